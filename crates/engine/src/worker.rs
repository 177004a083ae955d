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

/// How many accepted data connections may wait for their preamble at once
/// on a worker whose flows (or a profile's users' connections) hold
/// `conns`: twice that plus 64, so that anyone may open a connection and
/// the ones that never send a preamble stay bounded. Past it, the one that
/// waited longest is closed for each new one. The workload server and the
/// profile worker both keep it.
pub(crate) fn preamble_cap(conns: usize) -> usize {
    conns.saturating_mul(2).saturating_add(64)
}

/// Bytes of payload written at most per write: every worker writes from one
/// region of this size, shared by the whole process.
const PAYLOAD_BYTES: usize = 1 << 20;
/// Largest read scratch of a worker: what it reads into, whatever the
/// messages' size (a larger message is read in parts).
const MAX_SCRATCH: usize = 256 * 1024;
const MIN_SCRATCH: usize = 64 * 1024;
/// Largest UDP datagram, header included.
const MAX_DATAGRAM: usize = 65_536;

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

/// The payload every worker writes from: one read-only region for the whole
/// process, so that a worker's memory does not grow with the messages' size.
pub fn payload() -> &'static [u8] {
    static PAYLOAD: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    PAYLOAD.get_or_init(|| vec![0x5a; PAYLOAD_BYTES].into_boxed_slice())
}

/// Payload buffers of one worker: the shared payload it writes from, a
/// bounded scratch it reads into, and, for UDP, room for one datagram.
#[derive(Debug)]
pub struct Buffers {
    /// Written from (shared by every worker of the process).
    pub write: &'static [u8],
    /// Read into.
    pub read: Vec<u8>,
    /// A datagram, or a run of them, being assembled (header and payload);
    /// empty for TCP.
    pub datagram: Vec<u8>,
}

impl Buffers {
    /// Buffers for messages up to `largest` bytes, with room for a datagram
    /// when `udp`. At most [`BUFFER_BYTES_PER_WORKER`] of the worker's own,
    /// whatever `largest` is.
    pub fn new(largest: usize, udp: bool) -> Self {
        let scratch = if udp {
            // A datagram is read whole.
            largest.clamp(MIN_SCRATCH, MAX_DATAGRAM)
        } else {
            largest.clamp(MIN_SCRATCH, MAX_SCRATCH)
        };
        Buffers {
            write: payload(),
            read: vec![0; scratch],
            // Room for a run of datagrams sent in one call (UDP streams).
            datagram: if udp {
                vec![0x5a; MAX_DATAGRAM]
            } else {
                Vec::new()
            },
        }
    }
}

/// The most memory one worker's buffers hold, bytes (the shared payload
/// aside): what a server charges a worker for its buffers.
pub const BUFFER_BYTES_PER_WORKER: usize = MAX_SCRATCH + MAX_DATAGRAM;

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
