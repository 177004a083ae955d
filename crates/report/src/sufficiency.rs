//! "Is the link sufficient?": for a results file whose link capacity is known,
//! the user count of a workload from which the link no longer carries it
//! cleanly, the question the seeds' interconnect study answers for its 1 Gb
//! network ("not sufficient from 60 users").
//!
//! A user count is **not sufficient** when any of:
//!
//! * the wire in the busier direction ran at [`WIRE_SHARE`] (95%) of the
//!   capacity or more, read from the sending interface's own counters (its
//!   root queue's bytes: every segment with its headers), or, where a file has
//!   no such counters, from the payload rate (which understates the wire by
//!   the headers: 1448 of 1514 bytes for full TCP segments);
//! * UDP transactions were lost (no answer within the timeout: the
//!   application's retries, as the study's "request retries");
//! * the link's queues dropped [`DROP_SHARE`] (0.1%) of the packets or more.
//!
//! The wire rule is held against the runs' spread: where the 95 % interval
//! of the mean rate over a user count's runs straddles [`WIRE_SHARE`] (a
//! link at 94–96 % of the wire), the runs cannot tell which side of the rule
//! the link is on, and the answer from there is **inconclusive**, not a
//! verdict that the next run's noise would flip. A single run has no spread
//! and is judged on its figure.
//!
//! The finding names what was seen at that user count, and the p99
//! transaction time against the base's at the same test ("6.1× veth's"), the
//! cost a user of the link pays. A file whose every user count is clean is
//! **sufficient up to** its largest one, with the largest share of the wire
//! it used.

use serde::Serialize;

use linkperf_workload::BitsPerSecond;

use crate::units::capacity;

/// Share of the capacity the wire's busier direction may reach before the
/// link counts as not sufficient: 95%.
pub const WIRE_SHARE: f64 = 0.95;

/// Share of packets the link's queues may drop before it counts as not
/// sufficient: 0.1%.
pub const DROP_SHARE: f64 = 0.001;

/// One user count of one workload in one results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SufficiencyPoint {
    /// Concurrent users.
    pub users: u32,
    /// The busier direction's rate, bits/s, and whether it is the wire's
    /// (headers included) or only the payload's.
    pub bits_per_s: Option<f64>,
    /// The 95 % interval of `bits_per_s` over the runs, low and high;
    /// `None` for a single run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_s_interval: Option<(f64, f64)>,
    /// Whether `bits_per_s` was read from the interface (else the payload).
    pub wire: bool,
    /// The interface that carried the busier direction.
    pub interface: Option<String>,
    /// Share of packets dropped on the way out, 0 to 1 (mean over the runs).
    pub drop_ratio: f64,
    /// Packets dropped over the ok runs.
    pub drops: u64,
    /// UDP transactions lost over the ok runs.
    pub lost: u64,
    /// Mean p99 transaction time, µs.
    pub p99_us: Option<f64>,
    /// The base's mean p99 transaction time at the same test, µs (absent for
    /// the base itself).
    pub base_p99_us: Option<f64>,
}

/// The answer for one workload of one results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Sufficiency {
    /// From `from_users` on, the link does not carry the workload cleanly.
    NotSufficient {
        /// The first user count that fails.
        from_users: u32,
        /// Its figures.
        at: SufficiencyPoint,
        /// The link's capacity, bits/s.
        capacity_bits_per_s: f64,
        /// The base's label, when `at` has the base's p99.
        base: Option<String>,
    },
    /// From `from_users` on, the runs' spread straddles the wire rule: they
    /// cannot tell whether the link carries the workload cleanly.
    Inconclusive {
        /// The first user count that cannot be told.
        from_users: u32,
        /// Its figures.
        at: SufficiencyPoint,
        /// The link's capacity, bits/s.
        capacity_bits_per_s: f64,
    },
    /// Every user count measured was carried cleanly.
    Sufficient {
        /// The largest user count measured.
        up_to_users: u32,
        /// The largest share of the capacity the busier direction used.
        max_share: Option<f64>,
        /// Whether that share was read from the wire (else the payload).
        wire: bool,
        /// The link's capacity, bits/s.
        capacity_bits_per_s: f64,
    },
}

