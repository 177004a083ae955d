//! What may make a comparison say more than it should: tests whose runs
//! disagreed or failed, and environments that differ in more than the compared
//! thing (kernel, CPU model and count, MTU, linkperf version, the tests'
//! worker placement).

use serde::Serialize;

use linkperf_measured::Environment;
use linkperf_results::ResultsDocument;

use crate::export::describe_placement;
use crate::{FileFigures, OfferedFigures};

/// A test worth a second look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlaggedTest {
    /// The results file's label.
    pub label: String,
    /// The test's name.
    pub test: String,
    /// Why it is flagged.
    pub reason: String,
}

/// A difference between the base's environment and a candidate's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvDifference {
    /// What differs: `kernel`, `cpu_model`, `cpu_count`, `mtu`,
    /// `linkperf_version`, or `placement` (worker placement of some tests).
    pub field: String,
    /// Whose: `client`, `server`, `file` (the document's own version), or
    /// for `placement` the tests it concerns.
    pub side: String,
    /// The base's label.
    pub base_label: String,
    /// The base's value.
    pub base: String,
    /// The candidate's label.
    pub candidate_label: String,
    /// The candidate's value.
    pub candidate: String,
}

impl EnvDifference {
    /// "MTU (client): 1500 in osa, 9000 in hs".
    pub fn describe(&self) -> String {
        let field = match self.field.as_str() {
            "kernel" => "kernel",
            "cpu_model" => "CPU model",
            "cpu_count" => "CPU count",
            "mtu" => "MTU",
            "linkperf_version" => "linkperf version",
            other => other,
        };
        let side = if self.side == "file" {
            String::new()
        } else {
            format!(" ({})", self.side)
        };
        format!(
            "{field}{side}: {} in {}, {} in {}",
            self.base, self.base_label, self.candidate, self.candidate_label
        )
    }
}

/// Everything the report points out about the trust one may put in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Consistency {
    /// Tests whose throughput varied by more than 5% (CV) across their runs.
    pub unstable: Vec<FlaggedTest>,
    /// Tests with failed or aborted runs.
    pub failed: Vec<FlaggedTest>,
    /// Tests with suspect runs (a validity check failed), left out.
    #[serde(default)]
    pub suspect: Vec<FlaggedTest>,
    /// Tests with a metric that some ok runs have and others lack (it is
    /// left out of the test).
    pub incomplete: Vec<FlaggedTest>,
    /// Environment fields that differ between the base and a candidate.
    pub environment: Vec<EnvDifference>,
    /// Tests that ran with another worker placement (threads, CPUs, policy)
    /// in a candidate than in the base.
    #[serde(default)]
    pub placement: Vec<EnvDifference>,
    /// Open-loop tests compared at the same offered rate whose arrivals
    /// were spaced otherwise, or whose connections could have another
    /// number of transactions outstanding, in a candidate than in the base
    /// (absent from the JSON when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offered: Vec<String>,
    /// Notes on the link capacity (a path faster than the capacity given).
    pub capacity: Vec<String>,
    /// Files whose uploads were counted at the sender (v1 files, foreign servers).
    #[serde(default)]
    pub counting: Vec<String>,
    /// Where instability cannot be judged: tests with a single ok run, whose
    /// variation is unknown (`None` when every test was repeated).
    pub stability_unjudged: Option<String>,
}

impl Consistency {
    /// Whether there is nothing to point out.
    pub fn is_empty(&self) -> bool {
        self.unstable.is_empty()
            && self.failed.is_empty()
            && self.suspect.is_empty()
            && self.incomplete.is_empty()
            && self.environment.is_empty()
            && self.placement.is_empty()
            && self.offered.is_empty()
            && self.capacity.is_empty()
            && self.counting.is_empty()
            && self.stability_unjudged.is_none()
    }
}

/// How to learn how much runs vary.
const REPEAT_HINT: &str = "repeat each test's runs, three times or more, to see how much they vary";

