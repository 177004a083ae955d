//! The knee of an open-loop sweep: the highest offered rate up to which the
//! p99 transaction time stays within [`KNEE_P99_FACTOR`] times its value at
//! the lowest offered rate. Beyond it, the queue the added load builds is
//! what the users wait on.
//!
//! Why a factor of the p99 at low load: in an M/M/1 queue the time a
//! transaction spends in the system is exponential with rate μ(1 − ρ)
//! (L. Kleinrock, *Queueing Systems*, vol. 1: *Theory*, 1975), so every
//! percentile grows as 1 / (1 − ρ) with the utilisation ρ: twice the
//! unloaded p99 at half the service's capacity, five times at 80 %. A
//! factor of 2 calls the knee where the mean wait in the queue has grown
//! as long as the service itself, whatever the path's own latency. The
//! p99s are those of transaction times measured from their due times, as
//! an open-loop run measures them, so a stall is in them.

use serde::Serialize;

use crate::figures::rate_label;
use crate::units::time_us;

/// The factor of the p99 at the lowest offered rate within which a rate is
/// below the knee: 2 (see the module's documentation). A rate whose p99 is
/// exactly twice the lowest's is still within.
pub const KNEE_P99_FACTOR: f64 = 2.0;

/// One offered rate of one file's open-loop sweep, over the test's ok runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadPoint {
    /// The test's name, e.g. `rr1c-1x1--4--10k/s`.
    pub test: String,
    /// Transactions offered per second, over all users.
    pub offered_per_s: u64,
    /// Ok runs: the figures below are means over them.
    pub ok_runs: u32,
    /// Suspect runs, left out.
    pub suspect_runs: u32,
    /// The checks the suspect runs failed.
    pub suspect_reasons: Vec<String>,
    /// Transactions answered per second (`throughput.transactions_per_s`).
    pub achieved_per_s: Option<f64>,
    /// How far below the offered rate the achieved one may be before it
    /// falls short, a fraction: what the runs' `arrival_fidelity` check
    /// allowed (1 %, [`linkperf_results::RATE_TOLERANCE`], or wider for a
    /// Poisson count's own noise over a short window).
    pub rate_tolerance: f64,
    /// Median transaction time from the due time, µs.
    pub p50_us: Option<f64>,
    /// 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub p999_us: Option<f64>,
}

impl LoadPoint {
    /// Whether the achieved rate fell short of the offered by more than
    /// [`rate_tolerance`](Self::rate_tolerance): the generator kept its
    /// schedule, but fewer transactions were answered than offered.
    pub fn falls_short(&self) -> bool {
        self.achieved_per_s
            .is_some_and(|a| a < self.offered_per_s as f64 * (1.0 - self.rate_tolerance))
    }
}

/// Where a sweep's p99 leaves [`KNEE_P99_FACTOR`] times its value at the
/// lowest offered rate (the lowest with a clean run).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Knee {
    /// The p99 stays within the factor up to `knee_per_s` and leaves it at
    /// the next rate, `beyond_per_s`.
    Found {
        /// The factor, [`KNEE_P99_FACTOR`].
        factor: f64,
        /// The lowest offered rate with a clean run.
        reference_per_s: u64,
        /// Its p99, µs.
        reference_p99_us: f64,
        /// The knee: the highest rate whose p99 (and every lower rate's) is
        /// within the factor.
        knee_per_s: u64,
        /// The next rate measured.
        beyond_per_s: u64,
        /// Its p99, µs.
        beyond_p99_us: f64,
        /// Its p99 over the reference's.
        beyond_ratio: f64,
        /// Its achieved rate, when that fell short of the offered.
        beyond_achieved_per_s: Option<f64>,
    },
    /// The p99 stays within the factor up to `knee_per_s`, and the next
    /// rate has no clean run to say more: the knee is at most there.
    Unmeasured {
        /// The factor, [`KNEE_P99_FACTOR`].
        factor: f64,
        /// The lowest offered rate with a clean run.
        reference_per_s: u64,
        /// Its p99, µs.
        reference_p99_us: f64,
        /// The highest rate of the clean run of rates within the factor.
        knee_per_s: u64,
        /// The next rate, without a clean run.
        beyond_per_s: u64,
        /// Its suspect runs.
        suspect_runs: u32,
        /// The checks they failed.
        reasons: Vec<String>,
    },
    /// Every rate's p99 is within the factor: no knee in the range.
    Within {
        /// The factor, [`KNEE_P99_FACTOR`].
        factor: f64,
        /// The lowest offered rate with a clean run.
        reference_per_s: u64,
        /// Its p99, µs.
        reference_p99_us: f64,
        /// The highest rate offered.
        up_to_per_s: u64,
        /// The largest p99 over the reference's.
        max_ratio: f64,
    },
    /// One offered rate only: nothing to compare it with.
    OneRate {
        /// The rate.
        offered_per_s: u64,
    },
    /// Fewer than two offered rates with a clean run (and a p99).
    TooFewClean {
        /// Rates with a clean run.
        clean: usize,
        /// Rates offered.
        rates: usize,
    },
}