/// Where a rate falls against the wire rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Below,
    /// The runs' interval straddles it.
    Across,
    AtOrAbove,
}

impl SufficiencyPoint {
    /// The rate against the wire rule, its runs' spread considered.
    fn wire_rule(&self, cap: f64) -> Option<Rule> {
        let limit = cap * WIRE_SHARE;
        let b = self.bits_per_s?;
        Some(match self.bits_per_s_interval {
            Some((low, high)) if low < limit && high >= limit => Rule::Across,
            _ if b >= limit => Rule::AtOrAbove,
            _ => Rule::Below,
        })
    }

    /// Why this point is not sufficient, in words; empty when it is (or
    /// when its runs cannot tell: [`Rule::Across`]).
    fn failures(&self, cap: f64) -> Vec<String> {
        let mut why = Vec::new();
        if let (Some(b), Some(Rule::AtOrAbove)) = (self.bits_per_s, self.wire_rule(cap)) {
            why.push(self.share_words(b / cap));
        }
        if self.lost > 0 {
            why.push(lost_words(self.lost));
        }
        if self.drops > 0 && self.drop_ratio >= DROP_SHARE {
            why.push(drop_words(self.drop_ratio, self.drops));
        }
        why
    }

    fn share_words(&self, share: f64) -> String {
        let what = if self.wire {
            "the wire"
        } else {
            "the link (payload)"
        };
        format!("{:.0}% of {what}", share * 100.0)
    }
}

fn lost_words(n: u64) -> String {
    format!("{n} lost transaction{}", if n == 1 { "" } else { "s" })
}

fn drop_words(ratio: f64, drops: u64) -> String {
    format!(
        "{:.2}% of packets dropped by its queue ({drops})",
        ratio * 100.0
    )
}

/// Judges a workload's user counts (any order) against `cap`; `None` when
/// there is no point with a rate to judge.
pub fn sufficiency(
    points: &[SufficiencyPoint],
    cap: BitsPerSecond,
    base_label: Option<&str>,
) -> Option<Sufficiency> {
    let mut pts: Vec<&SufficiencyPoint> = points.iter().collect();
    pts.sort_by_key(|p| p.users);
    let c = cap.as_f64();
    if c <= 0.0 || pts.iter().all(|p| p.bits_per_s.is_none() && p.lost == 0) {
        return None;
    }
    let first = pts
        .iter()
        .find(|p| !p.failures(c).is_empty() || p.wire_rule(c) == Some(Rule::Across));
    if let Some(p) = first.filter(|p| p.failures(c).is_empty()) {
        return Some(Sufficiency::Inconclusive {
            from_users: p.users,
            at: (*p).clone(),
            capacity_bits_per_s: c,
        });
    }
    if let Some(p) = first {
        return Some(Sufficiency::NotSufficient {
            from_users: p.users,
            at: (*p).clone(),
            capacity_bits_per_s: c,
            base: base_label
                .filter(|_| p.base_p99_us.is_some())
                .map(str::to_string),
        });
    }
    let last = pts.last()?;
    let max_share = pts
        .iter()
        .filter_map(|p| p.bits_per_s)
        .map(|b| b / c)
        .reduce(f64::max);
    Some(Sufficiency::Sufficient {
        up_to_users: last.users,
        max_share,
        wire: pts.iter().all(|p| p.wire || p.bits_per_s.is_none()),
        capacity_bits_per_s: c,
    })
}

impl Sufficiency {
    /// Whether the link was found not sufficient.
    pub fn is_insufficient(&self) -> bool {
        matches!(self, Sufficiency::NotSufficient { .. })
    }

