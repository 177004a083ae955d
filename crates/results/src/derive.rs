//! Computing a [`Run`]'s figures from what the two sides measured. Pure
//! functions: no clock, no I/O.
//!
//! Every rate is over the client's measurement window. Each direction's bytes
//! are counted at its receiver: client to server by the server, server to
//! client by the client. Only where the receiver did not report (a foreign
//! server) does the sender's count stand in, and [`Throughput::counted_at`]
//! says so. A rate over a zero window is 0; an efficiency over zero CPU time
//! or zero transactions is `None`. No figure is ever NaN or infinite (JSON
//! cannot carry them).

use linkperf_measured::{
    FlowCounts, FlowMeasure, FlowStats, Interval, SideCpu, SideReport, TcpInfoSummary,
};
use linkperf_workload::{Protocol, StreamDirection, TestSpec, Workload};

use crate::{
    CountedAt, Counter, CpuPair, DirectionBytes, Efficiency, IntervalRate, Payload, PinnedCpu,
    PinnedSide, Run, RunStatus, Throughput,
};

/// Microseconds in a second.
const US_PER_S: f64 = 1e6;

/// The run of `spec` whose window completed: status `ok` (until checked, see
/// [`crate::judge_run`]), its figures derived from the client's report and
/// the server's (when the server reported).
pub fn derive_run(
    run: u32,
    started: String,
    spec: &TestSpec,
    client: SideReport,
    server: Option<SideReport>,
) -> Run {
    let carried = Carried::of(spec, &client, server.as_ref());
    let intervals = receiver_intervals(spec, &client, server.as_ref());
    Run {
        run,
        started,
        status: RunStatus::Ok,
        error: None,
        status_reasons: Vec::new(),
        retry_of: None,
        throughput: Some(carried.throughput(client.window_s)),
        payload: Some(carried.payload),
        flows: flow_stats(spec, &client, server.as_ref()),
        loss: (spec.protocol == Protocol::Udp && !is_stream(spec))
            .then(|| crate::checks::udp_loss_of(&client)),
        wire: crate::LinkUse::of(&client, server.as_ref()),
        pinned: pinned_cpu(spec, &client, server.as_ref()),
        udp: crate::udp::udp_stream(spec, &client, server.as_ref()),
        open_loop: crate::open_loop::open_loop(spec, &client),
        checks: Vec::new(),
        parts: Vec::new(),
        agents: None,
        transaction_time_us: client.latency,
        cpu: Some(CpuPair {
            client: client.cpu,
            server: server.as_ref().map(|s| s.cpu),
        }),
        efficiency: Some(efficiency(&carried, &client, server.as_ref())),
        intervals,
        errors: client
            .errors
            .saturating_add(server.as_ref().map_or(0, |s| s.errors)),
        tcp_info: both_ends_tcp(client.tcp_info, server.as_ref().and_then(|s| s.tcp_info)),
        client: Some(client),
        server,
    }
}

/// A run's TCP_INFO from both ends' connections: each side reads its own
/// sockets, and a segment is retransmitted by its sender (a download's by
/// the server), so the retransmits are both sides' sum; `flows` the flows
/// of the side that read more of them (each flow has a socket at each
/// end); the RTT, its variance, the window and the MSS means over every
/// socket read, the largest RTT of all.
pub(crate) fn both_ends_tcp(
    client: Option<TcpInfoSummary>,
    server: Option<TcpInfoSummary>,
) -> Option<TcpInfoSummary> {
    let (c, s) = match (client, server) {
        (Some(c), Some(s)) if c.flows > 0 && s.flows > 0 => (c, s),
        (c, s) => {
            return c
                .filter(|c| c.flows > 0)
                .or(s.filter(|s| s.flows > 0))
                .or(c)
        }
    };
    let (wc, ws) = (f64::from(c.flows), f64::from(s.flows));
    let mean = |a: f64, b: f64| (a * wc + b * ws) / (wc + ws);
    Some(TcpInfoSummary {
        flows: c.flows.max(s.flows),
        retransmits: c.retransmits.saturating_add(s.retransmits),
        rtt_us_mean: mean(c.rtt_us_mean, s.rtt_us_mean),
        rtt_us_max: c.rtt_us_max.max(s.rtt_us_max),
        rttvar_us_mean: mean(c.rttvar_us_mean, s.rttvar_us_mean),
        snd_cwnd_mean: mean(c.snd_cwnd_mean, s.snd_cwnd_mean),
        snd_mss_mean: mean(c.snd_mss_mean, s.snd_mss_mean),
    })
}

