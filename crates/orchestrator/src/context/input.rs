//! Reading context inputs under a byte budget and a stop switch.
//!
//! `--max-context-bytes` is checked against file sizes before anything is read, but a
//! pipe, a FIFO, a device or stdin has no size to check (`--context /dev/zero` never
//! ends), and a regular file can grow while it is read. So every byte read from an
//! input is counted against one [`Budget`] shared by all the inputs of a load, and
//! reading fails the moment the limit is crossed: the store's streaming write then
//! drops its temporary file, and nothing of the input is kept.
//!
//! Ctrl-C / SIGTERM cancel a token that every read checks. A regular file never keeps
//! a read waiting, but anything else can (a quiet pipe kept open, a FIFO nobody
//! writes), so such inputs are read by a pump thread handing chunks over a bounded
//! channel, and a watcher thread posts to the same channel when the token fires: the
//! reading side gives up at once, leaving the pump blocked in its read (it ends with
//! the process, or with its next chunk, which nobody takes).

use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;

use rlm_process::CancellationToken;

/// The path that means "read the context from stdin" (`--context -`).
pub const STDIN_PATH: &str = "-";

/// Bytes a pump reads at a time.
const PUMP_CHUNK_BYTES: usize = 256 * 1024;

/// Chunks a pump may read ahead of its consumer (so at most about 1 MiB past the
/// limit is read from a pipe, and none of it is written anywhere).
const PUMP_DEPTH_CHUNKS: usize = 4;

/// Buffer of a regular file's reader.
const FILE_BUFFER_BYTES: usize = 1 << 20;

/// Why reading stopped before its input ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The inputs hold more than the budget's limit.
    OverLimit,
    /// The load was cancelled (Ctrl-C, SIGTERM).
    Cancelled,
}

/// Bytes allowed and read so far across every input of one load, and the token
/// that stops it.
#[derive(Debug)]
pub struct Budget {
    used: u64,
    max: u64,
    cancel: CancellationToken,
    stop: Option<Stop>,
}

impl Budget {
    /// A budget of `max` bytes, stopped early when `cancel` is cancelled.
    pub fn new(max: u64, cancel: CancellationToken) -> Self {
        Self {
            used: 0,
            max,
            cancel,
            stop: None,
        }
    }

    /// The limit, in bytes.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Why the last read failed, when it failed because of the budget or the token
    /// (callers check this before reporting a failure as an I/O error).
    pub fn stopped(&self) -> Option<Stop> {
        self.stop
    }

    /// True once the load was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Records `stop` and returns the error a reader gives for it.
    fn halt(&mut self, stop: Stop) -> io::Error {
        self.stop = Some(stop);
        let message = match stop {
            Stop::OverLimit => "the context is over --max-context-bytes",
            Stop::Cancelled => "the context load was cancelled",
        };
        io::Error::other(message)
    }

    /// Fails when the token was cancelled.
    fn check_cancel(&mut self) -> io::Result<()> {
        if self.cancel.is_cancelled() {
            return Err(self.halt(Stop::Cancelled));
        }
        Ok(())
    }
}

/// One open input, counted against a [`Budget`].
pub struct Input<'b> {
    source: Source,
    budget: &'b mut Budget,
}

enum Source {
    File(BufReader<File>),
    Pump(Pump),
}

/// True when `path` is read through a pump: stdin and anything that is not a regular
/// file (pipes, FIFOs, character devices, sockets).
fn needs_pump(path: &Path) -> io::Result<bool> {
    if path.as_os_str() == STDIN_PATH {
        return Ok(true);
    }
    Ok(!fs::metadata(path)?.is_file())
}

impl<'b> Input<'b> {
    /// Opens `path` (`-` is stdin) for reading under `budget`. A FIFO is opened by the
    /// pump, so waiting for its writer can be cancelled too.
    pub fn open(path: &Path, budget: &'b mut Budget) -> io::Result<Self> {
        let source = if needs_pump(path)? {
            Source::Pump(Pump::start(path.to_owned(), budget.cancel.clone())?)
        } else {
            Source::File(BufReader::with_capacity(
                FILE_BUFFER_BYTES,
                File::open(path)?,
            ))
        };
        Ok(Self { source, budget })
    }

    /// The budget this input counts against.
    pub fn budget(&self) -> &Budget {
        self.budget
    }
}

