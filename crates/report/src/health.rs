//! "Is this path healthy?": the closing verdict of a suite, above all of
//! the health check `linkperf suite quick`, from the results document alone.
//!
//! The verdict is made of what the run itself checked and measured, against
//! a stated reference:
//!
//! * a test whose runs all failed (no run completed) makes the path
//!   **degraded**, with the error;
//! * of the tests with a clean (`ok`) run, failed or lost transactions make
//!   it **degraded**; on loopback (the client's traffic went over `lo`: the
//!   path is the host's memory) so does a figure under the loopback
//!   reference: a TCP or Unix stream under [`LOOPBACK_MIN_STREAM_BITS_PER_S`]
//!   (100 Mbit/s), a closed-loop request/response test under
//!   [`LOOPBACK_MIN_TRANSACTIONS_PER_S`] (1,000 transactions per second, all
//!   users together). Both are floors any working host clears many times
//!   over (a 2-CPU virtual machine under a load of 10 measured 1.4–24 Gbit/s
//!   and 21,000–130,000 transactions per second, docs/suites.md): below them
//!   something sits in the path (shaping or netem on `lo`, a firewall, a
//!   starved machine). Paced UDP streams, open loops and profiles carry what
//!   they were asked to and have no floor. Elsewhere linkperf knows no
//!   capacity to hold the figures to, and the verdict says so;
//! * a test with only suspect runs cannot be believed either way: without a
//!   finding elsewhere the verdict is **inconclusive**, naming the checks;
//! * otherwise the path is **healthy** against that reference.

use serde::Serialize;

use linkperf_results::{ResultsDocument, RunStatus};
use linkperf_workload::{Protocol, Workload};

use crate::figures::TestFigures;
use crate::units::rate;
use crate::Metric;

/// The least a TCP or Unix stream carries over loopback, bits per second.
pub const LOOPBACK_MIN_STREAM_BITS_PER_S: f64 = 1e8;

/// The fewest transactions per second (all users together) a closed-loop
/// request/response test completes over loopback.
pub const LOOPBACK_MIN_TRANSACTIONS_PER_S: f64 = 1000.0;

/// What the figures were held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// The loopback floors: the path is the host's memory.
    Loopback,
    /// The run's own checks only: the path's capacity is not known.
    ChecksOnly,
}

/// The verdict on a suite's path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Health {
    /// Every test ran clean and met the reference.
    Healthy {
        /// Tests judged.
        tests: usize,
        /// What they were held to.
        reference: Reference,
    },
    /// Something the clean runs measured, or a test that never completed,
    /// says the path does not carry the workloads as it should.
    Degraded {
        /// What was found, one finding per test.
        findings: Vec<String>,
        /// Tests with only suspect runs, not judged.
        unjudged: usize,
        /// What the figures were held to.
        reference: Reference,
    },
    /// Nothing found against the path, but some tests had no run to believe.
    Inconclusive {
        /// The tests without a clean run.
        unjudged: Vec<String>,
        /// The checks their runs failed, each with how many runs failed it.
        checks: Vec<(String, usize)>,
        /// Tests in all.
        tests: usize,
    },
    /// The document has no test.
    Empty,
}

/// The verdict on the path `doc`'s suite measured.
pub fn health(doc: &ResultsDocument) -> Health {
    if doc.tests.is_empty() {
        return Health::Empty;
    }
    let reference = if doc
        .environment
        .client
        .as_ref()
        .and_then(|e| e.interface.as_deref())
        == Some("lo")
    {
        Reference::Loopback
    } else {
        Reference::ChecksOnly
    };
    let mut findings = Vec::new();
    let mut unjudged = Vec::new();
    let mut checks: Vec<(String, usize)> = Vec::new();
    for t in &doc.tests {
        let f = TestFigures::of(t);
        if f.ok_runs == 0 {
            if let Some(r) = t.runs.iter().find(|r| r.status == RunStatus::Failed) {
                findings.push(format!(
                    "{} failed ({})",
                    t.name,
                    r.error.as_deref().unwrap_or("no error recorded")
                ));
                continue;
            }
            unjudged.push(t.name.clone());
            for r in &t.runs {
                let names: Vec<&str> = if r.status == RunStatus::Suspect {
                    r.status_reasons
                        .iter()
                        .map(|w| w.split(':').next().unwrap_or(w))
                        .collect()
                } else {
                    vec!["interrupted"]
                };
                for n in names {
                    match checks.iter_mut().find(|(c, _)| c == n) {
                        Some((_, k)) => *k += 1,
                        None => checks.push((n.to_string(), 1)),
                    }
                }
            }
            continue;
        }
        let errors: u64 = t
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok)
            .map(|r| r.errors)
            .sum();
        if errors > 0 {
            findings.push(format!(
                "{}: {errors} failed or lost transaction{}",
                t.name,
                if errors == 1 { "" } else { "s" }
            ));
            continue;
        }
        if reference == Reference::Loopback {
            if let Some(short) = under_loopback_floor(t, &f) {
                findings.push(short);
            }
        }
    }
    checks.sort_by_key(|c| std::cmp::Reverse(c.1));
    if !findings.is_empty() {
        Health::Degraded {
            findings,
            unjudged: unjudged.len(),
            reference,
        }
    } else if !unjudged.is_empty() {
        Health::Inconclusive {
            unjudged,
            checks,
            tests: doc.tests.len(),
        }
    } else {
        Health::Healthy {
            tests: doc.tests.len(),
            reference,
        }
    }
}