/// A run that measured nothing: its status (`failed` or `aborted`), why, and no
/// figures at all.
pub fn failed_run(run: u32, started: String, status: RunStatus, error: String) -> Run {
    Run {
        run,
        started,
        status,
        status_reasons: vec![error.clone()],
        error: Some(error),
        retry_of: None,
        throughput: None,
        payload: None,
        flows: None,
        loss: None,
        wire: None,
        pinned: None,
        udp: None,
        open_loop: None,
        checks: Vec::new(),
        parts: Vec::new(),
        agents: None,
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

fn is_stream(spec: &TestSpec) -> bool {
    matches!(spec.workload, Workload::Stream { .. })
}

/// What the window carried, each direction from its receiver where it can be.
struct Carried {
    payload: Payload,
    counted_at: CountedAt,
    /// Client to server, as counted (received, else sent).
    up: u64,
    /// Server to client, as counted.
    down: u64,
    transactions: f64,
}

impl Carried {
    fn of(spec: &TestSpec, client: &SideReport, server: Option<&SideReport>) -> Self {
        let dir = |sent: u64, received: Option<u64>| DirectionBytes {
            sent,
            received,
            in_flight: received.map(|r| sent as i64 - r as i64),
        };
        let payload = Payload {
            client_to_server: dir(client.tx_bytes, server.map(|s| s.rx_bytes)),
            server_to_client: dir(
                server.map_or(client.rx_bytes, |s| s.tx_bytes),
                Some(client.rx_bytes),
            ),
        };
        // Without the server's report, the client's own count of what it sent
        // is all there is for uploads.
        let counted_at = if server.is_some() {
            CountedAt::receivers()
        } else {
            CountedAt {
                client_to_server: Counter::Sender,
                server_to_client: Counter::Receiver,
            }
        };
        let up = server.map_or(client.tx_bytes, |s| s.rx_bytes);
        let down = client.rx_bytes;
        let transactions = match (&spec.workload, server) {
            // Messages whole at their receiver.
            (Workload::Stream { direction, message }, Some(s)) => match direction {
                StreamDirection::Up => s.transactions as f64,
                StreamDirection::Down => client.transactions as f64,
                StreamDirection::Bidir => (up + down) as f64 / message.0.max(1) as f64,
            },
            // Round trips, complete when the client has read the response.
            _ => client.transactions as f64,
        };
        Carried {
            payload,
            counted_at,
            up,
            down,
            transactions,
        }
    }

    fn throughput(&self, window_s: f64) -> Throughput {
        Throughput {
            bytes_per_s: rate((self.up + self.down) as f64, window_s),
            tx_bytes_per_s: rate(self.up as f64, window_s),
            rx_bytes_per_s: rate(self.down as f64, window_s),
            transactions_per_s: rate(self.transactions, window_s),
            counted_at: self.counted_at,
        }
    }
}

/// The run's per-second samples, each direction from its receiver: the
/// server's intervals for client to server, the client's for server to
/// client (the client's alone where the server sent none that line up).
/// An aborted test's server, told to stop a moment after the client, may
/// have counted a second more: its seconds still line up with the client's.
fn receiver_intervals(
    spec: &TestSpec,
    client: &SideReport,
    server: Option<&SideReport>,
) -> Vec<IntervalRate> {
    let server_iv = server
        .map(|s| &s.intervals)
        .filter(|iv| iv.len() >= client.intervals.len());
    client
        .intervals
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let s = server_iv.and_then(|iv| iv.get(k));
            let up = s.map_or(c.tx_bytes, |s| s.rx_bytes);
            // Each direction's datagrams from its receiver's second.
            let receivers: Vec<&Interval> = match &spec.workload {
                Workload::Stream { direction, .. } => {
                    let mut r = Vec::new();
                    if *direction != StreamDirection::Down {
                        r.extend(s);
                    }
                    if *direction != StreamDirection::Up {
                        r.push(c);
                    }
                    r
                }
                _ => Vec::new(),
            };
            let (loss_rate, jitter_us) = crate::udp::interval_udp(&receivers);
            let transactions = match (&spec.workload, s) {
                (Workload::Stream { direction, message }, Some(s)) => match direction {
                    StreamDirection::Up => s.transactions,
                    StreamDirection::Down => c.transactions,
                    StreamDirection::Bidir => (up + c.rx_bytes) / message.0.max(1),
                },
                _ => c.transactions,
            };
            IntervalRate {
                second: Interval {
                    start_s: c.start_s,
                    length_s: c.length_s,
                    tx_bytes: up,
                    rx_bytes: c.rx_bytes,
                    transactions,
                    jitter_us,
                    ..Interval::default()
                },
                loss_rate,
            }
        })
        .collect()
}

