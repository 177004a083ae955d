//! Moving a UDP stream's datagrams, shared by client and server (as
//! io/stream.rs is for TCP streams): sending what the sender's pacer lets go,
//! a run of datagrams per system call where the kernel takes runs, and
//! reading what has arrived, a run per call where it hands them so.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Instant;

use linkperf_protocol::{UdpHeader, UDP_HEADER_LEN};

use crate::counters::{Counters, FlowSlotId};
use crate::flow::udp_stream::{DatagramTx, TxWant};
use crate::io::datagram::{receive, run_length, segmentation_refused, send_one, send_segments};

/// Most payload bytes one turn moves each way before the worker goes on to
/// its other flows, its clock and its signals (as a TCP stream's drive).
pub const DRIVE_BUDGET: usize = 1024 * 1024;

/// How a sender's turn ended.
#[derive(Debug)]
pub enum Sent {
    /// The socket buffer is full: a writable event resumes it.
    Blocked,
    /// The budget ran out with datagrams still due: again soon.
    Again,
    /// The next datagram is due then.
    Waiting(Instant),
    /// Not started, or finished.
    Idle,
    /// The socket failed.
    Failed(io::Error),
}

/// The socket a sender writes to: connected (the client's) or not (the
/// server's, which names the flow's address), and whether it takes runs of
/// datagrams in one send (cleared when the kernel refuses one).
pub struct Out<'a> {
    /// The socket.
    pub sock: &'a mio::net::UdpSocket,
    /// Where to, on an unconnected socket.
    pub to: Option<SocketAddr>,
    /// Runs of datagrams per send.
    pub runs: &'a mut bool,
}

impl Out<'_> {
    #[inline]
    fn send_one(&self, d: &[u8]) -> io::Result<usize> {
        send_one(self.sock, d, self.to)
    }
}

/// Sends what `tx` has due, from `buf` (payload bytes, room for a run),
/// counting into `counters` as the flow in `slot`.
pub fn send_due(
    tx: &mut DatagramTx,
    out: &mut Out<'_>,
    buf: &mut [u8],
    counters: &mut Counters,
    slot: FlowSlotId,
) -> Sent {
    let mut budget = DRIVE_BUDGET;
    loop {
        if budget == 0 {
            return Sent::Again;
        }
        let now = Instant::now();
        let max = if *out.runs { usize::MAX } else { 1 };
        let (header, payload, count) = match tx.want_run(now, max_run(max, buf.len(), tx)) {
            TxWant::Send {
                header,
                payload,
                count,
            } => (header, payload, count),
            TxWant::Wait(at) => return Sent::Waiting(at),
            TxWant::Idle | TxWant::Done => return Sent::Idle,
        };
        let segment = UDP_HEADER_LEN + payload;
        let Some(run) = buf.get_mut(..segment * count) else {
            return Sent::Failed(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message larger than a datagram",
            ));
        };
        for (i, d) in run.chunks_mut(segment).enumerate() {
            let h = UdpHeader {
                seq: header.seq + i as u64,
                ..header
            };
            if let Some(at) = d.first_chunk_mut::<UDP_HEADER_LEN>() {
                h.encode(at);
            }
        }
        let r = if count > 1 {
            send_segments(out.sock.as_raw_fd(), run, segment, out.to.as_ref())
        } else {
            out.send_one(run)
        };
        match r {
            Ok(_) => {
                budget = budget.saturating_sub(run.len());
                let took = tx.sent(now, count, false);
                counters.tx(slot, payload * count, now);
                counters.datagram_sent(now, count as u64);
                let each = took / u32::try_from(count).unwrap_or(u32::MAX);
                counters.transactions(slot, count as u64, each, now);
            }
            Err(e) if count > 1 && segmentation_refused(&e) => *out.runs = false,
            // Room in the socket buffer raises a writable edge.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error of an earlier datagram (the peer's port is gone,
            // or not yet there): these go next.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Sent::Failed(e),
        }
    }
}

/// The longest run `tx`'s datagrams make in `room` bytes, at most `max`.
fn max_run(max: usize, room: usize, tx: &DatagramTx) -> usize {
    let segment = UDP_HEADER_LEN + tx.message();
    max.min(run_length(segment)).min(room / segment).max(1)
}

/// How a receiver's turn ended.
#[derive(Debug)]
pub enum Got {
    /// Nothing more waits.
    Drained,
    /// The budget ran out: again soon.
    Again,
    /// The socket failed.
    Failed(io::Error),
}

/// Reads what waits on `sock` into `buf`, a run at a time where the kernel
/// hands runs, and gives each datagram, with where it came from, to `each`.
pub fn receive_due(
    sock: &mio::net::UdpSocket,
    buf: &mut [u8],
    mut each: impl FnMut(&[u8], Option<SocketAddr>),
) -> Got {
    let mut budget = DRIVE_BUDGET;
    loop {
        if budget == 0 {
            return Got::Again;
        }
        match receive(sock.as_raw_fd(), buf) {
            Ok(r) => {
                budget = budget.saturating_sub(r.len.max(1));
                for d in r.datagrams(buf) {
                    each(d, r.from);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Got::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error for an earlier datagram: the other side's report says.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Got::Failed(e),
        }
    }
}
