//! Exit codes, and how a failure is told to the user.
//!
//! Scripts (and the orchestrator driving sub-agents) branch on the exit code, so each
//! expected failure has its own documented code. Errors print on stderr as
//! `error: …`, one `caused by: …` line per cause, and a `hint: …` when one helps.
//! A closed stdout pipe (`rlm-orchestrate vars get big | head`) is success, not an
//! error: the reader simply wanted no more.

use std::error::Error as StdError;
use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

use rlm_context_store::StoreError;

/// The exit codes of `rlm-orchestrate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything worked.
    Success = 0,
    /// Any failure without a more specific code.
    Failure = 1,
    /// Bad usage or input: invalid key, unreadable or invalid value, bad flags.
    BadInput = 2,
    /// `--if-sha256` did not match the stored value.
    Conflict = 3,
    /// The variable does not exist.
    Missing = 4,
    /// Ctrl-C or SIGTERM ended the run (128 + SIGINT, as shells report it).
    Cancelled = 130,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        ExitCode::from(status as u8)
    }
}

/// An error annotated with the exit status it should produce and/or a hint.
///
/// It is transparent in messages: it displays as the error it wraps, and its causes
/// are that error's causes.
#[derive(Debug)]
pub struct Annotated {
    status: Option<ExitStatus>,
    hint: Option<String>,
    error: anyhow::Error,
}

impl fmt::Display for Annotated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl StdError for Annotated {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.error.chain().nth(1)
    }
}

/// Builds an error from a message that exits with [`ExitStatus::BadInput`].
pub fn bad_input(message: impl fmt::Display + fmt::Debug + Send + Sync + 'static) -> anyhow::Error {
    annotate(
        anyhow::Error::msg(message),
        Some(ExitStatus::BadInput),
        None,
    )
}

/// Attaches an exit status and/or a hint to `error` (replacing earlier ones).
pub fn annotate(
    error: anyhow::Error,
    status: Option<ExitStatus>,
    hint: Option<String>,
) -> anyhow::Error {
    match error.downcast::<Annotated>() {
        Ok(mut annotated) => {
            annotated.status = status.or(annotated.status);
            annotated.hint = hint.or(annotated.hint);
            anyhow::Error::new(annotated)
        }
        Err(error) => anyhow::Error::new(Annotated {
            status,
            hint,
            error,
        }),
    }
}

