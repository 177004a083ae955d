//! What a worker hands over at its end: its counters, its window's CPU and placement,
//! its connections' TCP_INFO and the facts of one of its data sockets.

use std::net::IpAddr;
use std::os::fd::RawFd;

use linkperf_measured::{Environment, Totals, WorkerPlacement};
use linkperf_metrics::{
    read_tcp_info, socket_buffers, socket_congestion_control, socket_nodelay, ProcessCpu,
    TcpInfoAggregator,
};

use crate::counters::Counters;

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
    /// Whether it carried a flow on the blocking single-flow fast path (its
    /// socket parked in the side's signals): for the engine's own tests.
    #[cfg(test)]
    pub(crate) parked: bool,
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