/// What a clean test carried under the loopback floor, if it did.
fn under_loopback_floor(t: &linkperf_results::TestResult, f: &TestFigures) -> Option<String> {
    if t.spec.offered.is_some() {
        return None;
    }
    match &t.spec.workload {
        Workload::Stream { .. } if t.spec.protocol != Protocol::Udp => {
            let bits = f.mean(Metric::Throughput)? * 8.0;
            (bits < LOOPBACK_MIN_STREAM_BITS_PER_S).then(|| {
                format!(
                    "{} carried {}, under the {} a loopback stream carries at the least",
                    t.name,
                    rate(bits / 8.0),
                    rate(LOOPBACK_MIN_STREAM_BITS_PER_S / 8.0)
                )
            })
        }
        Workload::Rr { .. } | Workload::Crr { .. } | Workload::Mix { .. } => {
            let tps = f.mean(Metric::TransactionRate)?;
            (tps < LOOPBACK_MIN_TRANSACTIONS_PER_S).then(|| {
                format!(
                    "{} completed {tps:.0} transactions/s, under the {LOOPBACK_MIN_TRANSACTIONS_PER_S:.0} a loopback request/response test completes at the least",
                    t.name
                )
            })
        }
        _ => None,
    }
}

impl Health {
    /// The verdict's word: `healthy`, `degraded`, `inconclusive`, `none`.
    pub fn word(&self) -> &'static str {
        match self {
            Health::Healthy { .. } => "healthy",
            Health::Degraded { .. } => "degraded",
            Health::Inconclusive { .. } => "inconclusive",
            Health::Empty => "none",
        }
    }

    /// The verdict in a sentence, with the reference it was held to and,
    /// where it cannot be given, how to get one.
    pub fn sentence(&self) -> String {
        let floors = format!(
            "streams at least {}, request/response at least {:.0} transactions/s",
            rate(LOOPBACK_MIN_STREAM_BITS_PER_S / 8.0),
            LOOPBACK_MIN_TRANSACTIONS_PER_S
        );
        match self {
            Health::Healthy {
                tests,
                reference: Reference::Loopback,
            } => format!(
                "verdict: healthy: {} ran clean (every check passed, no failed transaction) and met the loopback reference ({floors}; docs/suites.md)",
                all_tests(*tests)
            ),
            Health::Healthy {
                tests,
                reference: Reference::ChecksOnly,
            } => format!(
                "verdict: healthy by its checks: {} ran clean (every check passed, no failed transaction); their speed is not judged, as linkperf knows no capacity for this path (hold it to an earlier run with linkperf compare)",
                all_tests(*tests)
            ),
            Health::Degraded {
                findings,
                unjudged,
                reference,
            } => {
                let against = match reference {
                    Reference::Loopback => format!("against the loopback reference ({floors})"),
                    Reference::ChecksOnly => "by its own checks and counts".to_string(),
                };
                let not = if *unjudged > 0 {
                    format!(
                        "; {} not judged (only suspect runs)",
                        count(*unjudged, "more test")
                    )
                } else {
                    String::new()
                };
                format!("verdict: degraded {against}: {}{not}", findings.join("; "))
            }
            Health::Inconclusive {
                unjudged,
                checks,
                tests,
            } => {
                let failed: Vec<String> = checks
                    .iter()
                    .map(|(c, n)| format!("{c} in {}", count(*n, "run")))
                    .collect();
                let how = if checks.iter().any(|(c, _)| c == "host_noise") {
                    "run it again on a quieter host, or with each side pinned to its own CPUs (--placement split)"
                } else {
                    "see why on each run's line above, and run it again"
                };
                format!(
                    "verdict: inconclusive: {} of {tests} tests had no clean run, only runs that failed a check ({}), so the path is not judged (the other tests ran clean); {how}",
                    unjudged.len(),
                    failed.join(", ")
                )
            }
            Health::Empty => "verdict: none: no test ran".to_string(),
        }
    }
}

