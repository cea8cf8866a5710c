//! One OOLONG-synth context window of `trec_coarse`, built as OOLONG's
//! `construct_context` builds one: a skewed label distribution (a softmax of random
//! weights at a random temperature), that many TREC questions of each label, a skewed
//! user id (80 % of the lines from 10 % of the ids) and a uniform date per line; the
//! text shows date, user and question, never the label.

use chrono::{Days, NaiveDate};

use super::trec::{TrecSet, LABELS};
use crate::rng::Rng;

/// One line of a window: its date, user, question and (hidden) label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The line's date.
    pub day: NaiveDate,
    /// The line's user id.
    pub user: u32,
    /// The label's name.
    pub label: String,
}

/// A window: its labels in OOLONG's order (which its descriptions and counting
/// questions list), the lines in the order they were drawn, and their questions.
#[derive(Debug, Clone)]
pub struct Window {
    /// Label names, in the window's order.
    pub labels: Vec<&'static str>,
    /// The rows, in the order drawn (the order OOLONG counts in).
    pub rows: Vec<Row>,
    /// Each row's question text.
    pub texts: Vec<String>,
}

/// The first and last date of OOLONG's dates (`sample_random_dates`).
fn date_range() -> (NaiveDate, NaiveDate) {
    (
        NaiveDate::from_ymd_opt(2022, 2, 16).unwrap_or_default(),
        NaiveDate::from_ymd_opt(2025, 6, 21).unwrap_or_default(),
    )
}

/// A date as the lines write it (`%b %d, %Y`).
pub fn line_date(day: NaiveDate) -> String {
    day.format("%b %d, %Y").to_string()
}

/// Python's `round` (half to even).
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

/// `base` to the power `n`, by multiplication.
fn power(base: f64, n: u32) -> f64 {
    (0..n).fold(1.0, |acc, _| acc * base)
}

/// `x^(1/n)` for `x` ≥ 1, by Newton's method on the four operations only: the bytes
/// of a window must not depend on a platform's `libm`.
fn root(x: f64, n: u32) -> f64 {
    let n_f = f64::from(n);
    // Bernoulli: 1 + (x - 1) / n is above the root, so Newton descends to it.
    let mut r = 1.0 + (x - 1.0) / n_f;
    for _ in 0..64 {
        r = ((n_f - 1.0) * r + x / power(r, n - 1)) / n_f;
    }
    r
}

/// `e^x` on the four operations only (see [`root`]): `x` halved to within 1/8, a
/// Taylor series, squared back.
fn exp(x: f64) -> f64 {
    let (mut y, mut halvings) = (x, 0);
    while y.abs() > 0.125 && halvings < 64 {
        y /= 2.0;
        halvings += 1;
    }
    let (mut term, mut sum) = (1.0, 1.0);
    for i in 1..=24 {
        term *= y / f64::from(i);
        sum += term;
    }
    (0..halvings).fold(sum, |s, _| s * s)
}

/// Counts per label summing to `total`: `softmax(randint(1, 30) ** (1 / temperature))`
/// of a temperature drawn from 2 to 6, rounded, the first corrected for the rounding.
fn skewed_counts(rng: &mut Rng, labels: usize, total: usize) -> Vec<usize> {
    let temperature = rng.between(2, 6) as u32;
    let weights: Vec<f64> = (0..labels)
        .map(|_| root(rng.between(1, 30) as f64, temperature))
        .collect();
    let top = weights.iter().copied().fold(f64::MIN, f64::max);
    let exps: Vec<f64> = weights.iter().map(|w| exp(w - top)).collect();
    let sum: f64 = exps.iter().sum();
    let mut counts: Vec<i64> = exps
        .iter()
        .map(|e| round_half_even(e / sum * total as f64) as i64)
        .collect();
    let excess: i64 = counts.iter().sum::<i64>() - total as i64;
    if let Some(first) = counts.first_mut() {
        *first -= excess;
    }
    // A first count driven below zero (OOLONG would not cope) takes from the largest.
    if let Some(&first) = counts.first() {
        if first < 0 {
            counts[0] = 0;
            if let Some(largest) = (0..counts.len()).max_by_key(|&i| counts[i]) {
                counts[largest] += first;
            }
        }
    }
    counts.into_iter().map(|c| c.max(0) as usize).collect()
}

/// `total` user ids from 10000 to 99999: a tenth of that many common ids (at least
/// one) give 80 % of the rows, any other id the rest (`generate_skewed_user_ids`).
fn skewed_users(rng: &mut Rng, total: usize) -> Vec<u32> {
    const LOW: u32 = 10_000;
    const SPAN: usize = 90_000;
    let common: Vec<u32> = rng
        .sample(SPAN, (total / 10).max(1))
        .into_iter()
        .map(|i| LOW + i as u32)
        .collect();
    let is_common: std::collections::BTreeSet<u32> = common.iter().copied().collect();
    (0..total)
        .map(|_| {
            if rng.unit() < 0.8 {
                *rng.pick(&common)
            } else {
                loop {
                    let id = LOW + rng.below(SPAN as u64) as u32;
                    if !is_common.contains(&id) {
                        break id;
                    }
                }
            }
        })
        .collect()
}

