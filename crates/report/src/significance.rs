//! Relative differences and whether they are larger than the noise: pure
//! functions over the per-run values of one metric on each side.
//!
//! The sign convention is the product brief's: positive means the candidate is
//! better. Higher-is-better metrics: `(cand / base − 1) × 100`; lower-is-better
//! metrics: `(base − cand) / base × 100`.
//!
//! A difference counts only when it is both statistically significant and
//! large enough to matter. With repeated runs on both sides, significance is
//! Welch's two-sided t-test ([`linkperf_metrics::welch_t_test`]; B. L. Welch,
//! Biometrika 34, 1947; NIST/SEMATECH e-Handbook of Statistical Methods
//! §1.3.5.3) at [`SIGNIFICANCE_LEVEL`], and the outcome is one of four:
//!
//! - **better** / **worse**: significant, and larger than the threshold
//!   ([`DEFAULT_THRESHOLD_PCT`] unless told otherwise);
//! - **same**: the difference's 95% confidence interval lies inside ± the
//!   threshold, so whatever the true difference is, it is too small to matter
//!   (an equivalence shown, not merely a difference not found);
//! - **inconclusive**: neither was shown: the runs are too few or too noisy to
//!   tell a difference of the threshold's size from none.
//!
//! Requiring size and confidence together follows the advice to judge
//! performance differences by both (A. Georges, D. Buytaert, L. Eeckhout,
//! "Statistically rigorous Java performance evaluation", OOPSLA 2007; T.
//! Kalibera, R. Jones, "Rigorous benchmarking in reasonable time", ISMM 2013).
//! Each judgement also carries the power the test had to find a difference
//! of the threshold's size ([`linkperf_metrics::Welch::power`]), so a report
//! can say how much evidence its "inconclusive" rests on.
//!
//! Without repeats no test applies and the threshold alone decides (better,
//! worse or same, never inconclusive); the report says so. Repeated runs that
//! all gave one figure leave nothing to test either: the threshold decides.

use serde::{Deserialize, Serialize};

use linkperf_metrics::{describe, welch_t_test};

use crate::Better;

/// Smallest relative difference, in percent, that counts as a difference
/// (`--threshold`): 2%. A product choice, of the order of the run-to-run
/// variation of a quiet loopback test.
pub const DEFAULT_THRESHOLD_PCT: f64 = 2.0;

/// Largest p-value of Welch's t-test at which a difference counts as
/// statistically significant: 0.05 (95% confidence, two-sided).
pub const SIGNIFICANCE_LEVEL: f64 = 0.05;

/// Rounding error of a relative difference in percent that does not make it
/// "more than" the threshold.
const ROUNDING: f64 = 1e-9;

/// The relative difference of `cand` against `base` in percent, positive when
/// `cand` is better. `None` when `base` is 0 or either value is not finite.
pub fn relative_difference(base: f64, cand: f64, better: Better) -> Option<f64> {
    if base == 0.0 || !base.is_finite() || !cand.is_finite() {
        return None;
    }
    let pct = match better {
        Better::Higher => (cand / base - 1.0) * 100.0,
        Better::Lower => (base - cand) / base * 100.0,
    };
    pct.is_finite().then_some(pct)
}

/// How a difference was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Both sides had repeated runs: Welch's t-test and the threshold.
    Welch,
    /// Both sides had repeated runs that all gave the same figure: no test
    /// applies (nothing varied), the threshold alone decides.
    ConstantRuns,
    /// A side had a single run: the threshold alone decides.
    ThresholdOnly,
}

/// What a difference means for the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Better by more than the noise.
    Better,
    /// Worse by more than the noise.
    Worse,
    /// Within ± the threshold: with repeats, the whole 95% interval of the
    /// difference is.
    Same,
    /// Repeated runs that show neither a difference nor its absence.
    Inconclusive,
}

