//! Statistics over repeated runs of one test: pure functions over slices of
//! one figure (throughput, a percentile, a CPU time, …), one value per run.
//!
//! Definitions follow the NIST/SEMATECH e-Handbook of Statistical Methods
//! (<https://www.itl.nist.gov/div898/handbook/>): §1.3.5.2 "Confidence Limits
//! for the Mean" for the interval of [`describe`], §1.3.5.3 "Two-Sample t-Test
//! for Equal Means" (the unequal-variance case) for [`welch_t_test`], and
//! §1.3.6.6.4 "t Distribution" for [`student_t_quantile`]. The Student t
//! distribution itself comes from the `statrs` crate, not from a hand table.
//!
//! Every figure returned is finite (the results document is JSON, which has no
//! NaN or infinity): a function returns `None` rather than a non-finite figure.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Confidence level of the interval [`describe`] gives: 95%, two-sided.
pub const CONFIDENCE: f64 = 0.95;

/// Largest power-of-two exponent by which values are scaled before summing
/// (see [`scale_for`]); keeps the scale factor a normal `f64` both ways.
const SCALE_EXPONENT_LIMIT: i32 = 1000;

/// Summary of one figure over repeated runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of values summarised.
    pub n: u32,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor `n − 1`); 0 for a single value.
    pub stddev: f64,
    /// Coefficient of variation, `stddev / |mean|`; `None` when `mean` is 0 or
    /// `n < 2` (or so near 0 that the ratio overflows).
    #[serde(default)]
    pub cv: Option<f64>,
    /// Lower end of the [`CONFIDENCE`] interval of the mean,
    /// `mean − t(0.975, n − 1) × stddev / √n`; `None` when `n < 2`.
    #[serde(default)]
    pub ci95_low: Option<f64>,
    /// Upper end of the [`CONFIDENCE`] interval of the mean,
    /// `mean + t(0.975, n − 1) × stddev / √n`; `None` when `n < 2`.
    #[serde(default)]
    pub ci95_high: Option<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Mean, sample standard deviation, coefficient of variation, [`CONFIDENCE`]
/// interval of the mean (Student t with `n − 1` degrees of freedom, NIST
/// e-Handbook §1.3.5.2), smallest and largest of `values`.
///
/// `None` when `values` is empty, holds a NaN or an infinity, holds more than
/// `u32::MAX` values, or when a figure would not be finite (values whose spread
/// approaches `f64::MAX`). With one value: `stddev` 0, no `cv`, no interval.
pub fn describe(values: &[f64]) -> Option<Stats> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = u32::try_from(values.len()).ok()?;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mean, stddev) = mean_and_stddev(values, min, max);

    let cv = (n >= 2 && mean != 0.0)
        .then(|| stddev / mean.abs())
        .filter(|cv| cv.is_finite());
    let (ci95_low, ci95_high) = if n >= 2 {
        let t = student_t_quantile(two_sided_quantile(CONFIDENCE), f64::from(n - 1));
        let half_width = t * stddev / f64::from(n).sqrt();
        (Some(mean - half_width), Some(mean + half_width))
    } else {
        (None, None)
    };

    let stats = Stats {
        n,
        mean,
        stddev,
        cv,
        ci95_low,
        ci95_high,
        min,
        max,
    };
    let finite = [stddev, mean]
        .into_iter()
        .chain(ci95_low)
        .chain(ci95_high)
        .all(f64::is_finite);
    finite.then_some(stats)
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom:
/// the `x` such that `P(T ≤ x) = p` for `T ~ t(df)` (NIST e-Handbook
/// §1.3.6.6.4; e.g. `t(0.975, 7) = 2.365`, as in its table §1.3.6.7.2). An
/// infinite `df` is the standard normal distribution.
///
/// Computed by `statrs`' `StudentsT::inverse_cdf` (through the inverse of the
/// regularised incomplete beta function). NaN when `p` is not in `[0, 1]` or
/// `df` is not positive; `p` 0 and 1 give −∞ and +∞.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df.is_infinite() {
        return Normal::standard().inverse_cdf(p);
    }
    StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| t.inverse_cdf(p))
}

