//! Counting keys as Python's `Counter` does (in the order they first appear) and
//! ranking them as `sorted(..., key=count, reverse=True)` does (ties keep that order):
//! OOLONG's questions break ties so, and the oracle answers so.

/// Instances of each key in the order keys first appear (Python's `Counter`).
pub fn tally<K: Ord + Clone>(keys: impl Iterator<Item = K>) -> Vec<(K, usize)> {
    let mut at: std::collections::BTreeMap<K, usize> = std::collections::BTreeMap::new();
    let mut out: Vec<(K, usize)> = Vec::new();
    for key in keys {
        match at.get(&key) {
            Some(&i) => out[i].1 += 1,
            None => {
                at.insert(key.clone(), out.len());
                out.push((key, 1));
            }
        }
    }
    out
}

/// `tally` sorted by count, most first, ties in first-appearance order.
pub fn ranked<K: Ord + Clone>(keys: impl Iterator<Item = K>) -> Vec<(K, usize)> {
    let mut out = tally(keys);
    out.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out
}
