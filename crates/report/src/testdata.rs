//! Synthetic results documents whose right answers are known by construction,
//! for the unit tests of this crate.

use std::time::Duration;

use linkperf_measured::{Environment, Interval, LatencySummary};
use linkperf_results::{
    failed_run, CountedAt, Efficiency, IntervalRate, OpenLoop, ResultsDocument, Run, RunStatus,
    TestConfig, Throughput,
};
use linkperf_workload::{
    Arrival, OfferedLoad, Placement, Protocol, TestSpec, TransactionsPerSecond,
};

/// The headline figures of one synthetic run.
#[derive(Debug, Clone, Copy)]
pub struct Fig {
    /// Throughput, bytes/s, both directions (a quarter up, three quarters down).
    pub bytes: f64,
    /// Mean transaction time, µs (p99 is twice it).
    pub mean_us: f64,
    /// Bytes per CPU-second, every efficiency figure (CPU-µs per transaction
    /// is 1e6 / it).
    pub eff: f64,
}

/// A figure with throughput `bytes`, mean time `mean_us` and efficiency `eff`.
pub fn fig(bytes: f64, mean_us: f64, eff: f64) -> Fig {
    Fig {
        bytes,
        mean_us,
        eff,
    }
}

/// Gives `run` `n` one-second samples at its throughput.
pub fn with_intervals(run: &mut Run, n: u32) {
    let t = run.throughput.expect("a run with a throughput");
    run.intervals = (0..n)
        .map(|i| IntervalRate {
            second: Interval {
                start_s: f64::from(i),
                length_s: 1.0,
                tx_bytes: (t.tx_bytes_per_s) as u64,
                rx_bytes: (t.rx_bytes_per_s) as u64,
                transactions: t.transactions_per_s as u64,
                ..Interval::default()
            },
            loss_rate: None,
        })
        .collect();
}

/// An ok run with the figures of `f`, and ten one-second samples at them.
pub fn run(n: u32, f: Fig) -> Run {
    let mut r = failed_run(
        n,
        "2024-05-01T10:00:00Z".into(),
        RunStatus::Ok,
        String::new(),
    );
    r.error = None;
    r.throughput = Some(Throughput {
        bytes_per_s: f.bytes,
        tx_bytes_per_s: f.bytes / 4.0,
        rx_bytes_per_s: f.bytes * 3.0 / 4.0,
        transactions_per_s: f.bytes / 1000.0,
        counted_at: CountedAt::receivers(),
    });
    r.transaction_time_us = Some(LatencySummary {
        count: 1000,
        mean: f.mean_us,
        p50: f.mean_us,
        p90: f.mean_us,
        p99: 2.0 * f.mean_us,
        p999: 3.0 * f.mean_us,
        min: f.mean_us / 2.0,
        max: 4.0 * f.mean_us,
    });
    let per_txn = 1e6 / f.eff;
    r.efficiency = Some(Efficiency {
        client_bytes_per_cpu_s: Some(f.eff),
        server_bytes_per_cpu_s: Some(f.eff),
        client_cpu_us_per_txn: Some(per_txn),
        server_cpu_us_per_txn: Some(per_txn),
        client_bytes_per_system_cpu_s: Some(f.eff),
        server_bytes_per_system_cpu_s: Some(f.eff),
        client_system_cpu_us_per_txn: Some(per_txn),
        server_system_cpu_us_per_txn: Some(per_txn),
        ..Efficiency::default()
    });
    with_intervals(&mut r, 10);
    r
}

/// A host for both sides.
pub fn environment(kernel: &str, mtu: u32) -> Environment {
    Environment {
        hostname: "lab1".into(),
        kernel: kernel.into(),
        os: "Linux x86_64".into(),
        cpu_model: "Test CPU".into(),
        cpu_count: 4,
        interface: Some("lo".into()),
        mtu: Some(mtu),
        congestion_control: Some("cubic".into()),
        socket_congestion_control: Some("cubic".into()),
        tcp_rmem: None,
        tcp_wmem: None,
        socket_sndbuf: None,
        socket_rcvbuf: None,
        socket_nodelay: None,
        boot_id: None,
        linkperf_version: "0.1.0".into(),
        command_line: vec!["linkperf".into()],
    }
}

