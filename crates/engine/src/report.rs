//! Merging the workers' reports into one side's record.

use linkperf_metrics::{ProcessCpu, SideCpu, SideReport, TcpInfoAggregator};

use crate::counters::Counters;
use crate::worker::{SocketFacts, WorkerReport};

/// One side's workers, merged.
#[derive(Debug)]
pub struct Aggregate {
    /// All counters added up.
    pub counters: Counters,
    /// Sum of the workers' thread CPU over the window.
    pub worker_cpu: ProcessCpu,
    /// One data socket's facts.
    pub socket: Option<SocketFacts>,
    /// The rest of the record, waiting for the side's CPU.
    workers: Vec<linkperf_metrics::WorkerPlacement>,
    tcp: TcpInfoAggregator,
    connections: u64,
}

/// Merges worker reports.
pub fn aggregate(reports: Vec<WorkerReport>) -> Aggregate {
    let mut counters = Counters::new(true);
    let mut worker_cpu = ProcessCpu {
        user_s: 0.0,
        system_s: 0.0,
    };
    let mut tcp = TcpInfoAggregator::new();
    let mut socket = None;
    let mut workers = Vec::new();
    let mut connections = 0;
    for r in reports {
        counters.merge(&r.counters);
        worker_cpu += r.cpu;
        tcp.merge(&r.tcp);
        if socket.is_none() {
            socket = r.socket;
        }
        workers.push(r.placement);
        connections += r.connections;
    }
    Aggregate {
        counters,
        worker_cpu,
        socket,
        workers,
        tcp,
        connections,
    }
}

impl Aggregate {
    /// The side's record, given its CPU over a window of `window_s` seconds.
    pub fn into_report(self, window_s: f64, cpu: SideCpu, busy_poll: bool) -> SideReport {
        let c = &self.counters;
        let latency = c.window_latency();
        SideReport {
            window_s,
            tx_bytes: c.tx_bytes,
            rx_bytes: c.rx_bytes,
            transactions: c.transactions,
            errors: c.errors,
            totals: c.totals,
            latency: latency.summary(),
            intervals: c.intervals(),
            cpu,
            tcp_info: self.tcp.summary(),
            workers: self.workers,
            busy_poll,
            connections: self.connections,
            error_samples: c.error_samples.clone(),
            profile: None,
            latency_histogram: latency.encode_histogram(),
            flows: c.flow_counts(),
            udp: c.datagrams.report(),
            links: Vec::new(),
            pinned_cpus: Vec::new(),
        }
    }
}