/// Annotations on results, in the style of `anyhow::Context`.
pub trait ResultExt<T> {
    /// Fails with exit status `status` instead of the inferred one.
    fn status(self, status: ExitStatus) -> anyhow::Result<T>;
    /// Adds a `hint:` line to the failure message.
    fn hint(self, hint: impl FnOnce() -> String) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> ResultExt<T> for Result<T, E> {
    fn status(self, status: ExitStatus) -> anyhow::Result<T> {
        self.map_err(|e| annotate(e.into(), Some(status), None))
    }

    fn hint(self, hint: impl FnOnce() -> String) -> anyhow::Result<T> {
        self.map_err(|e| annotate(e.into(), None, Some(hint())))
    }
}

/// Every error object in `err`'s chain, including the ones [`Annotated`] hides from
/// the printed chain (it displays as its inner error rather than listing it).
fn causes(err: &anyhow::Error) -> Vec<&(dyn StdError + 'static)> {
    let mut all = Vec::new();
    for cause in err.chain() {
        all.push(cause);
        if let Some(annotated) = cause.downcast_ref::<Annotated>() {
            let inner: &(dyn StdError + 'static) = annotated.error.as_ref();
            all.push(inner);
        }
    }
    all
}

/// The exit status `err` calls for.
pub fn status_of(err: &anyhow::Error) -> ExitStatus {
    let causes = causes(err);
    for cause in &causes {
        if let Some(Annotated {
            status: Some(status),
            ..
        }) = cause.downcast_ref::<Annotated>()
        {
            return *status;
        }
    }
    for cause in &causes {
        if let Some(store_error) = cause.downcast_ref::<StoreError>() {
            match store_error {
                StoreError::NotFound { .. } => return ExitStatus::Missing,
                StoreError::Conflict { .. } => return ExitStatus::Conflict,
                StoreError::InvalidKey { .. }
                | StoreError::InvalidUtf8 { .. }
                | StoreError::FileChanged { .. } => return ExitStatus::BadInput,
                StoreError::Io { .. }
                | StoreError::Corrupt { .. }
                | StoreError::Integrity { .. }
                | StoreError::Symlink { .. }
                | StoreError::Json { .. }
                | StoreError::LockTimeout { .. }
                | StoreError::WaitTimeout { .. }
                | StoreError::Watch { .. }
                | StoreError::Summarize { .. } => {}
            }
        }
    }
    ExitStatus::Failure
}

/// The first hint attached anywhere in `err`.
fn hint_of(err: &anyhow::Error) -> Option<&str> {
    causes(err).into_iter().find_map(|cause| {
        cause
            .downcast_ref::<Annotated>()
            .and_then(|a| a.hint.as_deref())
    })
}

/// True when `err` comes from writing to a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    causes(err).into_iter().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Writes the `error:` / `caused by:` / `hint:` report of `err`. Messages may quote the
/// model or a server, so their terminal escapes are shown escaped.
pub fn write_report(err: &anyhow::Error, out: &mut dyn Write) -> io::Result<()> {
    let mut lines = err.chain().map(|cause| {
        let text = cause.to_string();
        crate::output::terminal_text(&rlm_process::redact_secrets(&text))
    });
    let mut previous = lines.next().unwrap_or_default();
    writeln!(out, "error: {previous}")?;
    for line in lines {
        // A cause whose text is already part of the line above adds nothing.
        if previous.contains(&line) {
            continue;
        }
        writeln!(out, "caused by: {line}")?;
        previous = line;
    }
    if let Some(hint) = hint_of(err) {
        writeln!(out, "hint: {hint}")?;
    }
    Ok(())
}

/// Turns the outcome of a command into the process's exit code, reporting failures on
/// stderr.
pub fn finish(result: anyhow::Result<()>) -> ExitCode {
    let Err(err) = result else {
        return ExitStatus::Success.into();
    };
    if is_broken_pipe(&err) {
        tracing::debug!("stdout closed early; stopping");
        return ExitStatus::Success.into();
    }
    let status = status_of(&err);
    tracing::debug!(?status, "command failed: {err:?}");
    let mut stderr = io::stderr().lock();
    // Nothing sensible is left to do if stderr itself is gone.
    let _ = write_report(&err, &mut stderr);
    status.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn report(err: &anyhow::Error) -> String {
        let mut out = Vec::new();
        write_report(err, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn store_errors_map_to_documented_codes() {
        let missing: anyhow::Error = StoreError::NotFound { key: "k".into() }.into();
        assert_eq!(status_of(&missing), ExitStatus::Missing);
        let conflict = Err::<(), _>(StoreError::Conflict {
            key: "k".into(),
            expected: "none".into(),
            actual: "ab".into(),
        })
        .context("failed to store \"k\"")
        .unwrap_err();
        assert_eq!(status_of(&conflict), ExitStatus::Conflict);
        assert_eq!(
            status_of(&anyhow::anyhow!("something else")),
            ExitStatus::Failure
        );
    }

    #[test]
    fn annotations_survive_context_and_stay_invisible() {
        let err = Err::<(), _>(StoreError::NotFound { key: "k".into() })
            .hint(|| "look elsewhere".into())
            .context("failed to read \"k\"")
            .unwrap_err();
        assert_eq!(status_of(&err), ExitStatus::Missing);
        let text = report(&err);
        assert_eq!(
            text,
            "error: failed to read \"k\"\n\
             caused by: no variable named \"k\" (list them with `rlm-orchestrate vars list`)\n\
             hint: look elsewhere\n"
        );
    }

    #[test]
    fn explicit_status_wins_and_broken_pipe_is_found() {
        let err = bad_input("bad");
        assert_eq!(status_of(&err), ExitStatus::BadInput);
        let pipe: anyhow::Error = StoreError::Io {
            action: "write the value of",
            path: "x".into(),
            source: io::Error::from(io::ErrorKind::BrokenPipe),
        }
        .into();
        assert!(is_broken_pipe(&pipe));
        assert!(!is_broken_pipe(&err));
    }
}
