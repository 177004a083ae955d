//! A candidate against the base: tests matched by name, every metric judged,
//! a verdict per test, and the counts and sentence the study led with.

use serde::Serialize;

use crate::significance::{judge, Judgement, Method, Outcome};
use crate::{Better, CpuSide, FileFigures, Metric, TestFigures, WorkloadKey};

/// What a test's three headline metrics say together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least one headline metric better by more than the noise, none worse.
    Better,
    /// At least one headline metric worse by more than the noise, none better.
    Worse,
    /// Every headline metric shown to be within ± the threshold.
    Same,
    /// No headline metric shown better or worse, and at least one not shown
    /// the same either: the runs cannot tell.
    Inconclusive,
    /// Some headline metrics better, others worse.
    Mixed,
    /// No clean (`ok`) run on at least one side: nothing to judge.
    NoData,
}

impl Verdict {
    /// The verdict of a test whose headline metrics came out as `outcomes`
    /// (metrics a side did not measure are left out).
    pub fn of(outcomes: impl IntoIterator<Item = Outcome>) -> Verdict {
        let (mut better, mut worse, mut unknown) = (false, false, false);
        for o in outcomes {
            match o {
                Outcome::Better => better = true,
                Outcome::Worse => worse = true,
                Outcome::Inconclusive => unknown = true,
                Outcome::Same => {}
            }
        }
        match (better, worse, unknown) {
            (true, true, _) => Verdict::Mixed,
            (true, false, _) => Verdict::Better,
            (false, true, _) => Verdict::Worse,
            (false, false, true) => Verdict::Inconclusive,
            (false, false, false) => Verdict::Same,
        }
    }

    /// The word for it: `better`, `worse`, `same`, `inconclusive`, `mixed`,
    /// `no_data`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "same",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Mixed => "mixed",
            Verdict::NoData => "no_data",
        }
    }
}

/// One metric of one test, base against candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricComparison {
    /// The metric.
    pub metric: Metric,
    /// Which way it is better.
    pub better: Better,
    /// Whether it is one of the three the verdict is made of.
    pub headline: bool,
    /// Means, relative difference and outcome.
    #[serde(flatten)]
    pub judgement: Judgement,
}

/// A headline metric a test's verdict had to do without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingMetric {
    /// The metric.
    pub metric: Metric,
    /// Why: "missing in 1 of 3 ok runs of hs", "not measured in osa", or
    /// "without a relative difference (the base's mean is 0)".
    pub reason: String,
}

/// One test present in both files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestComparison {
    /// The test's name.
    pub name: String,
    /// Its workload and protocol.
    pub workload: WorkloadKey,
    /// Concurrent users.
    pub users: u32,
    /// An open-loop test's offered rate, transactions per second, the same
    /// on both sides; absent (and absent from the JSON) for a closed-loop
    /// test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_per_s: Option<u64>,
    /// Ok runs of the base.
    pub base_runs: u32,
    /// Ok runs of the candidate.
    pub candidate_runs: u32,
    /// Whether either side's runs were unstable (throughput CV over 5%).
    pub unstable: bool,
    /// Every metric both sides measured, in [`Metric::ALL`] order.
    pub metrics: Vec<MetricComparison>,
    /// The verdict from the headline metrics.
    pub verdict: Verdict,
    /// Headline metrics left out of the verdict, and why.
    pub missing_headline: Vec<MissingMetric>,
}

impl TestComparison {
    /// The comparison of `metric`, if both sides measured it.
    pub fn metric(&self, metric: Metric) -> Option<&MetricComparison> {
        self.metrics.iter().find(|m| m.metric == metric)
    }

    /// What the verdict had to do without, in words: "verdict from 2 of 3
    /// headline metrics: server CPU efficiency (system-wide) missing in 1 of 3
    /// ok runs of hs"; `None` when it had all three.
    pub fn verdict_note(&self) -> Option<String> {
        if self.missing_headline.is_empty() {
            return None;
        }
        let used = self.metrics.iter().filter(|m| m.headline).count();
        let total = used + self.missing_headline.len();
        let missing: Vec<String> = self
            .missing_headline
            .iter()
            .map(|m| format!("{} {}", m.metric.label(), m.reason))
            .collect();
        Some(format!(
            "verdict from {used} of {total} headline metrics: {}",
            missing.join("; ")
        ))
    }