/// Says where instability cannot be judged: tests with a single ok run (tests
/// without an ok run are failed, and said so elsewhere). `None` when every
/// test with an ok run was repeated.
pub(crate) fn stability_unjudged(files: &[FileFigures]) -> Option<String> {
    let counts: Vec<(&str, usize, usize)> = files
        .iter()
        .map(|f| {
            let ran = f.tests.iter().filter(|t| t.ok_runs > 0).count();
            let single = f.tests.iter().filter(|t| t.ok_runs == 1).count();
            (f.label.as_str(), single, ran)
        })
        .collect();
    let single: usize = counts.iter().map(|c| c.1).sum();
    let ran: usize = counts.iter().map(|c| c.2).sum();
    if single == 0 {
        None
    } else if single == ran {
        let every = if ran == 1 {
            "the test has a single run"
        } else {
            "every test has a single run"
        };
        Some(format!(
            "Instability cannot be judged: {every} ({REPEAT_HINT})."
        ))
    } else {
        let each: Vec<String> = counts
            .iter()
            .filter(|c| c.1 > 0)
            .map(|(label, single, ran)| format!("{single} of {ran} in {label}"))
            .collect();
        Some(format!(
            "Instability cannot be judged for the tests with a single run: {} ({REPEAT_HINT}).",
            each.join(", ")
        ))
    }
}

/// Unstable tests and tests with failed runs of one file.
pub(crate) fn flag_tests(figures: &FileFigures, c: &mut Consistency) {
    for t in &figures.tests {
        if t.unstable {
            let cv = t
                .throughput_cv
                .map(|cv| format!("throughput CV {:.1}%", cv * 100.0))
                .unwrap_or_else(|| "throughput varied".into());
            c.unstable.push(FlaggedTest {
                label: figures.label.clone(),
                test: t.name.clone(),
                reason: format!("{cv} over {} runs (more than 5%)", t.ok_runs),
            });
        }
        // Metrics some ok runs lack and others have, grouped by how many lack them.
        let mut partial: Vec<(u32, Vec<&str>)> = Vec::new();
        for (m, &n) in &t.missing_runs {
            if n >= t.ok_runs {
                continue;
            }
            match partial.iter_mut().find(|(k, _)| *k == n) {
                Some((_, names)) => names.push(m.label()),
                None => partial.push((n, vec![m.label()])),
            }
        }
        if !partial.is_empty() {
            let each: Vec<String> = partial
                .iter()
                .map(|(n, names)| {
                    format!(
                        "{} missing in {n} of {} ok runs",
                        names.join(", "),
                        t.ok_runs
                    )
                })
                .collect();
            c.incomplete.push(FlaggedTest {
                label: figures.label.clone(),
                test: t.name.clone(),
                reason: format!("{}: left out of this test", each.join("; ")),
            });
        }
        if t.suspect_runs > 0 {
            c.suspect.push(FlaggedTest {
                label: figures.label.clone(),
                test: t.name.clone(),
                reason: format!(
                    "{} of {} runs suspect, left out ({})",
                    t.suspect_runs,
                    t.runs,
                    t.suspect_reasons.join("; ")
                ),
            });
        }
        let not_completed = t.runs - t.ok_runs - t.suspect_runs;
        if not_completed > 0 {
            c.failed.push(FlaggedTest {
                label: figures.label.clone(),
                test: t.name.clone(),
                reason: format!("{} of {} runs failed or aborted", not_completed, t.runs),
            });
        }
    }
}

