//! Stationarity of a run's per-second series (the achieved rate, the p99):
//! did the run measure one steady state, or something that drifted?
//!
//! The trend test is Mann–Kendall's (H. B. Mann, "Nonparametric tests against
//! trend", Econometrica 13, 1945; M. G. Kendall, *Rank Correlation Methods*,
//! 4th ed., Griffin, 1975), with the variance corrected for ties and the
//! normal approximation with continuity correction, and the size of the trend
//! is Sen's slope (P. K. Sen, "Estimates of the regression coefficient based
//! on Kendall's tau", JASA 63, 1968); formulas as in R. O. Gilbert,
//! *Statistical Methods for Environmental Pollution Monitoring*, Wiley 1987,
//! ch. 16, and as implemented by the `pymannkendall` package, against which
//! the tests check. Beside it, the spread of the two halves of the series is
//! compared by the Brown–Forsythe form of Levene's test (NIST/SEMATECH
//! e-Handbook §1.3.5.10; M. B. Brown, A. B. Forsythe, JASA 69, 1974).
//!
//! Why Mann–Kendall and not the augmented Dickey–Fuller test Lancet uses:
//! ADF's null hypothesis is non-stationarity (a unit root), so a run would
//! have to prove itself steady, and on the 10 to 60 points of a typical run
//! ADF has little power: steady runs would often fail. Its statistic follows
//! no standard distribution (Dickey–Fuller tables, MacKinnon's response
//! surfaces) and needs a lag order chosen. Mann–Kendall's null is "no
//! trend", so a run is flagged only on evidence of drift; it works on ranks,
//! so one bad second or the skew of a p99 series does not dominate it; its
//! normal approximation holds from about 10 points; and Sen's slope says how
//! large the drift is, so that a significant but negligible drift on a long
//! series is not flagged. What it does not see: oscillation without a
//! trend, and serially correlated series inflate its false alarms (K. H.
//! Hamed, A. R. Rao, J. Hydrology 204, 1998); the drift bound keeps those
//! alarms to drifts that matter.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal};

/// Fewest points for a trend test: below 10 the normal approximation of
/// Mann–Kendall's statistic is poor (exact tables of `S` are used there,
/// Kendall 1975), and a series of a few seconds has no trend worth the name.
pub const MIN_TREND_POINTS: usize = 10;

/// Longest series tested point by point. The test is quadratic (all pairs)
/// in time and Sen's slope in memory, so a longer series (past 33 minutes of
/// seconds) is tested on the means of consecutive blocks of
/// `⌈n / TREND_MAX_POINTS⌉` points, the few points of an incomplete last block
/// dropped: a trend over the run is a trend over its blocks.
pub const TREND_MAX_POINTS: usize = 2000;

/// Significance level of the trend test and of the test of spread.
pub const TREND_ALPHA: f64 = 0.01;

/// The largest drift over the run, as a share of the series' median, that is
/// not flagged however significant: 4 %. A linear drift of `d` over the run
/// puts the mean of its second half `d/2` from the first's; at 4 % that is
/// the 2 % that linkperf's reports call a difference between two
/// configurations.
pub const MAX_RELATIVE_DRIFT: f64 = 0.04;

/// The largest ratio of the halves' spreads (mean absolute deviation from
/// their medians, the larger over the smaller) that is not flagged however
/// significant.
pub const MAX_SPREAD_RATIO: f64 = 2.0;

/// Mann–Kendall's test of a monotonic trend, with Sen's slope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannKendall {
    /// Points tested: the series' length, or its number of block means.
    pub points: usize,
    /// Points of the series per point tested (1, or the block length).
    pub block: usize,
    /// `S = Σ_{i<j} sgn(x_j − x_i)`: positive for an upward trend.
    pub s: i64,
    /// `Var(S) = [n(n − 1)(2n + 5) − Σ_t t(t − 1)(2t + 5)] / 18`, the sum over
    /// groups of `t` tied values.
    pub variance: f64,
    /// `(S − sgn(S)) / √Var(S)` (0 when `S` is 0 or every value is tied).
    pub z: f64,
    /// Two-sided p-value, `2(1 − Φ(|z|))`: the probability, were there no
    /// trend, of a `|z|` at least this large.
    pub p_value: f64,
    /// Sen's slope per point of the series (per second of a per-second
    /// series): the median of `(x_j − x_i)/(j − i)` over all pairs `i < j`.
    pub sen_slope: f64,
}

