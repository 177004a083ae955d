//! The summary of a test's repeated runs: for each figure a run carries, its
//! mean, spread and 95% confidence interval over the test's `ok` runs
//! ([`linkperf_metrics::describe`]), and whether the throughput varied too much
//! from run to run to be trusted ([`UNSTABLE_CV`]).
//!
//! A summary is derived from the runs and kept next to them in the document;
//! the runs stay as they are.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use linkperf_measured::SideCpu;
use linkperf_metrics::{describe, Stats};

use crate::{Run, RunStatus, TestResult};

/// Largest coefficient of variation of `throughput.bytes_per_s` across a
/// test's ok runs for the test to count as stable: above it (5%), the runs
/// disagree by more than the differences a comparison usually looks for, and
/// the test is flagged `unstable`. The threshold is a product choice; it is of
/// the size netperf's example scripts ask of a result with `-I 99,5` (a
/// confidence interval no wider than 5% of the mean).
pub const UNSTABLE_CV: f64 = 0.05;

/// Key of the figure whose coefficient of variation decides [`UNSTABLE_CV`].
const THROUGHPUT_KEY: &str = "throughput.bytes_per_s";

/// Statistics of one test over its `ok` runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSummary {
    /// Number of `ok` runs summarised (suspect, failed and aborted runs are
    /// left out).
    pub runs: u32,
    /// Suspect runs left out of the statistics (a check failed: see each
    /// run's `status_reasons`).
    #[serde(default)]
    pub suspect_runs: u32,
    /// Statistics of each figure, keyed by its dotted path in a run (e.g.
    /// `throughput.bytes_per_s`, `cpu.server.softirq_s`); a figure is here only
    /// when every summarised run has it.
    pub metrics: BTreeMap<String, Stats>,
    /// Whether the coefficient of variation of `throughput.bytes_per_s`
    /// exceeds [`UNSTABLE_CV`]. A single run is never unstable: it cannot show
    /// variation.
    pub unstable: bool,
    /// Coefficient of variation of `throughput.bytes_per_s` (`None` with fewer
    /// than two runs or a zero mean).
    #[serde(default)]
    pub throughput_cv: Option<f64>,
}

/// Reads one figure from a run, if the run has it.
type Figure = fn(&Run) -> Option<f64>;