    /// The notes beside the verdict in the tables ("unstable", and
    /// [`verdict_note`](Self::verdict_note)), joined by "; ".
    pub fn verdict_notes(&self) -> Option<String> {
        let notes: Vec<String> = self
            .unstable
            .then(|| "unstable".to_string())
            .into_iter()
            .chain(self.verdict_note())
            .collect();
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// How the throughput difference was judged (the method of the test).
    pub fn method(&self) -> Option<Method> {
        self.metric(Metric::Throughput).map(|m| m.judgement.method)
    }
}

/// A test both files have that could not be compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCompared {
    /// The test's name.
    pub name: String,
    /// Always [`Verdict::NoData`]: never better, worse or the same.
    pub verdict: Verdict,
    /// Why, e.g. "no clean run in hs (2 suspect runs excluded)".
    pub reason: String,
}

/// How many compared tests got each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    /// Tests where the candidate is better.
    pub better: usize,
    /// Tests where both are about the same.
    pub same: usize,
    /// Tests where the candidate is worse.
    pub worse: usize,
    /// Tests whose runs show neither a difference nor its absence.
    #[serde(default)]
    pub inconclusive: usize,
    /// Tests with better and worse headline metrics.
    pub mixed: usize,
    /// Tests in both files with no clean run on a side (not in
    /// [`total`](Self::total)).
    #[serde(default)]
    pub no_data: usize,
}

impl VerdictCounts {
    /// Counts of `verdicts`.
    pub fn of(verdicts: impl IntoIterator<Item = Verdict>) -> Self {
        let mut c = VerdictCounts::default();
        for v in verdicts {
            match v {
                Verdict::Better => c.better += 1,
                Verdict::Same => c.same += 1,
                Verdict::Worse => c.worse += 1,
                Verdict::Inconclusive => c.inconclusive += 1,
                Verdict::Mixed => c.mixed += 1,
                Verdict::NoData => c.no_data += 1,
            }
        }
        c
    }

    /// Every test compared (those with no data left out).
    pub fn total(&self) -> usize {
        self.better + self.same + self.worse + self.inconclusive + self.mixed
    }
}

/// A candidate against the base.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateComparison {
    /// The base's label.
    pub base: String,
    /// The candidate's label.
    pub candidate: String,
    /// Tests in both files with an ok run on each side, in the base's order.
    pub tests: Vec<TestComparison>,
    /// Tests only the base has.
    pub only_in_base: Vec<String>,
    /// Tests only the candidate has.
    pub only_in_candidate: Vec<String>,
    /// Tests in both files without an ok run on one side.
    pub not_compared: Vec<NotCompared>,
    /// Suspect runs of the tests in both files, left out (base and candidate).
    pub suspect_excluded: u32,
    /// Verdict counts over [`tests`](Self::tests).
    pub counts: VerdictCounts,
    /// "hs is better in 33 of 45 tests, about the same in 2, worse in 10."
    pub summary: String,
    /// How the differences were judged, in a sentence, with the power the
    /// repeated runs had.
    pub method_note: String,
    /// The median, over the tests with repeated runs on both sides, of the
    /// power their throughput comparison had to find a difference of the
    /// threshold's size (0 to 1); `None` when no test had repeats.
    pub median_power: Option<f64>,
}