/// Mann–Kendall's test of `series` (equally spaced in time) and its Sen
/// slope; series longer than [`TREND_MAX_POINTS`] are reduced to block means.
///
/// `None` when fewer than [`MIN_TREND_POINTS`] points are tested or a value
/// is not finite.
pub fn mann_kendall(series: &[f64]) -> Option<MannKendall> {
    if !series.iter().all(|v| v.is_finite()) {
        return None;
    }
    let block = series.len().div_ceil(TREND_MAX_POINTS).max(1);
    let points: Vec<f64> = if block == 1 {
        series.to_vec()
    } else {
        series
            .chunks_exact(block)
            .map(|chunk| chunk.iter().sum::<f64>() / block as f64)
            .collect()
    };
    let n = points.len();
    if n < MIN_TREND_POINTS {
        return None;
    }
    let mut s = 0i64;
    for (i, &a) in points.iter().enumerate() {
        for &b in &points[i + 1..] {
            s += match b.total_cmp(&a) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    let variance = mann_kendall_variance(&points);
    let z = if s == 0 || variance <= 0.0 {
        0.0
    } else {
        (s - s.signum()) as f64 / variance.sqrt()
    };
    let p_value = (2.0 * Normal::standard().cdf(-z.abs())).min(1.0);
    let sen_slope = sen_slope_of(&points)? / block as f64;
    let figures = [variance, z, p_value, sen_slope];
    figures
        .iter()
        .all(|f| f.is_finite())
        .then_some(MannKendall {
            points: n,
            block,
            s,
            variance,
            z,
            p_value,
            sen_slope,
        })
}

/// `Var(S)` with the correction for ties.
fn mann_kendall_variance(points: &[f64]) -> f64 {
    let term = |t: f64| t * (t - 1.0) * (2.0 * t + 5.0);
    let mut sorted = points.to_vec();
    sorted.sort_by(f64::total_cmp);
    let ties: f64 = sorted
        .chunk_by(|a, b| a == b)
        .map(|group| term(group.len() as f64))
        .sum();
    (term(points.len() as f64) - ties) / 18.0
}

/// Sen's slope of equally spaced `series`: the median of the slopes of all
/// pairs (the mean of the two middle ones for an even count). `None` when
/// there are fewer than 2 points, a value is not finite, or the series is
/// longer than [`TREND_MAX_POINTS`] (memory is quadratic: use
/// [`mann_kendall`], which reduces long series).
pub fn sen_slope(series: &[f64]) -> Option<f64> {
    if series.len() > TREND_MAX_POINTS || !series.iter().all(|v| v.is_finite()) {
        return None;
    }
    sen_slope_of(series)
}

fn sen_slope_of(points: &[f64]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let mut slopes = Vec::with_capacity(points.len() * (points.len() - 1) / 2);
    for (i, &a) in points.iter().enumerate() {
        for (d, &b) in points[i + 1..].iter().enumerate() {
            slopes.push((b - a) / (d + 1) as f64);
        }
    }
    let median = median_in_place(&mut slopes)?;
    median.is_finite().then_some(median)
}

/// The median of `values` (the mean of the two middle values for an even
/// count), reordering them; `None` when empty.
fn median_in_place(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (below, &mut upper, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(lower + (upper - lower) / 2.0)
}

/// The spread of the first half of a series against the second's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpreadBetweenHalves {
    /// Points in each half (the middle point of an odd series is left out).
    pub half: usize,
    /// The Brown–Forsythe statistic `W` (Levene's, about the halves'
    /// medians); `None` when it is infinite: each half's deviations are
    /// constant and they differ.
    pub statistic: Option<f64>,
    /// Its p-value from the F distribution with 1 and `2·half − 2` degrees
    /// of freedom.
    pub p_value: f64,
    /// Mean absolute deviation of the second half from its median over the
    /// first's: above 1 when the series got noisier; `None` when the first
    /// half is constant.
    pub ratio: Option<f64>,
}

/// Whether the second half of `series` is as spread as the first, by the
/// Brown–Forsythe test: Levene's one-way analysis of variance on the
/// absolute deviations `zᵢⱼ = |xᵢⱼ − medianᵢ|` of two groups,
///
/// ```text
/// W = (N − 2) · Σᵢ Nᵢ (z̄ᵢ − z̄)² / Σᵢ Σⱼ (zᵢⱼ − z̄ᵢ)²,   W ~ F(1, N − 2)
/// ```
///
/// `None` when the series has fewer than [`MIN_TREND_POINTS`] points or a
/// value is not finite.
pub fn spread_between_halves(series: &[f64]) -> Option<SpreadBetweenHalves> {
    if series.len() < MIN_TREND_POINTS || !series.iter().all(|v| v.is_finite()) {
        return None;
    }
    let half = series.len() / 2;
    let deviations = |part: &[f64]| -> Option<Vec<f64>> {
        let centre = median_in_place(&mut part.to_vec())?;
        Some(part.iter().map(|v| (v - centre).abs()).collect())
    };
    let first = deviations(&series[..half])?;
    let second = deviations(&series[series.len() - half..])?;
    let mean = |z: &[f64]| z.iter().sum::<f64>() / z.len() as f64;
    let (m1, m2) = (mean(&first), mean(&second));
    let grand = (m1 + m2) / 2.0;
    let h = half as f64;
    let between = h * ((m1 - grand).powi(2) + (m2 - grand).powi(2));
    let within: f64 = first.iter().map(|z| (z - m1).powi(2)).sum::<f64>()
        + second.iter().map(|z| (z - m2).powi(2)).sum::<f64>();
    let df = 2.0 * h - 2.0;
    let (statistic, p_value) = if within > 0.0 {
        let w = df * between / within;
        let f = FisherSnedecor::new(1.0, df).ok()?;
        (Some(w), f.sf(w).clamp(0.0, 1.0))
    } else if between > 0.0 {
        (None, 0.0)
    } else {
        (Some(0.0), 1.0)
    };
    let ratio = (m1 > 0.0).then(|| m2 / m1).filter(|r| r.is_finite());
    statistic
        .is_none_or(f64::is_finite)
        .then_some(SpreadBetweenHalves {
            half,
            statistic,
            p_value,
            ratio,
        })
}

/// Whether a per-second series was stationary: no trend that is both
/// significant and large, and no change of spread that is both significant
/// and large.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stationarity {
    /// The trend test.
    pub trend: MannKendall,
    /// Sen's slope times the series' span (`n − 1` points) over the absolute
    /// median: the drift over the run as a share of its level; `None` when
    /// the median is 0.
    pub relative_drift: Option<f64>,
    /// The halves' spreads.
    pub spread: SpreadBetweenHalves,
    /// Not (`trend.p_value < TREND_ALPHA` and the drift is above
    /// [`MAX_RELATIVE_DRIFT`], or unknown).
    pub trend_passed: bool,
    /// Not (`spread.p_value < TREND_ALPHA` and the ratio is beyond
    /// [`MAX_SPREAD_RATIO`] either way, or unknown).
    pub spread_passed: bool,
    /// Both passed.
    pub passed: bool,
}

/// The stationarity of `series`, values equally spaced in time (one per
/// second), by [`mann_kendall`] and [`spread_between_halves`], each judged
/// by significance ([`TREND_ALPHA`]) and size ([`MAX_RELATIVE_DRIFT`],
/// [`MAX_SPREAD_RATIO`]) together: a long steady run's negligible drift is
/// significant without mattering, and a short run's large one may matter
/// without being significant (the second is said by the test's p-value, not
/// flagged).
///
/// `None` when fewer than [`MIN_TREND_POINTS`] points (after reduction to
/// block means) or a value is not finite: too short a run to judge.
pub fn stationarity(series: &[f64]) -> Option<Stationarity> {
    let trend = mann_kendall(series)?;
    let spread = spread_between_halves(series)?;
    let median = median_in_place(&mut series.to_vec())?;
    let relative_drift = (median != 0.0)
        .then(|| trend.sen_slope * (series.len() - 1) as f64 / median.abs())
        .filter(|d| d.is_finite());
    let trend_passed = trend.p_value >= TREND_ALPHA
        || relative_drift.is_some_and(|d| d.abs() <= MAX_RELATIVE_DRIFT);
    let spread_passed = spread.p_value >= TREND_ALPHA
        || spread
            .ratio
            .is_some_and(|r| (1.0 / MAX_SPREAD_RATIO..=MAX_SPREAD_RATIO).contains(&r));
    Some(Stationarity {
        trend,
        relative_drift,
        spread,
        trend_passed,
        spread_passed,
        passed: trend_passed && spread_passed,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::subsample::SplitMix64;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    /// Values `level × (1 + noise)`, noise uniform in ±`relative`, seeded.
    fn noisy(level: f64, relative: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| level * (1.0 + relative * (2.0 * rng.open_unit() - 1.0)))
            .collect()
    }

    #[test]
    fn mann_kendall_matches_pymannkendall() {
        // Reference: pymannkendall 1.4.3, original_test(x), fields s, var_s,
        // z, p and slope (scratch venv, not in the repository).
        // The first 20 digits of π (ties: 3, 5, 9 and 1 repeat).
        let pi = [
            3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0, 9.0, 7.0, 9.0, 3.0, 2.0,
            3.0, 8.0, 4.0,
        ];
        let r = mann_kendall(&pi).unwrap();
        assert_eq!((r.s, r.points, r.block), (40, 20, 1));
        assert!(close(r.variance, 930.0, 1e-9), "{r:?}");
        assert!(close(r.z, 1.278_860_379_778_708_1, 1e-12), "{r:?}");
        // statrs' normal distribution function agrees with scipy's to ~10⁻¹¹
        // (to 3·10⁻⁷ relative in the far tail, below).
        assert!(close(r.p_value, 0.200_946_226_864_307_2, 1e-10), "{r:?}");
        assert!(close(r.sen_slope, 1.0 / 6.0, 1e-15), "{r:?}");

        // A noisy ramp with ties: var_s 3117.333 where 30 distinct values
        // would give 30 × 29 × 65 / 18 = 3141.667.
        let ramp: Vec<f64> = (0..30)
            .map(|i| 10.0 + 0.5 * f64::from(i) + f64::from((i * 7919) % 13 - 6) * 0.4)
            .collect();
        let r = mann_kendall(&ramp).unwrap();
        assert_eq!(r.s, 362);
        assert!(close(r.variance, 9352.0 / 3.0, 1e-9), "{r:?}");
        assert!(close(r.z, 6.465_700_448_718_432, 1e-12), "{r:?}");
        assert!(
            close(r.p_value, 1.008_306_771_410_616_4e-10, 1e-16),
            "{r:?}"
        );
        assert!(close(r.sen_slope, 0.52, 1e-12), "{r:?}");

        // A level series: s −14, var_s 3128.667, z −0.23241, p 0.81622,
        // slope −0.0434783.
        let flat: Vec<f64> = (0..30)
            .map(|i| f64::from(100 + (i * 7919) % 17 - 8))
            .collect();
        let r = mann_kendall(&flat).unwrap();
        assert_eq!(r.s, -14);
        assert!(close(r.variance, 9386.0 / 3.0, 1e-9), "{r:?}");
        assert!(close(r.z, -0.232_414_759_640_206_5, 1e-12), "{r:?}");
        assert!(close(r.p_value, 0.816_215_886_221_644_9, 1e-10), "{r:?}");
        assert!(
            close(r.sen_slope, -0.043_478_260_869_565_216, 1e-15),
            "{r:?}"
        );
    }

    #[test]
    fn brown_forsythe_matches_scipy() {
        // Reference: scipy 1.17.1, stats.levene(a, b, center='median'):
        // statistic 17.465768390386014, p 0.0005636673166234001.
        let series = [
            10.1, 9.8, 10.3, 10.0, 9.7, 10.2, 9.9, 10.4, 10.0, 9.6, // calm
            11.5, 8.2, 10.9, 7.9, 12.4, 9.0, 10.0, 13.1, 6.8, 10.6, // noisy
        ];
        let s = spread_between_halves(&series).unwrap();
        assert_eq!(s.half, 10);
        assert!(
            close(s.statistic.unwrap(), 17.465_768_390_386_014, 1e-10),
            "{s:?}"
        );
        assert!(
            close(s.p_value, 0.000_563_667_316_623_400_1, 1e-10),
            "{s:?}"
        );
        assert!(s.ratio.unwrap() > 2.0, "{s:?}");
        // No trend in it (pymannkendall: s 3, p 0.948), but the spread fails.
        let st = stationarity(&series).unwrap();
        assert_eq!(st.trend.s, 3);
        assert!(
            close(st.trend.p_value, 0.948_162_729_509_879_8, 1e-10),
            "{st:?}"
        );
        assert!(st.trend_passed && !st.spread_passed && !st.passed, "{st:?}");
    }

    #[test]
    fn a_trendless_series_passes() {
        // A minute of per-second rates at 50k/s, ±2 % noise.
        let series = noisy(50_000.0, 0.02, 60, 1);
        let st = stationarity(&series).unwrap();
        assert!(st.passed, "{st:?}");
        assert!(st.trend.p_value > 0.05, "{st:?}");
        assert!(st.relative_drift.unwrap().abs() < 0.02, "{st:?}");
    }

    #[test]
    fn a_ramp_fails() {
        // p99 climbing from 200 to 300 µs over a minute, ±5 % noise.
        let series: Vec<f64> = noisy(1.0, 0.05, 60, 2)
            .iter()
            .enumerate()
            .map(|(i, noise)| (200.0 + 100.0 * i as f64 / 59.0) * noise)
            .collect();
        let st = stationarity(&series).unwrap();
        assert!(!st.trend_passed && !st.passed, "{st:?}");
        assert!(st.trend.p_value < 1e-6 && st.trend.z > 0.0, "{st:?}");
        // Sen's slope near 100/59 = 1.695 µs per second; drift near 40 %.
        assert!(close(st.trend.sen_slope, 100.0 / 59.0, 0.3), "{st:?}");
        assert!(close(st.relative_drift.unwrap(), 0.4, 0.1), "{st:?}");
    }

    #[test]
    fn a_significant_but_small_drift_passes() {
        // An hour of seconds at 10k/s, ±0.1 % noise, drifting 1 % overall:
        // Mann–Kendall sees it, but it is below the 4 % that matters. Long
        // enough to be tested on block means of 2.
        let series: Vec<f64> = noisy(1.0, 0.001, 3600, 3)
            .iter()
            .enumerate()
            .map(|(i, noise)| 10_000.0 * (1.0 + 0.01 * i as f64 / 3599.0) * noise)
            .collect();
        let st = stationarity(&series).unwrap();
        assert_eq!((st.trend.points, st.trend.block), (1800, 2));
        assert!(st.trend.p_value < 1e-10, "{st:?}");
        assert!(close(st.relative_drift.unwrap(), 0.01, 0.002), "{st:?}");
        assert!(st.passed, "{st:?}");
    }

    #[test]
    fn constant_and_short_series() {
        let st = stationarity(&[5.0; 12]).unwrap();
        assert_eq!((st.trend.s, st.trend.z, st.trend.p_value), (0, 0.0, 1.0));
        assert_eq!(st.trend.sen_slope, 0.0);
        assert_eq!(st.spread.statistic, Some(0.0));
        assert!(st.passed);
        // Rising by one each point: S = n(n − 1)/2, slope 1.
        let up: Vec<f64> = (0..10).map(f64::from).collect();
        let r = mann_kendall(&up).unwrap();
        assert_eq!(r.s, 45);
        assert_eq!(r.sen_slope, 1.0);
        assert!(close(r.variance, 10.0 * 9.0 * 25.0 / 18.0, 1e-12));
        assert_eq!(mann_kendall(&up[..9]), None);
        assert_eq!(stationarity(&up[..9]), None);
        assert_eq!(
            mann_kendall(&[1.0, f64::NAN, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
            None
        );
        // A median of 0: the drift is unknown, the p-value alone decides.
        let zero: Vec<f64> = (0..21).map(|i| f64::from(i - 10)).collect();
        let st = stationarity(&zero).unwrap();
        assert_eq!(st.relative_drift, None);
        assert!(!st.trend_passed);
        // One half constant, the other not: infinite W.
        let mut steps = vec![1.0; 10];
        steps.extend([0.0, 2.0, 0.0, 2.0, 0.0, 2.0, 0.0, 2.0, 0.0, 2.0]);
        let s = spread_between_halves(&steps).unwrap();
        assert_eq!((s.statistic, s.p_value, s.ratio), (None, 0.0, None));
        assert_eq!(sen_slope(&[1.0]), None);
        assert_eq!(sen_slope(&[1.0, 3.0]), Some(2.0));
        assert_eq!(sen_slope(&vec![0.0; TREND_MAX_POINTS + 1]), None);
    }

    proptest! {
        #[test]
        fn figures_are_finite_and_consistent(
            series in prop::collection::vec(-1e9f64..1e9, MIN_TREND_POINTS..300)
        ) {
            let st = stationarity(&series).unwrap();
            let t = st.trend;
            let n = t.points as i64;
            prop_assert!(t.s.abs() <= n * (n - 1) / 2);
            prop_assert!((0.0..=1.0).contains(&t.p_value) && (0.0..=1.0).contains(&st.spread.p_value));
            prop_assert!(t.variance >= 0.0);
            prop_assert!(t.z == 0.0 || t.z.signum() == (t.s as f64).signum(), "{:?}", t);
            let json = serde_json::to_string(&st).unwrap();
            let back: Stationarity = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back.passed, st.passed);
        }

        #[test]
        fn reversing_a_series_negates_its_trend(
            series in prop::collection::vec(-1e6f64..1e6, MIN_TREND_POINTS..100)
        ) {
            let forward = mann_kendall(&series).unwrap();
            let reversed: Vec<f64> = series.iter().rev().copied().collect();
            let backward = mann_kendall(&reversed).unwrap();
            prop_assert_eq!(backward.s, -forward.s);
            prop_assert!((backward.sen_slope + forward.sen_slope).abs() <= 1e-9 * (1.0 + forward.sen_slope.abs()));
            prop_assert!((backward.p_value - forward.p_value).abs() < 1e-12);
        }
    }
}
