//! Computing a [`Run`]'s figures from what the two sides measured. Pure
//! functions: no clock, no I/O.
//!
//! Every rate is over the client's measurement window. A rate over a zero window
//! is 0; an efficiency over zero CPU time or zero transactions is `None`. No
//! figure is ever NaN or infinite (JSON cannot carry them).

use linkperf_metrics::{Interval, SideCpu, SideReport};

use crate::{CpuPair, Efficiency, IntervalRate, Run, RunStatus, Throughput};

/// Microseconds in a second.
const US_PER_S: f64 = 1e6;

/// The run of a test whose window completed: status `ok`, its figures derived
/// from the client's report and the server's (when the server reported).
pub fn derive_run(
    run: u32,
    started: String,
    client: SideReport,
    server: Option<SideReport>,
) -> Run {
    Run {
        run,
        started,
        status: RunStatus::Ok,
        error: None,
        throughput: Some(throughput(&client)),
        transaction_time_us: client.latency,
        cpu: Some(CpuPair {
            client: client.cpu,
            server: server.as_ref().map(|s| s.cpu),
        }),
        efficiency: Some(efficiency(&client, server.as_ref())),
        intervals: client.intervals.iter().map(interval_rate).collect(),
        errors: client
            .errors
            .saturating_add(server.as_ref().map_or(0, |s| s.errors)),
        tcp_info: client.tcp_info,
        client: Some(client),
        server,
    }
}

/// A run that measured nothing: its status (`failed` or `aborted`), why, and no
/// figures at all.
pub fn failed_run(run: u32, started: String, status: RunStatus, error: String) -> Run {
    Run {
        run,
        started,
        status,
        error: Some(error),
        throughput: None,
        transaction_time_us: None,
        cpu: None,
        efficiency: None,
        intervals: Vec::new(),
        errors: 0,
        tcp_info: None,
        client: None,
        server: None,
    }
}

/// Payload rates over the client's window.
fn throughput(client: &SideReport) -> Throughput {
    let w = client.window_s;
    Throughput {
        bytes_per_s: rate(payload(client), w),
        tx_bytes_per_s: rate(client.tx_bytes as f64, w),
        rx_bytes_per_s: rate(client.rx_bytes as f64, w),
        transactions_per_s: rate(client.transactions as f64, w),
    }
}

/// CPU efficiency of both sides for the payload and transactions the client
/// counted in its window.
fn efficiency(client: &SideReport, server: Option<&SideReport>) -> Efficiency {
    let bytes = payload(client);
    let txns = client.transactions as f64;
    let server_cpu: Option<&SideCpu> = server.map(|s| &s.cpu);
    let per_cpu_s = |cpu_s: f64| ratio(bytes, cpu_s);
    let us_per_txn = |cpu_s: f64| {
        if cpu_s > 0.0 {
            ratio(cpu_s * US_PER_S, txns)
        } else {
            None
        }
    };
    Efficiency {
        client_bytes_per_cpu_s: per_cpu_s(client.cpu.process_s),
        server_bytes_per_cpu_s: server_cpu.and_then(|c| per_cpu_s(c.process_s)),
        client_cpu_us_per_txn: us_per_txn(client.cpu.process_s),
        server_cpu_us_per_txn: server_cpu.and_then(|c| us_per_txn(c.process_s)),
        client_bytes_per_system_cpu_s: per_cpu_s(client.cpu.system_busy_s),
        server_bytes_per_system_cpu_s: server_cpu.and_then(|c| per_cpu_s(c.system_busy_s)),
        client_system_cpu_us_per_txn: us_per_txn(client.cpu.system_busy_s),
        server_system_cpu_us_per_txn: server_cpu.and_then(|c| us_per_txn(c.system_busy_s)),
    }
}

/// One interval with its rates.
fn interval_rate(i: &Interval) -> IntervalRate {
    IntervalRate {
        start_s: i.start_s,
        length_s: i.length_s,
        tx_bytes: i.tx_bytes,
        rx_bytes: i.rx_bytes,
        transactions: i.transactions,
        bytes_per_s: rate(i.tx_bytes as f64 + i.rx_bytes as f64, i.length_s),
        transactions_per_s: rate(i.transactions as f64, i.length_s),
    }
}

/// Payload the client moved in its window, both directions.
fn payload(client: &SideReport) -> f64 {
    client.tx_bytes as f64 + client.rx_bytes as f64
}

/// `amount / seconds`, or 0 when there is no (valid) time to divide by.
fn rate(amount: f64, seconds: f64) -> f64 {
    ratio(amount, seconds).unwrap_or(0.0)
}

