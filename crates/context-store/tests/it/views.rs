//! Text views and line ranges from other processes: several processes making the same
//! view at once all get one whole file, and a large text variable is viewed and read
//! by range without being loaded whole (peak memory measured in a worker process, so
//! no other test's allocations count).
//!
//! The `worker_*` tests are the other processes: they do nothing in a normal run (see
//! [`crate::support`]).

use std::io::{self, Read};
use std::ops::ControlFlow;

use rlm_context_store::{SetOptions, Store, VIEWS_DIR};

use crate::support::{bulk, data_dir, file_names, hear_parent, tell_parent, worker_input, Worker};

// ----- several processes make the same view -----

const VIEWER: &str = "views::worker_viewer";
const VIEWERS: usize = 4;
const RACED_KEY: &str = "shared";

/// About 8 MiB of text with escapes and multi-byte characters, numbered by line.
fn shared_text() -> String {
    (0..100_000)
        .map(|i| format!("{i:06} \"quoted\" é 😀\t\\ end\r\n"))
        .collect()
}

/// Waits for "go", asks for the view of [`RACED_KEY`] and reports its path.
#[test]
fn worker_viewer() {
    let Some(input) = worker_input(VIEWER) else {
        return;
    };
    let store = Store::open_with(&input.dir, bulk()).unwrap();
    tell_parent("ready");
    assert_eq!(hear_parent(), "go");
    let view = store.text_view(RACED_KEY).unwrap();
    tell_parent(&format!("view {}", view.display()));
}

#[test]
fn processes_making_the_same_view_at_once_all_get_one_whole_file() {
    let (_temp, data) = data_dir();
    let text = shared_text();
    Store::open_with(&data, bulk())
        .unwrap()
        .set(RACED_KEY, serde_json::json!(text), SetOptions::default())
        .unwrap();
    let mut workers: Vec<Worker> = (0..VIEWERS)
        .map(|_| Worker::spawn(VIEWER, &data, ""))
        .collect();
    for worker in &mut workers {
        worker.expect_message("ready");
    }
    for worker in &mut workers {
        worker.send("go");
    }
    let views: Vec<String> = workers.into_iter().flat_map(Worker::finish).collect();
    assert_eq!(views.len(), VIEWERS);
    assert!(views.iter().all(|v| *v == views[0]), "{views:?}");
    let path = views[0].strip_prefix("view ").unwrap();
    assert!(
        std::fs::read_to_string(path).unwrap() == text,
        "the view is not the text"
    );
    assert_eq!(
        file_names(&data.join(VIEWS_DIR)).len(),
        1,
        "one view and no temp file left behind"
    );
}

// ----- a large value is never loaded whole -----

const BIG_READER: &str = "views::worker_big_reader";

/// One line of the large text (63 bytes with the newline).
const BIG_LINE: &str = "2024-01-01 ERROR \"token\" expired é😀 path=C:\\tmp\tuser=alice\n";

/// Lines of the large text variable: about 64 MiB of them.
const BIG_LINES: u64 = (64 << 20) / BIG_LINE.len() as u64;

/// Bytes of the large text variable.
const BIG_BYTES: u64 = BIG_LINES * BIG_LINE.len() as u64;

/// Endless lines of [`BIG_LINE`], cut at `left` bytes.
struct Lines {
    left: u64,
    at: usize,
}

impl Read for Lines {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let line = BIG_LINE.as_bytes();
        let mut n = 0;
        while n < buf.len() && self.left > 0 {
            let take = (line.len() - self.at)
                .min(buf.len() - n)
                .min(self.left as usize);
            buf[n..n + take].copy_from_slice(&line[self.at..self.at + take]);
            self.at = (self.at + take) % line.len();
            self.left -= take as u64;
            n += take;
        }
        Ok(n)
    }
}

/// The peak resident memory of this process (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// In its own process: makes the view of the large variable, reads its last lines and
/// a byte range at its end, and reports the peak memory it took.
#[test]
fn worker_big_reader() {
    let Some(input) = worker_input(BIG_READER) else {
        return;
    };
    let store = Store::open_with(&input.dir, bulk()).unwrap();
    let view = store.text_view("big").unwrap();
    let lines = BIG_LINES;
    let reader = store.text_reader("big").unwrap();
    let mut last = Vec::new();
    let read = reader.write_lines(lines - 1, None, &mut last).unwrap();
    assert_eq!(last, BIG_LINE.repeat(2).as_bytes());
    assert_eq!(read.total, Some(lines));
    let mut tail = Vec::new();
    reader.write_bytes(BIG_BYTES - 1, None, &mut tail).unwrap();
    assert_eq!(tail, b"\n");
    let mut counted = 0u64;
    reader
        .stream(&mut |buf| {
            counted += buf.len() as u64;
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(counted, BIG_BYTES);
    tell_parent(&format!("view {}", view.display()));
    tell_parent(&format!("peak {}", peak_rss_kib()));
}

#[test]
fn a_large_text_is_viewed_and_read_by_range_without_being_loaded_whole() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let mut lines = Lines {
        left: BIG_BYTES,
        at: 0,
    };
    store
        .set_text_from_reader("big", &mut lines, "generated lines", SetOptions::default())
        .unwrap();
    let messages = Worker::spawn(BIG_READER, &data, "").finish();
    let view = messages[0].strip_prefix("view ").unwrap();
    assert_eq!(std::fs::metadata(view).unwrap().len(), BIG_BYTES);
    let peak: u64 = messages[1].strip_prefix("peak ").unwrap().parse().unwrap();
    // The value is 64 MiB (more as JSON): holding it once would take more than that.
    assert!(
        peak < 32 * 1024,
        "peak RSS {peak} KiB while viewing and reading a 64 MiB value"
    );
}
