//! What a run tells its watchdog, and the framing that carries it over the watchdog's
//! stdin.
//!
//! The watchdog used to run the commands of a file in `$TMPDIR` named by the cookie in
//! its world-readable argv, whoever had written it: another local user could have a
//! command run as root, and a process of the run could register one that outlived the
//! run. Its orders now come only over the pipe its parent holds the write end of (the
//! end is close-on-exec, so no child inherits it): each order is one frame, a 4-byte
//! big-endian length and that many bytes of JSON, parsed strictly into [`Order`].
//! Nothing on disk is read and nothing runs through a shell. A frame that is too long
//! or does not parse ends the reading of orders (the watchdog still waits for the pipe
//! to close and still sweeps): a stream that lost its framing cannot be trusted again.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The longest frame a watchdog accepts.
pub(crate) const MAX_FRAME_BYTES: usize = 64 * 1024;
/// The most orders a watchdog keeps; later ones are dropped (with the framing intact).
pub(crate) const MAX_ORDERS: usize = 4096;

/// One thing the watchdog is to do once its run is gone, after its sweep.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "order", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Order {
    /// Run `argv[0]` with the rest as arguments (no shell), inside the run's cgroup
    /// where it has one, for at most a few seconds: for what no signal reaches, such
    /// as a Slurm job whose `srun` died with the run (`scancel --name=…`).
    Run {
        /// The program and its arguments.
        argv: Vec<String>,
    },
    /// Remove this directory and everything in it (a kernel's private temp dir).
    RemoveDir {
        /// The directory.
        path: PathBuf,
    },
    /// Remove the run's live record (and its lock) once everything else is done.
    Record {
        /// The record file, `<data-dir>/live/<cookie>.json`.
        path: PathBuf,
    },
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The pipe failed.
    #[error("failed to read an order from the watchdog's stdin")]
    Io(#[from] io::Error),
    /// The frame announced more than [`MAX_FRAME_BYTES`].
    #[error("failed to read an order: a frame of {bytes} bytes is over the {MAX_FRAME_BYTES}-byte limit")]
    TooLong {
        /// The announced length.
        bytes: usize,
    },
    /// The frame's bytes are no [`Order`].
    #[error("failed to parse an order frame")]
    Parse(#[from] serde_json::Error),
}

/// Writes `order` as one frame (one `write` of the whole frame, so orders written by
/// several threads under a lock never interleave).
pub(crate) fn write_order(out: &mut impl Write, order: &Order) -> io::Result<()> {
    let json = serde_json::to_vec(order).map_err(io::Error::other)?;
    if json.len() > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an order of {} bytes is over the watchdog's {MAX_FRAME_BYTES}-byte frame limit",
                json.len()
            ),
        ));
    }
    let len = u32::try_from(json.len()).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + json.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&json);
    out.write_all(&frame)?;
    out.flush()
}

/// Reads the next frame: `Ok(None)` when the pipe closed between frames (a frame cut
/// short by the close is dropped the same way).
pub(crate) fn read_order(input: &mut impl Read) -> Result<Option<Order>, FrameError> {
    let mut len = [0u8; 4];
    if !read_whole(input, &mut len)? {
        return Ok(None);
    }
    let bytes = u32::from_be_bytes(len) as usize;
    if bytes > MAX_FRAME_BYTES {
        return Err(FrameError::TooLong { bytes });
    }
    let mut json = vec![0u8; bytes];
    if !read_whole(input, &mut json)? {
        return Ok(None);
    }
    Ok(Some(serde_json::from_slice(&json)?))
}

