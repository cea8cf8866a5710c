//! `--max-context-bytes` and Ctrl-C as errors that name the input. Sizes known before
//! reading are checked here first; every byte read is then counted by
//! [`Budget`](super::input::Budget), and a read it stops becomes a
//! [`ContextError`] here, so each loader reports a stop the same way.

use std::path::Path;

use super::error::ContextError;
use super::input::{Budget, Input, Stop};

/// Fails with [`ContextError::TooLarge`] when `total` bytes, known before reading,
/// are over `max`; `path` is the input that crossed it and `hint` what to do instead.
pub(super) fn check_known_size(
    path: &Path,
    total: u64,
    max: u64,
    hint: &'static str,
) -> Result<(), ContextError> {
    if total > max {
        return Err(ContextError::TooLarge {
            path: path.to_owned(),
            size: total,
            max,
            hint,
        });
    }
    Ok(())
}

/// Opens an input under `budget`, naming it in errors.
pub(super) fn open_input<'b>(
    path: &Path,
    budget: &'b mut Budget,
) -> Result<Input<'b>, ContextError> {
    if budget.is_cancelled() {
        return Err(ContextError::Cancelled {
            path: path.to_owned(),
        });
    }
    Input::open(path, budget).map_err(|e| ContextError::Unreadable {
        path: path.to_owned(),
        source: e,
    })
}

/// The error for a read of `path` that the budget stopped, if it did.
pub(super) fn stop_error(path: &Path, budget: &Budget) -> Option<ContextError> {
    budget.stopped().map(|stop| match stop {
        Stop::Cancelled => ContextError::Cancelled {
            path: path.to_owned(),
        },
        Stop::OverLimit => ContextError::OverLimit {
            path: path.to_owned(),
            max: budget.max(),
        },
    })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Write;
    use std::path::PathBuf;

    use rlm_process::CancellationToken;

    use super::*;
    use crate::context::load_context;
    use crate::context::test_support::{spec, store, test_keys};

    #[test]
    fn devices_are_counted_against_the_limit_whatever_their_shape() {
        let (dir, store) = store();
        let mut over = spec(vec![PathBuf::from("/dev/zero")]);
        over.max_bytes = 1 << 20;
        let err =
            load_context(&store, &over, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(
            matches!(err, ContextError::OverLimit { max, .. } if max == 1 << 20),
            "{err}"
        );
        assert!(err.to_string().contains("--max-context-bytes"));
        // A `.json` pipe goes through the same count (its parse would never end).
        let json = dir.path().join("endless.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&json)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let json = json.clone();
            std::thread::spawn(move || {
                let mut fifo = fs::OpenOptions::new().write(true).open(json).unwrap();
                let _ = fifo.write_all(b"[");
                while fifo.write_all(&b"1,".repeat(4096)).is_ok() {}
            })
        };
        let mut over = spec(vec![json]);
        over.max_bytes = 1 << 20;
        let err =
            load_context(&store, &over, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(matches!(err, ContextError::OverLimit { .. }), "{err}");
        writer.join().unwrap();
        // Two inputs share one budget: each fits, together they do not.
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        fs::write(&a, "x".repeat(600)).unwrap();
        fs::write(&b, "y".repeat(600)).unwrap();
        let mut both = spec(vec![a, b]);
        both.max_bytes = 1000;
        let err =
            load_context(&store, &both, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(matches!(err, ContextError::TooLarge { .. }), "{err}");
        assert!(
            store.list(&Default::default()).is_empty(),
            "a failed load left variables"
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("data/variables"))
            .unwrap()
            .collect();
        assert!(
            leftovers.is_empty(),
            "a failed load left files: {leftovers:?}"
        );
    }
}
