//! `rlm-orchestrate repl`: one question after another over the same context.
//!
//! The REPL is one [`Session`]: the store and the Python kernel stay up between
//! queries, so variables the model defined survive, `history` holds the earlier
//! `{query, answer}` pairs, and `:context PATH` brings a new context into its own slot.
//! Each query is still a run of its own, with its own trace under `runs/`.
//!
//! With a terminal, lines are read with `rustyline` (editing, and a history kept in
//! `<data-dir>/repl_history`) after an `rlm> ` prompt. With piped stdin there is no
//! prompt and no line editing: each line is a query and each answer goes to stdout on
//! its own (one JSON object a line with `--json`), so scripts can read them; progress
//! and errors go to stderr as for `run`.
//!
//! Ctrl-C while a query runs cancels that query only (its sub-agents are ended; the
//! kernel is interrupted and keeps its variables); a second Ctrl-C during the same
//! query kills every child process group at once. SIGTERM ends the REPL.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use rlm_context_store::ListFilter;
use rlm_orchestrator::agents::Lineage;
use rlm_orchestrator::context::{ContextSpec, DirAs, STDIN_PATH};
use rlm_orchestrator::events::{Event, EventListener};
use rlm_orchestrator::format::one_line;
use rlm_orchestrator::run::{QueryCanceller, RunConfig, RunError, Session};
use rlm_process::CancellationToken;
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;
use tokio::runtime::Runtime;

use crate::cli::{GlobalArgs, ReplArgs, RunOptions};
use crate::exit::{annotate, bad_input, write_report, ExitStatus};
use crate::live::{write_stderr, Progress};
use crate::output;
use crate::run::{prepare, print_report, run_error, MAX_TASK_BYTES};
use crate::runtime::{Received, Signals};

/// The prompt shown on a terminal.
pub const PROMPT: &str = "rlm> ";

/// The line-history file, in the data directory.
pub const HISTORY_FILE: &str = "repl_history";

/// Lines kept in the history file.
const HISTORY_LINES: usize = 1000;

/// Characters of a task shown by `:runs`.
const TASK_CHARS: usize = 60;

/// What `:help` prints.
const HELP: &str = "\
Type a query and press Enter: the model answers it with code in a persistent Python
REPL. Variables it defines stay for the next query, and `history` holds the earlier
queries and answers.

Commands:
  :context PATH   load PATH as a new context for the next query (repeat for a list);
                  earlier contexts stay in `contexts` / `context_<i>`
  :vars           the store's variables, then the REPL's own variables
  :runs           this session's runs: id, status, task
  :help           this text
  :quit, :exit    leave (Ctrl-D too)

Ctrl-C cancels the running query; the REPL and its variables stay.";

/// Runs `repl`.
pub fn run(global: &GlobalArgs, args: ReplArgs) -> anyhow::Result<()> {
    let options = &args.options;
    if options.context.iter().any(|p| p.as_os_str() == STDIN_PATH) {
        return Err(crate::exit::bad_input(
            "--context - cannot be used with repl: stdin carries the queries; pass a file",
        ));
    }
    let stop = CancellationToken::new();
    let lineage = Lineage::from_env().map_err(crate::exit::bad_input)?;
    let config = prepare(global, options, lineage, stop.clone())?;
    let runtime = crate::runtime::build()?;
    let views = Views::default();
    // Installed before the context loads (a signal then stops the load, which leaves
    // nothing behind) and before the first prompt: the line editor saves the SIGINT
    // handler it finds and puts it back after each line, so one installed later would
    // be lost.
    let mut signals = Signals::install(&runtime);
    // A bad context fails here, before the first prompt (exit 2).
    let session = runtime
        .block_on(start_session(
            config,
            vec![views.listener()],
            signals.as_mut().ok(),
            &stop,
        ))
        .map_err(run_error)?;
    let interactive = io::stdin().is_terminal();
    let generation = Arc::new(AtomicU64::new(0));
    match signals {
        Ok(signals) => {
            runtime.spawn(cancel_on_signals(
                signals,
                session.canceller(),
                stop.clone(),
                Arc::clone(&generation),
                interactive,
            ));
        }
        Err(error) => tracing::warn!(
            %error,
            "cannot install signal handlers; Ctrl-C will end the REPL without cleanup"
        ),
    }
    let mut repl = Repl {
        session,
        runtime: &runtime,
        options,
        data_dir: &global.data_dir,
        quiet: global.quiet,
        views,
        stop,
        generation,
        next_context: Vec::new(),
        queries: 0,
        failed: 0,
    };
    let read = if interactive {
        repl.interactive(&global.data_dir.join(HISTORY_FILE))
    } else {
        repl.piped()
    };
    let Repl {
        session,
        stop,
        queries,
        failed,
        ..
    } = repl;
    runtime.block_on(session.close());
    read?;
    if stop.is_cancelled() {
        return Err(annotate(
            anyhow::anyhow!("the REPL was stopped (SIGTERM)"),
            Some(ExitStatus::Cancelled),
            None,
        ));
    }
    if failed > 0 && !interactive {
        anyhow::bail!("{failed} of {queries} queries failed (their errors are above)");
    }
    Ok(())
}

