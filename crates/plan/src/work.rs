//! The host's own work on a plan, bounded before it is done. Every piece is read by
//! the host — for a filter, a `count` or an `extract`, a prompt — so a plan's pieces
//! together are what it reads: its input once, and again whatever overlaps repeat. A
//! split with `overlap = size - 1` puts each byte in `size` pieces (the fourth hostile
//! review: a `lines` split of 400 KB in 1000-line pieces, 400 MB to read, 14 s), and a
//! pieces variable written by model code may list one range of a large file ten
//! thousand times. What the pieces repeat is priced — before a split from its size and
//! overlap, after it (or for a pieces variable) from the pieces themselves — and a plan
//! that would repeat more than the bound is refused before any pass over its pieces.

use std::sync::atomic::{AtomicU64, Ordering};

use rlm_protocol::format::human_bytes;

use crate::error::PlanError;
use crate::split::{Cut, Piece};

/// How many times over the pieces of a plan may repeat its input, all levels of a
/// nested plan together (an overlap of half a piece repeats it about once).
pub const MAX_REPEATS: u64 = 3;

/// Bytes the pieces may repeat whatever the input's size: a small input may overlap
/// as it likes.
pub const MIN_REPEAT_BYTES: u64 = 64 << 20;

/// What the host has read again for a plan's overlaps, against the bound its input
/// sets: `MAX_REPEATS` times the input, or `MIN_REPEAT_BYTES` when that is more.
/// Shared by the levels of a nested plan (and by its leaves, which split in parallel).
#[derive(Debug)]
pub struct HostWork {
    bound: u64,
    repeated: AtomicU64,
}

impl HostWork {
    /// The bound for a plan whose input holds `input_bytes`.
    pub fn over(input_bytes: u64) -> Self {
        Self {
            bound: input_bytes
                .saturating_mul(MAX_REPEATS)
                .max(MIN_REPEAT_BYTES),
            repeated: AtomicU64::new(0),
        }
    }

    /// Bytes the pieces may repeat in all.
    pub fn bound(&self) -> u64 {
        self.bound
    }

    /// Bytes the pieces counted so far repeat.
    pub fn repeated(&self) -> u64 {
        self.repeated.load(Ordering::SeqCst)
    }

    /// Checks, before `cut` splits an input of `bytes`, that what its pieces would
    /// repeat fits what the bound leaves; the refusal says which overlap would fit.
    pub fn before_split(&self, cut: &Cut, bytes: u64) -> Result<(), PlanError> {
        let repeats = repeats_of(cut);
        let would = (bytes as f64 * (repeats - 1.0)) as u64;
        let left = self.bound.saturating_sub(self.repeated());
        if would <= left {
            return Ok(());
        }
        let (size, overlap, unit) = match cut {
            Cut::Chars { size, overlap } => (*size, *overlap, "characters"),
            Cut::Lines { size, overlap } => (*size, *overlap, "lines"),
            // Records never overlap: they repeat nothing.
            Cut::Records { .. } => return Ok(()),
        };
        let fits = overlap_that_fits(cut, left as f64 / bytes.max(1) as f64 + 1.0);
        let advice = match fits {
            0 => "leave out `split.overlap`".to_owned(),
            n => format!("use an `overlap` of at most {n} {unit}, or none"),
        };
        Err(PlanError::HostWork(format!(
            "a split of {size} {unit} a piece with an overlap of {overlap} puts each byte of its input of {} in about {repeats:.0} pieces, so the host would read about {} of it again, over the {} a plan's overlaps may repeat ({MAX_REPEATS} times its input, or {}); {advice}",
            human_bytes(bytes),
            human_bytes(would),
            human_bytes(left),
            human_bytes(MIN_REPEAT_BYTES),
        )))
    }

    /// Counts what `pieces` of an input of `bytes` repeat — their bytes beyond the
    /// input's — and fails once the plan's repeats pass the bound (`what` names the
    /// pieces, `advice` what to do, in the refusal).
    pub fn count_pieces<'p>(
        &self,
        pieces: impl IntoIterator<Item = &'p Piece>,
        bytes: u64,
        (what, advice): (&str, &str),
    ) -> Result<(), PlanError> {
        let held: u64 = pieces
            .into_iter()
            .map(|p| p.end.saturating_sub(p.start))
            .fold(0, u64::saturating_add);
        let repeats = held.saturating_sub(bytes);
        let repeated = self.repeated.fetch_add(repeats, Ordering::SeqCst) + repeats;
        if repeated <= self.bound {
            return Ok(());
        }
        Err(PlanError::HostWork(format!(
            "{what} hold {} of an input of {}, so the host would read about {} of it again, over the {} a plan's overlaps may repeat ({MAX_REPEATS} times its input, or {}); {advice}",
            human_bytes(held),
            human_bytes(bytes),
            human_bytes(repeated),
            human_bytes(self.bound),
            human_bytes(MIN_REPEAT_BYTES),
        )))
    }
}

