//! Saturation: the user count from which a path carries no more, for one
//! results file and one workload.
//!
//! Two rules, whichever finds the smaller user count:
//!
//! * **The knee.** From one measured user count to the next, throughput grows
//!   by less than [`SATURATION_THROUGHPUT_GROWTH`] (5%) while the mean
//!   transaction time grows by more than [`SATURATION_TIME_GROWTH`] (20%): the
//!   added users only queue. This is the "knee capacity" of R. Jain, *The Art of
//!   Computer Systems Performance Analysis* (Wiley, 1991), §3.3: beyond it
//!   response time rises quickly for little gain in throughput. The two
//!   percentages are product choices, wide enough to stay clear of run-to-run
//!   noise (the results document flags a throughput CV over 5% as unstable).
//! * **The capacity.** When the link's capacity is known, a user count whose
//!   payload rate in the busier direction reaches within [`CAPACITY_MARGIN`]
//!   (5%) of it: the link, not the hosts, is the limit, as the 1 Gb interconnect
//!   of the Oracle RAC study was "not sufficient" at 60 users. Payload excludes
//!   headers, so a link carrying full-size TCP segments delivers about 95% of
//!   its rate as payload at best; the margin is sized for that.
//!
//! A finding that rests on a test flagged unstable (throughput CV over 5%)
//! says so: the knee compares two means whose runs disagreed by more than the
//! growth it looks for, so it may be noise. The finding is kept, not dropped
//! (a saturating path is often an unstable one), and its words end "(from
//! unstable runs: throughput CV 13.0%)".

use serde::Serialize;

use linkperf_workload::BitsPerSecond;

use crate::units::{capacity, rate};

/// Largest throughput growth between neighbouring user counts, as a fraction,
/// that counts as "no more throughput": 5%.
pub const SATURATION_THROUGHPUT_GROWTH: f64 = 0.05;

/// Smallest mean-transaction-time growth between neighbouring user counts, as
/// a fraction, that counts as "only queueing": 20%.
pub const SATURATION_TIME_GROWTH: f64 = 0.20;

/// How close to the link's capacity the busier direction's payload rate must
/// come, as a fraction of the capacity, to count as saturating it: 5%.
pub const CAPACITY_MARGIN: f64 = 0.05;

/// One user count of one workload in one results file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SaturationPoint {
    /// Concurrent users.
    pub users: u32,
    /// Mean payload rate, both directions, bytes/s.
    pub throughput_bytes_per_s: f64,
    /// Mean payload rate of the busier direction, bytes/s.
    pub busiest_direction_bytes_per_s: f64,
    /// Mean transaction time, µs, when measured.
    pub mean_time_us: Option<f64>,
    /// Whether the test is flagged unstable (throughput CV over 5%).
    pub unstable: bool,
    /// Coefficient of variation of the throughput over its runs, when repeated.
    pub throughput_cv: Option<f64>,
}

/// Why a workload counts as saturated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SaturationCause {
    /// The busier direction carried within 5% of the link's capacity.
    Capacity {
        /// Its payload rate, bits per second.
        throughput_bits_per_s: f64,
        /// The link's capacity, bits per second.
        capacity_bits_per_s: f64,
    },
    /// More users brought little throughput and much longer transactions.
    Knee {
        /// The next user count measured.
        to_users: u32,
        /// Throughput growth to it, percent.
        throughput_growth_pct: f64,
        /// Mean transaction time growth to it, percent.
        time_growth_pct: f64,
    },
}

/// A saturated workload of one results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Saturation {
    /// The user count from which the path is saturated.
    pub from_users: u32,
    /// Why.
    pub cause: SaturationCause,
    /// Whether a test the finding rests on (the knee's two user counts, or
    /// the one that met the capacity) is flagged unstable.
    pub from_unstable_runs: bool,
    /// The largest throughput CV of those unstable tests, as a fraction.
    pub unstable_cv: Option<f64>,
}

