use std::time::Duration;

use linkperf_measured::{BusyMethod, ProcessMethod, WorkerPlacement};
use linkperf_results::{failed_run, TestConfig};
use linkperf_workload::{Placement, Protocol, TestSpec};

use super::*;

fn cpu(process_s: f64, system_busy_s: f64) -> SideCpu {
    SideCpu {
        process_s,
        process_user_s: process_s / 2.0,
        process_system_s: process_s / 2.0,
        process_method: ProcessMethod::RusageSelf,
        system_busy_s,
        system_busy_method: BusyMethod::ProcStat,
        softirq_s: system_busy_s / 4.0,
        // The host busy with the test's processes but for a little.
        proc_stat: ProcStatBreakdown {
            user_s: process_s / 2.0 + 0.05,
            system_s: process_s / 2.0,
            ..Default::default()
        },
        cpus: 2,
        window_s: 1.0,
        opened_late_s: None,
        closed_late_s: None,
    }
}

/// A side that moved `rx` bytes in `transactions` over a 1 s window.
fn side(rx: u64, transactions: u64, mean_us: f64, p99: f64, busy: f64) -> SideReport {
    SideReport {
        window_s: 1.0,
        tx_bytes: 0,
        rx_bytes: rx,
        transactions,
        errors: 0,
        totals: Totals {
            tx_bytes: 0,
            rx_bytes: rx + 10,
            transactions,
        },
        latency: Some(LatencySummary {
            count: transactions,
            mean: mean_us,
            p50: mean_us,
            p90: p99 / 2.0,
            p99,
            p999: p99 * 2.0,
            min: mean_us / 2.0,
            max: p99 * 3.0,
        }),
        intervals: vec![
            Interval {
                start_s: 0.0,
                length_s: 0.5,
                tx_bytes: 0,
                rx_bytes: rx / 2,
                transactions: transactions / 2,
                ..Default::default()
            },
            Interval {
                start_s: 0.5,
                length_s: 0.5,
                tx_bytes: 0,
                rx_bytes: rx / 2,
                transactions: transactions / 2,
                ..Default::default()
            },
        ],
        cpu: cpu(0.5, busy),
        tcp_info: Some(TcpInfoSummary {
            flows: 1,
            retransmits: 3,
            rtt_us_mean: mean_us,
            rtt_us_max: mean_us * 2.0,
            rttvar_us_mean: 1.0,
            snd_cwnd_mean: 10.0,
            snd_mss_mean: 1448.0,
        }),
        workers: vec![WorkerPlacement {
            worker: 0,
            pinned: None,
            allowed_cpus: vec![0, 1],
            last_cpu: Some(0),
            flows: 1,
        }],
        busy_poll: false,
        connections: 1,
        error_samples: Vec::new(),
        profile: None,
        latency_histogram: None,
        flows: Default::default(),
        udp: None,
        links: Vec::new(),
        pinned_cpus: Vec::new(),
        open_loop: None,
    }
}

fn spec() -> TestSpec {
    TestSpec::new(
        "str-writex30k".parse().unwrap(),
        Protocol::Tcp,
        1,
        Duration::from_secs(1),
    )
}

