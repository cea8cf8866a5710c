//! `vars set KEY --file PATH`: a value read from a file, a device, a pipe or stdin,
//! bounded like a context and stoppable.
//!
//! A device or a pipe has no size to check first (`--file /dev/zero` never ends), so
//! every byte is counted as it is read against `--max-bytes` (the orchestrator's
//! context [`Budget`]), and reading fails the moment the bound is crossed. Ctrl-C and
//! SIGTERM are ours while the value streams in: they cancel the budget's token, which
//! also wakes a read waiting on a quiet pipe. Either way the store's temporary file is
//! dropped (removed) on the way out, and the variable keeps its old value.

use std::io::{BufReader, Write as _};

use anyhow::Result;
use rlm_context_store::{Expected, SetOptions, StoreError, VariableRef, VariableType};
use rlm_orchestrator::context::Budget;
use rlm_process::CancellationToken;
use tokio::runtime::Runtime;

use super::value::{check_text_type, check_type, parse_json, read_text, stopped_error, Input};
use crate::cli::GlobalArgs;
use crate::runtime::Signals;

/// How a `--file` value is to be stored.
pub(super) struct FromFile<'a> {
    /// `--json`: parse the value.
    pub(super) json: bool,
    /// `--type`.
    pub(super) var_type: Option<VariableType>,
    /// `--if-sha256`.
    pub(super) expected: Option<&'a Expected>,
    /// `--max-bytes`.
    pub(super) max_bytes: u64,
}

impl FromFile<'_> {
    /// Reads `input` under the bound and stores it as `key`. The outer error is the
    /// input's (bad input, over the bound, cancelled); the inner one the store's.
    pub(super) fn store(
        &self,
        global: &GlobalArgs,
        key: &str,
        input: &Input,
        opts: SetOptions,
    ) -> Result<Result<VariableRef, StoreError>> {
        let cancel = CancellationToken::new();
        let _signals = stop_on_signals(&cancel);
        let mut budget = Budget::new(self.max_bytes, cancel);
        let outcome = self.read_and_store(global, key, input, opts, &mut budget);
        match budget.stopped() {
            Some(stop) => Err(stopped_error(input, stop, self.max_bytes)),
            None => outcome,
        }
    }

    fn read_and_store(
        &self,
        global: &GlobalArgs,
        key: &str,
        input: &Input,
        opts: SetOptions,
        budget: &mut Budget,
    ) -> Result<Result<VariableRef, StoreError>> {
        let mut reader = input.open(budget)?;
        if self.json {
            let value = parse_json(BufReader::new(&mut reader), &input.name)?;
            check_type(&value, self.var_type)?;
            let store = super::open(global)?;
            Ok(super::store_value(&store, key, value, opts, self.expected))
        } else if let Some(expected) = self.expected {
            // compare-and-set needs the whole value; only this path buffers a file.
            check_text_type(self.var_type)?;
            let text = read_text(&mut reader, &input.name)?;
            let store = super::open(global)?;
            Ok(super::store_value(
                &store,
                key,
                serde_json::Value::String(text),
                opts,
                Some(expected),
            ))
        } else {
            check_text_type(self.var_type)?;
            let store = super::open(global)?;
            Ok(store.set_text_from_reader(key, &mut reader, &input.name, opts))
        }
    }
}

/// Makes the first Ctrl-C or SIGTERM cancel `cancel` (the read stops, the temporary
/// file is removed, exit 130); a second one exits 130 at once. The runtime returned
/// keeps the handlers alive; without one (they could not be installed) a signal
/// kills as by default, and the store's next use removes the temporary file.
fn stop_on_signals(cancel: &CancellationToken) -> Option<Runtime> {
    let runtime = match crate::runtime::build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::warn!(%error, "cannot handle Ctrl-C while the value is read");
            return None;
        }
    };
    let mut signals = match Signals::install(&runtime) {
        Ok(signals) => signals,
        Err(error) => {
            tracing::warn!(%error, "cannot handle Ctrl-C while the value is read");
            return None;
        }
    };
    let cancel = cancel.clone();
    runtime.spawn(async move {
        signals.recv().await;
        cancel.cancel();
        signals.recv().await;
        let _ = writeln!(std::io::stderr(), "stopped at once");
        std::process::exit(130);
    });
    Some(runtime)
}
