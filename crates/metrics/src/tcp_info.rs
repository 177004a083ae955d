//! TCP_INFO of the data connections, and the socket settings the environment
//! record reports.

use std::os::fd::RawFd;

use crate::sys::socket;
use linkperf_measured::TcpInfoSummary;

/// The TCP_INFO fields linkperf keeps for one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfoSnapshot {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Smoothed RTT in microseconds (`tcpi_rtt`).
    pub rtt_us: u32,
    /// RTT variance in microseconds (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Congestion window in segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// Send MSS in bytes (`tcpi_snd_mss`).
    pub snd_mss: u32,
}

/// Reads TCP_INFO from a connected TCP socket. `None` if `fd` is not a TCP socket
/// or the kernel returned too short a structure; a kernel too old to report
/// `tcpi_total_retrans` gives 0 retransmits. The descriptor is only read.
pub fn read_tcp_info(fd: RawFd) -> Option<TcpInfoSnapshot> {
    socket::tcp_info(fd).map(|f| TcpInfoSnapshot {
        total_retrans: f.total_retrans,
        rtt_us: f.rtt_us,
        rttvar_us: f.rttvar_us,
        snd_cwnd: f.snd_cwnd,
        snd_mss: f.snd_mss,
    })
}

/// How long ago the TCP connection `fd` last received an acknowledgment from
/// its peer (`tcpi_last_ack_recv`); `None` if it is not a TCP socket. With
/// keepalive on, the peer's kernel answers a probe every interval, so this
/// stays under the interval while the peer's host is there and reachable.
pub fn since_last_ack(fd: RawFd) -> Option<std::time::Duration> {
    socket::tcp_info(fd).map(|f| std::time::Duration::from_millis(u64::from(f.last_ack_recv_ms)))
}

/// The TCP state of `fd` (`tcpi_state`: 1 established, 4 FIN-WAIT-1,
/// 5 FIN-WAIT-2, 6 TIME-WAIT, 7 CLOSE, 8 CLOSE-WAIT, …); `None` if it is
/// not a TCP socket.
pub fn tcp_state(fd: RawFd) -> Option<u8> {
    socket::tcp_info(fd).map(|f| f.state)
}

/// The window the peer last advertised on `fd` (`tcpi_snd_wnd`, Linux 5.4
/// and later): its free receive buffer, so it shrinks by what the peer has
/// received and not yet read. `None` if it is not a TCP socket or the
/// kernel does not report it.
pub fn peer_window(fd: RawFd) -> Option<u32> {
    socket::tcp_info(fd).and_then(|f| f.snd_wnd)
}

/// The socket's congestion control algorithm (TCP_CONGESTION), e.g. `cubic`.
pub fn socket_congestion_control(fd: RawFd) -> Option<String> {
    socket::congestion_control(fd)
}

/// Whether TCP_NODELAY is on; `None` if `fd` is not a TCP socket.
pub fn socket_nodelay(fd: RawFd) -> Option<bool> {
    socket::nodelay(fd)
}

/// The socket's (SO_SNDBUF, SO_RCVBUF) as the kernel set them.
pub fn socket_buffers(fd: RawFd) -> (Option<u32>, Option<u32>) {
    socket::buffers(fd)
}

/// Sums TCP_INFO over flows (per worker, then merged) into a [`TcpInfoSummary`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInfoAggregator {
    flows: u32,
    retransmits: u64,
    rtt_us_sum: f64,
    rtt_us_max: u32,
    rttvar_us_sum: f64,
    snd_cwnd_sum: f64,
    snd_mss_sum: f64,
}

impl TcpInfoAggregator {
    /// No flows yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one flow's snapshot.
    pub fn add(&mut self, s: &TcpInfoSnapshot) {
        self.flows = self.flows.saturating_add(1);
        self.retransmits += u64::from(s.total_retrans);
        self.rtt_us_sum += f64::from(s.rtt_us);
        self.rtt_us_max = self.rtt_us_max.max(s.rtt_us);
        self.rttvar_us_sum += f64::from(s.rttvar_us);
        self.snd_cwnd_sum += f64::from(s.snd_cwnd);
        self.snd_mss_sum += f64::from(s.snd_mss);
    }

    /// Adds the retransmits of a connection that is not a flow of its own
    /// (one of a connect-per-transaction flow's, closed within the window):
    /// its segments count, its RTT and window are not a flow's.
    pub fn add_retransmits(&mut self, n: u32) {
        self.retransmits += u64::from(n);
    }