/// Result of Welch's two-sample t-test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// The statistic `(mean_a − mean_b) / √(s_a²/n_a + s_b²/n_b)`: positive
    /// when `a`'s mean is the larger.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom (not necessarily an integer).
    pub df: f64,
    /// Two-sided p-value: the probability, were both means equal, of a `|t|`
    /// at least this large.
    pub p_value: f64,
    /// `mean_a − mean_b`.
    pub difference: f64,
    /// The standard error of that difference, `√(s_a²/n_a + s_b²/n_b)`.
    pub standard_error: f64,
}

impl Welch {
    /// The two-sided `confidence` interval of `mean_a − mean_b`:
    /// `difference ± t(1 − (1 − confidence)/2, df) × standard_error`
    /// (NIST e-Handbook §1.3.5.3, the interval that goes with the test).
    pub fn interval(&self, confidence: f64) -> (f64, f64) {
        let half =
            student_t_quantile(two_sided_quantile(confidence), self.df) * self.standard_error;
        (self.difference - half, self.difference + half)
    }

    /// The power of this test, at significance `alpha` (two-sided), to find a
    /// true difference of `delta` between the means, with the spread and the
    /// run counts it had: `Φ(δ/SE − z) + Φ(−δ/SE − z)`, `z = Φ⁻¹(1 − α/2)`,
    /// the normal approximation to the power of a two-sample test (J. Cohen,
    /// *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed.,
    /// 1988, ch. 2). It is optimistic for very few runs, where the t
    /// distribution's tails are heavier; 0.8 is the customary aim.
    pub fn power(&self, alpha: f64, delta: f64) -> f64 {
        let normal = Normal::standard();
        let z = normal.inverse_cdf(1.0 - alpha / 2.0);
        let d = delta.abs() / self.standard_error;
        (normal.cdf(d - z) + normal.cdf(-d - z)).clamp(0.0, 1.0)
    }
}

/// Welch's two-sided t-test of whether `a` and `b` have the same mean, without
/// assuming equal variances (B. L. Welch, "The generalization of 'Student's'
/// problem when several different population variances are involved",
/// Biometrika 34, 1947; degrees of freedom after F. E. Satterthwaite,
/// Biometrics Bulletin 2, 1946; NIST e-Handbook §1.3.5.3):
///
/// ```text
/// t  = (mean_a − mean_b) / √(q_a + q_b),   q = s² / n
/// df = (q_a + q_b)² / (q_a² / (n_a − 1) + q_b² / (n_b − 1))
/// p  = 2 × P(T > |t|),  T ~ t(df)
/// ```
///
/// `None` when either side has fewer than 2 values or is refused by
/// [`describe`], or when both sides have zero variance: then every run of each
/// side gave the same figure and no test applies. A caller should then compare
/// the two constant values directly (equal, or a difference that nothing in
/// the runs contradicts, at the resolution of the measurement) and say that
/// the runs did not vary, rather than report a p-value.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<Welch> {
    let (sa, sb) = (describe(a)?, describe(b)?);
    if sa.n < 2 || sb.n < 2 {
        return None;
    }
    let q = |s: &Stats| s.stddev * s.stddev / f64::from(s.n);
    let (qa, qb) = (q(&sa), q(&sb));
    if qa == 0.0 && qb == 0.0 {
        return None;
    }
    let t = (sa.mean - sb.mean) / (qa + qb).sqrt();
    let df =
        (qa + qb).powi(2) / (qa.powi(2) / f64::from(sa.n - 1) + qb.powi(2) / f64::from(sb.n - 1));
    if !t.is_finite() || !df.is_finite() || df <= 0.0 {
        return None;
    }
    let p_value = StudentsT::new(0.0, 1.0, df)
        .ok()
        .map(|dist| (2.0 * dist.sf(t.abs())).min(1.0))?;
    p_value.is_finite().then_some(Welch {
        t,
        df,
        p_value,
        difference: sa.mean - sb.mean,
        standard_error: (qa + qb).sqrt(),
    })
}