/// `a / b` when `b` is positive and the result finite.
fn ratio(a: f64, b: f64) -> Option<f64> {
    if b.is_nan() || b <= 0.0 {
        return None;
    }
    let r = a / b;
    r.is_finite().then_some(r)
}

#[cfg(test)]
mod tests {
    use linkperf_metrics::{
        BusyMethod, LatencySummary, ProcStatBreakdown, ProcessMethod, TcpInfoSummary, Totals,
    };

    use super::*;

    fn cpu(process_s: f64, system_busy_s: f64) -> SideCpu {
        SideCpu {
            process_s,
            process_user_s: process_s / 2.0,
            process_system_s: process_s / 2.0,
            process_method: ProcessMethod::RusageSelf,
            system_busy_s,
            system_busy_method: BusyMethod::CgroupV2CpuStat,
            softirq_s: 0.1,
            proc_stat: ProcStatBreakdown::default(),
            cpus: 4,
            window_s: 2.0,
        }
    }

    fn side(window_s: f64, tx: u64, rx: u64, txns: u64, cpu: SideCpu) -> SideReport {
        SideReport {
            window_s,
            tx_bytes: tx,
            rx_bytes: rx,
            transactions: txns,
            errors: 1,
            totals: Totals {
                tx_bytes: tx,
                rx_bytes: rx,
                transactions: txns,
            },
            latency: Some(LatencySummary {
                count: txns,
                mean: 20.0,
                p50: 18.0,
                p90: 30.0,
                p99: 50.0,
                p999: 80.0,
                min: 10.0,
                max: 99.0,
            }),
            intervals: vec![
                Interval {
                    start_s: 0.0,
                    length_s: 1.0,
                    tx_bytes: 1000,
                    rx_bytes: 2000,
                    transactions: 50,
                },
                Interval {
                    start_s: 1.0,
                    length_s: 0.5,
                    tx_bytes: 1000,
                    rx_bytes: 2000,
                    transactions: 50,
                },
            ],
            cpu,
            tcp_info: Some(TcpInfoSummary {
                flows: 1,
                ..TcpInfoSummary::default()
            }),
            workers: Vec::new(),
            busy_poll: false,
            connections: 1,
            error_samples: Vec::new(),
            profile: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn figures_match_hand_computed_values() {
        // window 2 s, tx 2000, rx 4000, 100 transactions; client process 0.5 s,
        // server process 0.25 s; client host busy 1.0 s, server host busy 2.0 s.
        let client = side(2.0, 2000, 4000, 100, cpu(0.5, 1.0));
        let server = side(2.0, 4000, 2000, 100, cpu(0.25, 2.0));
        let run = derive_run(
            3,
            "2024-05-01T10:00:00Z".into(),
            client.clone(),
            Some(server.clone()),
        );

        assert_eq!(run.status, RunStatus::Ok);
        assert_eq!(
            (run.run, run.started.as_str(), run.error.as_deref()),
            (3, "2024-05-01T10:00:00Z", None)
        );
        let t = run.throughput.unwrap();
        assert!(close(t.bytes_per_s, 3000.0));
        assert!(close(t.tx_bytes_per_s, 1000.0));
        assert!(close(t.rx_bytes_per_s, 2000.0));
        assert!(close(t.transactions_per_s, 50.0));

        let e = run.efficiency.unwrap();
        // 6000 bytes / 0.5 s = 12000; 0.5 s × 1e6 / 100 = 5000 µs.
        assert!(close(e.client_bytes_per_cpu_s.unwrap(), 12_000.0));
        assert!(close(e.client_cpu_us_per_txn.unwrap(), 5000.0));
        // 6000 / 0.25 = 24000; 0.25 × 1e6 / 100 = 2500 µs.
        assert!(close(e.server_bytes_per_cpu_s.unwrap(), 24_000.0));
        assert!(close(e.server_cpu_us_per_txn.unwrap(), 2500.0));
        // System-wide: 6000 / 1.0, 1.0 × 1e6 / 100; 6000 / 2.0, 2.0 × 1e6 / 100.
        assert!(close(e.client_bytes_per_system_cpu_s.unwrap(), 6000.0));
        assert!(close(e.client_system_cpu_us_per_txn.unwrap(), 10_000.0));
        assert!(close(e.server_bytes_per_system_cpu_s.unwrap(), 3000.0));
        assert!(close(e.server_system_cpu_us_per_txn.unwrap(), 20_000.0));

        assert_eq!(run.errors, 2, "client and server errors are summed");
        assert_eq!(run.transaction_time_us, client.latency);
        assert_eq!(run.tcp_info, client.tcp_info);
        assert_eq!(
            run.cpu,
            Some(CpuPair {
                client: client.cpu,
                server: Some(server.cpu)
            })
        );
        assert_eq!(run.intervals.len(), 2);
        assert!(close(run.intervals[0].bytes_per_s, 3000.0));
        assert!(close(run.intervals[0].transactions_per_s, 50.0));
        assert!(
            close(run.intervals[1].bytes_per_s, 6000.0),
            "a short last interval is scaled by its length"
        );
        assert!(close(run.intervals[1].transactions_per_s, 100.0));
        assert_eq!(run.client, Some(client));
        assert_eq!(run.server, Some(server));
    }

    #[test]
    fn zero_cpu_or_zero_transactions_give_none() {
        let client = side(2.0, 2000, 4000, 100, cpu(0.0, 0.0));
        let run = derive_run(
            1,
            String::new(),
            client,
            Some(side(2.0, 0, 0, 0, cpu(0.0, 0.0))),
        );
        assert_eq!(run.efficiency, Some(Efficiency::default()));

        let client = side(2.0, 0, 0, 0, cpu(0.5, 1.0));
        let e = derive_run(1, String::new(), client, None)
            .efficiency
            .unwrap();
        assert_eq!(
            e.client_bytes_per_cpu_s,
            Some(0.0),
            "no payload over real CPU time is 0 bytes per CPU-second"
        );
        assert_eq!(
            e.client_cpu_us_per_txn, None,
            "no transactions: no CPU per transaction"
        );
        assert_eq!(e.client_system_cpu_us_per_txn, None);
    }

    #[test]
    fn without_a_server_report_server_figures_are_none() {
        let run = derive_run(
            1,
            String::new(),
            side(2.0, 2000, 4000, 100, cpu(0.5, 1.0)),
            None,
        );
        let e = run.efficiency.unwrap();
        assert!(e.client_bytes_per_cpu_s.is_some());
        assert_eq!(
            (e.server_bytes_per_cpu_s, e.server_cpu_us_per_txn),
            (None, None)
        );
        assert_eq!(
            (
                e.server_bytes_per_system_cpu_s,
                e.server_system_cpu_us_per_txn
            ),
            (None, None)
        );
        assert_eq!(run.cpu.unwrap().server, None);
        assert_eq!(run.errors, 1);
        assert_eq!(run.server, None);
    }

    #[test]
    fn zero_window_gives_zero_rates_never_nan() {
        let mut client = side(0.0, 2000, 4000, 100, cpu(0.5, 1.0));
        client.intervals = vec![Interval {
            start_s: 0.0,
            length_s: 0.0,
            tx_bytes: 5,
            rx_bytes: 5,
            transactions: 1,
        }];
        let run = derive_run(1, String::new(), client, None);
        let t = run.throughput.unwrap();
        assert_eq!(
            (
                t.bytes_per_s,
                t.tx_bytes_per_s,
                t.rx_bytes_per_s,
                t.transactions_per_s
            ),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!(
            (
                run.intervals[0].bytes_per_s,
                run.intervals[0].transactions_per_s
            ),
            (0.0, 0.0)
        );
        // JSON has no NaN or inf (serde_json writes null, which would not load back).
        let json = serde_json::to_string(&run).unwrap();
        assert_eq!(serde_json::from_str::<Run>(&json).unwrap(), run);
    }

    #[test]
    fn nonsense_denominators_give_no_figure() {
        assert_eq!(ratio(1.0, -1.0), None);
        assert_eq!(ratio(1.0, f64::NAN), None);
        assert_eq!(
            ratio(f64::MAX, f64::MIN_POSITIVE),
            None,
            "an overflow is not a figure"
        );
        assert_eq!(rate(1.0, f64::NAN), 0.0);
    }

    #[test]
    fn failed_run_has_no_measurements() {
        let run = failed_run(
            2,
            "2024-05-01T10:00:00Z".into(),
            RunStatus::Failed,
            "connect to 10.0.0.2:7000: refused".into(),
        );
        assert_eq!(run.status, RunStatus::Failed);
        assert_eq!(
            run.error.as_deref(),
            Some("connect to 10.0.0.2:7000: refused")
        );
        let v = serde_json::to_value(&run).unwrap();
        let obj = v.as_object().unwrap();
        for absent in [
            "throughput",
            "transaction_time_us",
            "cpu",
            "efficiency",
            "tcp_info",
            "client",
            "server",
        ] {
            assert!(
                !obj.contains_key(absent),
                "{absent} must be absent from a failed run: {v}"
            );
        }
        assert_eq!(v["status"], "failed");
        assert_eq!(v["intervals"], serde_json::json!([]));
        let back: Run = serde_json::from_value(v).unwrap();
        assert_eq!(back, run);
    }
}
