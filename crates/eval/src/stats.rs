//! Statistics a reader can trust: the 95 % Wilson score interval of an accuracy.
//!
//! With a handful of items per cell, "3 of 3" says little: the Wilson interval says how
//! little (3/3 → 44 % to 100 %). It is used rather than the normal approximation
//! because it stays inside [0, 1] and is sensible at 0 and n successes, which are the
//! common cases here.

/// The z value of a two-sided 95 % interval (the 97.5th percentile of the normal).
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson score interval of `correct` successes out of `n` trials, as
/// `(low, high)` in [0, 1]; `None` when `n` is 0 (nothing was measured). `correct`
/// above `n` is taken as `n`.
pub fn wilson_interval(correct: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n_f = n as f64;
    let p = correct.min(n) as f64 / n_f;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denominator;
    let half = Z_95 / denominator * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: (f64, f64), want: (f64, f64)) -> bool {
        (got.0 - want.0).abs() < 5e-4 && (got.1 - want.1).abs() < 5e-4
    }

    #[test]
    fn known_intervals() {
        // The first three are the values issue 24 gives; the others were computed from
        // the closed form independently (Python, float64), rounded to four places.
        for (correct, n, want) in [
            (0, 5, (0.0, 0.4345)),
            (5, 5, (0.5655, 1.0)),
            (3, 10, (0.1078, 0.6032)),
            (1, 1, (0.2065, 1.0)),
            (50, 100, (0.4038, 0.5962)),
            (0, 1, (0.0, 0.7935)),
        ] {
            let got = wilson_interval(correct, n).unwrap();
            assert!(close(got, want), "{correct}/{n}: {got:?}, want {want:?}");
        }
    }

    #[test]
    fn nothing_measured_has_no_interval() {
        assert_eq!(wilson_interval(0, 0), None);
    }

    #[test]
    fn the_interval_holds_the_observed_rate_and_narrows_with_n() {
        let mut last_width = 1.0;
        for n in [4_u64, 16, 64, 256, 1024] {
            let (low, high) = wilson_interval(n / 4, n).unwrap();
            assert!(low < 0.25 && 0.25 < high, "{n}: {low} {high}");
            assert!(high - low < last_width, "{n}");
            last_width = high - low;
        }
    }
}