/// The one-sided quantile that bounds a two-sided interval of `confidence`:
/// 0.975 for 0.95.
fn two_sided_quantile(confidence: f64) -> f64 {
    1.0 - (1.0 - confidence) / 2.0
}

/// Mean and sample standard deviation of finite, non-empty `values` whose
/// smallest and largest are `min` and `max`.
///
/// Two passes over values scaled by a power of two (exact) so that neither the
/// sum nor the squares can overflow; the mean is kept within `[min, max]`,
/// where rounding alone could push it out (so a constant slice has exactly its
/// value as mean and 0 as standard deviation).
fn mean_and_stddev(values: &[f64], min: f64, max: f64) -> (f64, f64) {
    let scale = scale_for(min.abs().max(max.abs()));
    let n = values.len() as f64;
    let scaled_mean =
        (values.iter().map(|v| v * scale).sum::<f64>() / n).clamp(min * scale, max * scale);
    let stddev = if values.len() < 2 {
        0.0
    } else {
        let squares: f64 = values
            .iter()
            .map(|v| (v * scale - scaled_mean).powi(2))
            .sum();
        (squares / (n - 1.0)).sqrt() / scale
    };
    (scaled_mean / scale, stddev)
}

/// A power of two that brings `max_abs` to between 1 and 2 (within the limits
/// of [`SCALE_EXPONENT_LIMIT`]); 1 for 0.
fn scale_for(max_abs: f64) -> f64 {
    if max_abs == 0.0 {
        return 1.0;
    }
    let exponent =
        (max_abs.log2().floor() as i32).clamp(-SCALE_EXPONENT_LIMIT, SCALE_EXPONENT_LIMIT);
    2f64.powi(-exponent)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn describe_matches_hand_computed_values() {
        let s = describe(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        // mean = 40 / 8 = 5
        // squared deviations 9+1+1+1+0+0+4+16 = 32; sample variance 32 / 7
        //   = 4.571428…; stddev = √4.571428… = 2.138089935…
        // standard error 2.138089935 / √8 = 0.755928946
        // half width t(0.975, 7) × se = 2.3646 × 0.755928946 = 1.78747 (±0.0001
        //   for the table's 4 decimals) → interval 3.21253 … 6.78747
        // cv = 2.138089935 / 5 = 0.427618
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        assert!(close(s.stddev, 2.138_089_935, 1e-9), "{}", s.stddev);
        assert!(close(s.cv.unwrap(), 0.427_617_987, 1e-9));
        assert!(close(s.ci95_low.unwrap(), 3.212_53, 1e-4), "{s:?}");
        assert!(close(s.ci95_high.unwrap(), 6.787_47, 1e-4), "{s:?}");
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn one_value_has_no_spread_and_no_interval() {
        let s = describe(&[42.5]).unwrap();
        assert_eq!(
            s,
            Stats {
                n: 1,
                mean: 42.5,
                stddev: 0.0,
                cv: None,
                ci95_low: None,
                ci95_high: None,
                min: 42.5,
                max: 42.5,
            }
        );
    }

    #[test]
    fn nothing_or_non_finite_values_give_none() {
        assert_eq!(describe(&[]), None);
        assert_eq!(describe(&[1.0, f64::NAN]), None);
        assert_eq!(describe(&[f64::INFINITY, 1.0]), None);
        assert_eq!(describe(&[1.0, f64::NEG_INFINITY]), None);
    }

    #[test]
    fn zero_mean_has_no_cv() {
        let s = describe(&[-1.0, 1.0]).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, None);
        assert!(s.ci95_low.is_some());
    }

    #[test]
    fn huge_values_do_not_overflow_the_mean() {
        let s = describe(&[f64::MAX, f64::MAX, f64::MAX]).unwrap();
        assert_eq!((s.mean, s.stddev), (f64::MAX, 0.0));
        // A spread near f64::MAX has no finite standard deviation.
        assert_eq!(describe(&[f64::MAX, -f64::MAX]), None);
    }

    #[test]
    fn t_quantiles_match_the_table() {
        // NIST e-Handbook §1.3.6.7.2, upper critical values, α = 0.025 (3 decimals).
        for (df, t) in [(1.0, 12.706), (2.0, 4.303), (7.0, 2.365), (30.0, 2.042)] {
            let q = student_t_quantile(0.975, df);
            assert!(close(q, t, 5e-4), "t(0.975, {df}) = {q}, table {t}");
        }
        assert!(close(student_t_quantile(0.975, 7.0), 2.364_624, 1e-6));
        assert!(close(student_t_quantile(0.025, 7.0), -2.364_624, 1e-6));
        assert_eq!(student_t_quantile(0.5, 3.0), 0.0);
        assert!(close(
            student_t_quantile(0.975, f64::INFINITY),
            1.959_964,
            1e-6
        ));
        assert!(student_t_quantile(1.5, 3.0).is_nan());
        assert!(student_t_quantile(0.5, 0.0).is_nan());
        assert!(student_t_quantile(f64::NAN, 3.0).is_nan());
    }

    #[test]
    fn welch_reproduces_r_on_the_sleep_data() {
        // R's `sleep` data set (Cushny & Peebles, as used by Student 1908):
        // `t.test(extra ~ group, data = sleep)` prints
        //   Welch Two Sample t-test
        //   t = -1.8608, df = 17.776, p-value = 0.07939
        let a = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let b = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        // By hand: mean_a = 7.5 / 10 = 0.75, mean_b = 23.3 / 10 = 2.33
        //   s_a² = 28.805 / 9 = 3.200556, s_b² = 36.081 / 9 = 4.009
        //   q_a = 0.3200556, q_b = 0.4009; √(q_a + q_b) = 0.8490910
        //   t = (0.75 − 2.33) / 0.8490910 = −1.860813
        //   df = 0.7209556² / (0.3200556² / 9 + 0.4009² / 9) = 17.77647
        let w = welch_t_test(&a, &b).unwrap();
        assert!(close(w.t, -1.860_813, 1e-6), "{w:?}");
        assert!(close(w.df, 17.776_47, 1e-5), "{w:?}");
        assert!(close(w.p_value, 0.079_39, 5e-6), "{w:?}");
        // And "95 percent confidence interval: -3.3654832  0.2054832".
        let (lo, hi) = w.interval(0.95);
        assert!(
            close(lo, -3.365_483_2, 1e-6) && close(hi, 0.205_483_2, 1e-6),
            "{lo} {hi}"
        );

        let swapped = welch_t_test(&b, &a).unwrap();
        assert_eq!((swapped.t, swapped.df), (-w.t, w.df));
        assert!(close(swapped.p_value, w.p_value, 1e-12));
    }

    #[test]
    fn welch_refuses_what_it_cannot_test() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_t_test(&[1.0, 2.0], &[]), None);
        assert_eq!(welch_t_test(&[3.0, 3.0], &[5.0, 5.0, 5.0]), None);
        assert_eq!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        // One constant side is fine: the other's variance carries the test.
        let w = welch_t_test(&[3.0, 3.0, 3.0], &[1.0, 2.0, 3.0]).unwrap();
        // q_b = 1 / 3; t = (3 − 2) / √(1/3) = 1.732051; df = (1/3)² / ((1/3)² / 2) = 2
        assert!(close(w.t, 1.732_051, 1e-6));
        assert!(close(w.df, 2.0, 1e-12));
    }

    #[test]
    fn welch_power_is_the_normal_approximation() {
        // Standard error 1 (q_a = q_b = 0.5): a true difference of
        // (1.96 + 0.8416) SE is found 80% of the time at α = 0.05, the
        // textbook pairing of z(0.975) and z(0.80).
        let w = welch_t_test(&[0.0, 1.0, 2.0, 3.0], &[0.0, 1.0, 2.0, 3.0]).unwrap();
        let se = w.standard_error;
        assert!(close(w.power(0.05, 2.801_585 * se), 0.80, 1e-4));
        // No difference is found at the test's own false-positive rate.
        assert!(close(w.power(0.05, 0.0), 0.05, 1e-9));
        // A huge one always; the sign of δ does not matter.
        assert!(w.power(0.05, -100.0 * se) > 0.999_999);
    }

    #[test]
    fn welch_of_equal_samples_has_p_one() {
        let w = welch_t_test(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap();
        assert_eq!(w.t, 0.0);
        assert!(close(w.p_value, 1.0, 1e-12));
    }

    #[test]
    fn stats_serialise_with_nulls_and_round_trip() {
        let s = describe(&[7.0]).unwrap();
        let v = serde_json::to_value(s).unwrap();
        assert_eq!(v["cv"], serde_json::Value::Null);
        assert_eq!(serde_json::from_value::<Stats>(v).unwrap(), s);
        // serde_json without its `float_roundtrip` feature may read a float back
        // one unit in the last place off, so compare within a relative 1e-15.
        let s = describe(&[1.0, 2.0, 4.0]).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Stats = serde_json::from_str(&json).unwrap();
        let figures = |s: &Stats| {
            [s.mean, s.stddev, s.min, s.max]
                .into_iter()
                .chain(s.cv)
                .chain(s.ci95_low)
                .chain(s.ci95_high)
                .collect::<Vec<_>>()
        };
        assert_eq!(back.n, s.n);
        for (x, y) in figures(&back).into_iter().zip(figures(&s)) {
            assert!(close(x, y, 1e-15 * y.abs()), "{x} vs {y}");
        }
        assert_eq!(figures(&back).len(), figures(&s).len());
    }

    fn check_invariants(values: &[f64], s: &Stats) -> Result<(), TestCaseError> {
        prop_assert_eq!(s.n as usize, values.len());
        prop_assert!(s.min <= s.mean && s.mean <= s.max, "{:?}", s);
        prop_assert!(s.stddev >= 0.0, "{:?}", s);
        prop_assert_eq!(s.ci95_low.is_some(), values.len() >= 2);
        if let (Some(low), Some(high)) = (s.ci95_low, s.ci95_high) {
            prop_assert!(low <= s.mean && s.mean <= high, "{:?}", s);
        }
        if let Some(cv) = s.cv {
            prop_assert!(cv >= 0.0 && cv.is_finite(), "{:?}", s);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn realistic_values_are_described(values in prop::collection::vec(-1e12f64..1e12, 1..40)) {
            let s = describe(&values).expect("finite values of ordinary size");
            check_invariants(&values, &s)?;
        }

        #[test]
        fn any_finite_values_give_finite_consistent_figures(
            values in prop::collection::vec(prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO, 1..20)
        ) {
            if let Some(s) = describe(&values) {
                check_invariants(&values, &s)?;
            } else {
                let max_abs = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                prop_assert!(max_abs > 1e300, "refused ordinary values {:?}", values);
            }
        }

        #[test]
        fn a_constant_slice_has_no_spread(v in prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO, n in 1usize..30) {
            let values = vec![v; n];
            let s = describe(&values).unwrap();
            prop_assert_eq!(s.stddev, 0.0);
            prop_assert_eq!((s.mean, s.min, s.max), (v, v, v));
            if n >= 2 {
                prop_assert_eq!((s.ci95_low, s.ci95_high), (Some(v), Some(v)));
            }
        }

        #[test]
        fn welch_p_is_a_probability_and_df_is_bounded(
            a in prop::collection::vec(-1e6f64..1e6, 2..15),
            b in prop::collection::vec(-1e6f64..1e6, 2..15),
        ) {
            if let Some(w) = welch_t_test(&a, &b) {
                prop_assert!((0.0..=1.0).contains(&w.p_value), "{:?}", w);
                // Welch–Satterthwaite df lies between min(n) − 1 and n_a + n_b − 2.
                let lo = (a.len().min(b.len()) - 1) as f64;
                let hi = (a.len() + b.len() - 2) as f64;
                prop_assert!(w.df >= lo * (1.0 - 1e-9) && w.df <= hi * (1.0 + 1e-9), "{:?}", w);
            }
        }
    }
}