    /// Adds another aggregator's flows.
    pub fn merge(&mut self, other: &TcpInfoAggregator) {
        self.flows = self.flows.saturating_add(other.flows);
        self.retransmits += other.retransmits;
        self.rtt_us_sum += other.rtt_us_sum;
        self.rtt_us_max = self.rtt_us_max.max(other.rtt_us_max);
        self.rttvar_us_sum += other.rttvar_us_sum;
        self.snd_cwnd_sum += other.snd_cwnd_sum;
        self.snd_mss_sum += other.snd_mss_sum;
    }

    /// Flows added.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Totals and means over the flows, `None` if there were none.
    pub fn summary(&self) -> Option<TcpInfoSummary> {
        if self.flows == 0 {
            return None;
        }
        let n = f64::from(self.flows);
        Some(TcpInfoSummary {
            flows: self.flows,
            retransmits: self.retransmits,
            rtt_us_mean: self.rtt_us_sum / n,
            rtt_us_max: f64::from(self.rtt_us_max),
            rttvar_us_mean: self.rttvar_us_sum / n,
            snd_cwnd_mean: self.snd_cwnd_sum / n,
            snd_mss_mean: self.snd_mss_sum / n,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsRawFd;

    use super::*;

    fn snap(retrans: u32, rtt: u32, rttvar: u32, cwnd: u32, mss: u32) -> TcpInfoSnapshot {
        TcpInfoSnapshot {
            total_retrans: retrans,
            rtt_us: rtt,
            rttvar_us: rttvar,
            snd_cwnd: cwnd,
            snd_mss: mss,
        }
    }

    #[test]
    fn aggregates_and_merges_flows() {
        assert_eq!(TcpInfoAggregator::new().summary(), None);
        let mut a = TcpInfoAggregator::new();
        a.add(&snap(1, 100, 10, 10, 1448));
        a.add(&snap(2, 300, 30, 20, 1448));
        let mut b = TcpInfoAggregator::new();
        b.add(&snap(u32::MAX, 200, 20, 30, 65483));
        a.merge(&b);
        a.merge(&TcpInfoAggregator::new());
        let s = a.summary().unwrap();
        assert_eq!(s.flows, 3);
        assert_eq!(a.flows(), 3);
        assert_eq!(s.retransmits, 3 + u64::from(u32::MAX));
        assert_eq!(s.rtt_us_mean, 200.0);
        assert_eq!(s.rtt_us_max, 300.0);
        assert_eq!(s.rttvar_us_mean, 20.0);
        assert_eq!(s.snd_cwnd_mean, 20.0);
        assert_eq!(s.snd_mss_mean, (1448.0 * 2.0 + 65483.0) / 3.0);
    }

    #[test]
    fn reads_tcp_info_from_a_loopback_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut byte = [0u8; 1];
        for _ in 0..3 {
            client.write_all(b"x").unwrap();
            server.read_exact(&mut byte).unwrap();
            server.write_all(b"y").unwrap();
            client.read_exact(&mut byte).unwrap();
        }
        let info = read_tcp_info(client.as_raw_fd()).unwrap();
        assert!(info.rtt_us > 0, "{info:?}");
        assert!(info.snd_cwnd > 0 && info.snd_mss > 0, "{info:?}");
        assert!(read_tcp_info(server.as_raw_fd()).is_some());
        assert_eq!(tcp_state(client.as_raw_fd()), Some(1), "established");
        let window = peer_window(client.as_raw_fd()).expect("Linux 5.4 or later");
        assert!(window > 0, "the peer reads everything: its window is open");

        let cc = socket_congestion_control(client.as_raw_fd()).unwrap();
        assert!(!cc.is_empty() && cc.is_ascii(), "{cc}");
        let (snd, rcv) = socket_buffers(client.as_raw_fd());
        assert!(snd.unwrap() > 0 && rcv.unwrap() > 0);
    }

    #[test]
    fn non_tcp_sockets_give_none() {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(read_tcp_info(udp.as_raw_fd()), None);
        assert_eq!(socket_congestion_control(udp.as_raw_fd()), None);
        assert_eq!(read_tcp_info(-1), None);
        assert_eq!((tcp_state(udp.as_raw_fd()), peer_window(-1)), (None, None));
        assert_eq!(socket_buffers(-1), (None, None));
    }
}
