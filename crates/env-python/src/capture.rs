//! Bounds the kernel's capture files from the orchestrator's side.
//!
//! During a cell the kernel's fds 1 and 2 point at two files in its `TMPDIR`, so
//! C-level and subprocess output is captured in order. The driver keeps only the first
//! `output_cap` bytes of each, but it cannot stop what writes to the files: model code
//! writing to fd 1 directly, or a background process (`yes &`) that keeps its copy of
//! the fd after the cell (one wrote 1.86 GB in 5 s). So the orchestrator opens the same
//! files (the driver reports their paths and identities in `ready`) and a watcher task
//! empties a file whenever it grows past the limit, counting what it threw away; the
//! environment reports that count with the cell's output.

use super::error::CaptureError;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::protocol::CaptureFile;

/// How often the watcher looks at the files' sizes. The watcher is a thread of its
/// own, so a busy async runtime cannot delay it (a task on the runtime once let a
/// file reach 120 MB past a 20 MB promise): at the fastest rate seen (about 400 MB/s)
/// a file overshoots the limit by about 4 MB per poll, plus whatever the OS holds the
/// thread off the CPU.
const CAPTURE_POLL: Duration = Duration::from_millis(10);

/// The streams, in the order the driver reports their files.
pub(super) const STREAMS: [&str; 2] = ["stdout", "stderr"];

/// The watcher of one kernel's capture files; dropping it stops the watching.
pub(super) struct CaptureWatch {
    stop: Arc<AtomicBool>,
    discarded: Arc<[AtomicU64; 2]>,
}

impl CaptureWatch {
    /// Opens the files the driver reported (checking that each is the very file the
    /// driver created, not something put at its path), removes their names, and
    /// starts watching them. `limit` is the most bytes a file may hold.
    ///
    /// The paths are the kernel's: a confined kernel's temporary directory is a tmpfs
    /// in its own mount namespace, so they are opened through `/proc/<pid>/root` of
    /// the kernel (`pid`) first, then as they are.
    pub fn start(reported: &[CaptureFile], limit: u64, pid: u32) -> Result<Self, CaptureError> {
        let [out, err] = reported else {
            return Err(CaptureError::Count {
                count: reported.len(),
            });
        };
        let files = [open_seen_by(out, pid)?, open_seen_by(err, pid)?];
        for file in [out, err] {
            // The driver removes them too; whoever is second finds nothing.
            let _ = std::fs::remove_file(as_seen_by(&file.path, pid));
            let _ = std::fs::remove_file(&file.path);
        }
        let discarded: Arc<[AtomicU64; 2]> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (counts, stopped) = (Arc::clone(&discarded), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("rlm-capture-watch".to_owned())
            .spawn(move || watch(&files, limit, &counts, &stopped))
            .map_err(|source| CaptureError::Thread { source })?;
        Ok(Self { stop, discarded })
    }

    /// Bytes thrown away from each stream (stdout, stderr) since the last call.
    pub fn take_discarded(&self) -> [u64; 2] {
        [
            self.discarded[0].swap(0, Ordering::SeqCst),
            self.discarded[1].swap(0, Ordering::SeqCst),
        ]
    }
}

impl Drop for CaptureWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// `path` as the process `pid` sees it, from here: through its `/proc/<pid>/root`.
fn as_seen_by(path: &std::path::Path, pid: u32) -> std::path::PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    std::path::PathBuf::from(format!("/proc/{pid}/root")).join(relative)
}

/// [`open_checked`] of the file as the kernel `pid` sees it, else as reported.
fn open_seen_by(reported: &CaptureFile, pid: u32) -> Result<File, CaptureError> {
    let seen = CaptureFile {
        path: as_seen_by(&reported.path, pid),
        ..reported.clone()
    };
    open_checked(&seen).or_else(|_| open_checked(reported))
}

/// Opens a reported capture file for writing (to truncate it) and checks its identity.
fn open_checked(reported: &CaptureFile) -> Result<File, CaptureError> {
    let path = &reported.path;
    let io = |action| {
        move |source| CaptureError::Io {
            action,
            path: path.clone(),
            source,
        }
    };
    let meta = std::fs::symlink_metadata(path).map_err(io("inspect"))?;
    if !meta.file_type().is_file() {
        return Err(CaptureError::NotAFile { path: path.clone() });
    }
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io("open"))?;
    let meta = file.metadata().map_err(io("inspect"))?;
    if (meta.dev(), meta.ino()) != (reported.dev, reported.ino) || meta.nlink() != 1 {
        return Err(CaptureError::Replaced { path: path.clone() });
    }
    Ok(file)
}

/// Empties a file past `limit` bytes (its size or its allocated blocks) and counts
/// the bytes it held. Emptying, not cutting to the limit: the driver empties the file
/// after each cell too, and cutting to a length could grow a file the driver had just
/// emptied.
fn watch(files: &[File; 2], limit: u64, discarded: &[AtomicU64; 2], stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(CAPTURE_POLL);
        for (file, count) in files.iter().zip(discarded.iter()) {
            let Ok(meta) = file.metadata() else { continue };
            let held = meta.len().max(meta.blocks().saturating_mul(512));
            if held > limit {
                // Counted before the file is emptied: a cell waiting for the empty
                // file may end at once, and its output must carry the notice. `held`,
                // not the length: a write in progress can hold blocks before its
                // length shows them (ext4's large folios on Linux 6.18 showed length 0
                // past the limit, and the flood went unreported in CI), and emptying
                // waits for that write, so the length read here may be far short.
                count.fetch_add(held, Ordering::SeqCst);
                if let Err(error) = file.set_len(0) {
                    count.fetch_sub(held, Ordering::SeqCst);
                    tracing::warn!(%error, "could not empty a Python capture file");
                }
            }
        }
    }
}

