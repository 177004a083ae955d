//! Value axes: linear or logarithmic, their tick marks, and how a value is
//! written on them (with its unit, scaled: `1 Gbit/s`, `95k/s`, `1.5 ms`).

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use serde::Serialize;

/// A chart's values span more than this ratio (largest over smallest):
/// its Y axis is logarithmic, so that a 1 Gbit/s line is not drawn flat
/// beside a 30 Gbit/s one.
pub const LOG_RATIO: f64 = 30.0;

/// What the values of an axis are, and so how they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueUnit {
    /// Bits per second: `500 Mbit/s`, `1 Gbit/s` (powers of 1000).
    BitsPerSecond,
    /// Transactions per second: `950/s`, `95k/s`, `1.2M/s`.
    TransactionsPerSecond,
    /// Microseconds: `20 µs`, `1.5 ms`, `2 s`.
    Microseconds,
    /// A relative difference: `+20%`.
    Percent,
}

impl ValueUnit {
    /// `v` written for an axis or a label.
    pub fn format(self, v: f64) -> String {
        if v == 0.0 && self != ValueUnit::Percent {
            return "0".into();
        }
        match self {
            ValueUnit::BitsPerSecond => {
                let (x, prefix) = si(v);
                format!("{} {prefix}bit/s", short(x))
            }
            ValueUnit::TransactionsPerSecond => {
                let (x, prefix) = si(v);
                format!("{}{prefix}/s", short(x))
            }
            ValueUnit::Microseconds => {
                if v.abs() >= 1e6 {
                    format!("{} s", short(v / 1e6))
                } else if v.abs() >= 1e3 {
                    format!("{} ms", short(v / 1e3))
                } else {
                    format!("{} µs", short(v))
                }
            }
            ValueUnit::Percent => {
                let r = if v.abs() >= 10.0 {
                    v.round()
                } else {
                    (v * 10.0).round() / 10.0
                };
                if r == 0.0 {
                    "0%".into()
                } else {
                    format!("{}{}%", if r > 0.0 { "+" } else { "-" }, short(r.abs()))
                }
            }
        }
    }
}

/// `v` scaled by a power of 1000 to lie in [1, 1000), and its prefix.
fn si(v: f64) -> (f64, &'static str) {
    let a = v.abs();
    for (scale, prefix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if a >= scale {
            return (v / scale, prefix);
        }
    }
    (v, "")
}

