//! Confidence intervals for quantiles (p50, p99, p99.9 of transaction times)
//! by order statistics: distribution-free, from the ranks alone.
//!
//! J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication
//! Systems*, EPFL Press 2010, §2.2.2, Theorem 2.1: for `n` independent samples
//! of a continuous distribution whose `p`-quantile is `q`, and `1 ≤ j < k ≤ n`,
//!
//! ```text
//! P(x₍ⱼ₎ ≤ q ≤ x₍ₖ₎) = B(k − 1) − B(j − 1),   B the Binomial(n, p) distribution function
//! ```
//!
//! since `x₍ⱼ₎ ≤ q` exactly when at least `j` samples fall at or below `q`.
//! The ranks here are the equal-tailed choice: the largest `j` with
//! `B(j − 1) ≤ α/2` and the smallest `k` with `1 − B(k − 1) ≤ α/2`, `α = 1 −
//! confidence`, so each side errs with probability at most `α/2` and the
//! interval covers `q` with probability at least the confidence. With ties
//! (values read from a histogram, a clock's resolution) the closed interval
//! covers at least as often. For the median at 95 % this gives `[x₍₂₎, x₍₉₎]`
//! for `n = 10` and no interval for `n ≤ 5` (even `[x₍₁₎, x₍₅₎]` misses with
//! probability `2·2⁻⁵ > 0.05`).
//!
//! The binomial is summed exactly, term by term outwards from its mode over
//! ±40 standard deviations (beyond which its mass is below 10⁻²⁴, by
//! Bernstein's inequality), which is exact and cheap up to about a million
//! terms. Larger (`n·p·(1 − p)` above about 1.6·10⁸, billions of samples) it
//! uses Le Boudec's normal approximation, `j = ⌊np − η√(np(1 − p))⌋`,
//! `k = ⌈np + η√(np(1 − p))⌉ + 1`, `η` the `(1 + confidence)/2` normal
//! quantile, which there differs from the exact ranks by at most one rank, on
//! the wide side. The samples must be independent: successive transaction
//! times of one connection are not quite, so the interval is a lower bound on
//! the uncertainty, as every interval of this kind on latency data.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use crate::LatencyRecorder;

/// Half-width, in standard deviations (at least 1), of the window of the
/// binomial summed exactly around its mode. Bernstein's inequality bounds the
/// mass outside by `exp(−t²/(2(σ² + t/3)))` with `t = 40·max(σ, 1)`: under
/// 10⁻²⁴, negligible against any `α/2` a caller would ask for.
const WINDOW_SIGMAS: f64 = 40.0;

/// Most terms of the binomial summed exactly (8 MiB of `f64`); past it, the
/// normal approximation.
const EXACT_WINDOW_MAX: u64 = 1 << 20;

/// The ranks (from 1, in increasing order of value) of the order statistics
/// that bound a quantile's confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuantileRanks {
    /// `j`: the interval's lower end is the `j`-th smallest value.
    pub lower: u64,
    /// `k`: the interval's upper end is the `k`-th smallest value.
    pub upper: u64,
    /// `B(k − 1) − B(j − 1)`: the probability that `[x₍ⱼ₎, x₍ₖ₎]` covers the
    /// quantile, at least the confidence asked (exact, or by the normal
    /// approximation with continuity correction for very large `n`).
    pub coverage: f64,
}

/// The ranks `(j, k)` of the two-sided `confidence` interval of the
/// `p`-quantile of `n` samples (Le Boudec, Theorem 2.1; the module's
/// documentation says which ranks and how they are computed).
///
/// `None` when `n` is too small for a two-sided interval at that confidence
/// (some tail of the binomial is heavier than `α/2` even at the extreme rank:
/// `pⁿ > α/2` or `(1 − p)ⁿ > α/2`; for 95 % that is `n < 6` for the median,
/// `n < 368` for p99 and `n < 3688` for p99.9), or when `p` or `confidence`
/// is not strictly between 0 and 1.
pub fn quantile_ranks(n: u64, p: f64, confidence: f64) -> Option<QuantileRanks> {
    if n == 0 || !(p > 0.0 && p < 1.0) || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    let nf = n as f64;
    let sigma = (nf * p * (1.0 - p)).sqrt();
    let half = (WINDOW_SIGMAS * sigma.max(1.0)).ceil() as u64;
    let mode = ((nf + 1.0) * p).floor().min(nf) as u64;
    let (low, high) = (mode.saturating_sub(half), mode.saturating_add(half).min(n));
    if high - low + 1 > EXACT_WINDOW_MAX {
        return normal_ranks(n, p, confidence);
    }
    let pmf = binomial_window(n, p, mode, low, high);
    let total: f64 = pmf.iter().sum();

    // Lower rank: the largest j with B(j − 1) ≤ α/2. Below the window the
    // distribution function is negligible, so j − 1 = low − 1 always qualifies
    // when low > 0.
    let mut cumulative = 0.0;
    let mut lower_cdf = None; // (j − 1, B(j − 1))
    for (offset, w) in pmf.iter().enumerate() {
        cumulative += w / total;
        if cumulative > tail {
            break;
        }
        lower_cdf = Some((low + offset as u64, cumulative));
    }
    let (lower, below) = match lower_cdf {
        Some((k, b)) => (k + 1, b),
        None if low > 0 => (low, 0.0),
        None => return None,
    };

    // Upper rank: the smallest k with P(X ≥ k) = 1 − B(k − 1) ≤ α/2, summing
    // the upper tail from the right.
    let mut tail_sum = 0.0;
    let mut upper_tail = None; // (k, P(X ≥ k))
    for (offset, w) in pmf.iter().enumerate().rev() {
        tail_sum += w / total;
        if tail_sum > tail {
            break;
        }
        upper_tail = Some((low + offset as u64, tail_sum));
    }
    let (upper, above) = match upper_tail {
        Some((k, t)) => (k, t),
        None if high < n => (high + 1, 0.0),
        None => return None,
    };
    if lower > upper || upper > n || lower == 0 {
        return None;
    }
    Some(QuantileRanks {
        lower,
        upper,
        coverage: (1.0 - above - below).clamp(0.0, 1.0),
    })
}