/// Every figure a summary covers, by its dotted path in a run.
const FIGURES: &[(&str, Figure)] = &[
    (THROUGHPUT_KEY, |r| r.throughput.map(|t| t.bytes_per_s)),
    ("throughput.tx_bytes_per_s", |r| {
        r.throughput.map(|t| t.tx_bytes_per_s)
    }),
    ("throughput.rx_bytes_per_s", |r| {
        r.throughput.map(|t| t.rx_bytes_per_s)
    }),
    ("throughput.transactions_per_s", |r| {
        r.throughput.map(|t| t.transactions_per_s)
    }),
    ("transaction_time_us.mean", |r| {
        r.transaction_time_us.map(|l| l.mean)
    }),
    ("transaction_time_us.p50", |r| {
        r.transaction_time_us.map(|l| l.p50)
    }),
    ("transaction_time_us.p90", |r| {
        r.transaction_time_us.map(|l| l.p90)
    }),
    ("transaction_time_us.p99", |r| {
        r.transaction_time_us.map(|l| l.p99)
    }),
    ("transaction_time_us.p999", |r| {
        r.transaction_time_us.map(|l| l.p999)
    }),
    ("transaction_time_us.max", |r| {
        r.transaction_time_us.map(|l| l.max)
    }),
    ("cpu.client.process_s", |r| {
        client_cpu(r).map(|c| c.process_s)
    }),
    ("cpu.client.system_busy_s", |r| {
        client_cpu(r).map(|c| c.system_busy_s)
    }),
    ("cpu.client.softirq_s", |r| {
        client_cpu(r).map(|c| c.softirq_s)
    }),
    ("cpu.server.process_s", |r| {
        server_cpu(r).map(|c| c.process_s)
    }),
    ("cpu.server.system_busy_s", |r| {
        server_cpu(r).map(|c| c.system_busy_s)
    }),
    ("cpu.server.softirq_s", |r| {
        server_cpu(r).map(|c| c.softirq_s)
    }),
    ("efficiency.client_bytes_per_cpu_s", |r| {
        r.efficiency.and_then(|e| e.client_bytes_per_cpu_s)
    }),
    ("efficiency.server_bytes_per_cpu_s", |r| {
        r.efficiency.and_then(|e| e.server_bytes_per_cpu_s)
    }),
    ("efficiency.client_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.client_cpu_us_per_txn)
    }),
    ("efficiency.server_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.server_cpu_us_per_txn)
    }),
    ("efficiency.client_bytes_per_system_cpu_s", |r| {
        r.efficiency.and_then(|e| e.client_bytes_per_system_cpu_s)
    }),
    ("efficiency.server_bytes_per_system_cpu_s", |r| {
        r.efficiency.and_then(|e| e.server_bytes_per_system_cpu_s)
    }),
    ("efficiency.client_system_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.client_system_cpu_us_per_txn)
    }),
    ("efficiency.server_system_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.server_system_cpu_us_per_txn)
    }),
    ("efficiency.client_bytes_per_pinned_cpu_s", |r| {
        r.efficiency.and_then(|e| e.client_bytes_per_pinned_cpu_s)
    }),
    ("efficiency.server_bytes_per_pinned_cpu_s", |r| {
        r.efficiency.and_then(|e| e.server_bytes_per_pinned_cpu_s)
    }),
    ("efficiency.client_pinned_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.client_pinned_cpu_us_per_txn)
    }),
    ("efficiency.server_pinned_cpu_us_per_txn", |r| {
        r.efficiency.and_then(|e| e.server_pinned_cpu_us_per_txn)
    }),
    // A count, exact as f64 up to 2^53.
    ("errors", |r| Some(r.errors as f64)),
    ("udp.loss_rate", |r| {
        r.udp.map(|u| u.loss_rate).or(r.loss.map(|l| l.rate))
    }),
    ("udp.jitter_us", |r| r.udp.and_then(|u| u.jitter_us)),
];

/// The client's CPU of a run.
fn client_cpu(run: &Run) -> Option<&SideCpu> {
    run.cpu.as_ref().map(|c| &c.client)
}

/// The server's CPU of a run, when the server reported it.
fn server_cpu(run: &Run) -> Option<&SideCpu> {
    run.cpu.as_ref().and_then(|c| c.server.as_ref())
}

