//! Break-even: the user count at which a candidate's throughput advantage turns
//! into a disadvantage (or the reverse), found by linear interpolation between
//! the two measured user counts whose relative differences have opposite signs
//! (the secant through the two neighbouring points, as the study read its
//! "break-even point ... at ~50 users" off its figure).

use serde::Serialize;

use crate::units::about;

/// Where the throughput difference of one workload crosses zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BreakEven {
    /// The difference changes sign between measured user counts.
    Crossing {
        /// Interpolated user counts where it crosses zero, in increasing order.
        at_users: Vec<f64>,
        /// Whether the candidate is better below the first crossing.
        better_below: bool,
    },
    /// The difference has one sign (or is zero) over every measured user count.
    NoCrossing {
        /// Smallest user count measured.
        min_users: u32,
        /// Largest user count measured.
        max_users: u32,
        /// Whether the candidate is better (`Some(true)`), worse (`Some(false)`)
        /// throughout, or equal everywhere (`None`).
        better_throughout: Option<bool>,
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
                let how = match better_throughout {
                    Some(true) => format!(" ({candidate} better throughout)"),
                    Some(false) => format!(" ({candidate} worse throughout)"),
                    None => String::new(),
                };
                format!("no crossing in {min_users}–{max_users} users{how}")
            }
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

/// Finds where the throughput difference crosses zero. `points` are (user
/// count, relative difference in percent, positive = candidate better), in
/// any order; each sign change between neighbouring user counts `(u1, d1)`,
/// `(u2, d2)` gives the crossing `u1 + d1 / (d1 − d2) × (u2 − u1)`. A
/// difference of exactly zero at a measured user count between two of
/// opposite signs is a crossing at that count.
pub fn break_even(points: &[(u32, f64)]) -> BreakEven {
    let mut pts: Vec<(u32, f64)> = points
        .iter()
        .copied()
        .filter(|(_, d)| d.is_finite())
        .collect();
    pts.sort_by_key(|(u, _)| *u);
    if pts.len() < 2 {
        return BreakEven::TooFewPoints;
    }
    // Zeros are crossings only between opposite signs: compare each non-zero
    // difference with the previous non-zero one.
    let mut at_users = Vec::new();
    let mut first_sign = None;
    let mut prev: Option<(u32, f64)> = None;
    let mut zero_run_start: Option<u32> = None;
    for &(u, d) in &pts {
        if d == 0.0 {
            zero_run_start.get_or_insert(u);
            continue;
        }
        if let Some((pu, pd)) = prev {
            if (pd > 0.0) != (d > 0.0) {
                let x = match zero_run_start {
                    Some(z) => f64::from(z),
                    None => f64::from(pu) + pd / (pd - d) * f64::from(u - pu),
                };
                at_users.push(x);
            }
        }
        first_sign.get_or_insert(d > 0.0);
        prev = Some((u, d));
        zero_run_start = None;
    }
    let (min_users, max_users) = (pts[0].0, pts[pts.len() - 1].0);
    match first_sign {
        Some(better_below) if !at_users.is_empty() => BreakEven::Crossing {
            at_users,
            better_below,
        },
        better_throughout => BreakEven::NoCrossing {
            min_users,
            max_users,
            better_throughout,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crossing(b: &BreakEven) -> Vec<f64> {
        match b {
            BreakEven::Crossing { at_users, .. } => at_users.clone(),
            other => panic!("no crossing: {other:?}"),
        }
    }

    #[test]
    fn interpolates_between_the_user_counts_around_zero() {
        // +20% at 25 users, −10% at 75: zero at 25 + 20 / 30 × 50 = 58.33.
        let b = break_even(&[(1, 250.0), (25, 20.0), (75, -10.0), (250, -50.0)]);
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
        let b = break_even(&[(75, -10.0), (25, 10.0), (10, 40.0)]);
        assert_eq!(crossing(&b), vec![50.0]);
        assert!(b.describe("hs").starts_with("break-even at ~50 users"));
    }

    #[test]
    fn worse_below_and_better_above() {
        let b = break_even(&[(1, -30.0), (10, 30.0)]);
        assert_eq!(crossing(&b), vec![5.5]);
        assert_eq!(
            b.describe("hs"),
            "break-even at ~6 users (hs worse below, better above)"
        );
    }

    #[test]
    fn a_measured_zero_between_opposite_signs_is_the_crossing() {
        let b = break_even(&[(1, 5.0), (10, 0.0), (25, -5.0)]);
        assert_eq!(crossing(&b), vec![10.0]);
        // A zero that does not separate opposite signs is not a crossing.
        let b = break_even(&[(1, 5.0), (10, 0.0), (25, 5.0)]);
        assert!(matches!(
            b,
            BreakEven::NoCrossing {
                better_throughout: Some(true),
                ..
            }
        ));
    }

    #[test]
    fn no_crossing_names_the_range() {
        let b = break_even(&[(1, 160.0), (250, 325.0), (100, 200.0)]);
        assert_eq!(
            b.describe("hs"),
            "no crossing in 1–250 users (hs better throughout)"
        );
        let b = break_even(&[(1, -1.0), (250, -3.0)]);
        assert_eq!(
            b.describe("hs"),
            "no crossing in 1–250 users (hs worse throughout)"
        );
        assert_eq!(
            break_even(&[(1, 0.0), (2, 0.0)]).describe("hs"),
            "no crossing in 1–2 users"
        );
    }

    #[test]
    fn several_crossings_are_all_reported() {
        let b = break_even(&[(1, 10.0), (10, -10.0), (20, 10.0)]);
        assert_eq!(crossing(&b), vec![5.5, 15.0]);
        assert_eq!(
            b.describe("hs"),
            "throughput difference crosses zero at ~6 and ~15 users (hs better below the first)"
        );
    }

    #[test]
    fn one_user_count_is_too_few() {
        assert_eq!(break_even(&[(1, 10.0)]), BreakEven::TooFewPoints);
        assert_eq!(break_even(&[]), BreakEven::TooFewPoints);
    }
}