impl Knee {
    /// The knee's rate, when one was found (or bounded by a rate without
    /// a clean run).
    pub fn knee_per_s(&self) -> Option<u64> {
        match self {
            Knee::Found { knee_per_s, .. } | Knee::Unmeasured { knee_per_s, .. } => {
                Some(*knee_per_s)
            }
            _ => None,
        }
    }

    /// The finding in words, after the file's label: "p99 stays within 2× of
    /// its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s it is 5.3×
    /// (186.0 µs)".
    pub fn describe(&self, label: &str) -> String {
        let within = |factor: f64, reference: u64, p99: f64| {
            format!(
                "p99 stays within {}× of its value at {} ({})",
                number(factor),
                rate_label(reference),
                time_us(p99)
            )
        };
        let text = match self {
            Knee::Found {
                factor,
                reference_per_s,
                reference_p99_us,
                knee_per_s,
                beyond_per_s,
                beyond_p99_us,
                beyond_ratio,
                beyond_achieved_per_s,
            } => {
                let short = beyond_achieved_per_s.map_or(String::new(), |a| {
                    format!(
                        ", achieved {} of {}",
                        crate::chart::ValueUnit::TransactionsPerSecond.format(a),
                        rate_label(*beyond_per_s)
                    )
                });
                let beyond = format!(
                    "at {} it is {} ({}{short})",
                    rate_label(*beyond_per_s),
                    times(*beyond_ratio, *factor),
                    time_us(*beyond_p99_us)
                );
                if knee_per_s == reference_per_s {
                    format!(
                        "p99 leaves {}× of its value at {} ({}) at the next rate: {beyond}",
                        number(*factor),
                        rate_label(*reference_per_s),
                        time_us(*reference_p99_us)
                    )
                } else {
                    format!(
                        "{} up to {}; {beyond}",
                        within(*factor, *reference_per_s, *reference_p99_us),
                        rate_label(*knee_per_s)
                    )
                }
            }
            Knee::Unmeasured {
                factor,
                reference_per_s,
                reference_p99_us,
                knee_per_s,
                beyond_per_s,
                suspect_runs,
                reasons,
            } => {
                let why = if *suspect_runs > 0 {
                    format!(
                        " ({suspect_runs} suspect run{}: {})",
                        if *suspect_runs == 1 { "" } else { "s" },
                        reasons.join(", ")
                    )
                } else {
                    String::new()
                };
                format!(
                    "{} up to {}; at {} no clean run{why}, so the knee is at {} or above",
                    within(*factor, *reference_per_s, *reference_p99_us),
                    rate_label(*knee_per_s),
                    rate_label(*beyond_per_s),
                    rate_label(*knee_per_s),
                )
            }
            Knee::Within {
                factor,
                reference_per_s,
                reference_p99_us,
                up_to_per_s,
                max_ratio,
            } => format!(
                "{} up to {}, the highest rate offered (at most {}): no knee in {}–{}",
                within(*factor, *reference_per_s, *reference_p99_us),
                rate_label(*up_to_per_s),
                times(*max_ratio, *factor),
                rate_label(*reference_per_s),
                rate_label(*up_to_per_s)
            ),
            Knee::OneRate { offered_per_s } => format!(
                "one offered rate only ({}): no knee to find",
                rate_label(*offered_per_s)
            ),
            Knee::TooFewClean { clean, rates } => {
                format!("{clean} of {rates} offered rates with a clean run: no knee to find")
            }
        };
        format!("{label}: {text}")
    }
}

/// `2`, `2.5`: a factor as people write it.
fn number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A ratio to the reference, `5.3×`, with a second decimal where one
/// would make a ratio beyond `factor` read as equal to it (`2.04×`, not
/// `2.0×`).
fn times(ratio: f64, factor: f64) -> String {
    let one = format!("{ratio:.1}");
    if ratio > factor && one.parse::<f64>().is_ok_and(|r| r <= factor) {
        format!("{ratio:.2}×")
    } else {
        format!("{one}×")
    }
}