/// Fills `buf`; `false` when the input ends first.
fn read_whole(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

/// Reads orders until the input closes, keeping at most [`MAX_ORDERS`] (each once).
/// After a bad frame the rest of the input is read and discarded, so the caller still
/// learns when the pipe closes. Returns the orders and the first problem, if any.
pub(crate) fn read_until_closed(input: &mut impl Read) -> (Vec<Order>, Option<FrameError>) {
    let mut orders: Vec<Order> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let problem = loop {
        match read_order(input) {
            Ok(Some(order)) => {
                if orders.len() < MAX_ORDERS && seen.insert(order.clone()) {
                    orders.push(order);
                }
            }
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    if problem.is_some() {
        discard_until_closed(input);
    }
    (orders, problem)
}

/// Reads and drops everything until the input closes (or fails).
fn discard_until_closed(input: &mut impl Read) {
    let mut sink = [0u8; 4096];
    loop {
        match input.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(orders: &[Order]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for order in orders {
            write_order(&mut bytes, order).unwrap();
        }
        bytes
    }

    fn run(argv: &[&str]) -> Order {
        Order::Run {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    #[test]
    fn orders_round_trip_each_once() {
        let orders = [
            run(&["scancel", "--name=rlm-a1"]),
            Order::RemoveDir {
                path: "/tmp/rlm-kernel-x".into(),
            },
            run(&["scancel", "--name=rlm-a1"]),
            Order::Record {
                path: "/d/live/1.t2.json".into(),
            },
        ];
        let (read, problem) = read_until_closed(&mut framed(&orders).as_slice());
        assert!(problem.is_none(), "{problem:?}");
        assert_eq!(
            read,
            [orders[0].clone(), orders[1].clone(), orders[3].clone()]
        );
    }

    #[test]
    fn the_wire_shape_is_tagged_json() {
        let bytes = framed(&[run(&["true"])]);
        assert_eq!(&bytes[..4], &[0, 0, 0, 31]);
        assert_eq!(
            &bytes[4..],
            br#"{"order":"run","argv":["true"]}"#.as_slice()
        );
    }

    #[test]
    fn a_frame_cut_by_the_close_is_dropped() {
        let mut bytes = framed(&[run(&["a"]), run(&["b"])]);
        bytes.truncate(bytes.len() - 3);
        let (read, problem) = read_until_closed(&mut bytes.as_slice());
        assert!(problem.is_none());
        assert_eq!(read, [run(&["a"])]);
    }

    #[test]
    fn an_oversized_or_unknown_frame_ends_the_orders_but_not_the_wait() {
        let mut bytes = framed(&[run(&["a"])]);
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        bytes.extend(framed(&[run(&["b"])]));
        let (read, problem) = read_until_closed(&mut bytes.as_slice());
        assert_eq!(read, [run(&["a"])]);
        assert!(
            matches!(problem, Some(FrameError::TooLong { .. })),
            "{problem:?}"
        );

        let unknown = br#"{"order":"shell","command":"rm -rf /"}"#;
        let mut bytes = (unknown.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(unknown);
        bytes.extend(framed(&[run(&["b"])]));
        let (read, problem) = read_until_closed(&mut bytes.as_slice());
        assert!(read.is_empty());
        assert!(matches!(problem, Some(FrameError::Parse(_))), "{problem:?}");
    }

    #[test]
    fn an_order_over_the_frame_limit_is_not_sent() {
        let long = "x".repeat(MAX_FRAME_BYTES);
        let mut bytes = Vec::new();
        assert!(write_order(&mut bytes, &run(&[&long])).is_err());
        assert!(bytes.is_empty());
    }

    proptest! {
        /// Whatever bytes arrive, reading ends (no panic, no unbounded allocation) and
        /// keeps at most the limit.
        #[test]
        fn any_input_is_read_to_its_end(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let (read, _) = read_until_closed(&mut bytes.as_slice());
            prop_assert!(read.len() <= MAX_ORDERS);
        }

        #[test]
        fn framed_orders_read_back(argvs in proptest::collection::vec(
            proptest::collection::vec("[^\u{0}]{0,12}", 1..4), 0..8)) {
            let orders: Vec<Order> = argvs.into_iter().map(|argv| Order::Run { argv }).collect();
            let (read, problem) = read_until_closed(&mut framed(&orders).as_slice());
            prop_assert!(problem.is_none());
            let mut expected: Vec<Order> = Vec::new();
            for order in orders {
                if !expected.contains(&order) {
                    expected.push(order);
                }
            }
            prop_assert_eq!(read, expected);
        }
    }
}