/// Binomial(n, p) probabilities from `low` to `high`, scaled so that the mode
/// is 1 (the recurrences `P(k + 1)/P(k) = (n − k)/(k + 1) · p/(1 − p)` outwards
/// from it, which neither overflow nor lose the tails' relative precision).
fn binomial_window(n: u64, p: f64, mode: u64, low: u64, high: u64) -> Vec<f64> {
    let odds = p / (1.0 - p);
    let mut pmf = vec![0.0; (high - low + 1) as usize];
    let at = |k: u64| (k - low) as usize;
    pmf[at(mode)] = 1.0;
    for k in mode..high {
        pmf[at(k + 1)] = pmf[at(k)] * (n - k) as f64 / (k + 1) as f64 * odds;
    }
    for k in (low + 1..=mode).rev() {
        pmf[at(k - 1)] = pmf[at(k)] * k as f64 / ((n - k + 1) as f64 * odds);
    }
    pmf
}

/// Le Boudec's normal approximation of the ranks, for very large `n`.
fn normal_ranks(n: u64, p: f64, confidence: f64) -> Option<QuantileRanks> {
    let normal = Normal::standard();
    let eta = normal.inverse_cdf((1.0 + confidence) / 2.0);
    let nf = n as f64;
    let sigma = (nf * p * (1.0 - p)).sqrt();
    let lower = (nf * p - eta * sigma).floor();
    let upper = (nf * p + eta * sigma).ceil() + 1.0;
    if lower < 1.0 || upper > nf {
        return None;
    }
    // B(k) ≈ Φ((k + 1/2 − np)/σ).
    let cdf = |k: f64| normal.cdf((k + 0.5 - nf * p) / sigma);
    Some(QuantileRanks {
        lower: lower as u64,
        upper: upper as u64,
        coverage: (cdf(upper - 1.0) - cdf(lower - 1.0)).clamp(0.0, 1.0),
    })
}

/// The two-sided `confidence` interval of the `p`-quantile of `n` sorted
/// values, given a way to read the value at a rank (from 1, increasing):
/// `(value_at_rank(j), value_at_rank(k))` for the ranks of
/// [`quantile_ranks`]. For an HDR histogram or any other sorted view; `None`
/// as [`quantile_ranks`].
pub fn quantile_interval_by<T>(
    n: u64,
    p: f64,
    confidence: f64,
    mut value_at_rank: impl FnMut(u64) -> T,
) -> Option<(T, T)> {
    let ranks = quantile_ranks(n, p, confidence)?;
    Some((value_at_rank(ranks.lower), value_at_rank(ranks.upper)))
}

/// The two-sided `confidence` interval of the `p`-quantile of values already
/// sorted in increasing order. `None` as [`quantile_ranks`].
pub fn quantile_interval_sorted(sorted: &[f64], p: f64, confidence: f64) -> Option<(f64, f64)> {
    quantile_interval_by(sorted.len() as u64, p, confidence, |rank| {
        sorted[(rank - 1) as usize]
    })
}