/// The summary of `test` over its `ok` runs; `None` when it has none.
///
/// A figure is summarised only when every `ok` run has it (e.g. the
/// `cpu.server.*` figures are left out if one run's server did not report),
/// so that each mean is over the same runs as [`TestSummary::runs`].
pub fn summarize(test: &TestResult) -> Option<TestSummary> {
    let ok: Vec<&Run> = test
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Ok)
        .collect();
    if ok.is_empty() {
        return None;
    }
    let metrics: BTreeMap<String, Stats> = FIGURES
        .iter()
        .filter_map(|(key, figure)| {
            let values: Option<Vec<f64>> = ok.iter().map(|r| figure(r)).collect();
            Some((key.to_string(), describe(&values?)?))
        })
        .collect();
    let throughput_cv = metrics.get(THROUGHPUT_KEY).and_then(|s| s.cv);
    let suspect = test
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Suspect)
        .count();
    Some(TestSummary {
        runs: u32::try_from(ok.len()).unwrap_or(u32::MAX),
        suspect_runs: u32::try_from(suspect).unwrap_or(u32::MAX),
        unstable: throughput_cv.is_some_and(|cv| cv > UNSTABLE_CV),
        throughput_cv,
        metrics,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_measured::{BusyMethod, LatencySummary, ProcStatBreakdown, ProcessMethod};
    use linkperf_workload::{Placement, Protocol, TestSpec};

    use super::*;
    use crate::{failed_run, CpuPair, Efficiency, ResultsDocument, TestConfig, Throughput};

    fn cpu(process_s: f64) -> SideCpu {
        SideCpu {
            process_s,
            process_user_s: process_s / 2.0,
            process_system_s: process_s / 2.0,
            process_method: ProcessMethod::RusageSelf,
            system_busy_s: 2.0 * process_s,
            system_busy_method: BusyMethod::CgroupV2CpuStat,
            softirq_s: 0.1,
            proc_stat: ProcStatBreakdown::default(),
            cpus: 4,
            window_s: 10.0,
            opened_late_s: None,
            closed_late_s: None,
        }
    }

    /// An ok run with every figure, throughput `bytes_per_s`. The derived
    /// rates are `bytes_per_s` times powers of two, so that they survive a JSON
    /// round trip exactly (serde_json's default float parsing, without its
    /// `float_roundtrip` feature, can read e.g. 91.66666666666667 back as
    /// 91.66666666666669).
    fn ok_run(n: u32, bytes_per_s: f64) -> Run {
        let mut run = failed_run(
            n,
            "2024-05-01T10:00:00Z".into(),
            RunStatus::Ok,
            String::new(),
        );
        run.error = None;
        run.throughput = Some(Throughput {
            counted_at: crate::CountedAt::receivers(),
            bytes_per_s,
            tx_bytes_per_s: bytes_per_s / 4.0,
            rx_bytes_per_s: bytes_per_s * 3.0 / 4.0,
            transactions_per_s: bytes_per_s / 8.0,
        });
        run.transaction_time_us = Some(LatencySummary {
            count: 1000,
            mean: 20.0,
            p50: 18.0,
            p90: 24.0,
            p99: 41.0,
            p999: 97.0,
            min: 11.0,
            max: 1210.0,
        });
        run.cpu = Some(CpuPair {
            client: cpu(4.0),
            server: Some(cpu(3.0)),
        });
        run.efficiency = Some(Efficiency {
            client_bytes_per_cpu_s: Some(1.0),
            server_bytes_per_cpu_s: Some(2.0),
            client_cpu_us_per_txn: Some(3.0),
            server_cpu_us_per_txn: Some(4.0),
            client_bytes_per_system_cpu_s: Some(5.0),
            server_bytes_per_system_cpu_s: Some(6.0),
            client_system_cpu_us_per_txn: Some(7.0),
            server_system_cpu_us_per_txn: Some(8.0),
            client_bytes_per_pinned_cpu_s: Some(9.0),
            server_bytes_per_pinned_cpu_s: Some(10.0),
            client_pinned_cpu_us_per_txn: Some(11.0),
            server_pinned_cpu_us_per_txn: Some(12.0),
        });
        run.errors = u64::from(n);
        run
    }

    fn spec() -> TestSpec {
        TestSpec::new(
            "rr1c-200x1000".parse().unwrap(),
            Protocol::Tcp,
            10,
            Duration::from_secs(10),
        )
    }

    fn document(runs: Vec<Run>) -> ResultsDocument {
        let mut doc = ResultsDocument::new("osa".into(), vec!["linkperf".into()]);
        let s = spec();
        for run in runs {
            let config = TestConfig::from_spec(
                &s,
                "embedded".into(),
                Placement::with_threads(1),
                Placement::with_threads(1),
            );
            doc.push_run(&s, config, run);
        }
        doc
    }

    fn test_of(runs: Vec<Run>) -> TestResult {
        document(runs).tests.remove(0)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn ten_percent_spread_is_unstable() {
        // 100, 110, 90: mean 100; deviations 0, 10, −10 → variance 200 / 2 = 100,
        // stddev 10, cv 10 / 100 = 0.10 > 0.05.
        let t = test_of(vec![ok_run(1, 100.0), ok_run(2, 110.0), ok_run(3, 90.0)]);
        let s = summarize(&t).unwrap();
        assert_eq!(s.runs, 3);
        let tp = s.metrics["throughput.bytes_per_s"];
        assert_eq!((tp.n, tp.mean, tp.stddev), (3, 100.0, 10.0));
        assert!(close(s.throughput_cv.unwrap(), 0.10));
        assert!(s.unstable);
        // half width t(0.975, 2) × 10 / √3 = 4.302653 × 5.773503 = 24.841377
        assert!((tp.ci95_low.unwrap() - 75.158_623).abs() < 1e-5, "{tp:?}");
        assert!((tp.ci95_high.unwrap() - 124.841_377).abs() < 1e-5, "{tp:?}");
        assert!(t.is_unstable());
    }

    #[test]
    fn one_percent_spread_is_stable() {
        // 100, 101, 99: mean 100, stddev 1, cv 0.01 ≤ 0.05.
        let t = test_of(vec![ok_run(1, 100.0), ok_run(2, 101.0), ok_run(3, 99.0)]);
        let s = summarize(&t).unwrap();
        assert!(close(s.throughput_cv.unwrap(), 0.01));
        assert!(!s.unstable);
        assert!(!t.is_unstable());
    }

    #[test]
    fn a_single_run_is_never_unstable() {
        let s = summarize(&test_of(vec![ok_run(1, 100.0)])).unwrap();
        assert_eq!((s.runs, s.throughput_cv, s.unstable), (1, None, false));
        assert_eq!(s.metrics["throughput.bytes_per_s"].ci95_low, None);
    }

    #[test]
    fn failed_and_aborted_runs_are_left_out() {
        let t = test_of(vec![
            ok_run(1, 100.0),
            failed_run(2, String::new(), RunStatus::Failed, "refused".into()),
            ok_run(3, 110.0),
            failed_run(4, String::new(), RunStatus::Aborted, "interrupted".into()),
            ok_run(5, 90.0),
        ]);
        let s = summarize(&t).unwrap();
        assert_eq!(s.runs, 3);
        assert_eq!(s.metrics["throughput.bytes_per_s"].mean, 100.0);
        // errors of the ok runs only: 1, 3, 5.
        assert_eq!(s.metrics["errors"].mean, 3.0);
        assert_eq!(t.runs.len(), 5, "summarising keeps every run");

        let none_ok = test_of(vec![failed_run(
            1,
            String::new(),
            RunStatus::Failed,
            "refused".into(),
        )]);
        assert_eq!(summarize(&none_ok), None);
        assert!(!none_ok.is_unstable());
    }

    #[test]
    fn every_figure_is_keyed_by_its_path() {
        let s = summarize(&test_of(vec![ok_run(1, 100.0), ok_run(2, 120.0)])).unwrap();
        let keys: Vec<&str> = s.metrics.keys().map(String::as_str).collect();
        // Every figure but a UDP stream's, which these runs are not.
        let mut expected: Vec<&str> = FIGURES
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !k.starts_with("udp."))
            .collect();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(keys.len(), 29);
        assert_eq!(s.metrics["transaction_time_us.p99"].mean, 41.0);
        assert_eq!(s.metrics["cpu.server.process_s"].mean, 3.0);
        assert_eq!(s.metrics["cpu.client.system_busy_s"].mean, 8.0);
        assert_eq!(
            s.metrics["efficiency.server_system_cpu_us_per_txn"].mean,
            8.0
        );
        // (100 + 120) / 2 × 3/4
        assert_eq!(s.metrics["throughput.rx_bytes_per_s"].mean, 82.5);
    }

    #[test]
    fn a_figure_missing_from_one_run_is_left_out() {
        let mut partial = ok_run(2, 100.0);
        partial.cpu.as_mut().unwrap().server = None;
        partial.efficiency.as_mut().unwrap().client_cpu_us_per_txn = None;
        partial.transaction_time_us = None;
        let s = summarize(&test_of(vec![ok_run(1, 100.0), partial])).unwrap();
        for absent in [
            "cpu.server.process_s",
            "cpu.server.system_busy_s",
            "cpu.server.softirq_s",
            "efficiency.client_cpu_us_per_txn",
            "transaction_time_us.p50",
        ] {
            assert!(!s.metrics.contains_key(absent), "{absent}");
        }
        assert!(s.metrics.contains_key("cpu.client.softirq_s"));
        assert!(s.metrics.contains_key("efficiency.server_cpu_us_per_txn"));
        assert_eq!(s.metrics.len(), 29 - 3 - 1 - 6);
    }

    #[test]
    fn summaries_round_trip_through_json() {
        let mut doc = document(vec![ok_run(1, 100.0), ok_run(2, 110.0), ok_run(3, 90.0)]);
        assert_eq!(doc.tests[0].summary, None);
        doc.refresh_summaries();
        let summary = doc.tests[0].summary.clone().unwrap();
        assert_eq!(Some(&summary), summarize(&doc.tests[0]).as_ref());

        let json = serde_json::to_string_pretty(&doc).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["tests"][0]["summary"]["runs"], 3);
        assert_eq!(v["tests"][0]["summary"]["unstable"], true);
        assert_eq!(
            v["tests"][0]["summary"]["metrics"]["throughput.bytes_per_s"]["mean"],
            100.0
        );
        assert_eq!(v["tests"][0]["runs"].as_array().unwrap().len(), 3);

        let back = ResultsDocument::from_json(&json, "osa.json").unwrap();
        // serde_json (without `float_roundtrip`) may read a float one unit in
        // the last place off: compare the runs exactly, the summary closely.
        assert_eq!(back.tests[0].runs, doc.tests[0].runs);
        let got = back.tests[0].summary.as_ref().unwrap();
        assert_eq!(
            (got.runs, got.unstable, got.metrics.len()),
            (summary.runs, summary.unstable, summary.metrics.len())
        );
        for (key, s) in &summary.metrics {
            let g = got.metrics[key];
            assert_eq!(
                (g.n, g.cv.is_some(), g.ci95_low.is_some()),
                (s.n, s.cv.is_some(), s.ci95_low.is_some())
            );
            for (x, y) in [
                (g.mean, s.mean),
                (g.stddev, s.stddev),
                (g.min, s.min),
                (g.max, s.max),
                (g.ci95_low.unwrap(), s.ci95_low.unwrap()),
                (g.ci95_high.unwrap(), s.ci95_high.unwrap()),
            ] {
                assert!(close(x, y), "{key}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn documents_without_summaries_still_load() {
        let doc = document(vec![ok_run(1, 100.0), ok_run(2, 110.0)]);
        let json = serde_json::to_string(&doc).unwrap();
        assert!(!json.contains("\"summary\""), "no summary, no key: {json}");
        let back = ResultsDocument::from_json(&json, "old.json").unwrap();
        assert_eq!(back.tests[0].summary, None);
        assert_eq!(back.tests[0].runs, doc.tests[0].runs);
        // A reader can still judge the test from its runs.
        assert!(back.tests[0].is_unstable());
    }

    #[test]
    fn appending_a_run_drops_the_stale_summary() {
        let mut doc = document(vec![ok_run(1, 100.0), ok_run(2, 101.0)]);
        doc.refresh_summaries();
        assert!(doc.tests[0].summary.is_some());
        let s = spec();
        let config = doc.tests[0].config.clone();
        doc.push_run(&s, config, ok_run(3, 150.0));
        assert_eq!(doc.tests[0].summary, None);
        assert!(
            doc.tests[0].is_unstable(),
            "judged from the runs, not a stale summary"
        );
        doc.refresh_summaries();
        assert_eq!(doc.tests[0].summary.as_ref().unwrap().runs, 3);
    }

    #[test]
    fn the_schema_page_documents_every_key() {
        let page = include_str!("../../../docs/results-schema.md");
        assert!(page.contains("## Repeated runs and statistics"));
        for (key, _) in FIGURES {
            let quoted = format!("`{key}`");
            assert!(
                page.contains(&quoted),
                "{key} is not in docs/results-schema.md"
            );
        }
    }
}
