//! What every event-loop worker shares, client or server: its placement, its
//! window CPU accounting, its buffers and the report it hands back.

use std::net::IpAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use linkperf_metrics::{
    current_cpu, current_thread_allowed_cpus, pin_current_thread, read_tcp_info, socket_buffers,
    socket_congestion_control, socket_nodelay, thread_cpu_now, Environment, ProcessCpu,
    TcpInfoAggregator, Totals, WorkerPlacement,
};

use crate::counters::Counters;
use crate::schedule::Schedule;

/// Token of a worker's waker.
pub const WAKER: mio::Token = mio::Token(usize::MAX);

/// Longest a worker sleeps before looking at its signals again.
pub const MAX_SLEEP: Duration = Duration::from_millis(50);

/// Size of the buffer payload is written from (and read into).
const MAX_BUFFER: usize = 1 << 20;
const MIN_BUFFER: usize = 64 * 1024;

/// Facts read from one data socket, for the environment record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketFacts {
    /// Local address of the data connection (finds the interface and its MTU).
    pub local_ip: Option<IpAddr>,
    /// Congestion control in use.
    pub cc: Option<String>,
    /// SO_SNDBUF as the kernel set it.
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF as the kernel set it.
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY as read back (TCP only).
    pub nodelay: Option<bool>,
}

impl SocketFacts {
    /// Reads the facts of socket `fd`.
    pub fn read(fd: RawFd, local_ip: Option<IpAddr>, tcp: bool) -> Self {
        let (sndbuf, rcvbuf) = socket_buffers(fd);
        SocketFacts {
            local_ip,
            cc: if tcp {
                socket_congestion_control(fd)
            } else {
                None
            },
            sndbuf,
            rcvbuf,
            nodelay: if tcp { socket_nodelay(fd) } else { None },
        }
    }

    /// Puts these facts in a side's environment record.
    pub fn record(&self, env: &mut Environment) {
        env.socket_congestion_control = self.cc.clone();
        env.socket_sndbuf = self.sndbuf;
        env.socket_rcvbuf = self.rcvbuf;
        env.socket_nodelay = self.nodelay;
    }
}

/// What one worker hands back at the end.
#[derive(Debug)]
pub struct WorkerReport {
    /// Its counters.
    pub counters: Counters,
    /// Its thread's CPU over the window.
    pub cpu: ProcessCpu,
    /// Where it ran.
    pub placement: WorkerPlacement,
    /// TCP_INFO of its flows at the end of the window.
    pub tcp: TcpInfoAggregator,
    /// Connections it opened or accepted.
    pub connections: u64,
    /// Facts of one of its data sockets.
    pub socket: Option<SocketFacts>,
    /// Whole-life counts of each flow it carried, by flow id (client workers
    /// only; empty on the server). A foreign server's per-connection report
    /// (iperf3's) is compared against these.
    pub flow_totals: Vec<(u32, Totals)>,
}

/// Payload buffers of one worker.
#[derive(Debug)]
pub struct Buffers {
    /// Written from.
    pub write: Vec<u8>,
    /// Read into.
    pub read: Vec<u8>,
}

impl Buffers {
    /// Buffers for messages up to `largest` bytes.
    pub fn new(largest: usize) -> Self {
        let n = largest.clamp(MIN_BUFFER, MAX_BUFFER);
        Buffers {
            write: vec![0x5a; n],
            read: vec![0; n],
        }
    }
}

/// A worker's window bookkeeping: thread CPU at the window's edges, placement.
#[derive(Debug)]
pub struct WindowClock {
    id: u32,
    pinned: Option<Vec<usize>>,
    cpu_start: Option<ProcessCpu>,
    cpu_end: Option<ProcessCpu>,
    last_cpu: Option<usize>,
    /// Set once the window has closed (TCP_INFO is read then).
    pub closed: bool,
}