impl Read for Input<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.budget.check_cancel()?;
        // One byte more than the budget allows tells "exactly at the limit" from "over".
        let room = self
            .budget
            .max
            .saturating_sub(self.budget.used)
            .saturating_add(1);
        let want = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        let n = match &mut self.source {
            Source::File(file) => file.read(&mut buf[..want])?,
            Source::Pump(pump) => match pump.read(&mut buf[..want]) {
                Err(PumpError::Cancelled) => return Err(self.budget.halt(Stop::Cancelled)),
                Err(PumpError::Io(e)) => return Err(e),
                Ok(n) => n,
            },
        };
        self.budget.used += n as u64;
        if self.budget.used > self.budget.max {
            return Err(self.budget.halt(Stop::OverLimit));
        }
        Ok(n)
    }
}

enum PumpError {
    Cancelled,
    Io(io::Error),
}

/// What a pump (or its cancellation watcher) hands the reading side.
enum Message {
    /// The next bytes.
    Data(Vec<u8>),
    /// The input failed.
    Failed(io::Error),
    /// The input ended.
    End,
    /// The load was cancelled.
    Cancelled,
}

/// The reading side of a pump thread (see the module docs).
struct Pump {
    messages: Receiver<Message>,
    cancel: CancellationToken,
    /// Cancelled when this pump is dropped, so its watcher ends with it.
    watch: CancellationToken,
    current: Vec<u8>,
    offset: usize,
    ended: bool,
}

impl Pump {
    /// Starts a thread that opens `path` (stdin for `-`) and sends its bytes, and one
    /// that wakes the reading side when `cancel` fires.
    fn start(path: PathBuf, cancel: CancellationToken) -> io::Result<Self> {
        let (sender, messages) = mpsc::sync_channel(PUMP_DEPTH_CHUNKS);
        let pump = Self::with_channel(messages, &sender, cancel)?;
        thread::Builder::new()
            .name("rlm-context-pump".into())
            .spawn(move || pump_input(&path, &sender))?;
        Ok(pump)
    }