/// The distribution over the test's users of what each flow achieved:
/// transactions for request/response (as the client completed them),
/// received bytes for streams (at whichever side received them). A user with
/// no counts at all counts as 0. `None` for a profile, or when the sides
/// carried no per-flow counts (a foreign server).
pub fn flow_stats(
    spec: &TestSpec,
    client: &SideReport,
    server: Option<&SideReport>,
) -> Option<FlowStats> {
    let users = spec.users as usize;
    if users == 0 || matches!(spec.workload, Workload::Profile { .. }) {
        return None;
    }
    let mut values = vec![0u64; users];
    let add = |values: &mut Vec<u64>,
               counts: &FlowCounts,
               f: fn(&linkperf_measured::FlowCount) -> u64| {
        for c in counts.as_slice() {
            if let Some(v) = values.get_mut(c.flow as usize) {
                *v = v.saturating_add(f(c));
            }
        }
    };
    let measure = match &spec.workload {
        Workload::Stream { direction, .. } => {
            let received_by_server =
                matches!(direction, StreamDirection::Up | StreamDirection::Bidir);
            let received_by_client =
                matches!(direction, StreamDirection::Down | StreamDirection::Bidir);
            if received_by_server {
                let s = server.filter(|s| !s.flows.is_empty())?;
                add(&mut values, &s.flows, |c| c.rx_bytes);
            }
            if received_by_client {
                if client.flows.is_empty() {
                    return None;
                }
                add(&mut values, &client.flows, |c| c.rx_bytes);
            }
            FlowMeasure::ReceivedBytes
        }
        _ => {
            if client.flows.is_empty() {
                return None;
            }
            add(&mut values, &client.flows, |c| c.transactions);
            FlowMeasure::Transactions
        }
    };
    FlowStats::of(measure, &values)
}

