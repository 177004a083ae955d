//! Merging the workers' reports into one side's record.

use linkperf_measured::{Environment, ProcessMethod, SideCpu, SideReport};
use linkperf_metrics::{
    side_cpu, system_cpu_between, system_cpu_now, ProcessCpu, TcpInfoAggregator,
};

use crate::counters::Counters;
use crate::sampler::WindowCpu;
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
    workers: Vec<linkperf_measured::WorkerPlacement>,
    tcp: TcpInfoAggregator,
    connections: u64,
}

/// A side's CPU from its sampler's `window`: the sampled whole process's
/// when `asked` for and sampled, else its workers' threads' (`worker_cpu`),
/// with the system's over the same window.
pub(crate) fn window_cpu(
    window: Option<&WindowCpu>,
    asked: ProcessMethod,
    worker_cpu: ProcessCpu,
) -> SideCpu {
    let (process, method) = match (asked, window) {
        (ProcessMethod::RusageSelf, Some(w)) => (w.process, ProcessMethod::RusageSelf),
        _ => (worker_cpu, ProcessMethod::RusageThreadSum),
    };
    match window {
        Some(w) => {
            let mut cpu = side_cpu(process, method, &w.system, w.window_s);
            w.mark(&mut cpu);
            cpu
        }
        None => {
            let s = system_cpu_now();
            side_cpu(process, method, &system_cpu_between(&s, &s), 0.0)
        }
    }
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
    /// The side's record from its workers and its sampler's `window`: the
    /// one place every side (linkperf's client and server, the driver of a
    /// stock iperf3 server) puts it together. The process CPU is the
    /// sampled whole process's when `asked` for and sampled, else the
    /// workers' threads'; `window_s` is the window the counts cover (or,
    /// when the workers stopped counting before it closed, the part that
    /// ran: where the intervals end); the data socket's facts go into `env`.
    pub fn side_report(
        mut self,
        window: Option<&WindowCpu>,
        asked: ProcessMethod,
        window_s: f64,
        busy_poll: bool,
        env: &mut Environment,
    ) -> SideReport {
        let cpu = window_cpu(window, asked, self.worker_cpu);
        // An aborted side counted until its stop, not until it reported; a
        // side cut short by the other's end stops counting where its
        // window ended: the intervals end where the window does.
        let window_s = match self.counters.cut_window_s() {
            Some(cut) => cut.min(window_s),
            None => {
                self.counters.stop_after_s(window_s);
                window_s
            }
        };
        if let Some(s) = &self.socket {
            s.record(env);
        }
        let mut report = self.into_report(window_s, cpu, busy_poll);
        if let Some(w) = window {
            w.fill(&mut report);
        }
        report
    }

    /// The side's record, given its CPU over a window of `window_s` seconds.
    fn into_report(self, window_s: f64, cpu: SideCpu, busy_poll: bool) -> SideReport {
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
            open_loop: c.open.as_ref().map(|t| t.record(window_s.ceil() as usize)),
        }
    }
}