fn doc(label: &str, server: &str, runs: Vec<Run>) -> ResultsDocument {
    let mut d = ResultsDocument::new(label.into(), vec!["linkperf".into(), "suite".into()]);
    for r in runs {
        let s = spec();
        let c = TestConfig::from_spec(
            &s,
            server.into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        d.push_run(&s, c, r);
    }
    d.refresh_summaries();
    d
}

fn ok_run(n: u32, rx: u64, transactions: u64, mean_us: f64, p99: f64) -> Run {
    derive_run(
        n,
        format!("2025-01-01T00:00:0{n}Z"),
        &spec(),
        side(rx, transactions, mean_us, p99, 1.0),
        Some(side(0, transactions, mean_us, p99, 1.2)),
    )
}

#[test]
fn throughput_and_transactions_are_summed_across_pairs() {
    let p1 = doc(
        "x-pair1",
        "198.18.1.1",
        vec![ok_run(1, 100_000_000, 1000, 10.0, 50.0)],
    );
    let p2 = doc(
        "x-pair2",
        "198.18.2.1",
        vec![ok_run(1, 60_000_000, 3000, 20.0, 80.0)],
    );
    let cl = vec!["linkperf".to_string(), "lab".into(), "run".into()];
    let a = aggregate("x", &cl, &[p1.clone(), p2.clone()], &[]).unwrap();
    assert_eq!(a.label, "x");
    assert_eq!(a.command_line, cl);
    assert_eq!(a.tests.len(), 1);
    let t = &a.tests[0];
    assert_eq!(t.config.server, "2 pairs: 198.18.1.1, 198.18.2.1");
    let r = &t.runs[0];
    assert_eq!(r.status, RunStatus::Ok);
    let th = r.throughput.unwrap();
    let (t1, t2) = (
        p1.tests[0].runs[0].throughput.unwrap(),
        p2.tests[0].runs[0].throughput.unwrap(),
    );
    assert_eq!(th.bytes_per_s, t1.bytes_per_s + t2.bytes_per_s);
    assert_eq!(th.rx_bytes_per_s, 160e6);
    assert_eq!(th.transactions_per_s, 4000.0);

    // Transaction time: weighted mean, the worst pair's percentiles.
    let l = r.transaction_time_us.unwrap();
    assert_eq!(l.count, 4000);
    assert_eq!(l.mean, (10.0 * 1000.0 + 20.0 * 3000.0) / 4000.0);
    assert_eq!((l.p99, l.max, l.min), (80.0, 240.0, 5.0));

    // CPU: process summed, system-wide averaged (the same host's CPUs).
    let c = r.cpu.unwrap();
    assert_eq!(c.client.process_s, 1.0);
    assert_eq!(c.client.system_busy_s, 1.0);
    assert_eq!(c.server.unwrap().system_busy_s, 1.2);
    let e = r.efficiency.unwrap();
    assert_eq!(e.client_bytes_per_cpu_s, Some(160e6));

    // Intervals second by second; TCP_INFO over all flows, each side's
    // and the run's over both ends.
    assert_eq!(r.intervals.len(), 2);
    assert_eq!(r.intervals[0].second.rx_bytes, 80_000_000);
    let tcp = r.client.as_ref().unwrap().tcp_info.unwrap();
    assert_eq!((tcp.flows, tcp.retransmits, tcp.rtt_us_mean), (2, 6, 15.0));
    let tcp = r.tcp_info.unwrap();
    assert_eq!((tcp.flows, tcp.retransmits, tcp.rtt_us_mean), (2, 12, 15.0));
    assert_eq!(r.client.as_ref().unwrap().workers.len(), 2);
    assert!(t.summary.is_some());
}

#[test]
fn a_run_that_failed_in_one_pair_fails_in_the_aggregate() {
    let p1 = doc(
        "x-pair1",
        "a",
        vec![ok_run(1, 1, 1, 1.0, 1.0), ok_run(2, 1, 1, 1.0, 1.0)],
    );
    let p2 = doc(
        "x-pair2",
        "b",
        vec![
            ok_run(1, 1, 1, 1.0, 1.0),
            failed_run(
                2,
                "t".into(),
                RunStatus::Failed,
                "connection refused".into(),
            ),
        ],
    );
    let p3 = doc("x-pair3", "c", vec![ok_run(1, 1, 1, 1.0, 1.0)]);
    let a = aggregate("x", &[], &[p1, p2, p3], &[]).unwrap();
    let runs = &a.tests[0].runs;
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, RunStatus::Ok);
    assert_eq!(runs[0].throughput.unwrap().transactions_per_s, 3.0);
    assert_eq!(runs[1].status, RunStatus::Failed);
    assert_eq!(
        runs[1].error.as_deref(),
        Some("pair2: connection refused; pair3: no such run")
    );
    assert!(runs[1].throughput.is_none());
}

#[test]
fn an_aborted_pair_makes_the_run_aborted_and_no_pairs_is_an_error() {
    let p1 = doc("a", "a", vec![ok_run(1, 1, 1, 1.0, 1.0)]);
    let p2 = doc(
        "b",
        "b",
        vec![failed_run(
            1,
            "t".into(),
            RunStatus::Aborted,
            "interrupted".into(),
        )],
    );
    let a = aggregate("x", &[], &[p1, p2], &[]).unwrap();
    assert_eq!(a.tests[0].runs[0].status, RunStatus::Aborted);
    assert!(aggregate("x", &[], &[], &[]).is_err());
}