impl Saturation {
    /// The finding in words, naming the results file's label: "1gbit saturates
    /// from 60 users: the link is not sufficient for this load (…)".
    pub fn describe(&self, label: &str) -> String {
        let mut s = self.describe_cause(label);
        if self.from_unstable_runs {
            match self.unstable_cv {
                Some(cv) => s.push_str(&format!(
                    " (from unstable runs: throughput CV {:.1}%)",
                    cv * 100.0
                )),
                None => s.push_str(" (from unstable runs)"),
            }
        }
        s
    }

    fn describe_cause(&self, label: &str) -> String {
        let u = self.from_users;
        match self.cause {
            SaturationCause::Capacity {
                throughput_bits_per_s,
                capacity_bits_per_s,
            } => format!(
                "{label} saturates from {}: the link is not sufficient for this load ({} in the busier direction, {:.0}% of its {} capacity)",
                users(u),
                rate(throughput_bits_per_s / 8.0),
                throughput_bits_per_s / capacity_bits_per_s * 100.0,
                capacity(capacity_bits_per_s)
            ),
            SaturationCause::Knee {
                to_users,
                throughput_growth_pct,
                time_growth_pct,
            } => {
                let throughput = if throughput_growth_pct < 0.0 {
                    format!("falls {:.1}%", -throughput_growth_pct)
                } else {
                    format!("grows only {throughput_growth_pct:.1}%")
                };
                format!(
                    "{label} saturates from {}: from {u} to {to_users} users throughput {throughput} while mean transaction time grows {time_growth_pct:.1}%",
                    users(u)
                )
            }
        }
    }
}

/// "1 user", "60 users".
fn users(n: u32) -> String {
    if n == 1 {
        "1 user".into()
    } else {
        format!("{n} users")
    }
}

/// Finds where one workload of one results file saturates; `None` when no
/// user count meets either rule. `points` may be in any order; `capacity` is
/// the link's, when known.
pub fn saturation(
    points: &[SaturationPoint],
    capacity: Option<BitsPerSecond>,
) -> Option<Saturation> {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.users);
    let by_capacity = capacity.and_then(|cap| {
        pts.iter().find_map(|p| {
            let bits = p.busiest_direction_bytes_per_s * 8.0;
            (bits >= cap.as_f64() * (1.0 - CAPACITY_MARGIN)).then(|| {
                resting_on(
                    &[p],
                    p.users,
                    SaturationCause::Capacity {
                        throughput_bits_per_s: bits,
                        capacity_bits_per_s: cap.as_f64(),
                    },
                )
            })
        })
    });
    let by_knee = pts.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        let (ta, tb) = (a.mean_time_us?, b.mean_time_us?);
        if a.throughput_bytes_per_s <= 0.0 || ta <= 0.0 {
            return None;
        }
        let throughput_growth = b.throughput_bytes_per_s / a.throughput_bytes_per_s - 1.0;
        let time_growth = tb / ta - 1.0;
        (throughput_growth < SATURATION_THROUGHPUT_GROWTH && time_growth > SATURATION_TIME_GROWTH)
            .then(|| {
                resting_on(
                    &[&a, &b],
                    a.users,
                    SaturationCause::Knee {
                        to_users: b.users,
                        throughput_growth_pct: throughput_growth * 100.0,
                        time_growth_pct: time_growth * 100.0,
                    },
                )
            })
    });
    match (by_capacity, by_knee) {
        (Some(c), Some(k)) => Some(if k.from_users < c.from_users { k } else { c }),
        (c, k) => c.or(k),
    }
}

/// A finding from `from_users` for `cause`, resting on `points`: flagged when
/// any of them is unstable, with the largest CV among those.
fn resting_on(points: &[&SaturationPoint], from_users: u32, cause: SaturationCause) -> Saturation {
    let unstable: Vec<&&SaturationPoint> = points.iter().filter(|p| p.unstable).collect();
    Saturation {
        from_users,
        cause,
        from_unstable_runs: !unstable.is_empty(),
        unstable_cv: unstable
            .iter()
            .filter_map(|p| p.throughput_cv)
            .reduce(f64::max),
    }
}

