//! The live view on a terminal: the [`Tree`] drawn in place on stderr by `indicatif`.
//!
//! One progress bar whose template is the whole tree: a ticker thread redraws it ten
//! times a second (spinners and elapsed times move even when no event arrives), and
//! every draw renders the current state, cut to the terminal's width and height, so a
//! line never wraps and the redraw never scrolls. Events only update the state; lines
//! that should stay (warnings, errors) are printed above the tree. When the run ends
//! the tree is cleared, leaving a one-line summary on stderr and stdout untouched.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use console::Term;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use rlm_orchestrator::events::{now_ms, Event, EventData, EventListener};

use super::tail::Tailer;
use super::tree::Tree;

/// Redraws per second, at most.
const REDRAWS_PER_SEC: u8 = 10;
/// Interval of the ticker that redraws without events.
const TICK_MS: u64 = 100;

/// The bar of the view on screen, if any, so other writers to stderr can step aside.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// A tree redrawn in place on stderr.
pub struct TermView {
    bar: ProgressBar,
    tree: Arc<Mutex<Tree>>,
    tailer: Mutex<Option<Tailer>>,
}

impl TermView {
    /// Starts drawing; nested runs are followed in `data_dir`'s run directories.
    pub fn start(data_dir: &Path) -> Self {
        let tree = Arc::new(Mutex::new(Tree::default()));
        let drawn = Arc::clone(&tree);
        let colors = console::colors_enabled_stderr();
        let style = ProgressStyle::with_template("{tree}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "tree",
                move |_: &ProgressState, out: &mut dyn fmt::Write| {
                    let (rows, cols) = Term::stderr().size();
                    let lines = lock(&drawn).render(
                        now_ms(),
                        usize::from(cols).saturating_sub(1),
                        usize::from(rows).saturating_sub(1),
                        colors,
                    );
                    let _ = out.write_str(&lines.join("\n"));
                },
            );
        let bar = ProgressBar::with_draw_target(
            None,
            ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SEC),
        );
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(TICK_MS));
        *lock(&ACTIVE) = Some(bar.clone());
        let tailer = Tailer::start(data_dir, Arc::clone(&tree));
        Self {
            bar,
            tree,
            tailer: Mutex::new(Some(tailer)),
        }
    }

    /// The listener feeding this view.
    pub fn listener(&self) -> EventListener {
        let tree = Arc::clone(&self.tree);
        let bar = self.bar.clone();
        Arc::new(move |event: &Event| {
            lock(&tree).apply(event);
            // A run's error is not printed here: the command reports it once, at its end.
            if let EventData::Warning { message } = &event.data {
                bar.println(format!(
                    "warning: {}",
                    crate::output::terminal_text(message)
                ));
            }
        })
    }

    /// Clears the tree and leaves the summary line; idempotent.
    pub fn finish(&self) {
        if let Some(tailer) = lock(&self.tailer).take() {
            tailer.stop();
        }
        if self.bar.is_finished() {
            return;
        }
        self.bar.finish_and_clear();
        *lock(&ACTIVE) = None;
        if let Some(summary) = lock(&self.tree).summary() {
            super::write_stderr(&summary);
        }
    }
}

impl Drop for TermView {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Runs `f` (which writes to stderr) with the live view cleared, redrawing it after.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    let bar = lock(&ACTIVE).clone();
    match bar {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