impl CandidateComparison {
    /// The comparison of the test named `name`.
    pub fn test(&self, name: &str) -> Option<&TestComparison> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The compared tests of `workload`, by increasing user count (and
    /// offered rate, for open-loop tests).
    pub fn workload(&self, workload: &WorkloadKey) -> Vec<&TestComparison> {
        let mut tests: Vec<&TestComparison> = self
            .tests
            .iter()
            .filter(|t| &t.workload == workload)
            .collect();
        tests.sort_by_key(|t| (t.users, t.offered_per_s));
        tests
    }
}

/// Compares the candidate's tests with the base's of the same name (an
/// open-loop test's name ends in its offered rate, so open-loop tests pair
/// at equal offered load, and never with a closed-loop test): every metric
/// both measured is judged with `threshold_pct` (see [`judge`]), and each
/// test gets a verdict from the headline metrics of `side`.
pub fn compare_tests(
    base: &FileFigures,
    cand: &FileFigures,
    threshold_pct: f64,
    side: CpuSide,
) -> CandidateComparison {
    let headline = Metric::headline(side);
    let mut tests = Vec::new();
    let mut not_compared = Vec::new();
    let mut suspect_excluded = 0u32;
    for b in &base.tests {
        let Some(c) = counterpart(b, cand) else {
            continue;
        };
        suspect_excluded +=
            (b.suspect_runs - b.suspect_included) + (c.suspect_runs - c.suspect_included);
        let missing = [(b, &base.label), (c, &cand.label)]
            .into_iter()
            .filter(|(t, _)| t.ok_runs == 0)
            .map(|(t, label)| {
                if t.suspect_runs > 0 {
                    format!(
                        "{label} ({} suspect run{} excluded)",
                        t.suspect_runs,
                        if t.suspect_runs == 1 { "" } else { "s" }
                    )
                } else {
                    label.to_string()
                }
            })
            .collect::<Vec<_>>();
        if !missing.is_empty() {
            not_compared.push(NotCompared {
                name: b.name.clone(),
                verdict: Verdict::NoData,
                reason: format!("no clean run in {}", missing.join(" and ")),
            });
            continue;
        }
        let metrics: Vec<MetricComparison> = Metric::ALL
            .iter()
            .filter_map(|&m| {
                let judgement = judge(
                    b.values.get(&m)?,
                    c.values.get(&m)?,
                    m.better(),
                    threshold_pct,
                )?;
                Some(MetricComparison {
                    metric: m,
                    better: m.better(),
                    headline: headline.contains(&m),
                    judgement,
                })
            })
            .collect();
        let verdict = Verdict::of(
            metrics
                .iter()
                .filter(|m| m.headline)
                .map(|m| m.judgement.outcome),
        );
        let missing_headline = headline
            .iter()
            .filter(|&&m| !metrics.iter().any(|mc| mc.metric == m))
            .map(|&m| {
                let why: Vec<String> = [b.missing(m, &base.label), c.missing(m, &cand.label)]
                    .into_iter()
                    .flatten()
                    .collect();
                MissingMetric {
                    metric: m,
                    reason: if why.is_empty() {
                        "without a relative difference (the base's mean is 0)".into()
                    } else {
                        why.join(" and ")
                    },
                }
            })
            .collect();
        tests.push(TestComparison {
            missing_headline,
            name: b.name.clone(),
            workload: b.workload.clone(),
            users: b.users,
            offered_per_s: b.offered_rate(),
            base_runs: b.ok_runs,
            candidate_runs: c.ok_runs,
            unstable: b.unstable || c.unstable,
            metrics,
            verdict,
        });
    }
    let only_in_base = base
        .tests
        .iter()
        .filter(|t| counterpart(t, cand).is_none())
        .map(|t| t.name.clone())
        .collect();
    let only_in_candidate = cand
        .tests
        .iter()
        .filter(|t| counterpart(t, base).is_none())
        .map(|t| t.name.clone())
        .collect();
    let mut counts = VerdictCounts::of(tests.iter().map(|t| t.verdict));
    counts.no_data = not_compared.len();
    let mut summary = summary_sentence(&cand.label, &counts);
    if suspect_excluded > 0 {
        summary.push_str(&format!(
            " {suspect_excluded} suspect run{} excluded.",
            if suspect_excluded == 1 {
                " was"
            } else {
                "s were"
            }
        ));
    }
    let median_power = median_power(&tests);
    let method_note = method_note(&tests, threshold_pct, median_power);
    CandidateComparison {
        base: base.label.clone(),
        candidate: cand.label.clone(),
        tests,
        only_in_base,
        only_in_candidate,
        not_compared,
        suspect_excluded,
        counts,
        summary,
        method_note,
        median_power,
    }
}

/// The test of `other` that `test` is compared with: the one of the same
/// name (workload, users, protocol and, for open loop, the offered rate),
/// provided it ran the same way: both closed loop, or both open loop at
/// the same offered rate. An open-loop test is never paired with a
/// closed-loop one, whatever their names.
fn counterpart<'a>(test: &TestFigures, other: &'a FileFigures) -> Option<&'a TestFigures> {
    other
        .test(&test.name)
        .filter(|o| o.offered_rate() == test.offered_rate())
}

/// "hs is better in 33 of 45 tests, about the same in 2, worse in 10." (and
/// ", mixed in N" when some are).
fn summary_sentence(candidate: &str, c: &VerdictCounts) -> String {
    let total = c.total();
    if total == 0 {
        let why = if c.no_data > 0 {
            format!(
                " ({} in common had no clean run on a side: verdict no data)",
                c.no_data
            )
        } else {
            String::new()
        };
        return format!(
            "{candidate} has no test in common with the base that could be compared{why}."
        );
    }
    let tests = if total == 1 { "test" } else { "tests" };
    let mut s = format!(
        "{candidate} is better in {} of {total} {tests}, about the same in {}, worse in {}",
        c.better, c.same, c.worse
    );
    if c.inconclusive > 0 {
        s.push_str(&format!(
            ", inconclusive in {} (the runs show neither a difference nor its absence)",
            c.inconclusive
        ));
    }
    if c.mixed > 0 {
        s.push_str(&format!(
            ", mixed in {} (some headline metrics better, others worse)",
            c.mixed
        ));
    }
    if c.no_data > 0 {
        s.push_str(&format!(
            "; {} more with no data (no clean run on a side)",
            c.no_data
        ));
    }
    s.push('.');
    s
}

