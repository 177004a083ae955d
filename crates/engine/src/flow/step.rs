//! What a flow asks of the worker that carries it, one level above its
//! bytes: open a connection, take one accepted for it, move its bytes on
//! one, close one, wait (for readiness or its deadline), spin for its CPU
//! time, hold at a barrier, or nothing more. The worker does the asking's
//! I/O and tells the flow what came of it ([`Told`]); the flow says when
//! it must next be looked at ([`Flow::deadline`]). A flow owns no socket
//! and reads no clock: the worker passes the time in.
//!
//! Every worker kind's flows implement [`Flow`]: the built-in workloads'
//! client and server flows, a profile's users and the iperf3 server's
//! streams. One worker, generic over the kind (`worker::core`), turns them
//! all.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use linkperf_protocol::UdpHeader;

/// A flow's connection by its number among the flow's own: 0 for a flow
/// of one connection, a profile user's named connection otherwise (fewer
/// than [`MAX_CONNS`]).
pub type ConnIx = usize;

/// Connections one flow may hold: its event token is `key * MAX_CONNS + c`.
pub const MAX_CONNS: usize = 64;

/// When a flow must next be looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// The time.
    pub at: Instant,
    /// Kept to the microsecond (an open loop's arrival that goes the
    /// moment it is due), rather than to the event wait's millisecond.
    pub precise: bool,
}

impl Deadline {
    /// A deadline kept to the event wait's millisecond.
    pub fn at(at: Instant) -> Self {
        Deadline { at, precise: false }
    }
}

/// What a flow wants now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Open connection `c` (on an open one, another on top of it).
    Connect(ConnIx),
    /// Take connection `c` from what the worker has accepted for it.
    Accept(ConnIx),
    /// Move bytes on connection `c` until its socket blocks or the flow's
    /// budget is spent.
    Carry(ConnIx),
    /// Close connection `c` (its newest socket).
    Close(ConnIx),
    /// Nothing until readiness on its sockets or its deadline.
    Wait,
    /// Look again this turn, without sleeping (its budget is spent, or
    /// something is due now).
    Again,
    /// Burn this much of its CPU time (at most a slice at once, so that
    /// the worker's other flows get turns), then [`Told::Spun`].
    Spin(Duration),
    /// Held at barrier `n` until the worker's kind releases it.
    Hold(usize),
    /// Finished: nothing more, ever.
    Done,
}

/// How moving a flow's bytes on one connection ended.
#[derive(Debug)]
pub enum Carried {
    /// The socket would block: nothing more until it is ready.
    Blocked,
    /// Stopped at the flow's budget with the socket still ready: carry
    /// again soon, without waiting for an event.
    Again,
    /// The flow's work on it is done.
    Finished,
    /// The peer closed it.
    Eof,
    /// It failed.
    Failed(io::Error),
}

/// What the worker tells a flow.
#[derive(Debug)]
pub enum Told {
    /// Connection `c` is open (a stream's greeting written, a datagram
    /// socket's registration answered).
    Connected(ConnIx),
    /// Connection `c` was taken from the accepted ones.
    Accepted(ConnIx),
    /// Bytes were carried on `conn`, ending as `how`.
    Carried {
        /// The connection.
        conn: ConnIx,
        /// How it ended.
        how: Carried,
    },
    /// Connection `c` is closed.
    Closed(ConnIx),
    /// Opening connection `c` failed.
    Failed(ConnIx, io::Error),
    /// A datagram for it came on a socket its worker shares among its
    /// flows (the worker read it and found whose it is).
    Datagram {
        /// The connection it came on.
        conn: ConnIx,
        /// Its header.
        header: UdpHeader,
        /// Its bytes past the header.
        payload: usize,
        /// Where it came from.
        from: SocketAddr,
        /// When it came, in nanoseconds on the worker's clock for jitter.
        clock_ns: u64,
    },
    /// The deadline the flow gave last has come.
    Timer(Instant),
    /// It spun this long.
    Spun(Duration),
}

/// A flow as a worker carries it.
pub trait Flow {
    /// What it counts into.
    type Counts;

    /// What it wants at `now`.
    fn step(&mut self, now: Instant, counts: &mut Self::Counts) -> Step;

    /// What came of what it wanted, or its deadline, at `now`.
    fn told(&mut self, what: Told, now: Instant, counts: &mut Self::Counts);

    /// When it must next be looked at whatever its sockets do.
    fn deadline(&self) -> Option<Deadline>;

    /// A closed-loop request/response flow, alone on its worker: it may
    /// wait in its own socket's blocking read (the single flow's fast path).
    fn parkable(&self) -> bool {
        false
    }
}