impl Outcome {
    /// The word for it: `better`, `worse`, `same`, `inconclusive`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Better => "better",
            Outcome::Worse => "worse",
            Outcome::Same => "same",
            Outcome::Inconclusive => "inconclusive",
        }
    }
}

/// One metric of one test, base against candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Mean of the base's runs.
    pub base_mean: f64,
    /// Mean of the candidate's runs.
    pub candidate_mean: f64,
    /// Relative difference in percent, positive = candidate better.
    pub relative_pct: f64,
    /// Welch's two-sided p-value, when the test applied.
    pub p_value: Option<f64>,
    /// The 95% confidence interval of the relative difference in percent
    /// (same sign convention), when the test applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_pct: Option<[f64; 2]>,
    /// The power the test had to find a true difference of the threshold's
    /// size at [`SIGNIFICANCE_LEVEL`], between 0 and 1, when it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<f64>,
    /// How the difference was judged.
    pub method: Method,
    /// The outcome.
    pub outcome: Outcome,
}

/// Judges the candidate's values of one metric against the base's, one value
/// per ok run on each side: the relative difference of the means and what it
/// shows (see the module's description). `threshold_pct` is the smallest
/// |difference| that counts, in percent.
///
/// `None` when a side has no value or the base's mean is 0.
pub fn judge(base: &[f64], cand: &[f64], better: Better, threshold_pct: f64) -> Option<Judgement> {
    let (b, c) = (describe(base)?, describe(cand)?);
    let relative_pct = relative_difference(b.mean, c.mean, better)?;
    // "More than the threshold", with rounding of the division forgiven: 98
    // against 100 is −2.0000000000000018%, which is 2%, not more.
    let large = relative_pct.abs() > threshold_pct + ROUNDING;
    let by_threshold = match (large, relative_pct > 0.0) {
        (false, _) => Outcome::Same,
        (true, true) => Outcome::Better,
        (true, false) => Outcome::Worse,
    };
    let mut judgement = Judgement {
        base_mean: b.mean,
        candidate_mean: c.mean,
        relative_pct,
        p_value: None,
        interval_pct: None,
        power: None,
        method: Method::ThresholdOnly,
        outcome: by_threshold,
    };
    if b.n < 2 || c.n < 2 {
        return Some(judgement);
    }
    let Some(w) = welch_t_test(base, cand) else {
        judgement.method = Method::ConstantRuns;
        return Some(judgement);
    };
    // The interval of base − cand, in percent of the base, turned to the
    // metric's sign convention (positive = candidate better).
    let (lo, hi) = w.interval(1.0 - SIGNIFICANCE_LEVEL);
    let to_pct = |d: f64| {
        let pct = d / b.mean * 100.0;
        match better {
            Better::Higher => -pct,
            Better::Lower => pct,
        }
    };
    let (a, z) = (to_pct(lo), to_pct(hi));
    let interval = [a.min(z), a.max(z)];
    let equivalent =
        interval[0] >= -threshold_pct - ROUNDING && interval[1] <= threshold_pct + ROUNDING;
    judgement.method = Method::Welch;
    judgement.p_value = Some(w.p_value);
    judgement.interval_pct = Some(interval);
    judgement.power = Some(w.power(SIGNIFICANCE_LEVEL, threshold_pct / 100.0 * b.mean));
    judgement.outcome = if large && w.p_value < SIGNIFICANCE_LEVEL {
        by_threshold
    } else if equivalent {
        Outcome::Same
    } else {
        Outcome::Inconclusive
    };
    Some(judgement)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn higher_is_better_is_cand_over_base_minus_one() {
        // 150 against 100: (150 / 100 − 1) × 100 = +50.
        assert!(close(
            relative_difference(100.0, 150.0, Better::Higher).unwrap(),
            50.0
        ));
        // 80 against 100: −20.
        assert!(close(
            relative_difference(100.0, 80.0, Better::Higher).unwrap(),
            -20.0
        ));
        // 3.5× the base: +250 (the study's "~3.5x better").
        assert!(close(
            relative_difference(2.0, 7.0, Better::Higher).unwrap(),
            250.0
        ));
    }

    #[test]
    fn lower_is_better_is_base_minus_cand_over_base() {
        // 20 µs against 100 µs: (100 − 20) / 100 × 100 = +80 (an 80% reduction).
        assert!(close(
            relative_difference(100.0, 20.0, Better::Lower).unwrap(),
            80.0
        ));
        // 250 µs against 100 µs: −150 (the study's "~150% worse").
        assert!(close(
            relative_difference(100.0, 250.0, Better::Lower).unwrap(),
            -150.0
        ));
    }

    #[test]
    fn a_zero_base_has_no_relative_difference() {
        assert_eq!(relative_difference(0.0, 1.0, Better::Higher), None);
        assert_eq!(relative_difference(1.0, f64::NAN, Better::Lower), None);
        assert_eq!(judge(&[0.0], &[1.0], Better::Higher, 2.0), None);
        assert_eq!(judge(&[], &[1.0], Better::Higher, 2.0), None);
    }

    #[test]
    fn without_repeats_the_threshold_alone_decides() {
        let j = judge(&[100.0], &[103.0], Better::Higher, 2.0).unwrap();
        assert_eq!(
            (j.method, j.outcome, j.p_value),
            (Method::ThresholdOnly, Outcome::Better, None)
        );
        let j = judge(&[100.0], &[101.5], Better::Higher, 2.0).unwrap();
        assert_eq!(j.outcome, Outcome::Same);
        // Exactly the threshold is not more than it.
        let j = judge(&[100.0], &[98.0], Better::Higher, 2.0).unwrap();
        assert_eq!(j.outcome, Outcome::Same);
        let j = judge(&[100.0], &[97.0], Better::Higher, 2.0).unwrap();
        assert_eq!(j.outcome, Outcome::Worse);
        // One side repeated, the other not: still no test.
        let j = judge(&[100.0, 101.0], &[110.0], Better::Higher, 2.0).unwrap();
        assert_eq!(j.method, Method::ThresholdOnly);
        // A higher threshold swallows the difference.
        let j = judge(&[100.0], &[103.0], Better::Higher, 5.0).unwrap();
        assert_eq!(j.outcome, Outcome::Same);
    }

    #[test]
    fn with_repeats_a_large_difference_must_also_be_significant() {
        // Means 100 and 110 (+10%), spread ±1: Welch p ≈ 0.0003.
        let j = judge(
            &[99.0, 100.0, 101.0],
            &[109.0, 110.0, 111.0],
            Better::Higher,
            2.0,
        )
        .unwrap();
        assert_eq!((j.method, j.outcome), (Method::Welch, Outcome::Better));
        assert!(j.p_value.unwrap() < 0.001, "{j:?}");
        // Means 100 and 110 (+10%) but spread ±30: p ≈ 0.72, not significant,
        // and the interval (about −58% to +78%) is far wider than ±2%: not
        // the same either, but inconclusive.
        let j = judge(
            &[70.0, 100.0, 130.0],
            &[80.0, 110.0, 140.0],
            Better::Higher,
            2.0,
        )
        .unwrap();
        assert_eq!(
            (j.method, j.outcome),
            (Method::Welch, Outcome::Inconclusive)
        );
        assert!(j.p_value.unwrap() > 0.5, "{j:?}");
        assert!(close(j.relative_pct, 10.0));
        let [lo, hi] = j.interval_pct.unwrap();
        // SE = √(900/3 + 900/3) = 24.495; df = 4; t(0.975, 4) = 2.776:
        // 10 ± 68.0 (in percent of the base's 100).
        assert!((lo - (10.0 - 2.776_445 * 24.494_897)).abs() < 1e-4, "{lo}");
        assert!((hi - (10.0 + 2.776_445 * 24.494_897)).abs() < 1e-4, "{hi}");
        // With that spread a 2% difference is found about 5% of the time.
        assert!(j.power.unwrap() < 0.06, "{j:?}");
    }

    #[test]
    fn with_repeats_a_significant_difference_must_also_be_large() {
        // Means 100 and 101 (+1%), spread ±0.01: highly significant, too small.
        let j = judge(
            &[99.99, 100.0, 100.01],
            &[100.99, 101.0, 101.01],
            Better::Higher,
            2.0,
        )
        .unwrap();
        assert_eq!(j.method, Method::Welch);
        assert!(j.p_value.unwrap() < 1e-6);
        // Its interval, about +0.97% to +1.03%, is inside ±2%: the same.
        assert_eq!(j.outcome, Outcome::Same);
        let [lo, hi] = j.interval_pct.unwrap();
        assert!(0.9 < lo && hi < 1.1, "{lo} {hi}");
        assert!(j.power.unwrap() > 0.999, "{j:?}");
    }

    #[test]
    fn a_small_difference_not_shown_small_enough_is_inconclusive() {
        // Means 100 and 101 (+1%), spread ±1: the interval, about −1.3% to
        // +3.3%, reaches past +2%: not shown the same, not shown different.
        let j = judge(
            &[99.0, 100.0, 101.0],
            &[100.0, 101.0, 102.0],
            Better::Higher,
            2.0,
        )
        .unwrap();
        assert_eq!(j.outcome, Outcome::Inconclusive, "{j:?}");
        // A wider threshold holds the whole interval: the same.
        let j = judge(
            &[99.0, 100.0, 101.0],
            &[100.0, 101.0, 102.0],
            Better::Higher,
            5.0,
        )
        .unwrap();
        assert_eq!(j.outcome, Outcome::Same, "{j:?}");
    }

    #[test]
    fn a_lower_is_better_interval_is_in_the_candidates_favour_when_positive() {
        // Transaction time 100 → 90 µs, spread ±1: +10%, interval around it.
        let j = judge(
            &[99.0, 100.0, 101.0],
            &[89.0, 90.0, 91.0],
            Better::Lower,
            2.0,
        )
        .unwrap();
        let [lo, hi] = j.interval_pct.unwrap();
        assert!(lo > 2.0 && lo < 10.0 && hi > 10.0, "{lo} {hi}");
        assert_eq!(j.outcome, Outcome::Better);
    }

    #[test]
    fn constant_runs_fall_back_to_the_threshold() {
        let j = judge(&[100.0, 100.0], &[90.0, 90.0], Better::Higher, 2.0).unwrap();
        assert_eq!(
            (j.method, j.outcome, j.p_value),
            (Method::ConstantRuns, Outcome::Worse, None)
        );
    }

    #[test]
    fn lower_is_better_metrics_are_judged_in_their_direction() {
        // Transaction time 100 µs → 50 µs: +50%, better.
        let j = judge(
            &[100.0, 101.0, 99.0],
            &[50.0, 51.0, 49.0],
            Better::Lower,
            2.0,
        )
        .unwrap();
        assert_eq!(j.outcome, Outcome::Better);
        assert!(close(j.relative_pct, 50.0));
    }

    proptest! {
        #[test]
        fn the_sign_says_which_side_is_better(base in 1e-3f64..1e12, factor in 0.01f64..100.0) {
            let cand = base * factor;
            let hi = relative_difference(base, cand, Better::Higher).unwrap();
            let lo = relative_difference(base, cand, Better::Lower).unwrap();
            // More of a higher-is-better metric, or less of a lower-is-better one, is positive.
            prop_assert_eq!(hi > 0.0, cand > base);
            prop_assert_eq!(lo > 0.0, cand < base);
            // A lower-is-better gain is capped at +100% (the figure cannot go below zero).
            prop_assert!(lo < 100.0);
        }
    }
}