/// The median power of the throughput comparisons that had one.
fn median_power(tests: &[TestComparison]) -> Option<f64> {
    let mut powers: Vec<f64> = tests
        .iter()
        .filter_map(|t| t.metric(Metric::Throughput)?.judgement.power)
        .collect();
    if powers.is_empty() {
        return None;
    }
    powers.sort_by(f64::total_cmp);
    let n = powers.len();
    Some(if n % 2 == 1 {
        powers[n / 2]
    } else {
        (powers[n / 2 - 1] + powers[n / 2]) / 2.0
    })
}

/// How the differences were judged, in a sentence naming the constants, and
/// the power the repeated runs had.
fn method_note(tests: &[TestComparison], threshold_pct: f64, power: Option<f64>) -> String {
    let welch = tests
        .iter()
        .filter(|t| t.base_runs >= 2 && t.candidate_runs >= 2)
        .count();
    let with = format!(
        "a difference counts when Welch's t-test finds it significant (p < {}) and it is larger than {threshold_pct}%; \
         it is the same when its 95% interval lies within ±{threshold_pct}%, inconclusive when neither is shown",
        crate::SIGNIFICANCE_LEVEL
    );
    let without = format!(
        "a difference counts when it is larger than {threshold_pct}%; with a single run no significance test is possible (run the suites with --repeat 3 for one)"
    );
    let mut note = if welch == tests.len() {
        format!("Repeated runs on both sides: {with}.")
    } else if welch == 0 {
        format!("No repeated runs: {without}.")
    } else {
        format!(
            "{welch} of {} tests have repeated runs on both sides: there {with}. In the others {without}.",
            tests.len()
        )
    };
    if let Some(p) = power {
        note.push_str(&format!(
            " With these runs the throughput comparisons had a median power of {:.0}% to find a {threshold_pct}% difference{}.",
            p * 100.0,
            if p < 0.8 {
                " (80% is the usual aim: more runs, a narrower confidence-interval target, or a quieter host raise it)"
            } else {
                ""
            }
        ));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_from_the_three_headline_outcomes() {
        use Outcome::*;
        assert_eq!(Verdict::of([Better, Better, Better]), Verdict::Better);
        assert_eq!(Verdict::of([Better, Same, Same]), Verdict::Better);
        assert_eq!(Verdict::of([Same, Same, Same]), Verdict::Same);
        assert_eq!(Verdict::of([Worse, Same, Worse]), Verdict::Worse);
        assert_eq!(Verdict::of([Better, Worse, Same]), Verdict::Mixed);
        assert_eq!(
            Verdict::of([Same, Inconclusive, Same]),
            Verdict::Inconclusive
        );
        // One metric shown better and none shown worse is better.
        assert_eq!(Verdict::of([Better, Inconclusive]), Verdict::Better);
        assert_eq!(Verdict::of([Worse, Inconclusive, Better]), Verdict::Mixed);
        assert_eq!(
            Verdict::of([Same, Same]),
            Verdict::Same,
            "a metric not measured"
        );
    }

    #[test]
    fn the_summary_sentence_reads_like_the_study() {
        let c = VerdictCounts {
            better: 33,
            same: 2,
            worse: 10,
            inconclusive: 0,
            mixed: 0,
            no_data: 0,
        };
        assert_eq!(
            summary_sentence("hs", &c),
            "hs is better in 33 of 45 tests, about the same in 2, worse in 10."
        );
        let c = VerdictCounts {
            better: 1,
            same: 0,
            worse: 0,
            inconclusive: 0,
            mixed: 0,
            no_data: 0,
        };
        assert_eq!(
            summary_sentence("hs", &c),
            "hs is better in 1 of 1 test, about the same in 0, worse in 0."
        );
        let c = VerdictCounts {
            better: 30,
            same: 2,
            worse: 10,
            inconclusive: 0,
            mixed: 3,
            no_data: 0,
        };
        assert!(summary_sentence("hs", &c).starts_with(
            "hs is better in 30 of 45 tests, about the same in 2, worse in 10, mixed in 3"
        ));
        let c = VerdictCounts {
            better: 1,
            same: 2,
            worse: 0,
            inconclusive: 4,
            mixed: 0,
            no_data: 0,
        };
        assert_eq!(
            summary_sentence("hs", &c),
            "hs is better in 1 of 7 tests, about the same in 2, worse in 0, inconclusive in 4 (the runs show neither a difference nor its absence)."
        );
    }
}