/// CPU efficiency of both sides for the payload the window carried (as
/// received) and the transactions the client counted.
fn efficiency(carried: &Carried, client: &SideReport, server: Option<&SideReport>) -> Efficiency {
    let bytes = (carried.up + carried.down) as f64;
    let txns = carried.transactions;
    let server_cpu: Option<&SideCpu> = server.map(|s| &s.cpu);
    let per_cpu_s = |cpu_s: f64| ratio(bytes, cpu_s);
    let us_per_txn = |cpu_s: f64| {
        if cpu_s > 0.0 {
            ratio(cpu_s * US_PER_S, txns)
        } else {
            None
        }
    };
    let pinned = pinned_cpu_of(client, server);
    let pinned_s = |f: fn(&PinnedCpu) -> &PinnedSide| pinned.as_ref().map(|p| f(p).busy_s);
    let client_pinned = pinned_s(|p| &p.client);
    let server_pinned = pinned_s(|p| &p.server);
    Efficiency {
        client_bytes_per_pinned_cpu_s: client_pinned.and_then(per_cpu_s),
        server_bytes_per_pinned_cpu_s: server_pinned.and_then(per_cpu_s),
        client_pinned_cpu_us_per_txn: client_pinned.and_then(us_per_txn),
        server_pinned_cpu_us_per_txn: server_pinned.and_then(us_per_txn),
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

/// Each side's CPU from its pinned CPUs: both sides must have been pinned,
/// to CPUs the other did not use (else a CPU's time cannot be given to one
/// side), over a window of some length.
fn pinned_cpu(
    spec: &TestSpec,
    client: &SideReport,
    server: Option<&SideReport>,
) -> Option<PinnedCpu> {
    let mut p = pinned_cpu_of(client, server)?;
    let users = f64::from(spec.users.max(1));
    p.client.per_user = p.client.utilisation / users;
    p.server.per_user = p.server.utilisation / users;
    Some(p)
}

fn pinned_cpu_of(client: &SideReport, server: Option<&SideReport>) -> Option<PinnedCpu> {
    let server = server?;
    let side = |s: &SideReport| -> Option<PinnedSide> {
        if s.pinned_cpus.is_empty() || s.window_s <= 0.0 {
            return None;
        }
        let busy_s: f64 = s.pinned_cpus.iter().map(|c| c.time.busy_s()).sum();
        Some(PinnedSide {
            cpus: s.pinned_cpus.iter().map(|c| c.cpu).collect(),
            busy_s,
            softirq_s: s.pinned_cpus.iter().map(|c| c.time.softirq_s).sum(),
            utilisation: busy_s / s.window_s,
            per_user: 0.0,
        })
    };
    let (c, s) = (side(client)?, side(server)?);
    c.cpus
        .iter()
        .all(|x| !s.cpus.contains(x))
        .then_some(PinnedCpu {
            client: c,
            server: s,
        })
}

/// `amount / seconds`, or 0 when there is no (valid) time to divide by.
pub(crate) fn rate(amount: f64, seconds: f64) -> f64 {
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
    use linkperf_measured::{
        BusyMethod, LatencySummary, ProcStatBreakdown, ProcessMethod, TcpInfoSummary, Totals,
    };

    use super::*;

    /// `derive_run` for a 1-user request/response test.
    fn rr_run(n: u32, started: String, client: SideReport, server: Option<SideReport>) -> Run {
        let spec = linkperf_workload::TestSpec::new(
            "rr:200x1000".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            1,
            std::time::Duration::from_secs(2),
        );
        crate::derive_run(n, started, &spec, client, server)
    }

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
            opened_late_s: None,
            closed_late_s: None,
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
                    ..Default::default()
                },
                Interval {
                    start_s: 1.0,
                    length_s: 0.5,
                    tx_bytes: 1000,
                    rx_bytes: 2000,
                    transactions: 50,
                    ..Default::default()
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
            latency_histogram: None,
            flows: Default::default(),
            udp: None,
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
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
        let mut server = side(2.0, 4000, 2000, 100, cpu(0.25, 2.0));
        // The server read what the client wrote, second by second.
        for i in &mut server.intervals {
            std::mem::swap(&mut i.tx_bytes, &mut i.rx_bytes);
        }
        let run = rr_run(
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
        // Both ends' sockets: each side read its one flow's.
        assert_eq!(run.tcp_info.map(|t| t.flows), Some(1));
        assert_eq!(
            run.cpu,
            Some(CpuPair {
                client: client.cpu,
                server: Some(server.cpu)
            })
        );
        assert_eq!(run.intervals.len(), 2);
        assert!(close(run.intervals[0].bytes_per_s(), 3000.0));
        assert!(close(run.intervals[0].transactions_per_s(), 50.0));
        assert!(
            close(run.intervals[1].bytes_per_s(), 6000.0),
            "a short last interval is scaled by its length"
        );
        assert!(close(run.intervals[1].transactions_per_s(), 100.0));
        assert_eq!(run.client, Some(client));
        assert_eq!(run.server, Some(server));
    }

    #[test]
    fn an_aborted_servers_later_second_leaves_the_others_receiver_counted() {
        // The client stopped 1.5 s into the window, the server a moment
        // later, in the third second.
        let client = side(1.5, 2000, 4000, 100, cpu(0.5, 1.0));
        let mut server = side(1.6, 4000, 2000, 100, cpu(0.25, 2.0));
        server.intervals[0].rx_bytes = 900;
        server.intervals[1].rx_bytes = 700;
        server.intervals.push(Interval {
            start_s: 2.0,
            length_s: 0.1,
            tx_bytes: 0,
            rx_bytes: 1,
            transactions: 0,
            ..Interval::default()
        });
        let run = rr_run(1, String::new(), client, Some(server));
        let up: Vec<u64> = run.intervals.iter().map(|i| i.second.tx_bytes).collect();
        assert_eq!(
            up,
            [900, 700],
            "the server's seconds, as many as the client's"
        );
        // A server with fewer seconds than the client's does not line up.
        let mut short = side(1.5, 4000, 2000, 100, cpu(0.25, 2.0));
        short.intervals.pop();
        let run = rr_run(
            1,
            String::new(),
            side(1.5, 2000, 4000, 100, cpu(0.5, 1.0)),
            Some(short),
        );
        let up: Vec<u64> = run.intervals.iter().map(|i| i.second.tx_bytes).collect();
        assert_eq!(up, [1000, 1000], "the client's own count");
    }

    #[test]
    fn each_side_is_given_the_time_of_the_cpus_it_alone_was_pinned_to() {
        use linkperf_measured::CpuShare;
        let share = |cpu: usize, user_s: f64, softirq_s: f64| CpuShare {
            cpu,
            time: ProcStatBreakdown {
                user_s,
                system_s: 0.2,
                softirq_s,
                steal_s: 0.5,
                idle_s: 1.0,
                ..ProcStatBreakdown::default()
            },
        };
        // Window 2 s, 6000 payload bytes, 100 transactions; the client on CPU
        // 0 (busy 0.6 + 0.2 + 0.2 = 1.0 s), the server on CPUs 1 and 2 (1.5 s,
        // 0.9 of it softirq); steal and idle are nobody's.
        let mut client = side(2.0, 2000, 4000, 100, cpu(0.5, 1.0));
        client.pinned_cpus = vec![share(0, 0.6, 0.2)];
        let mut server = side(2.0, 4000, 2000, 100, cpu(0.25, 2.0));
        server.pinned_cpus = vec![share(1, 0.1, 0.5), share(2, 0.1, 0.4)];
        let run = rr_run(1, "t".into(), client.clone(), Some(server.clone()));
        let p = run.pinned.as_ref().expect("pinned apart");
        assert_eq!(p.client.cpus, [0]);
        assert!((p.client.busy_s - 1.0).abs() < 1e-12);
        assert!((p.client.utilisation - 0.5).abs() < 1e-12);
        assert_eq!(p.server.cpus, [1, 2]);
        assert!((p.server.busy_s - 1.5).abs() < 1e-12);
        assert!((p.server.softirq_s - 0.9).abs() < 1e-12);
        let e = run.efficiency.unwrap();
        assert!((e.client_pinned_cpu_us_per_txn.unwrap() - 10_000.0).abs() < 1e-6);
        assert!((e.server_pinned_cpu_us_per_txn.unwrap() - 15_000.0).abs() < 1e-6);
        assert!((e.server_bytes_per_pinned_cpu_s.unwrap() - 4_000.0).abs() < 1e-6);
        // Sharing a CPU, the time cannot be split: nothing is claimed.
        server.pinned_cpus = vec![share(0, 0.1, 0.5)];
        let run = rr_run(2, "t".into(), client.clone(), Some(server.clone()));
        assert_eq!(run.pinned, None);
        assert_eq!(run.efficiency.unwrap().client_pinned_cpu_us_per_txn, None);
        // One side free: neither.
        server.pinned_cpus.clear();
        assert_eq!(rr_run(3, "t".into(), client, Some(server)).pinned, None);
    }

    #[test]
    fn zero_cpu_or_zero_transactions_give_none() {
        let client = side(2.0, 2000, 4000, 100, cpu(0.0, 0.0));
        let run = rr_run(
            1,
            String::new(),
            client,
            Some(side(2.0, 0, 0, 0, cpu(0.0, 0.0))),
        );
        assert_eq!(run.efficiency, Some(Efficiency::default()));

        let client = side(2.0, 0, 0, 0, cpu(0.5, 1.0));
        let e = rr_run(1, String::new(), client, None).efficiency.unwrap();
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
        let run = rr_run(
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
            ..Default::default()
        }];
        let run = rr_run(1, String::new(), client, None);
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
                run.intervals[0].bytes_per_s(),
                run.intervals[0].transactions_per_s()
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

    #[test]
    fn uploads_are_counted_by_what_the_server_received() {
        // The study's veth-1g str-readx30k at 250 users: the client wrote
        // 443 MB into its sockets, the server read 358 MB, over 3 s.
        let spec = linkperf_workload::TestSpec::new(
            "str-readx30k".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            250,
            std::time::Duration::from_secs(3),
        );
        let mut client = side(3.0, 443_000_000, 0, 14_420, cpu(0.5, 1.0));
        client.intervals.clear();
        let mut server = side(3.0, 0, 358_000_000, 11_653, cpu(0.4, 1.0));
        server.intervals.clear();
        server.flows = linkperf_measured::FlowCounts::from_counts(
            (0..250)
                .map(|f| linkperf_measured::FlowCount {
                    flow: f,
                    transactions: 46,
                    tx_bytes: 0,
                    rx_bytes: 358_000_000 / 250,
                })
                .collect(),
        );
        let run = derive_run(1, String::new(), &spec, client.clone(), Some(server));
        let t = run.throughput.unwrap();
        assert!(close(t.tx_bytes_per_s, 358e6 / 3.0));
        assert!(t.tx_bytes_per_s * 8.0 < 1e9, "at most the 1 Gbit/s link");
        assert_eq!(t.counted_at, crate::CountedAt::receivers());
        assert!(
            close(t.transactions_per_s, 11_653.0 / 3.0),
            "messages whole at the server"
        );
        let p = run.payload.unwrap();
        assert_eq!(p.client_to_server.sent, 443_000_000);
        assert_eq!(p.client_to_server.received, Some(358_000_000));
        assert_eq!(p.client_to_server.in_flight, Some(85_000_000));
        let f = run.flows.unwrap();
        assert_eq!(f.measure, linkperf_measured::FlowMeasure::ReceivedBytes);
        assert_eq!((f.flows, f.no_progress), (250, 0));
        assert_eq!(f.jain, Some(1.0));
        // Without the server's report only the sender's count is there, and
        // the run says so.
        let run = derive_run(1, String::new(), &spec, client, None);
        let t = run.throughput.unwrap();
        assert!(close(t.tx_bytes_per_s, 443e6 / 3.0));
        assert_eq!(t.counted_at.client_to_server, crate::Counter::Sender);
        assert!(run.flows.is_none(), "no per-flow counts of the receiver");
    }

    /// Regression (issue 32): a 2-user download showed "0 retransmits over
    /// 1 flow": only the client's sockets were read, and one of them had
    /// closed before its window did; the server, the sender, retransmitted.
    #[test]
    fn a_runs_tcp_info_is_both_ends_sockets() {
        let t = |flows, retransmits, rtt| TcpInfoSummary {
            flows,
            retransmits,
            rtt_us_mean: rtt,
            rtt_us_max: rtt,
            rttvar_us_mean: 1.0,
            snd_cwnd_mean: 10.0,
            snd_mss_mean: 1448.0,
        };
        let both = both_ends_tcp(Some(t(2, 0, 10.0)), Some(t(2, 11, 30.0))).unwrap();
        assert_eq!(both.flows, 2);
        assert_eq!(both.retransmits, 11, "the sender's retransmits count");
        assert!((both.rtt_us_mean - 20.0).abs() < 1e-9);
        assert_eq!(both.rtt_us_max, 30.0);
        // One side alone (a foreign server, or UDP on one side): as it read.
        assert_eq!(both_ends_tcp(Some(t(2, 3, 5.0)), None), Some(t(2, 3, 5.0)));
        assert_eq!(both_ends_tcp(None, Some(t(1, 3, 5.0))), Some(t(1, 3, 5.0)));
        assert_eq!(both_ends_tcp(None, None), None);
    }
}
