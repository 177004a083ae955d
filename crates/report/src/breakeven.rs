//! Break-even: the user count at which a candidate's throughput advantage turns
//! into a disadvantage (or the reverse), found by linear interpolation between
//! measured user counts whose differences count (are larger than the noise, by
//! the rule the verdicts use) and have opposite signs: the secant through the
//! two points, as the study read its "break-even point ... at ~50 users" off
//! its figure.
//!
//! Differences within the noise are "about the same": they neither cross nor
//! stop a crossing. Between the last counting difference of one sign and the
//! first counting difference of the other, the crossing is interpolated from
//! their raw values, whatever lies between them.

use serde::Serialize;

use crate::significance::Outcome;
use crate::units::about;

/// One measured user count of one workload: the candidate's throughput
/// difference and whether it counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BreakEvenPoint {
    /// Concurrent users.
    pub users: u32,
    /// Relative throughput difference, percent, positive = candidate better.
    pub relative_pct: f64,
    /// Whether the difference counts ([`Outcome::Better`], [`Outcome::Worse`])
    /// or is within the noise ([`Outcome::Same`]); see [`crate::judge`].
    pub outcome: Outcome,
}

/// Where the throughput difference of one workload crosses zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BreakEven {
    /// The difference goes from one sign that counts to the other.
    Crossing {
        /// Interpolated user counts where it crosses zero, in increasing order.
        at_users: Vec<f64>,
        /// Whether the candidate is better below the first crossing.
        better_below: bool,
    },
    /// Every difference that counts has the same sign.
    NoCrossing {
        /// Smallest user count measured.
        min_users: u32,
        /// Largest user count measured.
        max_users: u32,
        /// Whether the candidate is better (`true`) or worse (`false`) wherever
        /// the difference counts.
        better_throughout: bool,
    },
    /// No difference counts: within the noise at every measured user count.
    NoDifference {
        /// Smallest user count measured.
        min_users: u32,
        /// Largest user count measured.
        max_users: u32,
    },
    /// Fewer than two user counts were measured.
    TooFewPoints,
}

impl BreakEven {
    /// The finding in words, naming the candidate: "break-even at ~50 users
    /// (hs better below, worse above)", "no crossing in 1–250 users (hs better
    /// throughout)".
    pub fn describe(&self, candidate: &str) -> String {
        match self {
            BreakEven::Crossing {
                at_users,
                better_below,
            } => {
                let at: Vec<String> = at_users.iter().map(|u| about(*u)).collect();
                let (below, above) = if *better_below {
                    ("better", "worse")
                } else {
                    ("worse", "better")
                };
                if at.len() == 1 {
                    format!(
                        "break-even at {} users ({candidate} {below} below, {above} above)",
                        at[0]
                    )
                } else {
                    format!(
                        "throughput difference crosses zero at {} users ({candidate} {below} below the first)",
                        join_and(&at)
                    )
                }
            }
            BreakEven::NoCrossing {
                min_users,
                max_users,
                better_throughout,
            } => {
                let how = if *better_throughout {
                    "better"
                } else {
                    "worse"
                };
                format!(
                    "no crossing in {min_users}–{max_users} users ({candidate} {how} throughout)"
                )
            }
            BreakEven::NoDifference {
                min_users,
                max_users,
            } => format!("no difference beyond the noise in {min_users}–{max_users} users"),
            BreakEven::TooFewPoints => "one user count only: no break-even to find".into(),
        }
    }
}