/// How many pieces of `cut` hold a byte of a long input, on average: 1 without an
/// overlap; `size / (size - overlap)` lines for a `lines` cut; for `chars`, whose
/// pieces may end at a line end after four fifths of `size`, `size` over the shortest
/// step between two pieces' starts.
pub fn repeats_of(cut: &Cut) -> f64 {
    match cut {
        Cut::Records { .. } => 1.0,
        Cut::Chars { overlap: 0, .. } | Cut::Lines { overlap: 0, .. } => 1.0,
        Cut::Lines { size, overlap } => *size as f64 / size.saturating_sub(*overlap).max(1) as f64,
        Cut::Chars { size, overlap } => {
            *size as f64 / (size * 4 / 5).saturating_sub(*overlap).max(1) as f64
        }
    }
}

/// The largest overlap of `cut`'s size whose pieces hold a byte `repeats` times at
/// most (0 when even the smallest does not fit).
fn overlap_that_fits(cut: &Cut, repeats: f64) -> u64 {
    let (size, shortest) = match cut {
        Cut::Lines { size, .. } => (*size, *size),
        Cut::Chars { size, .. } => (*size, size * 4 / 5),
        Cut::Records { .. } => return 0,
    };
    let step = (size as f64 / repeats.max(1.0)).ceil() as u64;
    shortest.saturating_sub(step.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(size: u64, overlap: u64) -> Cut {
        Cut::Lines { size, overlap }
    }

    #[test]
    fn an_overlap_that_repeats_the_input_a_thousand_times_is_refused_before_the_split() {
        // The fourth hostile review: 400 KB in pieces of 1000 lines, 999 repeated.
        let work = HostWork::over(400_000);
        let error = work.before_split(&lines(1000, 999), 400_000).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("the plan was refused before any work: a split of 1000 lines a piece with an overlap of 999 puts each byte of its input of 390.6 KiB in about 1000 pieces"),
            "{message}"
        );
        assert!(
            message.contains("over the 64.0 MiB a plan's overlaps may repeat"),
            "{message}"
        );
        // The overlap it names fits.
        let fits = message
            .split("at most ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap();
        assert!(fits > 0 && fits < 999, "{message}");
        assert!(work.before_split(&lines(1000, fits), 400_000).is_ok());
        assert!(work.before_split(&lines(1000, fits + 1), 400_000).is_err());
        // No overlap repeats nothing; a modest one over a large input fits.
        assert!(work.before_split(&lines(1000, 0), u64::MAX / 8).is_ok());
        let big = HostWork::over(1 << 30);
        let chars = Cut::Chars {
            size: 8000,
            overlap: 2000,
        };
        assert!(big.before_split(&chars, 1 << 30).is_ok());
    }

    #[test]
    fn a_chars_overlap_over_a_large_input_is_refused_with_one_that_fits() {
        // The fourth hostile review: 32 MiB cut with a `chars` overlap of a piece but one.
        let bytes = 32 << 20;
        let cut = Cut::Chars {
            size: 1 << 20,
            overlap: (1 << 20) - 1,
        };
        let work = HostWork::over(bytes);
        let message = work.before_split(&cut, bytes).unwrap_err().to_string();
        assert!(
            message.contains("use an `overlap` of at most ") && message.contains("characters"),
            "{message}"
        );
    }

    #[test]
    fn pieces_that_list_one_range_again_and_again_are_refused() {
        // Model code's pieces variable: ten thousand times the whole of 100 KB.
        let work = HostWork::over(100_000);
        let piece = Piece {
            start: 0,
            end: 100_000,
            chars: 1,
        };
        let pieces = vec![piece; 10_000];
        let error = work
            .count_pieces(&pieces, 100_000, ("the pieces of `p`", "split it again"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("the plan was refused before any work: the pieces of `p` hold 953.7 MiB of an input of 97.7 KiB"),
            "{error}"
        );
        let big = HostWork::over(1 << 30);
        let whole = vec![
            Piece {
                start: 0,
                end: 1 << 30,
                chars: 1
            };
            10_000
        ];
        assert!(big.count_pieces(&whole, 1 << 30, ("p", "a")).is_err());
        // The pieces of a split without an overlap repeat nothing.
        let tiles: Vec<Piece> = (0..10)
            .map(|i| Piece {
                start: i * 100,
                end: (i + 1) * 100,
                chars: 100,
            })
            .collect();
        let fresh = HostWork::over(1_000);
        assert!(fresh.count_pieces(&tiles, 1_000, ("p", "a")).is_ok());
        assert_eq!(fresh.repeated(), 0);
    }
}
