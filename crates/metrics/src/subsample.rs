//! Reproducible randomness for the statistics: a seeded generator and a
//! uniform subsample drawn with it, so that a check run twice on the same
//! data gives the same answer.

/// The increment of SplitMix64's Weyl sequence (2⁶⁴ divided by the golden
/// ratio, made odd), from Steele, Lea and Flood (below).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// 2⁻⁵²: the width of the cells of `(0, 1)` whose midpoints
/// [`SplitMix64::open_unit`] returns, one for each value of the top 52 bits of
/// a draw (52, not 53: the highest midpoint, `1 − 2⁻⁵³`, is then an `f64`,
/// where `1 − 2⁻⁵⁴` would round to 1).
const UNIT_52: f64 = 1.0 / (1u64 << 52) as f64;

/// SplitMix64 (G. L. Steele, D. Lea, C. H. Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): 64 bits of state, passes
/// BigCrush, and is defined by a few lines, so the numbers it gives for a seed
/// never change with a dependency's version.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from the open interval `(0, 1)`: the midpoint of one of
    /// 2⁵² equal cells, so never 0 nor 1 (its logarithm, and that of its
    /// complement, are always finite).
    pub(crate) fn open_unit(&mut self) -> f64 {
        ((self.next_u64() >> 12) as f64 + 0.5) * UNIT_52
    }
}

/// A uniform random subsample of `size` of `values`, in their original order
/// (all of them, in order, when there are no more than `size`).
///
/// Selection sampling, Algorithm S of D. E. Knuth, *The Art of Computer
/// Programming*, vol. 2, 3rd ed., §3.4.2: one pass, each value kept with
/// probability (still to choose) / (still to see), so every subset of `size`
/// values is equally likely. It needs no memory beyond the subsample, whatever
/// the number of values.
pub(crate) fn subsample<T: Copy>(values: &[T], size: usize, rng: &mut SplitMix64) -> Vec<T> {
    if values.len() <= size {
        return values.to_vec();
    }
    let mut chosen = Vec::with_capacity(size);
    let total = values.len();
    for (seen, &value) in values.iter().enumerate() {
        let wanted = size - chosen.len();
        if wanted == 0 {
            break;
        }
        if ((total - seen) as f64) * rng.open_unit() < wanted as f64 {
            chosen.push(value);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_reference_sequence() {
        // The first five outputs for seed 1234567, as published by Rosetta
        // Code's task "Pseudo-random numbers/Splitmix64" (from the reference
        // splitmix64.c by S. Vigna).
        let mut rng = SplitMix64::new(1_234_567);
        let want = [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ];
        for w in want {
            assert_eq!(rng.next_u64(), w);
        }
    }

    #[test]
    fn open_unit_is_strictly_inside() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..10_000 {
            let u = rng.open_unit();
            assert!(u > 0.0 && u < 1.0);
        }
        // The extreme cells.
        const {
            assert!(0.5 * UNIT_52 > 0.0);
            assert!(((1u64 << 52) as f64 - 0.5) * UNIT_52 < 1.0);
        }
    }

    #[test]
    fn a_subsample_has_the_size_asked_keeps_order_and_is_reproducible() {
        let values: Vec<u32> = (0..100_000).collect();
        let a = subsample(&values, 3000, &mut SplitMix64::new(42));
        let b = subsample(&values, 3000, &mut SplitMix64::new(42));
        let c = subsample(&values, 3000, &mut SplitMix64::new(43));
        assert_eq!(a.len(), 3000);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        // Uniform over the positions: the mean index is near the middle
        // (standard error 100000 / √(12 × 3000) ≈ 527).
        let mean = a.iter().map(|&v| f64::from(v)).sum::<f64>() / 3000.0;
        assert!((mean - 49_999.5).abs() < 4.0 * 527.0, "{mean}");
        assert_eq!(
            subsample(&values[..10], 3000, &mut SplitMix64::new(1)),
            &values[..10]
        );
    }
}
