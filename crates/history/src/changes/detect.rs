//! Change points of a series, with Apache Otava's semantics
//! (`otava/analysis.py`, formerly DataStax's Hunter):
//!
//! 1. **Windows.** E-divisive means runs over windows of `window` points
//!    that overlap by half: each starts half a window after the last one's
//!    start, or at the last change point it found when that is later. This
//!    keeps the work linear in the series' length and finds changes that a
//!    single split of a long series would hide.
//! 2. **Significance.** In a window, the best split is a change point when
//!    Student's t-test between the stretches either side (bounded by the
//!    change points found so far) gives p ≤ `p_value`, the p-value
//!    corrected for the choice of the split among the stretch's positions
//!    (linkperf's one departure from Otava: see `edivisive.rs`).
//! 3. **Merge.** Over the whole series, each change point is tested again
//!    against its neighbours (the stretches up to the change points either
//!    side); the weakest is removed while one has p > `p_value`, then while
//!    one changes the mean by less than `min_magnitude` (a fraction:
//!    0.05 = 5 %), its neighbours tested again each time.
//!
//! Each change point comes with the mean before and after it (over the
//! stretches to its neighbours), the relative change `after / before − 1`
//! and the p-value.

use serde::Serialize;

use super::edivisive::{e_divisive, split_p};
use super::significance::PrefixSums;

/// Otava's default window: points per window.
pub const DEFAULT_WINDOW: usize = 50;
/// Otava's default significance level.
pub const DEFAULT_P_VALUE: f64 = 0.001;
/// Otava's default smallest relative change: none.
pub const DEFAULT_MIN_MAGNITUDE: f64 = 0.0;
/// Smallest window: E-divisive needs two stretches of two points.
pub const MIN_WINDOW: usize = 4;

/// How change points are found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Options {
    /// Points per window (at least [`MIN_WINDOW`]).
    pub window: usize,
    /// Largest p-value of a change point.
    pub p_value: f64,
    /// Smallest relative change of the mean of a change point (a fraction).
    pub min_magnitude: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: DEFAULT_WINDOW,
            p_value: DEFAULT_P_VALUE,
            min_magnitude: DEFAULT_MIN_MAGNITUDE,
        }
    }
}

/// A change point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChangePoint {
    /// Index of the first point after the change.
    pub index: usize,
    /// Points of the stretch before it (back to the previous change point).
    pub before_n: usize,
    /// Mean of that stretch.
    pub before_mean: f64,
    /// Its sample standard deviation.
    pub before_stddev: f64,
    /// Points of the stretch after it (up to the next change point).
    pub after_n: usize,
    /// Mean of that stretch.
    pub after_mean: f64,
    /// Its sample standard deviation.
    pub after_stddev: f64,
    /// Student's t-test's two-sided p-value between the two stretches,
    /// corrected for the choice of the split (see
    /// [`split_p`](super::split_p)).
    pub p_value: f64,
}

impl ChangePoint {
    /// `after / before − 1` (infinite when the mean before is 0).
    pub fn relative_change(&self) -> f64 {
        if self.before_mean == 0.0 {
            if self.after_mean == 0.0 {
                0.0
            } else {
                f64::INFINITY.copysign(self.after_mean)
            }
        } else {
            self.after_mean / self.before_mean - 1.0
        }
    }

    /// `|relative change|`.
    pub fn magnitude(&self) -> f64 {
        self.relative_change().abs()
    }
}

/// The change point at `index`, between the stretches that begin at `from`
/// and end before `to`.
fn stats(sums: &PrefixSums, from: usize, index: usize, to: usize) -> ChangePoint {
    let (a, b) = (sums.moments(from, index), sums.moments(index, to));
    ChangePoint {
        index,
        before_n: a.n,
        before_mean: a.mean,
        before_stddev: a.variance.sqrt(),
        after_n: b.n,
        after_mean: b.mean,
        after_stddev: b.variance.sqrt(),
        p_value: split_p(sums, from, index, to),
    }
}

/// The change points of `xs` (in order), as `options` says. Non-finite
/// values are not expected (the history stores none).
pub fn change_points(xs: &[f64], options: &Options) -> Vec<ChangePoint> {
    let window = options.window.max(MIN_WINDOW);
    let step = window / 2;
    let mut indexes: Vec<usize> = Vec::new();
    let mut start = 0;
    while start < xs.len() {
        let end = (start + window).min(xs.len());
        let found: Vec<usize> = e_divisive(&xs[start..end], options.p_value)
            .into_iter()
            .map(|i| i + start)
            .collect();
        let last = found.last().copied().unwrap_or(0);
        indexes.extend(found);
        start = last.max(start + step);
    }
    indexes.sort_unstable();
    indexes.dedup();
    merge(xs, indexes, options)
}

/// Removes the weakest change point (the largest p-value above the level,
/// else the smallest change below `min_magnitude`) until none is left that
/// fails, each time testing its neighbours again.
fn merge(xs: &[f64], indexes: Vec<usize>, options: &Options) -> Vec<ChangePoint> {
    let sums = PrefixSums::new(xs);
    let bound = |cps: &[usize], i: usize| -> (usize, usize) {
        let from = if i == 0 { 0 } else { cps[i - 1] };
        let to = cps.get(i + 1).copied().unwrap_or(xs.len());
        (from, to)
    };
    let mut cps = indexes;
    let mut points: Vec<ChangePoint> = (0..cps.len())
        .map(|i| {
            let (from, to) = bound(&cps, i);
            stats(&sums, from, cps[i], to)
        })
        .collect();
    while !points.is_empty() {
        let weakest_p = (0..points.len())
            .max_by(|&a, &b| points[a].p_value.total_cmp(&points[b].p_value))
            .filter(|&i| points[i].p_value > options.p_value);
        let remove = weakest_p.or_else(|| {
            (0..points.len())
                .min_by(|&a, &b| points[a].magnitude().total_cmp(&points[b].magnitude()))
                .filter(|&i| points[i].magnitude() < options.min_magnitude)
        });
        let Some(i) = remove else {
            break;
        };
        cps.remove(i);
        points.remove(i);
        for j in [i.wrapping_sub(1), i] {
            if j < cps.len() {
                let (from, to) = bound(&cps, j);
                points[j] = stats(&sums, from, cps[j], to);
            }
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_change_is_kept_only_above_the_min_magnitude() {
        let mut xs: Vec<f64> = (0..60).map(|i| 100.0 + [0.1, -0.1][i % 2]).collect();
        for x in &mut xs[30..] {
            *x += 2.0; // +2 %
        }
        let found = change_points(&xs, &Options::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 30);
        assert!((found[0].relative_change() - 0.02).abs() < 1e-3);
        let strict = Options {
            min_magnitude: 0.05,
            ..Options::default()
        };
        assert!(change_points(&xs, &strict).is_empty());
    }

    #[test]
    fn short_or_flat_series_have_no_change_points() {
        assert!(change_points(&[], &Options::default()).is_empty());
        assert!(change_points(&[1.0, 2.0, 3.0], &Options::default()).is_empty());
        assert!(change_points(&[5.0; 200], &Options::default()).is_empty());
    }
}
