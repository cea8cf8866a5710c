//! RULER's variable tracking (`variable_tracking.py`): chains `VAR A = 12345`, `VAR B =
//! VAR A `, … hidden in order among noise lines; the gold strings are every variable of
//! the first chain, all assigned the value asked.
//!
//! As RULER does, the input starts with one worked example (a short chain of
//! three-letter variables in about 500 tokens of noise, its template, answer prefix and
//! answer), which the baseline sees before the template; RULER's generator always adds
//! it.

use std::collections::BTreeSet;

use super::niah::NOISE;
use super::template::{Parts, VT};
use crate::rng::Rng;

/// Tokens of the worked example, answer prefix included (`max_seq_length=500`).
const EXAMPLE_TOKENS: u64 = 500;

/// `count` distinct names of `letters` upper-case letters.
fn names(rng: &mut Rng, count: usize, letters: usize) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let name: String = (0..letters)
            .map(|_| char::from(b'A' + rng.below(26) as u8))
            .collect();
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    out
}

/// `chains` chains of `hops` assignments after a value, with their variables.
fn chains(
    rng: &mut Rng,
    chains: usize,
    hops: usize,
    letters: usize,
    avoid: u64,
) -> (Vec<Vec<String>>, Vec<Vec<String>>, u64) {
    let all = names(rng, chains * (hops + 1), letters);
    let mut value = avoid;
    while value == avoid {
        value = rng.between(10_000, 99_998);
    }
    let mut vars = Vec::new();
    let mut statements = Vec::new();
    for (c, these) in all.chunks(hops + 1).enumerate() {
        let first = if c == 0 {
            value
        } else {
            rng.between(10_000, 99_998)
        };
        let mut chain = vec![format!("VAR {} = {first}", these[0])];
        for j in 0..hops {
            chain.push(format!("VAR {} = VAR {} ", these[j + 1], these[j]));
        }
        vars.push(these.to_vec());
        statements.push(chain);
    }
    (vars, statements, value)
}

/// Noise lines reaching about `length` characters with the chains among them, each
/// chain's statements in order at random places.
fn noise_with(rng: &mut Rng, statements: &[Vec<String>], length: usize) -> String {
    let chain_chars: usize = statements.iter().flatten().map(|s| s.len() + 1).sum();
    let count = (length.saturating_sub(chain_chars) + 1) / (NOISE.len() + 1);
    let mut lines: Vec<&str> = vec![NOISE; count.max(1)];
    for chain in statements {
        let mut at = rng.sample(lines.len().max(chain.len()), chain.len());
        at.sort_unstable();
        for (j, (statement, at)) in chain.iter().zip(at).enumerate() {
            lines.insert((at + j).min(lines.len()), statement);
        }
    }
    lines.join("\n")
}

/// The context, the item's parts (the worked example first) and the gold strings.
pub(crate) fn generate(
    chains_count: usize,
    hops: usize,
    rng: &mut Rng,
    length: usize,
) -> (String, Parts, Vec<String>) {
    // The worked example: three-letter names, its own value.
    let (example_vars, example_chains, example_value) = chains(rng, chains_count, hops, 3, 0);
    let example_parts = Parts::render(
        &VT,
        &[
            ("query", &example_value.to_string()),
            ("num_v", &(hops + 1).to_string()),
        ],
        false,
    );
    let frame = example_parts.input("").len();
    let example_length = usize::try_from(super::chars_of_tokens(EXAMPLE_TOKENS))
        .unwrap_or(0)
        .saturating_sub(frame);
    let example_context = noise_with(rng, &example_chains, example_length);
    let example = format!(
        "{} {}\n",
        example_parts.input(&example_context),
        example_vars[0].join(" ")
    );
    let (vars, statements, value) = chains(rng, chains_count, hops, 5, example_value);
    let context = noise_with(rng, &statements, length);
    let mut parts = Parts::render(
        &VT,
        &[
            ("query", &value.to_string()),
            ("num_v", &(hops + 1).to_string()),
        ],
        false,
    );
    parts.examples = format!("{example}\n");
    (context, parts, vars[0].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_in_order_among_noise_and_the_example_comes_first() {
        let mut rng = Rng::new(4, 4);
        let (context, parts, refs) = generate(1, 4, &mut rng, 20_000);
        assert_eq!(refs.len(), 5);
        assert!(refs.iter().all(|v| v.len() == 5));
        let lines: Vec<&str> = context.lines().collect();
        let at: Vec<usize> = refs
            .iter()
            .map(|v| {
                lines
                    .iter()
                    .position(|l| l.starts_with(&format!("VAR {v} =")))
                    .unwrap()
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
        assert!(lines.iter().all(|l| *l == NOISE || l.starts_with("VAR ")));
        assert!(
            (19_000..=20_100).contains(&context.len()),
            "{}",
            context.len()
        );
        let input = parts.framing();
        let crate::framing::Framing::Around { before, after, .. } = input else {
            panic!()
        };
        assert!(before.starts_with("Memorize and track"));
        assert_eq!(before.matches("Memorize and track").count(), 2);
        assert!(after.contains(", 5 variables are assigned the value"));
        // The example's own answer follows its answer prefix.
        let example_answer = before.split("they are: ").nth(1).unwrap();
        assert_eq!(
            example_answer
                .lines()
                .next()
                .unwrap()
                .split_whitespace()
                .count(),
            5
        );
    }
}
