//! What a run shows while it works, chosen once per run:
//!
//! | situation | stderr | stdout |
//! | --- | --- | --- |
//! | stderr is a terminal | the live tree, redrawn in place ([`term`]) | the answer |
//! | stderr is not a terminal | one plain line per event ([`plain`]) | the answer |
//! | `-q` | nothing | the answer |
//! | `--events` | the live tree on a terminal, else nothing | JSON lines |
//! | `--json` | as above | one JSON object |
//!
//! The view only ever writes to stderr, so `--json` and `--events` output stays pure
//! JSON. The events stream (`--events`) does not carry `text_delta`: its lines are the
//! lines of `events.jsonl`, one per step, not one per token.

pub mod plain;
mod tail;
mod term;
mod tree;

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use rlm_orchestrator::events::{Event, EventData, EventListener};

pub use term::suspend;

/// How progress is shown for one run.
pub struct Progress {
    view: View,
    events: bool,
}

enum View {
    None,
    Plain,
    Live(term::TermView),
}

impl Progress {
    /// Picks the view for a run: `events` streams JSON lines to stdout, `quiet` silences
    /// stderr; nested runs are looked for in `data_dir`.
    pub fn start(events: bool, quiet: bool, data_dir: &Path) -> Self {
        let view = if quiet {
            View::None
        } else if stderr_is_a_terminal() {
            View::Live(term::TermView::start(data_dir))
        } else if events {
            View::None // whoever reads the JSON lines gets everything there
        } else {
            View::Plain
        };
        Self { view, events }
    }

    /// The listeners to give the run.
    pub fn listeners(&self) -> Vec<EventListener> {
        let mut listeners: Vec<EventListener> = Vec::new();
        if self.events {
            // Same terminal for both streams: the tree steps aside for each line.
            let around_view = matches!(self.view, View::Live(_)) && io::stdout().is_terminal();
            listeners.push(Arc::new(move |event: &Event| {
                if around_view {
                    suspend(|| print_json_line(event));
                } else {
                    print_json_line(event);
                }
            }));
        }
        match &self.view {
            View::None => {}
            View::Plain => listeners.push(Arc::new(plain::print)),
            View::Live(view) => listeners.push(view.listener()),
        }
        listeners
    }

    /// Clears the live view (before the answer is printed); idempotent.
    pub fn finish(&self) {
        if let View::Live(view) = &self.view {
            view.finish();
        }
    }
}

/// A terminal that can redraw: not `TERM=dumb`.
fn stderr_is_a_terminal() -> bool {
    io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// `--events`: the event as one JSON line on stdout (`text_delta` excluded).
fn print_json_line(event: &Event) {
    if matches!(event.data, EventData::TextDelta { .. }) {
        return;
    }
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// Writes one line to stderr, stepping around the live view if one is drawn.
pub fn write_stderr(line: &str) {
    suspend(|| {
        let _ = writeln!(io::stderr().lock(), "{line}");
    });
}

/// A stderr for the log subscriber that steps around the live view.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        suspend(|| io::stderr().write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        suspend(|| io::stderr().write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}
