//! Whether two stretches of a series differ: Student's two-sample t-test
//! (pooled variance, two-sided), the test Apache Otava applies to a
//! candidate change point (`TTestSignificanceTester`), computed from
//! prefix sums so that any stretch's mean and variance cost O(1).
//!
//! Otava hands scipy's `ttest_ind_from_stats` the population standard
//! deviation (divisor n); this uses the sample standard deviation (divisor
//! n − 1), which is what the test's formula asks for (NIST/SEMATECH
//! e-Handbook of Statistical Methods, §1.3.5.3, "Two-Sample t-Test for
//! Equal Means", the pooled case). On the windows it sees (tens of points)
//! the two differ by a few per cent in the statistic.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Sums of a series' values and squares, for O(1) statistics of any stretch.
#[derive(Debug, Clone)]
pub struct PrefixSums {
    sum: Vec<f64>,
    squares: Vec<f64>,
    /// Subtracted from every value before squaring: the series' first
    /// value, so that large figures (bytes per second) keep their precision.
    shift: f64,
}

/// A stretch's count, mean and sample variance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    /// Points.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Sample variance (divisor n − 1; 0 for one point).
    pub variance: f64,
}

impl PrefixSums {
    /// The sums of `xs`.
    pub fn new(xs: &[f64]) -> PrefixSums {
        let shift = xs.first().copied().unwrap_or(0.0);
        let mut sum = Vec::with_capacity(xs.len() + 1);
        let mut squares = Vec::with_capacity(xs.len() + 1);
        sum.push(0.0);
        squares.push(0.0);
        let (mut s, mut q) = (0.0, 0.0);
        for x in xs {
            let d = x - shift;
            s += d;
            q += d * d;
            sum.push(s);
            squares.push(q);
        }
        PrefixSums {
            sum,
            squares,
            shift,
        }
    }

    /// The moments of `xs[from..to]`.
    pub fn moments(&self, from: usize, to: usize) -> Moments {
        let n = to.saturating_sub(from);
        if n == 0 {
            return Moments {
                n,
                mean: 0.0,
                variance: 0.0,
            };
        }
        let s = self.sum[to] - self.sum[from];
        let q = self.squares[to] - self.squares[from];
        let nf = n as f64;
        let mean = s / nf;
        let variance = if n < 2 {
            0.0
        } else {
            ((q - s * mean) / (nf - 1.0)).max(0.0)
        };
        Moments {
            n,
            mean: mean + self.shift,
            variance,
        }
    }
}

/// Two-sided p-value of Student's t-test that `a` and `b` have one mean.
/// Two stretches without spread have p 0 when their means differ and 1
/// when they do not; fewer than 3 points in all give 1 (no test).
pub fn student_p(a: Moments, b: Moments) -> f64 {
    let df = a.n as f64 + b.n as f64 - 2.0;
    if a.n == 0 || b.n == 0 || df < 1.0 {
        return 1.0;
    }
    let pooled = ((a.n as f64 - 1.0) * a.variance + (b.n as f64 - 1.0) * b.variance) / df;
    let se = (pooled * (1.0 / a.n as f64 + 1.0 / b.n as f64)).sqrt();
    let diff = a.mean - b.mean;
    if se == 0.0 || !se.is_finite() {
        return if diff == 0.0 { 1.0 } else { 0.0 };
    }
    let t = diff / se;
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

/// Two-sided p-value that the single value `x` comes from the population
/// `base` was drawn from: the prediction interval's t, `(x − mean) / (s ×
/// √(1 + 1/n))` with n − 1 degrees of freedom (NIST e-Handbook §2.3.6.2.3;
/// a t-test against a sample of one). A base without spread gives 0 for a
/// different value and 1 for the same.
pub fn prediction_p(base: Moments, x: f64) -> f64 {
    if base.n < 2 {
        return 1.0;
    }
    let s = base.variance.sqrt() * (1.0 + 1.0 / base.n as f64).sqrt();
    let diff = x - base.mean;
    if s == 0.0 || !s.is_finite() {
        return if diff == 0.0 { 1.0 } else { 0.0 };
    }
    match StudentsT::new(0.0, 1.0, base.n as f64 - 1.0) {
        Ok(dist) => (2.0 * dist.sf((diff / s).abs())).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_of_any_stretch_match_the_direct_ones() {
        let xs = [1e9 + 3.0, 1e9 + 5.0, 1e9 + 4.0, 1e9 + 8.0, 1e9 + 2.0];
        let p = PrefixSums::new(&xs);
        let m = p.moments(1, 4);
        assert_eq!(m.n, 3);
        assert!((m.mean - (1e9 + 17.0 / 3.0)).abs() < 1e-6, "{m:?}");
        // Values 5, 4, 8: mean 17/3, squares of deviations sum to 26/3.
        assert!((m.variance - 13.0 / 3.0).abs() < 1e-6, "{m:?}");
        assert_eq!(p.moments(2, 3).variance, 0.0);
    }

    #[test]
    fn student_p_agrees_with_a_worked_example() {
        // scipy.stats.ttest_ind([1,2,3,4,5],[3,4,5,6,7]): t = -2.0, p = 0.0805.
        let a = PrefixSums::new(&[1.0, 2.0, 3.0, 4.0, 5.0]).moments(0, 5);
        let b = PrefixSums::new(&[3.0, 4.0, 5.0, 6.0, 7.0]).moments(0, 5);
        let p = student_p(a, b);
        assert!((p - 0.08052).abs() < 1e-4, "{p}");
        assert_eq!(student_p(a, a), 1.0);
        let flat = |v| Moments {
            n: 4,
            mean: v,
            variance: 0.0,
        };
        assert_eq!(student_p(flat(1.0), flat(2.0)), 0.0);
        assert_eq!(student_p(flat(1.0), flat(1.0)), 1.0);
    }

    #[test]
    fn prediction_p_is_a_t_test_against_one_value() {
        // Base 10 values of mean 100, s = 1: x = 103 gives t = 3/sqrt(1.1) = 2.860,
        // df 9, two-sided p = 0.0188.
        let base = Moments {
            n: 10,
            mean: 100.0,
            variance: 1.0,
        };
        let p = prediction_p(base, 103.0);
        assert!((p - 0.0188).abs() < 5e-4, "{p}");
        assert!(prediction_p(base, 100.0) > 0.99);
    }
}