/// The notice added to a stream's output when `bytes` of it were thrown away.
pub(super) fn discard_notice(stream: &str, bytes: u64, limit: u64) -> String {
    format!(
        "\n[output discarded: about {bytes} bytes written to {stream} were thrown away because the capture file grew past {limit} bytes (a flood of output, or a background process still writing to it); what is shown is what remained]\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    fn reported(path: &std::path::Path) -> CaptureFile {
        let meta = std::fs::metadata(path).unwrap();
        CaptureFile {
            path: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    fn appender(path: &std::path::Path) -> File {
        OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .unwrap()
    }

    #[tokio::test]
    async fn a_file_past_the_limit_is_emptied_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (mut out, _err) = (appender(&a), appender(&b));
        let watch =
            CaptureWatch::start(&[reported(&a), reported(&b)], 1000, std::process::id()).unwrap();
        assert!(!a.exists() && !b.exists(), "the names are removed");
        out.write_all(&[b'x'; 5000]).unwrap();
        let mut seen = 0;
        for _ in 0..400 {
            tokio::time::sleep(CAPTURE_POLL).await;
            seen += watch.take_discarded()[0];
            if seen > 0 {
                break;
            }
        }
        // What the file held: its length, or its blocks where they are more.
        assert!(
            (5000..=5000 + 65536).contains(&seen),
            "counted {seen} bytes"
        );
        assert_eq!(out.metadata().unwrap().len(), 0);
        // Appending goes on from the start.
        out.write_all(b"hi").unwrap();
        assert_eq!(out.metadata().unwrap().len(), 2);
    }

    /// A file whose blocks are past the limit while its length is not (a write in
    /// progress, here blocks allocated past the end) is emptied and reported: the
    /// count is never 0 when something was thrown away.
    #[test]
    fn blocks_held_past_the_length_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (out, _err) = (appender(&a), appender(&b));
        let status = std::process::Command::new("fallocate")
            .args(["--keep-size", "--length", "65536"])
            .arg(&a)
            .status()
            .unwrap();
        assert!(status.success(), "fallocate --keep-size: {status}");
        assert_eq!(out.metadata().unwrap().len(), 0);
        assert!(out.metadata().unwrap().blocks() * 512 >= 65536);
        let watch =
            CaptureWatch::start(&[reported(&a), reported(&b)], 1000, std::process::id()).unwrap();
        let mut seen = 0;
        for _ in 0..400 {
            std::thread::sleep(CAPTURE_POLL);
            seen += watch.take_discarded()[0];
            if seen > 0 {
                break;
            }
        }
        assert!(seen >= 65536, "counted {seen} bytes");
        // The count is taken before the file is emptied (a cell waiting for the empty
        // file must carry the notice), so the emptying may follow it by a moment: CI
        // once read the blocks between the two.
        let emptied = (0..400).any(|_| {
            let blocks = out.metadata().unwrap().blocks();
            if blocks > 0 {
                std::thread::sleep(CAPTURE_POLL);
            }
            blocks == 0
        });
        assert!(
            emptied,
            "{} blocks still held",
            out.metadata().unwrap().blocks()
        );
    }

    /// The watcher keeps the bound while the async runtime is blocked (a task on the
    /// runtime did not: a busy runtime let a file grow far past the limit).
    #[test]
    fn the_bound_holds_while_the_runtime_is_blocked() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (mut out, _err) = (appender(&a), appender(&b));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let watch = runtime
            .block_on(async {
                CaptureWatch::start(&[reported(&a), reported(&b)], 1000, std::process::id())
            })
            .unwrap();
        // The runtime's only thread is busy here (nothing else runs on it) while the
        // file grows past the limit; the watcher must empty it all the same.
        runtime.block_on(async {
            out.write_all(&[b'x'; 5000]).unwrap();
            let mut emptied = false;
            for _ in 0..2000 {
                std::thread::sleep(Duration::from_millis(5));
                if out.metadata().unwrap().len() == 0 {
                    emptied = true;
                    break;
                }
            }
            assert!(
                emptied,
                "the file was not emptied while the runtime was blocked"
            );
        });
        let seen = watch.take_discarded()[0];
        assert!(
            (5000..=5000 + 65536).contains(&seen),
            "counted {seen} bytes"
        );
    }

    #[test]
    fn a_replaced_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (_x, _y) = (appender(&a), appender(&b));
        let mut claimed = reported(&a);
        claimed.ino += 1;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = runtime
            .block_on(async {
                CaptureWatch::start(&[claimed, reported(&b)], 10, std::process::id()).err()
            })
            .unwrap();
        assert!(
            error.to_string().contains("not the capture file"),
            "{error}"
        );
        std::fs::remove_file(&a).unwrap();
        std::os::unix::fs::symlink(&b, &a).unwrap();
        let link = CaptureFile {
            path: a.clone(),
            ..reported(&b)
        };
        let error = runtime
            .block_on(async {
                CaptureWatch::start(&[link, reported(&b)], 10, std::process::id()).err()
            })
            .unwrap();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