    /// The reading side of `messages`, with its cancellation watcher started on a
    /// clone of `sender`.
    fn with_channel(
        messages: Receiver<Message>,
        sender: &SyncSender<Message>,
        cancel: CancellationToken,
    ) -> io::Result<Self> {
        let watch = cancel.child_token();
        let watcher = (sender.clone(), watch.clone(), cancel.clone());
        thread::Builder::new()
            .name("rlm-context-cancel".into())
            .spawn(move || {
                let (sender, watch, cancel) = watcher;
                // Wakes when the load is cancelled (the watch token is its child) or
                // the pump is dropped.
                futures::executor::block_on(watch.cancelled());
                if cancel.is_cancelled() {
                    // A full channel means the reader is not waiting: it looks at the
                    // token before its next read.
                    let _ = sender.try_send(Message::Cancelled);
                }
            })?;
        Ok(Self {
            messages,
            cancel,
            watch,
            current: Vec::new(),
            offset: 0,
            ended: false,
        })
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, PumpError> {
        while self.offset == self.current.len() {
            if self.ended || buf.is_empty() {
                return Ok(0);
            }
            if self.cancel.is_cancelled() {
                return Err(PumpError::Cancelled);
            }
            match self.messages.recv() {
                Ok(Message::Data(chunk)) => {
                    self.current = chunk;
                    self.offset = 0;
                }
                Ok(Message::Failed(e)) => return Err(PumpError::Io(e)),
                Ok(Message::Cancelled) => return Err(PumpError::Cancelled),
                Ok(Message::End) | Err(_) => self.ended = true,
            }
        }
        let n = buf.len().min(self.current.len() - self.offset);
        buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.watch.cancel();
    }
}

/// The pump thread: sends `path`'s bytes in chunks until it ends, fails, or nobody
/// takes them any more.
fn pump_input(path: &Path, sender: &SyncSender<Message>) {
    let mut reader: Box<dyn Read> = if path.as_os_str() == STDIN_PATH {
        Box::new(io::stdin())
    } else {
        match File::open(path) {
            Ok(file) => Box::new(file),
            Err(e) => {
                let _ = sender.send(Message::Failed(e));
                return;
            }
        }
    };
    loop {
        let mut chunk = vec![0u8; PUMP_CHUNK_BYTES];
        let message = match reader.read(&mut chunk) {
            Ok(0) => Message::End,
            Ok(n) => {
                chunk.truncate(n);
                Message::Data(chunk)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Message::Failed(e),
        };
        let last = !matches!(message, Message::Data(_));
        if sender.send(message).is_err() || last {
            return; // done, or the load ended without it
        }
    }
}

/// What kind of non-regular file `path` is, for messages (`FIFO`, `device`, …).
pub fn special_kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "FIFO (named pipe)"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::unix::net::UnixStream;

    use super::*;

    fn read_all(input: &mut Input<'_>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        input.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn a_file_within_the_limit_is_read_whole_and_one_past_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ten.txt");
        fs::write(&path, "0123456789").unwrap();
        let mut exact = Budget::new(10, CancellationToken::new());
        let mut input = Input::open(&path, &mut exact).unwrap();
        assert_eq!(read_all(&mut input).unwrap(), b"0123456789");
        assert_eq!(exact.stopped(), None);

        let mut short = Budget::new(9, CancellationToken::new());
        let mut input = Input::open(&path, &mut short).unwrap();
        assert!(read_all(&mut input).is_err());
        assert_eq!(short.stopped(), Some(Stop::OverLimit));
    }

    proptest::proptest! {
        /// Whatever the sizes, an input within the limit reads back whole and one past
        /// it fails as over the limit, having handed out no more than the limit.
        #[test]
        fn the_limit_is_exact(len in 0usize..4096, max in 0u64..4096) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("data");
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            fs::write(&path, &data).unwrap();
            let mut budget = Budget::new(max, CancellationToken::new());
            let mut input = Input::open(&path, &mut budget).unwrap();
            let mut out = Vec::new();
            let result = input.read_to_end(&mut out);
            if len as u64 <= max {
                proptest::prop_assert!(result.is_ok());
                proptest::prop_assert_eq!(out, data);
                proptest::prop_assert_eq!(budget.stopped(), None);
            } else {
                proptest::prop_assert!(result.is_err());
                proptest::prop_assert!(out.len() as u64 <= max);
                proptest::prop_assert_eq!(budget.stopped(), Some(Stop::OverLimit));
            }
        }
    }

    #[test]
    fn an_endless_device_stops_at_the_limit() {
        let mut budget = Budget::new(3 << 20, CancellationToken::new());
        let mut input = Input::open(Path::new("/dev/zero"), &mut budget).unwrap();
        let mut sink = Vec::new();
        let err = input.read_to_end(&mut sink).unwrap_err();
        assert_eq!(budget.stopped(), Some(Stop::OverLimit), "{err}");
        assert!(sink.len() as u64 <= 3 << 20);
    }

    #[test]
    fn a_cancelled_token_ends_a_read_waiting_on_a_quiet_pipe() {
        // A socket pair stands in for a pipe whose writer stays open and silent.
        let (mut writer, reader) = UnixStream::pair().unwrap();
        let cancel = CancellationToken::new();
        let (sender, messages) = mpsc::sync_channel(PUMP_DEPTH_CHUNKS);
        let mut pump = Pump::with_channel(messages, &sender, cancel.clone()).unwrap();
        thread::spawn(move || {
            let mut reader = reader;
            let mut buf = [0u8; 16];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || sender.send(Message::Data(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        });
        writer.write_all(b"abc").unwrap();
        let mut buf = [0u8; 8];
        assert!(matches!(pump.read(&mut buf), Ok(3)));
        let canceller = thread::spawn(move || cancel.cancel());
        // Nothing more is written and the writer stays open: only the token ends this.
        assert!(matches!(pump.read(&mut buf), Err(PumpError::Cancelled)));
        canceller.join().unwrap();
        drop(writer);
    }

    #[test]
    fn a_pump_reads_a_pipe_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let path = path.clone();
            thread::spawn(move || fs::write(path, vec![b'q'; 700_000]).unwrap())
        };
        let mut budget = Budget::new(1 << 20, CancellationToken::new());
        let mut input = Input::open(&path, &mut budget).unwrap();
        assert_eq!(read_all(&mut input).unwrap(), vec![b'q'; 700_000]);
        writer.join().unwrap();
    }
}