/// How many lines of about `mean_chars`-character questions fit `length` characters
/// with the window's two descriptions.
fn lines_for(length: u64, mean_chars: f64, labels: &[&str]) -> usize {
    // `Date: Mon DD, YYYY || User: NNNNN || Instance: ` and the newline.
    const LINE_FRAME: f64 = 48.0;
    let descriptions =
        (describe(true, 1000, labels).len() + describe(false, 1000, labels).len()) as f64;
    (((length as f64 - descriptions) / (LINE_FRAME + mean_chars)).floor() as usize).max(8)
}

/// OOLONG's description of a `trec_coarse` window (`TREC_Coarse.get_desc`), before
/// (`intro`) or after the lines.
pub fn describe(intro: bool, lines: usize, labels: &[&str]) -> String {
    let start = if intro {
        "The following"
    } else {
        "Recall: the preceding"
    };
    let listed: Vec<String> = labels.iter().map(|l| format!("'{l}'")).collect();
    format!(
        "{start} lines contain {lines} general-knowledge questions, one per line. Each question has an answer that can be described as one of {} categories: {}.\n\nYou will be asked to answer questions about the aggregate label statistics across all {lines} examples in this dataset. Do not try to guess, estimate, or approximate the result. Calculate the exact answer given these datapoints.\n\n",
        labels.len(),
        listed.join(", ")
    )
}

impl Window {
    /// A window of about `length` characters of `trec`'s questions.
    pub fn build(trec: &TrecSet, rng: &mut Rng, length: u64) -> Self {
        // The labels the file has questions of, in a random order.
        let mut labels: Vec<usize> = (0..LABELS.len())
            .filter(|&l| !trec.questions(l).is_empty())
            .collect();
        rng.shuffle(&mut labels);
        let names: Vec<&'static str> = labels.iter().map(|&l| LABELS[l].1).collect();
        let total = lines_for(length, trec.mean_question_chars(), &names);
        let counts = skewed_counts(rng, labels.len(), total);
        let mut drawn: Vec<(usize, &str)> = Vec::with_capacity(total);
        for (&label, &count) in labels.iter().zip(&counts) {
            let pool = trec.questions(label);
            // Too few questions: the pool repeated, as OOLONG does.
            let copies = count.div_ceil(pool.len().max(1)).max(1);
            let indices = rng.sample(pool.len() * copies, count);
            drawn.extend(
                indices
                    .into_iter()
                    .map(|i| (label, pool[i % pool.len()].as_str())),
            );
        }
        rng.shuffle(&mut drawn);
        let users = skewed_users(rng, drawn.len());
        let (first, last) = date_range();
        let days = (last - first).num_days().max(0) as u64;
        let mut rows = Vec::with_capacity(drawn.len());
        let mut texts = Vec::with_capacity(drawn.len());
        for ((label, text), user) in drawn.into_iter().zip(users) {
            let day = first
                .checked_add_days(Days::new(rng.below(days + 1)))
                .unwrap_or(first);
            rows.push(Row {
                day,
                user,
                label: LABELS[label].1.to_owned(),
            });
            texts.push(text.replace('\n', " "));
        }
        Self {
            labels: names,
            rows,
            texts,
        }
    }

    /// The window's text: the description, the lines in a random order, the
    /// description again (`EvalContextWindow.get_prompt`).
    pub fn text(&self, rng: &mut Rng) -> String {
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        rng.shuffle(&mut order);
        let mut text = describe(true, self.rows.len(), &self.labels);
        for i in order {
            let row = &self.rows[i];
            text.push_str(&format!(
                "Date: {} || User: {} || Instance: {}\n",
                line_date(row.day),
                row.user,
                self.texts[i]
            ));
        }
        text.push_str(&describe(false, self.rows.len(), &self.labels));
        text
    }

    /// The label counts, in the window's label order (OOLONG's `true_counts`).
    pub fn counts(&self) -> Vec<(String, usize)> {
        self.labels
            .iter()
            .map(|l| {
                (
                    (*l).to_owned(),
                    self.rows.iter().filter(|r| r.label == *l).count(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_and_exponentials_are_right_on_the_four_operations() {
        for (x, n) in [(30.0, 2), (17.0, 3), (1.0, 6), (29.0, 6)] {
            let want = f64::powf(x, 1.0 / f64::from(n));
            assert!((root(x, n) - want).abs() < 1e-12, "{x} {n}");
        }
        for x in [0.0, -0.1, -1.0, -4.48, -20.0] {
            assert!(
                (exp(x) - f64::exp(x)).abs() < 1e-12 * f64::exp(x).max(1e-300) + 1e-15,
                "{x}"
            );
        }
    }

    #[test]
    fn rounding_is_pythons_and_counts_add_up() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(2.4), 2.0);
        let mut rng = Rng::new(9, 9);
        for total in [8, 100, 3_000] {
            for _ in 0..50 {
                let counts = skewed_counts(&mut rng, 6, total);
                assert_eq!(counts.iter().sum::<usize>(), total);
            }
        }
    }

    #[test]
    fn users_are_skewed_and_five_digits() {
        let mut rng = Rng::new(2, 5);
        let users = skewed_users(&mut rng, 2_000);
        assert!(users.iter().all(|u| (10_000..=99_999).contains(u)));
        let mut counts = std::collections::BTreeMap::new();
        for u in &users {
            *counts.entry(*u).or_insert(0) += 1;
        }
        let mut sizes: Vec<usize> = counts.values().copied().collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        // The 200 common ids carry about 80 % of the rows.
        let top: usize = sizes.iter().take(200).sum();
        assert!((1_450..=1_750).contains(&top), "{top}");
    }
}