/// The knee of one file's sweep, `points` in any order (one per offered
/// rate). The reference is the lowest rate with a clean run and a p99;
/// from it, rates are taken in increasing order while their p99 is within
/// [`KNEE_P99_FACTOR`] times the reference's (≤): the knee is the last of
/// them. The first rate beyond the factor, or without a clean run to
/// judge, ends the search: a p99 that comes back below the factor at a
/// higher rate does not move the knee past one that left it.
pub fn knee(points: &[LoadPoint]) -> Knee {
    let mut pts: Vec<&LoadPoint> = points.iter().collect();
    pts.sort_by_key(|p| p.offered_per_s);
    pts.dedup_by_key(|p| p.offered_per_s);
    let p99 = |p: &LoadPoint| p.p99_us.filter(|v| v.is_finite() && *v > 0.0);
    if pts.len() == 1 {
        return Knee::OneRate {
            offered_per_s: pts[0].offered_per_s,
        };
    }
    let clean = pts.iter().filter(|p| p99(p).is_some()).count();
    let start = match pts.iter().position(|p| p99(p).is_some()) {
        Some(start) if clean >= 2 => start,
        _ => {
            return Knee::TooFewClean {
                clean,
                rates: pts.len(),
            }
        }
    };
    let reference = pts[start];
    let reference_p99_us = p99(reference).unwrap_or(f64::NAN);
    let factor = KNEE_P99_FACTOR;
    let mut knee = reference;
    let mut max_ratio = 1.0f64;
    for p in &pts[start + 1..] {
        let Some(v) = p99(p) else {
            return Knee::Unmeasured {
                factor,
                reference_per_s: reference.offered_per_s,
                reference_p99_us,
                knee_per_s: knee.offered_per_s,
                beyond_per_s: p.offered_per_s,
                suspect_runs: p.suspect_runs,
                reasons: p.suspect_reasons.clone(),
            };
        };
        let ratio = v / reference_p99_us;
        if ratio > factor {
            return Knee::Found {
                factor,
                reference_per_s: reference.offered_per_s,
                reference_p99_us,
                knee_per_s: knee.offered_per_s,
                beyond_per_s: p.offered_per_s,
                beyond_p99_us: v,
                beyond_ratio: ratio,
                beyond_achieved_per_s: p.falls_short().then_some(p.achieved_per_s).flatten(),
            };
        }
        max_ratio = max_ratio.max(ratio);
        knee = p;
    }
    Knee::Within {
        factor,
        reference_per_s: reference.offered_per_s,
        reference_p99_us,
        up_to_per_s: knee.offered_per_s,
        max_ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean point at `rate` with p99 `p99` µs (p50 a third of it, p99.9
    /// twice), achieved as offered.
    fn at(rate: u64, p99: f64) -> LoadPoint {
        LoadPoint {
            test: format!("rr1c-1x1--4--{}", rate_label(rate)),
            offered_per_s: rate,
            ok_runs: 1,
            suspect_runs: 0,
            suspect_reasons: Vec::new(),
            achieved_per_s: Some(rate as f64),
            rate_tolerance: linkperf_results::RATE_TOLERANCE,
            p50_us: Some(p99 / 3.0),
            p99_us: Some(p99),
            p999_us: Some(p99 * 2.0),
        }
    }

    #[test]
    fn the_knee_is_the_last_rate_within_twice_the_lowest_rates_p99() {
        let pts = [
            at(1_000, 35.0),
            at(10_000, 38.0),
            at(20_000, 45.0),
            at(40_000, 66.0),
            at(50_000, 185.5),
            at(60_000, 900.0),
        ];
        let k = knee(&pts);
        assert_eq!(k.knee_per_s(), Some(40_000));
        match &k {
            Knee::Found {
                reference_per_s,
                beyond_per_s,
                beyond_ratio,
                beyond_achieved_per_s,
                ..
            } => {
                assert_eq!((*reference_per_s, *beyond_per_s), (1_000, 50_000));
                assert!((beyond_ratio - 185.5 / 35.0).abs() < 1e-12);
                assert_eq!(*beyond_achieved_per_s, None, "achieved as offered");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            k.describe("hs"),
            "hs: p99 stays within 2× of its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s it is 5.3× (185.5 µs)"
        );
        // The order the points come in does not matter.
        let mut reversed = pts.to_vec();
        reversed.reverse();
        assert_eq!(knee(&reversed), k);
    }

    #[test]
    fn a_rate_that_falls_short_says_what_it_achieved() {
        let mut beyond = at(50_000, 400.0);
        beyond.achieved_per_s = Some(43_100.0);
        let k = knee(&[at(1_000, 35.0), at(40_000, 60.0), beyond]);
        assert_eq!(
            k.describe("hs"),
            "hs: p99 stays within 2× of its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s it is 11.4× (400.0 µs, achieved 43.1k/s of 50k/s)"
        );
        // Within 1 % is as offered; 1.2 % short is short, unless the runs'
        // check allowed more (a Poisson count's noise over a short window).
        let mut close = at(50_000, 400.0);
        close.achieved_per_s = Some(49_600.0);
        assert!(!close.falls_short());
        close.achieved_per_s = Some(49_400.0);
        assert!(close.falls_short());
        close.rate_tolerance = 0.019;
        assert!(!close.falls_short());
    }

    #[test]
    fn a_flat_sweep_has_no_knee() {
        let k = knee(&[at(1_000, 30.0), at(10_000, 31.0), at(100_000, 42.0)]);
        assert_eq!(k.knee_per_s(), None);
        assert!(
            matches!(
                k,
                Knee::Within {
                    up_to_per_s: 100_000,
                    ..
                }
            ),
            "{k:?}"
        );
        assert_eq!(
            k.describe("osa"),
            "osa: p99 stays within 2× of its value at 1k/s (30.0 µs) up to 100k/s, the highest rate offered (at most 1.4×): no knee in 1k/s–100k/s"
        );
    }

    #[test]
    fn one_rate_has_no_knee() {
        let k = knee(&[at(10_000, 30.0)]);
        assert_eq!(
            k,
            Knee::OneRate {
                offered_per_s: 10_000
            }
        );
        assert_eq!(
            k.describe("osa"),
            "osa: one offered rate only (10k/s): no knee to find"
        );
        assert_eq!(k.knee_per_s(), None);
    }

    #[test]
    fn twice_exactly_is_within_and_a_hair_more_is_beyond() {
        // 1k/s at 20 µs; 2k/s at exactly 40 µs: within.
        let k = knee(&[at(1_000, 20.0), at(2_000, 40.0)]);
        assert!(
            matches!(k, Knee::Within { max_ratio, .. } if max_ratio == 2.0),
            "{k:?}"
        );
        // 40.01 µs: beyond, and said with the decimals that show it.
        let k = knee(&[at(1_000, 20.0), at(2_000, 40.01), at(3_000, 41.0)]);
        assert_eq!(k.knee_per_s(), Some(1_000));
        assert_eq!(
            k.describe("a"),
            "a: p99 leaves 2× of its value at 1k/s (20.0 µs) at the next rate: at 2k/s it is 2.00× (40.0 µs)"
        );
        let k = knee(&[at(1_000, 20.0), at(2_000, 40.0), at(3_000, 40.9)]);
        assert_eq!(
            k.describe("a"),
            "a: p99 stays within 2× of its value at 1k/s (20.0 µs) up to 2k/s; at 3k/s it is 2.04× (40.9 µs)"
        );
    }

    #[test]
    fn the_factor_is_documented_where_users_read_it() {
        let page = include_str!("../../../docs/reports.md");
        assert_eq!(KNEE_P99_FACTOR, 2.0);
        assert!(page.contains("within **2×**"));
        assert!(page.contains("`KNEE_P99_FACTOR`"));
    }

    #[test]
    fn a_p99_back_within_the_factor_does_not_move_the_knee() {
        let k = knee(&[
            at(1_000, 20.0),
            at(2_000, 30.0),
            at(3_000, 80.0),
            at(4_000, 35.0),
        ]);
        assert_eq!(k.knee_per_s(), Some(2_000));
    }

    #[test]
    fn a_rate_without_a_clean_run_ends_the_search_and_says_why() {
        let mut suspect = at(50_000, 0.0);
        suspect.ok_runs = 0;
        suspect.suspect_runs = 2;
        suspect.suspect_reasons = vec!["arrival_fidelity".into(), "client_saturated".into()];
        suspect.p99_us = None;
        suspect.achieved_per_s = None;
        let k = knee(&[at(1_000, 35.0), at(40_000, 60.0), suspect, at(60_000, 50.0)]);
        assert_eq!(k.knee_per_s(), Some(40_000));
        assert_eq!(
            k.describe("hs"),
            "hs: p99 stays within 2× of its value at 1k/s (35.0 µs) up to 40k/s; at 50k/s no clean run (2 suspect runs: arrival_fidelity, client_saturated), so the knee is at 40k/s or above"
        );
        // The lowest rate without a clean run: the reference is the lowest with one.
        let mut low = at(1_000, 0.0);
        low.p99_us = None;
        let k = knee(&[low.clone(), at(2_000, 35.0), at(4_000, 100.0)]);
        assert!(
            matches!(
                k,
                Knee::Found {
                    reference_per_s: 2_000,
                    knee_per_s: 2_000,
                    ..
                }
            ),
            "{k:?}"
        );
        // One clean rate of two: nothing to compare.
        let k = knee(&[low, at(2_000, 35.0)]);
        assert_eq!(k, Knee::TooFewClean { clean: 1, rates: 2 });
        assert_eq!(
            k.describe("a"),
            "a: 1 of 2 offered rates with a clean run: no knee to find"
        );
    }
}