/// At most three significant digits, no trailing zeros: `1`, `2.5`, `120`,
/// `0.25`.
fn short(v: f64) -> String {
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Whether values spanning `values` want a logarithmic axis: all positive
/// and the largest more than [`LOG_RATIO`] times the smallest.
pub fn wants_log(values: impl IntoIterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values {
        if !(v.is_finite() && v > 0.0) {
            return false;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    hi > 0.0 && hi / lo > LOG_RATIO
}

/// The "nice" numbers 1, 2 and 5 times a power of ten at or below `v` (> 0).
fn nice_below(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|n| *n <= v * (1.0 + 1e-9))
        .unwrap_or(decade)
}

/// The nice number (1, 2 or 5 times a power of ten) at or above `v` (> 0).
fn nice_above(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|n| *n >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}

/// The nice number (1, 2 or 5 times a power of ten) nearest `v` (> 0), by
/// ratio.
fn nice_near(v: f64) -> f64 {
    let (a, b) = (nice_below(v), nice_above(v));
    if (v / a).ln() <= (b / v).ln() {
        a
    } else {
        b
    }
}

/// A value axis from `lo` to `hi`, linear or logarithmic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueAxis {
    /// The bottom of the axis.
    pub lo: f64,
    /// The top of the axis.
    pub hi: f64,
    /// Whether it is logarithmic (then `0 < lo < hi`).
    pub log: bool,
    /// Tick marks only within these values (the room beyond a bar chart's
    /// clip has none: nothing there is to scale).
    pub marked: Option<(f64, f64)>,
}

impl ValueAxis {
    /// An axis for absolute values (throughput, times) covering `values`:
    /// linear from zero with a little room above the largest, or
    /// logarithmic from a nice number below the smallest to one above the
    /// largest. Values that are not positive are left out of a logarithmic
    /// axis (they are drawn at its bottom).
    pub fn fit(values: &[f64], log: bool) -> ValueAxis {
        let positive = || values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
        let hi = positive().fold(0.0f64, f64::max);
        if hi <= 0.0 {
            return ValueAxis::linear(0.0, 1.0);
        }
        if log {
            let lo = positive().fold(f64::INFINITY, f64::min);
            ValueAxis {
                lo: nice_below(lo / 1.15),
                hi: nice_above(hi * 1.15),
                log: true,
                marked: None,
            }
        } else {
            ValueAxis::linear(0.0, hi * 1.1)
        }
    }

    /// A linear axis from `lo` to `hi`.
    pub fn linear(lo: f64, hi: f64) -> ValueAxis {
        ValueAxis {
            lo,
            hi,
            log: false,
            marked: None,
        }
    }

    /// The same axis with tick marks only from `lo` to `hi`.
    pub fn marked_within(self, lo: f64, hi: f64) -> ValueAxis {
        ValueAxis {
            marked: Some((lo, hi)),
            ..self
        }
    }

    /// Where `v` lies on the axis, from 0 (bottom) to 1 (top); values off a
    /// logarithmic axis' bottom (zero included) at 0.
    pub fn position(&self, v: f64) -> f64 {
        if self.log {
            let v = v.max(self.lo);
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// The labelled tick marks: multiples of a step of 1, 2 or 5 times a
    /// power of ten (about six of them) on a linear axis; on a logarithmic
    /// one the powers of ten, with 2 and 5 times them while that leaves at
    /// most a dozen.
    pub fn ticks(&self) -> Vec<f64> {
        let mut ticks = self.all_ticks();
        if let Some((lo, hi)) = self.marked {
            let eps = (hi - lo).abs() * 1e-9;
            ticks.retain(|t| *t >= lo - eps && *t <= hi + eps);
        }
        ticks
    }

    fn all_ticks(&self) -> Vec<f64> {
        if self.log {
            let mut out = Vec::new();
            for mantissas in [&[1.0, 2.0, 5.0][..], &[1.0][..]] {
                out = self.log_marks(mantissas);
                if out.len() <= 12 {
                    break;
                }
            }
            return out;
        }
        let span = self.hi - self.lo;
        if span.is_nan() || span <= 0.0 {
            return vec![self.lo];
        }
        let step = nice_near(span / 6.0);
        let first = (self.lo / step).ceil() as i64;
        let last = (self.hi / step).floor() as i64;
        (first..=last).map(|i| i as f64 * step).collect()
    }

    /// The unlabelled grid lines between the ticks of a logarithmic axis:
    /// 2 to 9 times each power of ten not already a tick; none on a linear
    /// axis, or when there are more than four decades.
    pub fn minor_ticks(&self) -> Vec<f64> {
        if !self.log || (self.hi / self.lo).log10() > 4.0 {
            return Vec::new();
        }
        let ticks = self.ticks();
        self.log_marks(&[2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
            .into_iter()
            .filter(|m| !ticks.iter().any(|t| (t / m - 1.0).abs() < 1e-9))
            .collect()
    }

    /// `mantissa × 10^k` for every `k` and mantissa within the axis.
    fn log_marks(&self, mantissas: &[f64]) -> Vec<f64> {
        let (a, b) = (
            self.lo.log10().floor() as i32,
            self.hi.log10().ceil() as i32,
        );
        let mut out = Vec::new();
        for k in a..=b {
            for m in mantissas {
                let v = m * 10f64.powi(k);
                if v >= self.lo * (1.0 - 1e-9) && v <= self.hi * (1.0 + 1e-9) {
                    out.push(v);
                }
            }
        }
        out
    }
}

impl Ranged for ValueAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let p = self.position(*value);
        limit.0 + (p * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor_ticks()
        } else {
            self.ticks()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_with_their_unit_scaled() {
        let b = ValueUnit::BitsPerSecond;
        assert_eq!(b.format(1e9), "1 Gbit/s");
        assert_eq!(b.format(9.6e8), "960 Mbit/s");
        assert_eq!(b.format(2.5e10), "25 Gbit/s");
        assert_eq!(b.format(1.5e6), "1.5 Mbit/s");
        assert_eq!(b.format(0.0), "0");
        let t = ValueUnit::TransactionsPerSecond;
        assert_eq!(t.format(95_000.0), "95k/s");
        assert_eq!(t.format(950.0), "950/s");
        assert_eq!(t.format(1.2e6), "1.2M/s");
        let us = ValueUnit::Microseconds;
        assert_eq!(us.format(20.0), "20 µs");
        assert_eq!(us.format(1500.0), "1.5 ms");
        assert_eq!(us.format(2e6), "2 s");
        let p = ValueUnit::Percent;
        assert_eq!(p.format(-7070.4), "-7070%");
        assert_eq!(p.format(12.34), "+12%");
        assert_eq!(p.format(1.25), "+1.3%");
        assert_eq!(p.format(0.0), "0%");
    }

    #[test]
    fn a_log_axis_is_wanted_above_thirty_times() {
        assert!(!wants_log([1.0, 30.0]));
        assert!(wants_log([1.0, 30.1]));
        // 1 Gbit/s beside veth's 30 Gbit/s: 31 times.
        assert!(wants_log([0.96e9, 30e9]));
        assert!(!wants_log([0.0, 100.0]), "zero cannot be on a log axis");
        assert!(!wants_log([]));
    }

    #[test]
    fn a_linear_axis_starts_at_zero_with_round_ticks() {
        let a = ValueAxis::fit(&[8.0e6, 12.0e6], false);
        assert_eq!(a.lo, 0.0);
        assert!((a.hi - 13.2e6).abs() < 1.0);
        assert_eq!(a.ticks(), vec![0.0, 2e6, 4e6, 6e6, 8e6, 10e6, 12e6]);
        assert!(a.minor_ticks().is_empty());
        assert_eq!(a.position(0.0), 0.0);
        // A bar chart's room beyond its clip has no tick.
        let bars = ValueAxis::linear(-260.0, 30.0).marked_within(-200.0, 30.0);
        assert_eq!(bars.ticks(), vec![-200.0, -150.0, -100.0, -50.0, 0.0]);
    }

    #[test]
    fn a_log_axis_runs_between_nice_numbers_around_the_values() {
        let a = ValueAxis::fit(&[0.96e9, 30e9], true);
        assert!(a.log);
        assert_eq!((a.lo, a.hi), (5e8, 5e10));
        assert_eq!(a.ticks(), vec![5e8, 1e9, 2e9, 5e9, 1e10, 2e10, 5e10]);
        // Equal ratios, equal distances.
        let d1 = a.position(2e9) - a.position(1e9);
        let d2 = a.position(2e10) - a.position(1e10);
        assert!((d1 - d2).abs() < 1e-12);
        assert_eq!(a.position(0.0), 0.0, "zero at the bottom");
        // Many decades: powers of ten only.
        let wide = ValueAxis::fit(&[1.0, 1e9], true);
        assert!(wide
            .ticks()
            .iter()
            .all(|t| (t.log10().round() - t.log10()).abs() < 1e-9));
        assert!(wide.minor_ticks().is_empty());
    }
}