/// User counts whose busier direction carried more than the capacity allows
/// (beyond the margin): the capacity given does not describe this path.
pub(crate) fn above_capacity(
    points: &[SaturationPoint],
    capacity: BitsPerSecond,
) -> Vec<(u32, f64)> {
    points
        .iter()
        .map(|p| (p.users, p.busiest_direction_bytes_per_s * 8.0))
        .filter(|(_, bits)| *bits > capacity.as_f64() * (1.0 + CAPACITY_MARGIN))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point carrying `mbit` Mbit/s, all in one direction, with mean
    /// transaction time `us`.
    fn p(users: u32, mbit: f64, us: f64) -> SaturationPoint {
        let bytes = mbit * 1e6 / 8.0;
        SaturationPoint {
            users,
            throughput_bytes_per_s: bytes,
            busiest_direction_bytes_per_s: bytes,
            mean_time_us: Some(us),
            unstable: false,
            throughput_cv: None,
        }
    }

    /// [`p`], flagged unstable with throughput CV `cv`.
    fn shaky(users: u32, mbit: f64, us: f64, cv: f64) -> SaturationPoint {
        SaturationPoint {
            unstable: true,
            throughput_cv: Some(cv),
            ..p(users, mbit, us)
        }
    }

    #[test]
    fn a_finding_from_unstable_runs_says_so() {
        // The knee from 60 to 80 users, the 80-user test unstable (CV 13%):
        // the finding stands and says what it rests on.
        let pts = [
            p(40, 600.0, 100.0),
            p(60, 900.0, 110.0),
            shaky(80, 918.0, 154.0, 0.13),
        ];
        let s = saturation(&pts, None).unwrap();
        assert_eq!(s.from_users, 60);
        assert!(s.from_unstable_runs);
        assert_eq!(s.unstable_cv, Some(0.13));
        assert_eq!(
            s.describe("1gbit"),
            "1gbit saturates from 60 users: from 60 to 80 users throughput grows only 2.0% while mean transaction time grows 40.0% (from unstable runs: throughput CV 13.0%)"
        );
        // Both ends unstable: the larger CV.
        let pts = [shaky(60, 900.0, 110.0, 0.07), shaky(80, 918.0, 154.0, 0.06)];
        let s = saturation(&pts, None).unwrap();
        assert_eq!(s.unstable_cv, Some(0.07));
        // An unstable test elsewhere (40 users) is not what the knee rests on.
        let pts = [
            shaky(40, 600.0, 100.0, 0.2),
            p(60, 900.0, 110.0),
            p(80, 918.0, 154.0),
        ];
        let s = saturation(&pts, None).unwrap();
        assert!(!s.from_unstable_runs);
        assert!(!s.describe("1gbit").contains("unstable"));
        // Unstable without a CV (a results file that flags it but lacks the figure).
        let mut odd = shaky(80, 918.0, 154.0, 0.0);
        odd.throughput_cv = None;
        let s = saturation(&[p(60, 900.0, 110.0), odd], None).unwrap();
        assert!(s
            .describe("x")
            .ends_with("grows 40.0% (from unstable runs)"));
        // The capacity rule rests on the one test that met the capacity.
        let s = saturation(
            &[shaky(60, 960.0, 110.0, 0.09)],
            Some(BitsPerSecond(1_000_000_000)),
        )
        .unwrap();
        assert!(s
            .describe("1gbit")
            .ends_with("96% of its 1 Gbit/s capacity) (from unstable runs: throughput CV 9.0%)"));
    }

    #[test]
    fn the_knee_is_little_more_throughput_for_much_more_time() {
        // 40 → 60 users: +50% throughput (not saturated); 60 → 80: +2% throughput,
        // +40% time (saturated from 60).
        let pts = [
            p(40, 600.0, 100.0),
            p(60, 900.0, 110.0),
            p(80, 918.0, 154.0),
        ];
        let s = saturation(&pts, None).unwrap();
        assert_eq!(s.from_users, 60);
        match s.cause {
            SaturationCause::Knee {
                to_users,
                throughput_growth_pct,
                time_growth_pct,
            } => {
                assert_eq!(to_users, 80);
                assert!((throughput_growth_pct - 2.0).abs() < 1e-9);
                assert!((time_growth_pct - 40.0).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            s.describe("1gbit"),
            "1gbit saturates from 60 users: from 60 to 80 users throughput grows only 2.0% while mean transaction time grows 40.0%"
        );
    }

    #[test]
    fn both_conditions_are_needed_for_the_knee() {
        // Flat throughput, flat time: an idle path, not a saturated one.
        assert_eq!(
            saturation(&[p(1, 100.0, 10.0), p(2, 101.0, 11.0)], None),
            None
        );
        // Time grows by more than 20% but so does throughput: still scaling.
        assert_eq!(
            saturation(&[p(1, 100.0, 10.0), p(2, 110.0, 13.0)], None),
            None
        );
        // At the limits exactly: 5% is not less than 5%, 20% is not more than 20%.
        assert_eq!(
            saturation(&[p(1, 100.0, 10.0), p(2, 105.0, 13.0)], None),
            None
        );
        assert_eq!(
            saturation(&[p(1, 100.0, 10.0), p(2, 104.0, 12.0)], None),
            None
        );
        assert!(saturation(&[p(2, 104.0, 12.1), p(1, 100.0, 10.0)], None).is_some());
    }

    #[test]
    fn the_capacity_rule_needs_a_capacity() {
        // 1 Gbit/s link: 40 users carry 800 Mbit/s, 60 users 960 (96%): saturated
        // from 60, even though the knee rule sees nothing (throughput still grows).
        let pts = [
            p(40, 800.0, 100.0),
            p(60, 960.0, 110.0),
            p(80, 985.0, 118.0),
        ];
        assert_eq!(saturation(&pts, None), None);
        let s = saturation(&pts, Some(BitsPerSecond(1_000_000_000))).unwrap();
        assert_eq!(s.from_users, 60);
        assert_eq!(
            s.describe("1gbit"),
            "1gbit saturates from 60 users: the link is not sufficient for this load (960.0 Mbit/s in the busier direction, 96% of its 1 Gbit/s capacity)"
        );
        // A 10 Gbit/s link is nowhere near.
        assert_eq!(saturation(&pts, Some(BitsPerSecond(10_000_000_000))), None);
        // Within 5% means at least 95%: 949 Mbit/s is not.
        assert_eq!(
            saturation(&[p(40, 949.0, 1.0)], Some(BitsPerSecond(1_000_000_000))),
            None
        );
        assert!(saturation(&[p(40, 951.0, 1.0)], Some(BitsPerSecond(1_000_000_000))).is_some());
    }

    #[test]
    fn the_earlier_rule_wins() {
        // A knee from 10 to 20 users; the capacity is reached only at 60.
        let pts = [p(10, 500.0, 10.0), p(20, 510.0, 20.0), p(60, 960.0, 30.0)];
        let s = saturation(&pts, Some(BitsPerSecond(1_000_000_000))).unwrap();
        assert_eq!(s.from_users, 10);
        assert!(matches!(
            s.cause,
            SaturationCause::Knee { to_users: 20, .. }
        ));
    }

    #[test]
    fn the_busier_direction_meets_the_capacity() {
        // A round trip: 100 Mbit/s up, 960 down: 1060 together, 960 on the busy side.
        let pt = SaturationPoint {
            users: 60,
            throughput_bytes_per_s: 1060e6 / 8.0,
            busiest_direction_bytes_per_s: 960e6 / 8.0,
            mean_time_us: None,
            unstable: false,
            throughput_cv: None,
        };
        let s = saturation(&[pt], Some(BitsPerSecond(1_000_000_000))).unwrap();
        assert_eq!(s.from_users, 60);
        assert!(above_capacity(&[pt], BitsPerSecond(1_000_000_000)).is_empty());
        assert_eq!(
            above_capacity(&[pt], BitsPerSecond(500_000_000)),
            vec![(60, 960e6)]
        );
    }
}