/// "a", "a and b", "a, b and c".
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Finds where the throughput difference crosses zero. `points` may be in any
/// order. Only differences that count (outcome better or worse) take part:
/// each change of sign between one counting difference `(u1, d1)` and the next
/// counting one `(u2, d2)` gives the crossing `u1 + d1 / (d1 − d2) × (u2 − u1)`,
/// with the raw differences; differences within the noise between them are
/// passed over.
pub fn break_even(points: &[BreakEvenPoint]) -> BreakEven {
    let mut pts: Vec<BreakEvenPoint> = points
        .iter()
        .copied()
        .filter(|p| p.relative_pct.is_finite())
        .collect();
    pts.sort_by_key(|p| p.users);
    if pts.len() < 2 {
        return BreakEven::TooFewPoints;
    }
    let (min_users, max_users) = (pts[0].users, pts[pts.len() - 1].users);
    let counting = pts.iter().filter_map(|p| {
        let better = match p.outcome {
            Outcome::Better => true,
            Outcome::Worse => false,
            Outcome::Same | Outcome::Inconclusive => return None,
        };
        Some((p.users, p.relative_pct, better))
    });
    let mut at_users = Vec::new();
    let mut first_sign = None;
    let mut prev: Option<(u32, f64, bool)> = None;
    for (u, d, better) in counting {
        if let Some((pu, pd, pbetter)) = prev {
            if pbetter != better {
                at_users.push(f64::from(pu) + pd / (pd - d) * f64::from(u - pu));
            }
        }
        first_sign.get_or_insert(better);
        prev = Some((u, d, better));
    }
    match first_sign {
        None => BreakEven::NoDifference {
            min_users,
            max_users,
        },
        Some(better_below) if !at_users.is_empty() => BreakEven::Crossing {
            at_users,
            better_below,
        },
        Some(better_throughout) => BreakEven::NoCrossing {
            min_users,
            max_users,
            better_throughout,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measured difference judged by a 2% threshold alone (single runs).
    fn p(users: u32, relative_pct: f64) -> BreakEvenPoint {
        let outcome = if relative_pct > 2.0 {
            Outcome::Better
        } else if relative_pct < -2.0 {
            Outcome::Worse
        } else {
            Outcome::Same
        };
        BreakEvenPoint {
            users,
            relative_pct,
            outcome,
        }
    }

    /// A difference of any size that does not count (e.g. Welch p ≥ 0.05).
    fn noise(users: u32, relative_pct: f64) -> BreakEvenPoint {
        BreakEvenPoint {
            users,
            relative_pct,
            outcome: Outcome::Same,
        }
    }

    fn crossing(b: &BreakEven) -> Vec<f64> {
        match b {
            BreakEven::Crossing { at_users, .. } => at_users.clone(),
            other => panic!("no crossing: {other:?}"),
        }
    }

    #[test]
    fn interpolates_between_the_user_counts_around_zero() {
        // +20% at 25 users, −10% at 75: zero at 25 + 20 / 30 × 50 = 58.33.
        let b = break_even(&[p(1, 250.0), p(25, 20.0), p(75, -10.0), p(250, -50.0)]);
        let at = crossing(&b);
        assert_eq!(at.len(), 1);
        assert!((at[0] - 58.333_333).abs() < 1e-5, "{at:?}");
        assert_eq!(
            b.describe("hs"),
            "break-even at ~58 users (hs better below, worse above)"
        );
    }

    #[test]
    fn the_studys_break_even_at_50_users() {
        // +10% at 25, −10% at 75: midway, 50 users.
        let b = break_even(&[p(75, -10.0), p(25, 10.0), p(10, 40.0)]);
        assert_eq!(crossing(&b), vec![50.0]);
        assert!(b.describe("hs").starts_with("break-even at ~50 users"));
    }

    #[test]
    fn worse_below_and_better_above() {
        let b = break_even(&[p(1, -30.0), p(10, 30.0)]);
        assert_eq!(crossing(&b), vec![5.5]);
        assert_eq!(
            b.describe("hs"),
            "break-even at ~6 users (hs worse below, better above)"
        );
    }

    #[test]
    fn two_differences_within_the_noise_of_opposite_sign_do_not_cross() {
        // +1.5% at 1 user, −1.5% at 2: both within a 2% threshold. The raw
        // signs differ (the old rule said "break-even at ~2 users"), but
        // neither counts: no difference beyond the noise.
        let b = break_even(&[p(1, 1.5), p(2, -1.5)]);
        assert_eq!(
            b,
            BreakEven::NoDifference {
                min_users: 1,
                max_users: 2
            }
        );
        assert_eq!(
            b.describe("hs"),
            "no difference beyond the noise in 1–2 users"
        );
        // Large differences that Welch's test does not find significant are
        // noise as well, however far apart their signs.
        let b = break_even(&[noise(1, 30.0), noise(250, -40.0)]);
        assert_eq!(
            b.describe("hs"),
            "no difference beyond the noise in 1–250 users"
        );
    }

    #[test]
    fn differences_within_the_noise_between_opposite_signs_are_passed_over() {
        // +10% at 25 (counts), +1% and −1.5% at 50 and 60 (noise), −10% at 75
        // (counts): one crossing, between 25 and 75, from the raw +10 and −10.
        let b = break_even(&[p(25, 10.0), p(50, 1.0), p(60, -1.5), p(75, -10.0)]);
        assert_eq!(crossing(&b), vec![50.0]);
        // A measured zero is noise too: the crossing is still interpolated.
        let b = break_even(&[p(1, 6.0), p(10, 0.0), p(25, -3.0)]);
        assert_eq!(crossing(&b), vec![1.0 + 6.0 / 9.0 * 24.0]);
        // The last counting point of one sign and the first of the other:
        // +30 at 1, +5 at 10 (the last positive), −20 at 50 (the first negative).
        let b = break_even(&[p(1, 30.0), p(10, 5.0), p(25, 0.5), p(50, -20.0)]);
        assert_eq!(crossing(&b), vec![10.0 + 5.0 / 25.0 * 40.0]);
    }

    #[test]
    fn one_sign_that_counts_is_no_crossing() {
        // Noise of the other sign does not turn "better throughout" into a crossing.
        let b = break_even(&[p(1, 5.0), p(10, -1.0), p(25, 5.0)]);
        assert_eq!(
            b,
            BreakEven::NoCrossing {
                min_users: 1,
                max_users: 25,
                better_throughout: true,
            }
        );
        let b = break_even(&[noise(1, 40.0), p(250, -3.0)]);
        assert_eq!(
            b.describe("hs"),
            "no crossing in 1–250 users (hs worse throughout)"
        );
    }

    #[test]
    fn no_crossing_names_the_range() {
        let b = break_even(&[p(1, 160.0), p(250, 325.0), p(100, 200.0)]);
        assert_eq!(
            b.describe("hs"),
            "no crossing in 1–250 users (hs better throughout)"
        );
        let b = break_even(&[p(1, -2.5), p(250, -3.0)]);
        assert_eq!(
            b.describe("hs"),
            "no crossing in 1–250 users (hs worse throughout)"
        );
        assert_eq!(
            break_even(&[p(1, 0.0), p(2, 0.0)]).describe("hs"),
            "no difference beyond the noise in 1–2 users"
        );
    }

    #[test]
    fn several_crossings_are_all_reported() {
        let b = break_even(&[p(1, 10.0), p(10, -10.0), p(20, 10.0)]);
        assert_eq!(crossing(&b), vec![5.5, 15.0]);
        assert_eq!(
            b.describe("hs"),
            "throughput difference crosses zero at ~6 and ~15 users (hs better below the first)"
        );
    }

    #[test]
    fn one_user_count_is_too_few() {
        assert_eq!(break_even(&[p(1, 10.0)]), BreakEven::TooFewPoints);
        assert_eq!(break_even(&[]), BreakEven::TooFewPoints);
    }
}