    /// The answer in words: "veth-1g is not sufficient for rr1c-200x30k from
    /// 40 users: 98% of the wire, p99 transaction time 6.1× veth's, 187 lost
    /// transactions".
    pub fn describe(&self, label: &str, workload: &str) -> String {
        match self {
            Sufficiency::NotSufficient {
                from_users,
                at,
                capacity_bits_per_s,
                base,
            } => {
                let cap = *capacity_bits_per_s;
                let mut parts = Vec::new();
                if let Some(b) = at.bits_per_s {
                    parts.push(at.share_words(b / cap));
                }
                if let (Some(p), Some(bp), Some(base)) = (at.p99_us, at.base_p99_us, base) {
                    if bp > 0.0 {
                        parts.push(format!("p99 transaction time {:.1}× {base}'s", p / bp));
                    }
                }
                if at.lost > 0 {
                    parts.push(lost_words(at.lost));
                }
                if at.drops > 0 {
                    parts.push(drop_words(at.drop_ratio, at.drops));
                }
                format!(
                    "{label} is not sufficient for {workload} from {}: {} (its capacity {})",
                    users(*from_users),
                    parts.join(", "),
                    capacity(cap)
                )
            }
            Sufficiency::Inconclusive {
                from_users,
                at,
                capacity_bits_per_s,
            } => {
                let cap = *capacity_bits_per_s;
                let what = if at.wire {
                    "the wire"
                } else {
                    "the link (payload)"
                };
                let (low, high) = at.bits_per_s_interval.unwrap_or_default();
                format!(
                    "whether {label} is sufficient for {workload} from {} cannot be told: its runs put it at {:.1}–{:.1}% of {what} (95% interval), across the {:.0}% rule; more runs would say (its capacity {})",
                    users(*from_users),
                    low / cap * 100.0,
                    high / cap * 100.0,
                    WIRE_SHARE * 100.0,
                    capacity(cap)
                )
            }
            Sufficiency::Sufficient {
                up_to_users,
                max_share,
                wire,
                capacity_bits_per_s,
            } => {
                let share = max_share.map_or_else(String::new, |s| {
                    let what = if *wire {
                        "the wire"
                    } else {
                        "the link (payload)"
                    };
                    format!(" at most {:.0}% of {what},", s * 100.0)
                });
                format!(
                    "{label} is sufficient for {workload} up to {}:{share} no lost transactions, no queue drops to speak of (its capacity {})",
                    users(*up_to_users),
                    capacity(*capacity_bits_per_s)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(users: u32, gbit: f64) -> SufficiencyPoint {
        SufficiencyPoint {
            users,
            bits_per_s: Some(gbit * 1e9),
            bits_per_s_interval: None,
            wire: true,
            interface: Some("lp-s1".into()),
            drop_ratio: 0.0,
            drops: 0,
            lost: 0,
            p99_us: Some(300.0),
            base_p99_us: Some(100.0),
        }
    }

    const GIG: BitsPerSecond = BitsPerSecond(1_000_000_000);

    #[test]
    fn the_first_user_count_at_95_percent_of_the_wire_is_not_sufficient() {
        let pts = [p(80, 0.99), p(1, 0.10), p(40, 0.98), p(10, 0.60)];
        let s = sufficiency(&pts, GIG, Some("veth")).unwrap();
        assert!(s.is_insufficient());
        assert_eq!(
            s.describe("veth-1g", "rr1c-200x30k"),
            "veth-1g is not sufficient for rr1c-200x30k from 40 users: 98% of the wire, p99 transaction time 3.0× veth's (its capacity 1 Gbit/s)"
        );
    }

    #[test]
    fn losses_and_queue_drops_fail_a_link_below_the_wire_rule() {
        // Payload-only figures at 93%: the headers hide the rest; losses say it.
        let mut lossy = p(40, 0.93);
        lossy.wire = false;
        lossy.lost = 187;
        let s = sufficiency(&[p(20, 0.5), lossy], GIG, Some("veth")).unwrap();
        assert_eq!(
            s.describe("veth-1g", "mix"),
            "veth-1g is not sufficient for mix from 40 users: 93% of the link (payload), p99 transaction time 3.0× veth's, 187 lost transactions (its capacity 1 Gbit/s)"
        );
        let mut dropping = p(10, 0.5);
        dropping.drops = 40;
        dropping.drop_ratio = 0.002;
        let s = sufficiency(&[dropping], GIG, None).unwrap();
        assert_eq!(
            s.describe("1g", "str-readx30k"),
            "1g is not sufficient for str-readx30k from 10 users: 50% of the wire, 0.20% of packets dropped by its queue (40) (its capacity 1 Gbit/s)"
        );
        // A few drops below 0.1% are a queue doing its job.
        let mut few = p(10, 0.5);
        few.drops = 3;
        few.drop_ratio = 0.0001;
        assert!(!sufficiency(&[few], GIG, None).unwrap().is_insufficient());
    }

    #[test]
    fn a_clean_link_is_sufficient_up_to_its_largest_user_count() {
        let s = sufficiency(&[p(1, 0.05), p(50, 0.62)], GIG, Some("veth")).unwrap();
        assert_eq!(
            s.describe("veth-1g", "rr1c-1x1"),
            "veth-1g is sufficient for rr1c-1x1 up to 50 users: at most 62% of the wire, no lost transactions, no queue drops to speak of (its capacity 1 Gbit/s)"
        );
        // Nothing to judge by: no answer.
        let mut blind = p(1, 0.0);
        blind.bits_per_s = None;
        assert_eq!(sufficiency(&[blind], GIG, None), None);
    }

    /// Issue 32, point 3: a link at 94–96 % of the wire must not flip
    /// between sufficient and not on its runs' noise.
    #[test]
    fn a_link_whose_runs_straddle_the_rule_is_inconclusive() {
        let spread = |gbit: f64, low: f64, high: f64| {
            let mut q = p(40, gbit);
            q.bits_per_s_interval = Some((low * 1e9, high * 1e9));
            q
        };
        // Means of 0.945 and 0.955: either side of the rule, the same answer.
        for mean in [0.945, 0.955] {
            let s =
                sufficiency(&[p(10, 0.5), spread(mean, 0.94, 0.96)], GIG, Some("veth")).unwrap();
            assert!(
                matches!(s, Sufficiency::Inconclusive { from_users: 40, .. }),
                "{s:?}"
            );
            assert!(!s.is_insufficient());
            assert_eq!(
                s.describe("veth-1g", "str-readx30k"),
                "whether veth-1g is sufficient for str-readx30k from 40 users cannot be told: its runs put it at 94.0–96.0% of the wire (95% interval), across the 95% rule; more runs would say (its capacity 1 Gbit/s)"
            );
        }
        // Clear of the rule either way: a verdict.
        let above = sufficiency(&[spread(0.975, 0.96, 0.99)], GIG, None).unwrap();
        assert!(above.is_insufficient());
        let below = sufficiency(&[spread(0.90, 0.88, 0.92)], GIG, None).unwrap();
        assert!(matches!(below, Sufficiency::Sufficient { .. }), "{below:?}");
        // Losses are counted, not estimated: they decide whatever the spread.
        let mut lossy = spread(0.95, 0.94, 0.96);
        lossy.lost = 12;
        assert!(sufficiency(&[lossy], GIG, None).unwrap().is_insufficient());
        // A clear failure at fewer users comes first.
        let s = sufficiency(&[p(10, 0.97), spread(0.95, 0.94, 0.96)], GIG, None).unwrap();
        assert!(matches!(
            s,
            Sufficiency::NotSufficient { from_users: 10, .. }
        ));
    }
}