/// `1 run`, `2 runs`.
fn count(n: usize, noun: &str) -> String {
    crate::units::count(n as u64, noun)
}

/// `all 8 tests`, `the 1 test`.
fn all_tests(n: usize) -> String {
    if n == 1 {
        "the 1 test".to_string()
    } else {
        format!("all {n} tests")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{add, document, fig};

    fn over(interface: &str, mut doc: ResultsDocument) -> ResultsDocument {
        let mut env = doc.environment.client.clone().unwrap_or_default();
        env.interface = Some(interface.into());
        doc.environment.client = Some(env);
        doc
    }

    fn on_loopback(doc: ResultsDocument) -> ResultsDocument {
        over("lo", doc)
    }

    #[test]
    fn clean_runs_above_the_floors_are_healthy_against_the_loopback_reference() {
        let mut doc = on_loopback(document("quick"));
        add(&mut doc, "rr1c-1x1", 1, &[fig(5e7, 20.0, 5e7)]);
        let h = health(&doc);
        assert_eq!(h.word(), "healthy", "{h:?}");
        let s = h.sentence();
        assert!(
            s.starts_with("verdict: healthy: the 1 test ran clean"),
            "{s}"
        );
        assert!(
            s.contains("loopback reference (streams at least 100.0 Mbit/s"),
            "{s}"
        );
    }

    #[test]
    fn elsewhere_the_speed_is_not_judged() {
        let mut doc = over("eth0", document("quick"));
        add(&mut doc, "rr1c-1x1", 1, &[fig(10.0, 20.0, 5e7)]);
        let h = health(&doc);
        assert_eq!(
            h,
            Health::Healthy {
                tests: 1,
                reference: Reference::ChecksOnly
            }
        );
        assert!(h.sentence().contains("their speed is not judged"));
    }

    #[test]
    fn a_figure_under_the_loopback_floor_is_degraded() {
        let mut doc = on_loopback(document("quick"));
        add(&mut doc, "rr1c-1x1", 1, &[fig(5e7, 20.0, 5e7)]);
        // 500 transactions/s.
        add(&mut doc, "rr1c-1x1", 10, &[fig(5e5, 20_000.0, 5e7)]);
        let h = health(&doc);
        let s = h.sentence();
        assert_eq!(h.word(), "degraded", "{s}");
        assert!(
            s.contains("rr1c-1x1--10 completed 500 transactions/s, under the 1000"),
            "{s}"
        );
    }

    #[test]
    fn only_suspect_runs_are_inconclusive_and_say_which_checks() {
        let mut doc = on_loopback(document("quick"));
        add(&mut doc, "rr1c-1x1", 1, &[fig(5e7, 20.0, 5e7)]);
        add(&mut doc, "rr1c-1x1", 10, &[fig(5e7, 20.0, 5e7)]);
        for r in &mut doc.tests[1].runs {
            r.status = RunStatus::Suspect;
            r.status_reasons = vec!["host_noise: on this host, 60 % of others' work".into()];
        }
        let h = health(&doc);
        let s = h.sentence();
        assert_eq!(h.word(), "inconclusive", "{s}");
        assert!(s.contains("1 of 2 tests had no clean run"), "{s}");
        assert!(s.contains("(host_noise in 1 run)"), "{s}");
        assert!(s.contains("--placement split"), "{s}");
        // A finding among the clean tests outweighs them.
        doc.tests[0].runs[0].errors = 3;
        let s = health(&doc).sentence();
        assert!(
            s.starts_with("verdict: degraded")
                && s.contains("rr1c-1x1--1: 3 failed or lost transactions")
                && s.ends_with("1 more test not judged (only suspect runs)"),
            "{s}"
        );
    }
}