/// The fields of an environment that a comparison must hold equal.
fn fields(e: &Environment) -> [(&'static str, String); 5] {
    [
        ("kernel", e.kernel.clone()),
        ("cpu_model", e.cpu_model.clone()),
        ("cpu_count", e.cpu_count.to_string()),
        (
            "mtu",
            e.mtu
                .map_or_else(|| "unknown".to_string(), |m| m.to_string()),
        ),
        ("linkperf_version", e.linkperf_version.clone()),
    ]
}

/// Differences in kernel, CPU count, MTU and linkperf version between the
/// base's environment and the candidate's, on each side. A side that one file
/// does not describe is not a difference.
pub(crate) fn environment_differences(
    base: (&str, &ResultsDocument),
    cand: (&str, &ResultsDocument),
) -> Vec<EnvDifference> {
    let diff = |field: &str, side: &str, b: String, c: String| EnvDifference {
        field: field.to_string(),
        side: side.to_string(),
        base_label: base.0.to_string(),
        base: b,
        candidate_label: cand.0.to_string(),
        candidate: c,
    };
    let mut out = Vec::new();
    let sides = [
        (
            "client",
            base.1.environment.client.as_ref(),
            cand.1.environment.client.as_ref(),
        ),
        (
            "server",
            base.1.environment.server.as_ref(),
            cand.1.environment.server.as_ref(),
        ),
    ];
    for (side, b, c) in sides {
        let (Some(b), Some(c)) = (b, c) else { continue };
        for ((field, bv), (_, cv)) in fields(b).into_iter().zip(fields(c)) {
            if bv != cv {
                out.push(diff(field, side, bv, cv));
            }
        }
    }
    let has_version = out.iter().any(|d| d.field == "linkperf_version");
    if !has_version && base.1.linkperf_version != cand.1.linkperf_version {
        out.push(diff(
            "linkperf_version",
            "file",
            base.1.linkperf_version.clone(),
            cand.1.linkperf_version.clone(),
        ));
    }
    out
}

/// The tests that ran with another worker placement in `cand` than in
/// `base` (threads, CPU lists, policy on either side), one difference per
/// distinct pair of placements with the tests it concerns: on one host a
/// request/response result depends on whether the sides share CPUs.
pub(crate) fn placement_differences(
    base: (&str, &ResultsDocument),
    cand: (&str, &ResultsDocument),
) -> Vec<EnvDifference> {
    let describe = |c: &linkperf_results::TestConfig| {
        format!(
            "client {}, server {}",
            describe_placement(&c.client_placement),
            describe_placement(&c.server_placement)
        )
    };
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for bt in &base.1.tests {
        let Some(ct) = cand.1.find_test(&bt.name) else {
            continue;
        };
        let (b, c) = (describe(&bt.config), describe(&ct.config));
        if b == c {
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == b && g.1 == c) {
            Some(g) => g.2.push(&bt.name),
            None => groups.push((b, c, vec![&bt.name])),
        }
    }
    groups
        .into_iter()
        .map(|(b, c, tests)| EnvDifference {
            field: "placement".to_string(),
            side: tests.join(", "),
            base_label: base.0.to_string(),
            base: b,
            candidate_label: cand.0.to_string(),
            candidate: c,
        })
        .collect()
}

/// The open-loop tests of `cand` compared with the base's at the same
/// offered rate whose load was otherwise not the same (the arrivals'
/// spacing, the transactions a connection could have outstanding), one
/// sentence per distinct pair of loads with the tests it concerns: the
/// difference of the generators is part of every difference of theirs.
pub(crate) fn offered_differences(base: &FileFigures, cand: &FileFigures) -> Vec<String> {
    let describe = |o: &OfferedFigures| {
        format!(
            "{} arrivals, at most {} outstanding per connection",
            o.arrival, o.max_outstanding
        )
    };
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for bt in &base.tests {
        let Some(b) = bt.offered else { continue };
        let Some(c) = cand.test(&bt.name).and_then(|ct| ct.offered) else {
            continue;
        };
        let alike = b.arrival == c.arrival && b.max_outstanding == c.max_outstanding;
        if b.rate_per_s != c.rate_per_s || alike {
            continue;
        }
        let (b, c) = (describe(&b), describe(&c));
        match groups.iter_mut().find(|g| g.0 == b && g.1 == c) {
            Some(g) => g.2.push(&bt.name),
            None => groups.push((b, c, vec![&bt.name])),
        }
    }
    groups
        .into_iter()
        .map(|(b, c, tests)| {
            format!(
                "Offered load differs in {}: {b} in {}; {c} in {}. The generators' difference is part of every difference of these tests: rerun both alike (--arrival, --max-outstanding).",
                tests.join(", "),
                base.label,
                cand.label
            )
        })
        .collect()
}