/// An empty document labelled `label`, created at a fixed time.
pub fn document(label: &str) -> ResultsDocument {
    let mut doc = ResultsDocument::new(
        label.into(),
        vec![
            "linkperf".into(),
            "suite".into(),
            "uperf45".into(),
            "--label".into(),
            label.into(),
        ],
    );
    doc.created = "2024-05-01T10:00:00Z".into();
    doc.linkperf_version = "0.1.0".into();
    doc.environment.client = Some(environment("6.1.0", 65536));
    doc.environment.server = Some(environment("6.1.0", 65536));
    doc
}

/// Adds the test `workload--users` with one ok run per figure.
pub fn add(doc: &mut ResultsDocument, workload: &str, users: u32, figs: &[Fig]) {
    add_on(doc, workload, Protocol::Tcp, users, figs);
}

/// Adds the test `workload--users[--protocol]` with one ok run per figure.
pub fn add_on(
    doc: &mut ResultsDocument,
    workload: &str,
    protocol: Protocol,
    users: u32,
    figs: &[Fig],
) {
    let spec = TestSpec::new(
        workload.parse().expect("workload"),
        protocol,
        users,
        Duration::from_secs(10),
    );
    for (i, f) in figs.iter().enumerate() {
        let config = TestConfig::from_spec(
            &spec,
            "embedded".into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        doc.push_run(&spec, config, run(i as u32 + 1, *f));
    }
}

/// An ok open-loop run offered `rate` transactions/s that answered
/// `achieved` of them per second, with a p99 of `p99_us` (timed from the
/// due times; p50 half of it, p99.9 twice, mean 0.6 times), and the figures
/// of [`run`] otherwise.
pub fn open_run(n: u32, rate: u64, p99_us: f64, achieved: f64) -> Run {
    let mut r = run(n, fig(achieved * 2.0, 0.6 * p99_us, 1e8));
    if let Some(t) = r.throughput.as_mut() {
        t.transactions_per_s = achieved;
    }
    r.transaction_time_us = Some(LatencySummary {
        count: 1000,
        mean: 0.6 * p99_us,
        p50: p99_us / 2.0,
        p90: 0.8 * p99_us,
        p99: p99_us,
        p999: 2.0 * p99_us,
        min: p99_us / 4.0,
        max: 3.0 * p99_us,
    });
    r.open_loop = Some(OpenLoop {
        offered_per_s: rate as f64,
        arrival: Arrival::Poisson,
        max_outstanding: 1,
        achieved_per_s: achieved,
        arrivals: rate * 10,
        sent: (achieved * 10.0) as u64,
        late: 0,
        dropped: 0,
        behind: 0,
        service_time_us: r.transaction_time_us,
        pacing_error_us: None,
        transaction_time_ci_us: Default::default(),
    });
    r
}

/// The spec of the open-loop test `workload--users--RATE/s` (TCP, Poisson
/// arrivals, one outstanding per connection).
pub fn offered_spec(workload: &str, users: u32, rate: u64) -> TestSpec {
    let mut spec = TestSpec::new(
        workload.parse().expect("workload"),
        Protocol::Tcp,
        users,
        Duration::from_secs(10),
    );
    spec.offered = Some(OfferedLoad::new(TransactionsPerSecond(rate)));
    spec
}

/// Adds the open-loop test `workload--users--RATE/s` with one ok run per
/// (p99 µs, achieved transactions/s) pair (see [`open_run`]).
pub fn add_offered(
    doc: &mut ResultsDocument,
    workload: &str,
    users: u32,
    rate: u64,
    runs: &[(f64, f64)],
) {
    let spec = offered_spec(workload, users, rate);
    for (i, (p99, achieved)) in runs.iter().enumerate() {
        let config = TestConfig::from_spec(
            &spec,
            "embedded".into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        doc.push_run(&spec, config, open_run(i as u32 + 1, rate, *p99, *achieved));
    }
}
