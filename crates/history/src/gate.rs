//! Whether a candidate's figures are a significant regression against
//! their series: the gate a CI job runs before it accepts a change.
//!
//! The baseline is the series since its last change point (the figures of
//! the current regime; at most the last `window` of them), so that an old
//! level the series has left does not count. A candidate of one run is
//! judged by a t-test of one value against the baseline (the prediction
//! interval's); of several runs by Welch's t-test. A regression is a change
//! the wrong way for the metric (less throughput, more time), with p at
//! most `p_value` and at least `min_magnitude` relative change.

use linkperf_report::{Better, Metric};
use serde::Serialize;

use crate::changes::{change_points, prediction_p, Options, PrefixSums};

/// Fewest baseline points a candidate is judged against.
pub const MIN_BASELINE: usize = 3;

/// What the gate says of one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly worse.
    Regression,
    /// Significantly better.
    Improvement,
    /// Not significantly different (or not by enough).
    Same,
    /// The series has fewer than [`MIN_BASELINE`] points of its current
    /// regime: nothing to judge against.
    TooFew,
}

/// The gate's judgement of a candidate against a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// Baseline points (the series since its last change point, at most a
    /// window of them).
    pub baseline_n: usize,
    /// Their mean.
    pub baseline_mean: f64,
    /// The candidate's runs.
    pub candidate_n: usize,
    /// Their mean.
    pub candidate_mean: f64,
    /// `candidate / baseline − 1`.
    pub relative_change: f64,
    /// Two-sided p-value of the difference (1 when not tested).
    pub p_value: f64,
}

/// Judges `candidate` (one or more runs' figures) against `series` (the
/// history's `ok` figures, oldest first) of `metric`.
pub fn judge(series: &[f64], candidate: &[f64], metric: Metric, options: &Options) -> Judgement {
    let since = change_points(series, options).last().map_or(0, |c| c.index);
    let regime = &series[since..];
    let baseline = &regime[regime
        .len()
        .saturating_sub(options.window.max(MIN_BASELINE))..];
    let mean = |xs: &[f64]| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let (baseline_mean, candidate_mean) = (mean(baseline), mean(candidate));
    let relative_change = if baseline_mean == 0.0 {
        0.0
    } else {
        candidate_mean / baseline_mean - 1.0
    };
    let mut j = Judgement {
        verdict: Verdict::TooFew,
        baseline_n: baseline.len(),
        baseline_mean,
        candidate_n: candidate.len(),
        candidate_mean,
        relative_change,
        p_value: 1.0,
    };
    if baseline.len() < MIN_BASELINE || candidate.is_empty() {
        return j;
    }
    j.p_value = if candidate.len() == 1 {
        prediction_p(
            PrefixSums::new(baseline).moments(0, baseline.len()),
            candidate[0],
        )
    } else {
        match linkperf_metrics::welch_t_test(candidate, baseline) {
            Some(w) => w.p_value,
            // Neither side varied: the figures differ or they do not.
            None => {
                if candidate_mean == baseline_mean {
                    1.0
                } else {
                    0.0
                }
            }
        }
    };
    let worse = match metric.better() {
        Better::Higher => relative_change < 0.0,
        Better::Lower => relative_change > 0.0,
    };
    let significant =
        j.p_value <= options.p_value && relative_change.abs() >= options.min_magnitude;
    j.verdict = match (significant, worse) {
        (false, _) => Verdict::Same,
        (true, true) => Verdict::Regression,
        (true, false) => Verdict::Improvement,
    };
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wobble(n: usize, mean: f64) -> Vec<f64> {
        (0..n)
            .map(|i| mean * (1.0 + [0.01, -0.01, 0.005, -0.005, 0.0][i % 5]))
            .collect()
    }

    #[test]
    fn a_throughput_drop_is_a_regression_and_a_rise_an_improvement() {
        let series = wobble(30, 1e9);
        let o = Options::default();
        let j = judge(&series, &[0.9e9], Metric::Throughput, &o);
        assert_eq!(j.verdict, Verdict::Regression, "{j:?}");
        assert!((j.relative_change + 0.1).abs() < 1e-3);
        assert!(j.p_value < 0.001);
        let j = judge(
            &series,
            &[1.1e9, 1.1005e9, 1.0995e9],
            Metric::Throughput,
            &o,
        );
        assert_eq!(j.verdict, Verdict::Improvement, "{j:?}");
        let j = judge(&series, &[1.0e9], Metric::Throughput, &o);
        assert_eq!(j.verdict, Verdict::Same, "{j:?}");
    }

    #[test]
    fn more_time_is_worse_and_the_baseline_is_the_current_regime() {
        // The series was at 50 µs, then moved to 40 µs: 44 µs is a
        // regression against 40, not an improvement against the old mean.
        let mut series = wobble(40, 50.0);
        series.extend(wobble(20, 40.0));
        let j = judge(&series, &[44.0], Metric::TimeMean, &Options::default());
        assert_eq!(j.verdict, Verdict::Regression, "{j:?}");
        assert_eq!(j.baseline_n, 20);
        let loose = Options {
            min_magnitude: 0.2,
            ..Options::default()
        };
        assert_eq!(
            judge(&series, &[44.0], Metric::TimeMean, &loose).verdict,
            Verdict::Same
        );
        assert_eq!(
            judge(&series[..2], &[44.0], Metric::TimeMean, &loose).verdict,
            Verdict::TooFew
        );
    }
}