/// The two-sided `confidence` interval, in microseconds (as
/// [`LatencyRecorder::summary`]), of the `p`-quantile of the transaction times
/// in `recorder`: the order statistics of [`quantile_ranks`] read from its
/// histogram. Each end is widened to its histogram bucket (the lower end to
/// the bucket's lowest value, the upper to its highest, at most 0.1 % each),
/// so the interval keeps its coverage despite the histogram's resolution; the
/// ends are clamped to the exact minimum and maximum.
///
/// `None` when fewer transactions were recorded than a two-sided interval
/// needs (for 95 %: 6 for p50, 368 for p99, 3688 for p99.9), or when `p` or
/// `confidence` is not strictly between 0 and 1.
pub fn quantile_interval(
    recorder: &LatencyRecorder,
    p: f64,
    confidence: f64,
) -> Option<(f64, f64)> {
    let ranks = quantile_ranks(recorder.count(), p, confidence)?;
    let (low_ns, _) = recorder.range_at_rank(ranks.lower)?;
    let (_, high_ns) = recorder.range_at_rank(ranks.upper)?;
    let us = |ns: u64| ns as f64 / 1e3;
    Some((us(low_ns), us(high_ns)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::subsample::SplitMix64;

    #[test]
    fn ranks_match_the_binomial() {
        // Reference: scipy 1.17.1, stats.binom: for each case the largest j
        // with cdf(j − 1) ≤ α/2, the smallest k with sf(k − 1) ≤ α/2, and
        // cdf(k − 1) − cdf(j − 1), by brute force over all ranks.
        for (n, p, confidence, lower, upper, coverage) in [
            (10, 0.5, 0.95, 2, 9, 0.978_515_625),
            (6, 0.5, 0.95, 1, 6, 0.968_75),
            (100, 0.5, 0.95, 40, 61, 0.964_799_799_782),
            (1000, 0.99, 0.95, 983, 997, 0.976_094_763_498),
            (368, 0.99, 0.95, 360, 368, 0.962_415_820_411),
            (10_000, 0.999, 0.95, 9983, 9997, 0.975_457_461_854),
            (3688, 0.999, 0.95, 3680, 3688, 0.961_623_751_803),
            (100_000, 0.999, 0.99, 99_873, 99_926, 0.992_063_452_130),
            (1000, 0.9, 0.9, 884, 916, 0.908_153_601_863),
            (1_000_000, 0.99, 0.95, 989_805, 990_196, 0.950_571_124_355),
            (
                2_000_000,
                0.999,
                0.95,
                1_997_912,
                1_998_088,
                0.951_023_647_357,
            ),
        ] {
            let r = quantile_ranks(n, p, confidence).unwrap();
            assert_eq!((r.lower, r.upper), (lower, upper), "n {n} p {p}");
            assert!((r.coverage - coverage).abs() < 1e-9, "n {n} p {p}: {r:?}");
        }
    }

    #[test]
    fn too_few_samples_give_no_interval() {
        // The smallest n with a 95 % interval: 6 for the median
        // (2 × 0.5⁶ = 0.031 ≤ 0.05 < 2 × 0.5⁵), 368 for p99, 3688 for p99.9
        // (scipy, as above).
        assert_eq!(quantile_ranks(5, 0.5, 0.95), None);
        assert_eq!(quantile_ranks(367, 0.99, 0.95), None);
        assert_eq!(quantile_ranks(3687, 0.999, 0.95), None);
        assert!(quantile_ranks(3688, 0.999, 0.95).is_some());
        assert_eq!(quantile_ranks(0, 0.5, 0.95), None);
        assert_eq!(quantile_ranks(1, 0.5, 0.5), None);
        for p in [0.0, 1.0, -0.1, f64::NAN] {
            assert_eq!(quantile_ranks(100, p, 0.95), None);
        }
        for c in [0.0, 1.0, f64::NAN] {
            assert_eq!(quantile_ranks(100, 0.5, c), None);
        }
        // The lower tail alone: the 1st percentile of 367 values.
        assert_eq!(quantile_ranks(367, 0.01, 0.95), None);
        assert!(quantile_ranks(368, 0.01, 0.95).is_some());
    }

    #[test]
    fn the_normal_approximation_is_le_boudecs_and_near_the_exact() {
        // Le Boudec's formula evaluated in Python with scipy's norm.ppf:
        // n = 10⁶, p = 0.99 → (989804, 990197), exact (989805, 990196);
        // p = 0.5 → (499020, 500981), equal to the exact.
        let r = normal_ranks(1_000_000, 0.99, 0.95).unwrap();
        assert_eq!((r.lower, r.upper), (989_804, 990_197));
        assert!((r.coverage - 0.95).abs() < 0.002, "{r:?}");
        let r = normal_ranks(1_000_000, 0.5, 0.95).unwrap();
        assert_eq!((r.lower, r.upper), (499_020, 500_981));
        // Past the exact window (σ > 13,000): used, and sensible.
        let n = 1_000_000_000_000u64;
        let r = quantile_ranks(n, 0.5, 0.95).unwrap();
        assert!(
            r.lower < n / 2 && r.upper > n / 2 && r.coverage >= 0.95,
            "{r:?}"
        );
    }

    #[test]
    fn intervals_cover_the_true_quantile_as_promised() {
        // 2000 samples of 400 exponential values; the true median is ln 2 and
        // the true p99 ln 100. Each interval covers with probability equal to
        // its coverage (scipy: ranks (180, 221), 0.9598, for the median;
        // (392, 400), 0.9613, for p99); the count of misses is then
        // Binomial(2000, ≤ 0.041), mean ≤ 81, standard deviation 8.8; 115 is
        // 3.9 standard deviations above.
        let mut rng = SplitMix64::new(99);
        let (mut median_misses, mut p99_misses) = (0, 0);
        for _ in 0..2000 {
            let mut v: Vec<f64> = (0..400).map(|_| -rng.open_unit().ln()).collect();
            v.sort_by(f64::total_cmp);
            let (lo, hi) = quantile_interval_sorted(&v, 0.5, 0.95).unwrap();
            median_misses += usize::from(!(lo <= 2f64.ln() && 2f64.ln() <= hi));
            let (lo, hi) = quantile_interval_sorted(&v, 0.99, 0.95).unwrap();
            p99_misses += usize::from(!(lo <= 100f64.ln() && 100f64.ln() <= hi));
        }
        assert!(median_misses <= 115, "{median_misses}");
        assert!(p99_misses <= 115, "{p99_misses}");
    }

    #[test]
    fn a_recorders_interval_brackets_its_percentile() {
        let mut r = LatencyRecorder::new();
        for us in 1..=10_000u64 {
            r.record_ns(us * 1000);
        }
        // Ranks for p99 of 10,000 at 95 %: (9880, 9920) (scipy, as above);
        // the values are those ranks in µs, widened to their buckets (0.1 %).
        let ranks = quantile_ranks(10_000, 0.99, 0.95).unwrap();
        assert_eq!((ranks.lower, ranks.upper), (9880, 9920));
        let (lo, hi) = quantile_interval(&r, 0.99, 0.95).unwrap();
        assert!(lo <= 9880.0 && lo > 9880.0 * 0.999, "{lo}");
        assert!((9920.0..9920.0 * 1.001).contains(&hi), "{hi}");
        let p99 = r.summary().unwrap().p99;
        assert!(lo <= p99 && p99 <= hi, "{lo} {p99} {hi}");
        // Enough for p99.9 at 95 % (3688 needed), but not with 3000.
        assert!(quantile_interval(&r, 0.999, 0.95).is_some());
        let mut small = LatencyRecorder::new();
        for us in 1..=3000u64 {
            small.record_ns(us * 1000);
        }
        assert_eq!(quantile_interval(&small, 0.999, 0.95), None);
        assert!(quantile_interval(&small, 0.99, 0.95).is_some());
        assert_eq!(quantile_interval(&LatencyRecorder::new(), 0.5, 0.95), None);
    }

    #[test]
    fn the_generic_view_reads_the_ranks_it_is_given() {
        let mut asked = Vec::new();
        let got = quantile_interval_by(10, 0.5, 0.95, |rank| {
            asked.push(rank);
            rank * 100
        });
        assert_eq!(got, Some((200, 900)));
        assert_eq!(asked, [2, 9]);
    }

    proptest! {
        #[test]
        fn ranks_are_ordered_around_the_quantile_and_cover(
            n in 1u64..200_000, p in 0.001f64..0.999, confidence in 0.5f64..0.999,
        ) {
            if let Some(r) = quantile_ranks(n, p, confidence) {
                prop_assert!(1 <= r.lower && r.lower <= r.upper && r.upper <= n, "{:?}", r);
                prop_assert!(r.coverage >= confidence - 1e-9, "{:?}", r);
                // The point estimate's rank ⌈np⌉ lies inside.
                let point = ((n as f64 * p).ceil() as u64).max(1);
                prop_assert!(r.lower <= point && point <= r.upper, "{:?} {}", r, point);
            } else {
                // Only when a tail is heavier than α/2 at the extreme rank.
                let tail = (1.0 - confidence) / 2.0;
                let heavy = p.powf(n as f64) > tail * (1.0 - 1e-9)
                    || (1.0 - p).powf(n as f64) > tail * (1.0 - 1e-9);
                prop_assert!(heavy, "n {} p {} confidence {}", n, p, confidence);
            }
        }

        #[test]
        fn more_confidence_never_narrows(n in 10u64..50_000, p in 0.01f64..0.99) {
            if let (Some(a), Some(b)) = (quantile_ranks(n, p, 0.9), quantile_ranks(n, p, 0.99)) {
                prop_assert!(b.lower <= a.lower && b.upper >= a.upper, "{:?} {:?}", a, b);
            }
        }
    }
}
