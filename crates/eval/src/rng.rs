//! The generators' random numbers: SplitMix64, written out here so that a seed gives
//! the same contexts, questions and answers on every machine and with every version of
//! every dependency (a benchmark whose items change silently is not one).

/// A SplitMix64 generator (Steele, Lea and Flood, 2014).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, mixed with `stream` so that items of one run differ.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Self(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the bias for the n used here is far below 2^-40.
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A number in `low..=high` (`low` ≤ `high`), as Python's `random.randint`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low).saturating_add(1))
    }

    /// A number in [0, 1), from 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }

    /// `items` in a random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }

    /// `k` distinct numbers of `0..n`, in the order drawn (all of them when `k` ≥ `n`),
    /// as Python's `random.sample(range(n), k)`.
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        let k = k.min(n);
        if k * 2 >= n {
            let mut all: Vec<usize> = (0..n).collect();
            for i in 0..k {
                let j = i + self.below((n - i) as u64) as usize;
                all.swap(i, j);
            }
            all.truncate(k);
            return all;
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::with_capacity(k);
        while out.len() < k {
            let i = self.below(n as u64) as usize;
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn a_seed_gives_the_same_numbers_forever() {
        let mut rng = Rng::new(1, 0);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        // Pinned: changing these changes every benchmark's items.
        assert_eq!(
            first,
            vec![
                0xbeeb_8da1_658e_ec67,
                0xf893_a2ee_fb32_555e,
                0x71c1_8690_ee42_c90b
            ]
        );
        assert_ne!(Rng::new(1, 1).next_u64(), Rng::new(1, 0).next_u64());
        let mut rng = Rng::new(7, 3);
        assert!((0..1000).all(|_| rng.below(10) < 10));
    }

    #[test]
    fn draws_stay_in_their_ranges_and_samples_are_distinct() {
        let mut rng = Rng::new(3, 9);
        assert!((0..1000).all(|_| (5..=7).contains(&rng.between(5, 7))));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&rng.unit())));
        for (n, k) in [(10, 3), (10, 9), (1000, 5), (4, 10)] {
            let drawn = rng.sample(n, k);
            assert_eq!(drawn.len(), k.min(n));
            let distinct: std::collections::BTreeSet<_> = drawn.iter().collect();
            assert_eq!(distinct.len(), drawn.len());
            assert!(drawn.iter().all(|i| *i < n));
        }
        let mut items: Vec<u32> = (0..50).collect();
        rng.shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(items, sorted);
    }
}