impl WindowClock {
    /// Pins the calling thread when `cpus` says so.
    pub fn start(id: u32, cpus: Option<Vec<usize>>) -> Result<Self, String> {
        if let Some(c) = &cpus {
            pin_current_thread(c).map_err(|e| format!("worker {id}: {e}"))?;
        }
        Ok(WindowClock {
            id,
            pinned: cpus,
            cpu_start: None,
            cpu_end: None,
            last_cpu: None,
            closed: false,
        })
    }

    /// Whether the window opens at `now` (its CPU not yet sampled): what a
    /// worker reads to subtract from its window's figures (each connection's
    /// retransmits so far) it reads then, before [`WindowClock::tick`].
    pub fn opening(&self, schedule: &Schedule, now: Instant) -> bool {
        self.cpu_start.is_none() && now >= schedule.measure_from
    }

    /// Samples thread CPU when `now` crosses the window's edges. Returns true
    /// exactly once, when the window has just closed.
    pub fn tick(&mut self, schedule: &Schedule, now: Instant) -> bool {
        if self.cpu_start.is_none() && now >= schedule.measure_from {
            self.cpu_start = Some(thread_cpu_now());
        }
        if self.cpu_end.is_none() && now >= schedule.measure_until {
            self.cpu_end = Some(thread_cpu_now());
            self.last_cpu = current_cpu();
            self.closed = true;
            return true;
        }
        false
    }

    /// Closes the window now if it has not closed (an abort or early end).
    pub fn close(&mut self) {
        if self.cpu_start.is_some() && self.cpu_end.is_none() {
            self.cpu_end = Some(thread_cpu_now());
            self.last_cpu = current_cpu();
            self.closed = true;
        }
    }

    /// CPU over the window, and where the worker ran.
    pub fn finish(&self, flows: u32) -> (ProcessCpu, WorkerPlacement) {
        let cpu = match (self.cpu_start, self.cpu_end) {
            (Some(a), Some(b)) => b.since(&a),
            _ => ProcessCpu {
                user_s: 0.0,
                system_s: 0.0,
            },
        };
        let placement = WorkerPlacement {
            worker: self.id,
            pinned: self.pinned.clone(),
            allowed_cpus: current_thread_allowed_cpus(),
            last_cpu: self.last_cpu.or_else(current_cpu),
            flows,
        };
        (cpu, placement)
    }
}

/// How long to sleep in the event wait.
pub fn poll_timeout(
    busy_poll: bool,
    now: Instant,
    schedule: Option<&Schedule>,
    timer: Option<Instant>,
) -> Duration {
    if busy_poll {
        return Duration::ZERO;
    }
    let mut t = MAX_SLEEP;
    if let Some(next) = schedule.and_then(|s| s.next_boundary(now)) {
        t = t.min(next.saturating_duration_since(now));
    }
    if let Some(at) = timer {
        t = t.min(at.saturating_duration_since(now));
    }
    t
}

/// Segments the TCP connection `fd` has retransmitted so far (0 when it is
/// not TCP).
pub fn retransmits_so_far(fd: RawFd) -> u32 {
    read_tcp_info(fd).map_or(0, |i| i.total_retrans)
}

/// Reads TCP_INFO of `fd` into `agg`, its retransmits counted from `before`
/// (what [`retransmits_so_far`] read when the window opened; 0 for a
/// connection opened since), so that warm-up and connect are not in them.
pub fn sample_tcp_info(fd: RawFd, before: u32, agg: &mut TcpInfoAggregator) {
    if let Some(mut info) = read_tcp_info(fd) {
        info.total_retrans = info.total_retrans.saturating_sub(before);
        agg.add(&info);
    }
}

/// CPU list for worker `i` from an affinity list.
pub fn cpus_for(i: usize, affinity: Option<&Vec<usize>>) -> Option<Vec<usize>> {
    affinity
        .filter(|a| !a.is_empty())
        .map(|a| vec![a[i % a.len()]])
}
