//! Running the model's code in the kernel ([`CodeRepl`] for [`PythonEnv`]): one
//! execution at a time, a timeout that interrupts and then replaces the kernel, a
//! kernel that died or broke the protocol replaced at once, and what the model is told
//! about each.

use std::time::Instant;

use crate::capture;
use crate::env::PythonEnv;
use crate::kernel::{Kernel, Waited};
use crate::protocol::{ExecReply, FinalVarReply, ListVarsReply, Request};
use rlm_env::{CodeRepl, EnvError, EnvKind, ExecOutcome, ReplVariable};

/// Fence tags whose code runs here besides `repl`.
const FENCE_TAGS: &[&str] = &["python", "py", "python3"];

/// The outcome of an `exec` reply, and why the kernel cannot go on if it cannot.
fn outcome_from(body: serde_json::Value) -> (ExecOutcome, Option<String>) {
    match serde_json::from_value::<ExecReply>(body) {
        Ok(reply) => (
            ExecOutcome {
                stdout: reply.stdout,
                stderr: reply.stderr,
                error: reply.error.map(crate::missing_part::explained),
                final_answer: reply.final_answer,
                timed_out: reply.interrupted,
                ..ExecOutcome::default()
            },
            reply.broken,
        ),
        Err(error) => (
            ExecOutcome {
                error: Some(format!(
                    "the Python kernel sent an unreadable result: {error}"
                )),
                ..ExecOutcome::default()
            },
            None,
        ),
    }
}

/// What the model reads when its kernel had to be replaced because of `why`.
fn restart_notice(why: &str) -> String {
    format!(
        "The Python REPL could not go on: {why}.\n\
         It has been restarted; every variable you defined is lost \
         (`context` and the helpers are loaded again). Do not write to, close or \
         replace the REPL's own file descriptors (3 to 8)."
    )
}

/// Appends `notice` to an optional error text.
fn add_error(error: &mut Option<String>, notice: String) {
    *error = Some(match error.take() {
        Some(text) if !text.is_empty() => format!("{}\n{notice}", text.trim_end()),
        _ => notice,
    });
}

#[async_trait::async_trait]
impl CodeRepl for PythonEnv {
    fn fence_tags(&self) -> &'static [&'static str] {
        FENCE_TAGS
    }

    async fn execute(&mut self, code: &str) -> Result<ExecOutcome, EnvError> {
        let started = Instant::now();
        let restarted = self.ensure_ready().await?;
        let timeout = self.kernel.seed().config.exec_timeout;
        let grace = self.kernel.seed().options.interrupt_grace;
        let Some(kernel) = self.kernel.kernel_mut() else {
            return Err(self.kernel.broken("the kernel is not running"));
        };
        let waited = match kernel.send(|id| Request::Exec { id, code }) {
            None => (Waited::Closed, None),
            Some(id) => {
                // Cleared below; still set if this future is dropped while waiting.
                kernel.running = Some(id);
                (kernel.wait_result(id, timeout).await, Some(id))
            }
        };
        let discarded = kernel.take_discarded();
        let capture_limit = kernel.capture_limit();
        let mut outcome = match waited {
            (Waited::Reply(body), _) => {
                let (mut outcome, broken) = outcome_from(body);
                if let Some(why) = broken {
                    tracing::warn!(%why, "the Python kernel is broken; restarting it");
                    self.kernel.replace()?;
                    outcome.final_answer = None;
                    add_error(&mut outcome.error, restart_notice(&why));
                }
                outcome
            }
            (Waited::Broken(problem), _) => {
                tracing::warn!(%problem, "the Python kernel broke the protocol; restarting it");
                self.kernel.replace()?;
                // The notice stays owed: the next execution reports `restarted`.
                ExecOutcome {
                    error: Some(restart_notice(&format!(
                        "{problem}. Did the code write to the REPL's protocol file descriptor?"
                    ))),
                    ..ExecOutcome::default()
                }
            }
            (Waited::Closed, _) => {
                let report = kernel.death_report().await;
                self.kernel.replace()?;
                // The notice stays owed: the next execution reports `restarted`.
                ExecOutcome {
                    error: Some(format!(
                        "The Python REPL process died while running this code: {report}\n\
                         It has been restarted; every variable you defined is lost \
                         (`context` and the helpers are loaded again)."
                    )),
                    ..ExecOutcome::default()
                }
            }
            (Waited::TimedOut, id) => {
                kernel.interrupt();
                kernel.cancel_host_calls("cancelled: the execution timed out");
                let after = match id {
                    Some(id) => kernel.wait_result(id, grace).await,
                    None => Waited::Closed,
                };
                match after {
                    Waited::Reply(body) => {
                        let (mut outcome, broken) = outcome_from(body);
                        outcome.timed_out = true;
                        if let Some(why) = broken {
                            self.kernel.replace()?;
                            outcome.final_answer = None;
                            add_error(&mut outcome.error, restart_notice(&why));
                        }
                        outcome
                    }
                    Waited::Closed | Waited::TimedOut | Waited::Broken(_) => {
                        tracing::warn!(
                            pid = kernel.pid(),
                            "the Python kernel did not recover from the interrupt; restarting it"
                        );
                        self.kernel.replace()?;
                        self.kernel.take_lost_state();
                        ExecOutcome {
                            timed_out: true,
                            restarted: true,
                            ..ExecOutcome::default()
                        }
                    }
                }
            }
        };
        if let Some(kernel) = self.kernel.kernel_mut() {
            kernel.running = None;
        }
        for ((text, stream), bytes) in [&mut outcome.stdout, &mut outcome.stderr]
            .into_iter()
            .zip(capture::STREAMS)
            .zip(discarded)
        {
            if bytes > 0 {
                text.push_str(&capture::discard_notice(stream, bytes, capture_limit));
            }
        }
        if let Some(message) = self.kernel.kernel().and_then(Kernel::take_fatal) {
            return Err(EnvError::HostFatal {
                env: EnvKind::Python,
                message,
            });
        }
        outcome.restarted |= restarted;
        outcome.duration = started.elapsed();
        Ok(outcome)
    }

    async fn final_var(&mut self, name: &str) -> Result<Option<String>, EnvError> {
        let name = name.trim().trim_matches(|c| c == '"' || c == '\'');
        let Some(body) = self.query(|id| Request::FinalVar { id, name }).await else {
            return Ok(None);
        };
        Ok(serde_json::from_value::<FinalVarReply>(body)
            .ok()
            .filter(|reply| reply.found)
            .and_then(|reply| reply.value))
    }

    async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError> {
        let Some(body) = self.query(|id| Request::ListVars { id }).await else {
            return Ok(Vec::new());
        };
        Ok(serde_json::from_value::<ListVarsReply>(body)
            .map(|reply| reply.vars)
            .unwrap_or_default())
    }
}