/// A side whose transactions took `us` µs each, `n` of them, carried by
/// `users` flows, with its histogram and per-flow counts.
fn side_with_histogram(us: &[u64], users: u32) -> SideReport {
    let mut rec = LatencyRecorder::new();
    for &u in us {
        rec.record_ns(u * 1000);
    }
    let n = us.len() as u64;
    let mut s = side(n * 100, n, 0.0, 0.0, 1.0);
    s.latency = rec.summary();
    s.latency_histogram = rec.encode_histogram();
    s.flows = FlowCounts::from_counts(
        (0..users)
            .map(|f| linkperf_measured::FlowCount {
                flow: f,
                transactions: n / u64::from(users),
                tx_bytes: 0,
                rx_bytes: n * 100 / u64::from(users),
            })
            .collect(),
    );
    s
}

#[test]
fn users_are_summed_percentiles_merged_and_each_part_named() {
    let spec2 = TestSpec::new(
        "rr1c-1x1".parse().unwrap(),
        Protocol::Tcp,
        2,
        Duration::from_secs(1),
    );
    let part = |us: &[u64], server: &str| {
        let run = derive_run(
            1,
            "2025-01-01T00:00:01Z".into(),
            &spec2,
            side_with_histogram(us, 2),
            Some(side_with_histogram(us, 2)),
        );
        let mut d = ResultsDocument::new("p".into(), vec![]);
        let c = TestConfig::from_spec(
            &spec2,
            server.into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        d.push_run(&spec2, c, run);
        d
    };
    // One server fast (1..=1000 µs), one slow (1001..=3000 µs): the median
    // of all 3000 transactions is 1500 µs, neither server's own.
    let fast: Vec<u64> = (1..=1000).collect();
    let slow: Vec<u64> = (1001..=3000).collect();
    let a = aggregate(
        "both",
        &[],
        &[part(&fast, "h1"), part(&slow, "h2")],
        &["h1".into(), "h2".into()],
    )
    .unwrap();
    let t = &a.tests[0];
    assert_eq!(t.name, "rr1c-1x1--4", "2 users on each of 2 servers");
    assert_eq!((t.spec.users, t.workload.users), (4, 4));
    assert_eq!(t.config.server, "2 servers: h1, h2");
    let r = &t.runs[0];
    let l = r.transaction_time_us.unwrap();
    assert_eq!(l.count, 3000);
    assert!((l.p50 - 1500.0).abs() <= 1.5, "p50 {}", l.p50);
    assert!((l.p99 - 2970.0).abs() <= 3.0, "p99 {}", l.p99);
    assert!(r.client.as_ref().unwrap().latency_histogram.is_some());
    // Every part's flows, renumbered: 4 flows.
    let f = r.flows.unwrap();
    assert_eq!((f.flows, f.no_progress), (4, 0));
    assert_eq!(r.parts.len(), 2);
    assert_eq!((r.parts[0].label.as_str(), r.parts[0].users), ("h1", 2));
    assert_eq!((r.parts[1].label.as_str(), r.parts[1].users), ("h2", 2));
    assert_eq!(r.checks.len(), 7, "the whole is checked again");
}

#[test]
fn a_part_that_was_suspect_makes_the_whole_suspect_and_says_which() {
    let mut p1 = doc("x-pair1", "a", vec![ok_run(1, 1, 1, 1.0, 1.0)]);
    let p2 = doc("x-pair2", "b", vec![ok_run(1, 1, 1, 1.0, 1.0)]);
    let r = &mut p1.tests[0].runs[0];
    r.status = RunStatus::Suspect;
    r.status_reasons = vec!["stalled_interval: a second at 0".into()];
    let a = aggregate("x", &[], &[p1, p2], &[]).unwrap();
    let r = &a.tests[0].runs[0];
    assert_eq!(r.status, RunStatus::Suspect);
    assert!(
        r.status_reasons
            .contains(&"pair1: stalled_interval: a second at 0".to_string()),
        "{:?}",
        r.status_reasons
    );
    assert_eq!(r.parts[0].status, RunStatus::Suspect);
    assert_eq!(r.parts[1].status, RunStatus::Ok);
}