/// Whether to read another line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// The session and what the loop keeps between lines.
struct Repl<'a> {
    session: Session,
    runtime: &'a Runtime,
    options: &'a RunOptions,
    data_dir: &'a Path,
    quiet: bool,
    views: Views,
    /// Cancelled by SIGTERM: the running query stops and the REPL ends.
    stop: CancellationToken,
    /// Counts queries, so a second Ctrl-C is known to be about the same one.
    generation: Arc<AtomicU64>,
    /// Files given with `:context` for the next query.
    next_context: Vec<PathBuf>,
    queries: u64,
    failed: u64,
}

impl Repl<'_> {
    /// Reads lines from a terminal with line editing and a history file.
    fn interactive(&mut self, history: &Path) -> anyhow::Result<()> {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_LINES)
            .context("invalid line editor settings")?
            .auto_add_history(false)
            .build();
        let mut editor =
            DefaultEditor::with_config(config).context("failed to set up line editing")?;
        if let Err(error) = editor.load_history(history) {
            tracing::debug!(%error, path = %history.display(), "no REPL history loaded");
        }
        if !self.quiet {
            write_stderr("rlm repl: type a query, or :help for the commands (Ctrl-D quits)");
        }
        loop {
            let line = match editor.readline(PROMPT) {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => continue, // Ctrl-C clears the line
                Err(ReadlineError::Eof) => return Ok(()),
                Err(ReadlineError::Signal(_)) => continue,
                Err(error) => return Err(error).context("failed to read a line"),
            };
            if !line.trim().is_empty() {
                let _ = editor.add_history_entry(line.trim());
                if let Err(error) = editor.append_history(history) {
                    tracing::warn!(%error, path = %history.display(), "could not save the REPL history");
                }
            }
            if self.line(&line)? == Flow::Quit || self.stop.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// Reads lines from piped stdin, without a prompt.
    fn piped(&mut self) -> anyhow::Result<()> {
        let mut stdin = io::stdin().lock();
        let mut number = 0;
        while let Some(line) = next_line(&mut stdin, number + 1)? {
            number += 1;
            if self.line(&line)? == Flow::Quit || self.stop.is_cancelled() {
                break;
            }
        }
        Ok(())
    }

    /// Handles one line: a command, a query, or nothing.
    fn line(&mut self, line: &str) -> anyhow::Result<Flow> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Flow::Continue);
        }
        let Some(command) = line.strip_prefix(':') else {
            match crate::run::checked_task(line) {
                Ok(task) => self.query(&task)?,
                Err(error) => {
                    self.failed += 1;
                    let mut stderr = Vec::new();
                    let _ = write_report(&error, &mut stderr);
                    write_stderr(String::from_utf8_lossy(&stderr).trim_end());
                }
            }
            return Ok(Flow::Continue);
        };
        let (name, rest) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(name, rest)| (name, rest.trim()));
        let mut out = io::stdout().lock();
        let written = match name {
            "quit" | "exit" | "q" => return Ok(Flow::Quit),
            "help" | "h" | "?" => writeln!(out, "{HELP}"),
            "vars" => self.vars(&mut out),
            "runs" => self.runs(&mut out),
            "context" => self.context(rest, &mut out),
            other => {
                drop(out);
                write_stderr(&format!(
                    "error: unknown command :{other} (:help lists the commands)"
                ));
                return Ok(Flow::Continue);
            }
        };
        written
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::Error::new(e).context("failed to write to stdout"))?;
        Ok(Flow::Continue)
    }

    /// Runs one query and prints its answer (or its error).
    fn query(&mut self, text: &str) -> anyhow::Result<()> {
        let extra = (!self.next_context.is_empty()).then(|| ContextSpec {
            files: std::mem::take(&mut self.next_context),
            dir: None,
            dir_as: DirAs::List,
            follow_symlinks: false,
            var: None,
            max_bytes: self.options.max_context_bytes,
            // The REPL's kernel was confined when it started: files it was not given
            // then are copied into the store, which it can read.
            copy: true,
            lazy: crate::settings::lazy_policy(self.options),
        });
        self.queries += 1;
        self.generation.fetch_add(1, Ordering::SeqCst);
        let progress = Progress::start(self.options.events, self.quiet, self.data_dir);
        self.views.set(progress.listeners());
        let outcome = self.runtime.block_on(self.session.query(text, extra));
        progress.finish();
        self.views.set(Vec::new());
        match outcome {
            Ok(report) => {
                if self.options.events && !self.options.json {
                    return Ok(()); // the answer is in the `final` event on stdout
                }
                print_report(&report, self.options.json)
            }
            Err(error) => {
                self.failed += 1;
                let cancelled = matches!(error, RunError::Cancelled { .. });
                let message = error.to_string();
                let mut stderr = Vec::new();
                let _ = write_report(&run_error(error), &mut stderr);
                if cancelled && !self.stop.is_cancelled() {
                    let _ = writeln!(
                        stderr,
                        "the query was cancelled; the REPL and its variables are kept"
                    );
                }
                write_stderr(String::from_utf8_lossy(&stderr).trim_end());
                if self.options.json {
                    let object = serde_json::json!({ "query": text, "error": message });
                    let mut out = io::stdout().lock();
                    writeln!(out, "{object}")
                        .and_then(|()| out.flush())
                        .context("failed to write to stdout")?;
                }
                Ok(())
            }
        }
    }

    /// `:vars`: the store's variables (as `vars list` shows them), then the variables
    /// the model's code defined in the REPL.
    fn vars(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let store = self.session.store();
        if let Err(error) = store.refresh() {
            tracing::warn!(%error, "could not re-read the store");
        }
        let refs = store.list(&ListFilter::default());
        if refs.is_empty() {
            writeln!(out, "no variables in {}", self.data_dir.display())?;
        } else {
            crate::vars::write_list(out, &refs)?;
        }
        let repl = match self.runtime.block_on(self.session.variables()) {
            Ok(vars) => vars,
            Err(error) => {
                writeln!(out, "\nREPL variables: unavailable ({error})")?;
                return Ok(());
            }
        };
        if repl.is_empty() {
            return writeln!(out, "\nREPL variables: none yet");
        }
        writeln!(out, "\nREPL variables:")?;
        let rows: Vec<Vec<String>> = repl
            .iter()
            .map(|v| {
                vec![
                    output::escape_controls(&v.name),
                    v.type_name.clone(),
                    v.size.to_string(),
                    output::escape_controls(&v.preview),
                ]
            })
            .collect();
        output::write_table(out, &["NAME", "TYPE", "SIZE", "PREVIEW"], &rows)
    }

    /// `:runs`: this session's runs, oldest first.
    fn runs(&self, out: &mut dyn Write) -> io::Result<()> {
        let runs = self.session.runs();
        if runs.is_empty() {
            return writeln!(out, "no runs yet in this session");
        }
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| {
                vec![
                    r.run_id.to_string(),
                    r.status.to_string(),
                    one_line(&r.task, TASK_CHARS),
                ]
            })
            .collect();
        output::write_table(out, &["RUN", "STATUS", "TASK"], &rows)?;
        writeln!(
            out,
            "traces: {}",
            self.data_dir
                .join(rlm_orchestrator::events::RUNS_DIR)
                .display()
        )
    }

    /// `:context PATH` adds a file to the next query's context; `:context` alone says
    /// what is loaded and what is waiting.
    fn context(&mut self, path: &str, out: &mut dyn Write) -> io::Result<()> {
        if path == STDIN_PATH {
            return writeln!(out, "stdin carries the queries; give :context a file");
        }
        if !path.is_empty() {
            self.next_context.push(PathBuf::from(path));
            return writeln!(out, "the next query gets a new context: {}", self.waiting());
        }
        let slots = self.session.contexts();
        if slots.is_empty() {
            writeln!(out, "no context loaded")?;
        }
        for (i, info) in slots.iter().enumerate() {
            writeln!(
                out,
                "context_{i}: {} · {} characters · {}",
                info.kind,
                info.total_chars,
                one_line(&info.origin, TASK_CHARS)
            )?;
        }
        if !self.next_context.is_empty() {
            writeln!(out, "for the next query: {}", self.waiting())?;
        }
        Ok(())
    }

    fn waiting(&self) -> String {
        self.next_context
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The session's one listener, forwarding to the progress view of the running query
/// (each query gets a fresh view).
#[derive(Clone, Default)]
struct Views {
    current: Arc<Mutex<Vec<EventListener>>>,
}

impl Views {
    fn set(&self, listeners: Vec<EventListener>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = listeners;
    }

    fn listener(&self) -> EventListener {
        let current = Arc::clone(&self.current);
        Arc::new(move |event: &Event| {
            let listeners = current
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for listener in &listeners {
                listener(event);
            }
        })
    }
}

/// Starts the session (loading its context); Ctrl-C or SIGTERM meanwhile cancels
/// `stop`, which stops the load and so the start.
async fn start_session(
    config: RunConfig,
    listeners: Vec<EventListener>,
    signals: Option<&mut Signals>,
    stop: &CancellationToken,
) -> Result<Session, RunError> {
    let Some(signals) = signals else {
        return Session::start(config, listeners).await;
    };
    let start = Session::start(config, listeners);
    tokio::pin!(start);
    loop {
        tokio::select! {
            started = &mut start => return started,
            _ = signals.recv() => stop.cancel(),
        }
    }
}

/// Ctrl-C cancels the running query (a second one during the same query kills every
/// child process group); between queries it ends a piped REPL (a terminal REPL reads
/// Ctrl-C as a key instead). SIGTERM ends the REPL.
async fn cancel_on_signals(
    mut signals: Signals,
    canceller: QueryCanceller,
    stop: CancellationToken,
    generation: Arc<AtomicU64>,
    interactive: bool,
) {
    let mut cancelled = None;
    loop {
        if signals.recv().await == Received::Terminate {
            stop.cancel();
            if !canceller.is_running() {
                end_now("stopping (SIGTERM)");
            }
            continue;
        }
        let query = generation.load(Ordering::SeqCst);
        if !canceller.is_running() {
            if !interactive {
                end_now("stopping (Ctrl-C)");
            }
            continue;
        }
        if cancelled == Some(query) {
            let killed = rlm_process::kill_all_groups(rlm_process::Signal::SIGKILL);
            write_stderr(&format!(
                "killed {killed} process group(s); the next query starts a new Python REPL"
            ));
        } else if canceller.cancel() {
            cancelled = Some(query);
            write_stderr("cancelling the query: ending its sub-agents (press Ctrl-C again to kill them at once)");
        }
    }
}

/// Ends the process between queries: no run is in flight, so there is nothing to
/// record; child groups (the Python kernel) are killed first.
fn end_now(message: &str) -> ! {
    write_stderr(message);
    rlm_process::kill_all_groups(rlm_process::Signal::SIGKILL);
    std::process::exit(ExitStatus::Cancelled as i32);
}

/// Line `number` of `reader`, without its line end; `None` at the end. A line is held
/// only up to the task bound ([`MAX_TASK_BYTES`]): a longer one (an endless stdin
/// without newlines) is refused once the bound is passed, with nothing read beyond.
fn next_line(reader: &mut impl BufRead, number: usize) -> anyhow::Result<Option<String>> {
    let mut bytes = Vec::new();
    let read = io::Read::take(&mut *reader, MAX_TASK_BYTES as u64 + 2) // the line, its `\r\n`
        .read_until(b'\n', &mut bytes)
        .context("failed to read stdin")?;
    if read == 0 {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    }
    if bytes.len() > MAX_TASK_BYTES {
        return Err(bad_input(format!(
            "line {number} of stdin is longer than 1 MiB: a query is not a context; put the text in a file and load it with `:context FILE` (or `--context FILE`), then ask about it"
        )));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| bad_input(format!("line {number} of stdin is not valid UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22, item 2: a line without end is refused at the task bound (this test
    /// would not end otherwise); ordinary lines come without their line ends.
    #[test]
    fn piped_lines_are_bounded() {
        let mut endless = io::BufReader::new(io::repeat(b'y'));
        let error = next_line(&mut endless, 1).unwrap_err();
        assert!(error.to_string().contains("1 MiB"), "{error}");
        let mut lines = &b"first\r\nsecond\nlast"[..];
        assert_eq!(next_line(&mut lines, 1).unwrap().as_deref(), Some("first"));
        assert_eq!(next_line(&mut lines, 2).unwrap().as_deref(), Some("second"));
        assert_eq!(next_line(&mut lines, 3).unwrap().as_deref(), Some("last"));
        assert_eq!(next_line(&mut lines, 4).unwrap(), None);
        let mut exact = Vec::from([b'x'; MAX_TASK_BYTES]);
        exact.extend_from_slice(b"\r\n");
        let line = next_line(&mut &exact[..], 1).unwrap().unwrap();
        assert_eq!(line.len(), MAX_TASK_BYTES);
    }
}
