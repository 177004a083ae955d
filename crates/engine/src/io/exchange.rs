//! Moving a request/response flow's bytes, the client's and the server's
//! alike ([`Exchange`]): write what it wants written from the shared
//! payload, read what it wants read into the scratch, count both, and the
//! transactions it completes, as far as the socket lets it.
//!
//! The connection is edge-triggered: once what the flow wrote leaves it
//! waiting to read, the answer comes with a new readiness edge, so no read
//! is tried that would find nothing (one system call per transaction
//! saved). A blocking socket (a worker's single flow waits in its read)
//! returns to the loop after any part of a message, so that its intervals
//! and window edges stay on time on a slow link.

use std::io::{self, Read, Write};
use std::time::Instant;

use crate::counters::{Counters, FlowSlotId};
use crate::flow::{Exchange, Want};
use crate::io::Conn;

/// How a flow's turn on its connection ended.
#[derive(Debug)]
pub enum Exchanged {
    /// Nothing more until the next readiness edge.
    Blocked,
    /// The flow wants nothing more (it finished, or, with `once`, completed
    /// its transaction).
    Done,
    /// The peer closed the connection.
    Eof,
    /// The connection failed.
    Failed(io::Error),
}

/// Where a flow's turn counts, and how.
pub struct Turn<'a> {
    /// The payload written from.
    pub payload: &'static [u8],
    /// The worker's read scratch.
    pub scratch: &'a mut [u8],
    /// The worker's counters.
    pub counters: &'a mut Counters,
    /// The flow's slot.
    pub slot: FlowSlotId,
    /// The socket blocks (a single flow's).
    pub blocking: bool,
    /// The first transaction completed ends the turn with
    /// [`Exchanged::Done`] (connect per transaction).
    pub once: bool,
}

/// Moves `flow` on `conn` as far as it goes. `now` is a recent time (no
/// older than the last event wait), updated as reads complete and parts are
/// written: what the turn ends with is the latest time it took. `stop` says
/// at a time whether a flow should start no new transaction.
pub fn exchange(
    flow: &mut impl Exchange,
    conn: &mut Conn,
    mut t: Turn<'_>,
    now: &mut Instant,
    stop: impl Fn(Instant) -> bool,
) -> Exchanged {
    loop {
        match flow.want() {
            Want::Write(n) => {
                let n = n.min(t.payload.len());
                match conn.write(&t.payload[..n]) {
                    Ok(0) => return Exchanged::Eof,
                    Ok(k) => {
                        let at = *now;
                        t.counters.tx(t.slot, k, at);
                        let mut completed = 0;
                        flow.written(k, at, &mut |done| {
                            t.counters.transactions(t.slot, 1, done.took, at);
                            completed += 1;
                        });
                        if completed > 0 && t.once {
                            return Exchanged::Done;
                        }
                        if !matches!(flow.want(), Want::Write(_)) {
                            if flow.pipelined() {
                                // What the last read left behind it (a
                                // pipelined message) raises no new edge:
                                // read on until the socket is empty.
                                continue;
                            }
                            // The message is out. Edge-triggered readiness
                            // reports the answer when it arrives; reading now
                            // would only find nothing.
                            return Exchanged::Blocked;
                        }
                        // Part of a large message went (a blocking write may
                        // have waited for room), or the next one goes after
                        // it (an open loop's): stamped with a fresh time.
                        *now = Instant::now();
                        if t.blocking {
                            // Back to the loop (its intervals and window
                            // edges) before the next part.
                            return Exchanged::Blocked;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if t.blocking {
                            // A blocking write waited its 50 ms for room and
                            // none came: the loop goes on from now.
                            *now = Instant::now();
                            return Exchanged::Blocked;
                        }
                        // A pipelined flow reads aside while its write
                        // waits, or each end could wait on the other.
                        loop {
                            let n = flow.read_aside();
                            if n == 0 {
                                return Exchanged::Blocked;
                            }
                            match read_some(flow, conn, &mut t, n, now, &stop) {
                                ReadOutcome::Got(_) | ReadOutcome::Again => {}
                                ReadOutcome::Empty => return Exchanged::Blocked,
                                ReadOutcome::Ended(end) => return end,
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Exchanged::Failed(e),
                }
            }
            Want::Read(n) => match read_some(flow, conn, &mut t, n, now, &stop) {
                ReadOutcome::Got(completed) => {
                    if completed > 0 {
                        if t.once {
                            return Exchanged::Done;
                        }
                    } else if t.blocking && matches!(flow.want(), Want::Read(_)) {
                        // Part of a message: back to the loop before
                        // waiting for the rest.
                        return Exchanged::Blocked;
                    }
                }
                ReadOutcome::Again => {}
                ReadOutcome::Empty => return Exchanged::Blocked,
                ReadOutcome::Ended(end) => return end,
            },
            Want::Idle => return Exchanged::Blocked,
            Want::Done => return Exchanged::Done,
        }
    }
}

/// What one read came to.
enum ReadOutcome {
    /// Bytes came; this many transactions completed.
    Got(u64),
    /// Interrupted by a signal: try again.
    Again,
    /// Nothing to read.
    Empty,
    /// The turn ends so.
    Ended(Exchanged),
}

/// Reads at most `n` of what `flow` is owed into the scratch, counts it and
/// the transactions it completed, at the time the read ended.
fn read_some(
    flow: &mut impl Exchange,
    conn: &mut Conn,
    t: &mut Turn<'_>,
    n: usize,
    now: &mut Instant,
    stop: &impl Fn(Instant) -> bool,
) -> ReadOutcome {
    let n = n.min(t.scratch.len());
    match conn.read(&mut t.scratch[..n]) {
        Ok(0) => ReadOutcome::Ended(Exchanged::Eof),
        Ok(k) => {
            let at = Instant::now();
            *now = at;
            t.counters.rx(t.slot, k, at);
            let mut completed = 0;
            flow.arrived(k, at, stop(at), &mut |done| {
                t.counters.transactions(t.slot, 1, done.took, at);
                if let Some(service) = done.service {
                    t.counters.open_completed(done.took, service, at);
                }
                completed += 1;
            });
            ReadOutcome::Got(completed)
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => ReadOutcome::Empty,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => ReadOutcome::Again,
        Err(e) => ReadOutcome::Ended(Exchanged::Failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{RrClient, RrServer};
    use crate::worker::payload;
    use std::time::Duration;

    fn counters() -> Counters {
        let mut c = Counters::new(true);
        c.add_flow(0);
        c
    }

    fn turn<'a>(scratch: &'a mut [u8], counters: &'a mut Counters, once: bool) -> Turn<'a> {
        Turn {
            payload: payload(),
            scratch,
            counters,
            slot: 0,
            blocking: false,
            once,
        }
    }

    /// A client and a server over a real socket pair, each driven by the one
    /// executor: the client's request goes and it waits for the edge without
    /// a read; the server reads it whole and answers; the client reads the
    /// answer and its next request goes.
    #[test]
    fn client_and_server_exchange_through_the_one_executor() {
        let (a, b) = mio::net::UnixStream::pair().unwrap();
        let (mut client, mut server) = (Conn::Unix(a), Conn::Unix(b));
        let (mut rc, mut rs) = (RrClient::new(200, 1000), RrServer::new(200, 1000));
        let (mut cc, mut cs) = (counters(), counters());
        let mut scratch = vec![0u8; 64 * 1024];
        let t0 = Instant::now();
        rc.start(t0);
        let mut now = t0;
        let never = |_| false;
        let moved = exchange(
            &mut rc,
            &mut client,
            turn(&mut scratch, &mut cc, false),
            &mut now,
            never,
        );
        assert!(matches!(moved, Exchanged::Blocked));
        assert_eq!(now, t0, "no read was tried: the time is the one given");
        assert_eq!(cc.totals.tx_bytes, 200);
        let moved = exchange(
            &mut rs,
            &mut server,
            turn(&mut scratch, &mut cs, false),
            &mut now,
            never,
        );
        assert!(
            matches!(moved, Exchanged::Blocked),
            "answered, it waits for the next request"
        );
        assert_eq!(
            (
                cs.totals.rx_bytes,
                cs.totals.tx_bytes,
                cs.totals.transactions
            ),
            (200, 1000, 1)
        );
        let moved = exchange(
            &mut rc,
            &mut client,
            turn(&mut scratch, &mut cc, false),
            &mut now,
            never,
        );
        assert!(matches!(moved, Exchanged::Blocked));
        assert_eq!((cc.totals.rx_bytes, cc.totals.transactions), (1000, 1));
        assert_eq!(
            cc.totals.tx_bytes, 400,
            "the next request went after the answer"
        );
    }

    /// Two requests pipelined in one arrival: a pipelined server answers
    /// both in one turn (the second raises no edge of its own); one that
    /// is not waits for the next edge after the first.
    #[test]
    fn a_pipelined_server_reads_on_past_its_answer() {
        for (pipelined, answered) in [(true, 2), (false, 1)] {
            let (a, b) = mio::net::UnixStream::pair().unwrap();
            let (mut client, mut server) = (Conn::Unix(a), Conn::Unix(b));
            std::io::Write::write_all(&mut client, &[0u8; 2]).unwrap();
            let mut rs = RrServer::new(1, 1).pipelining(pipelined);
            let mut cs = counters();
            let mut scratch = vec![0u8; 64];
            let mut now = Instant::now();
            let moved = exchange(
                &mut rs,
                &mut server,
                turn(&mut scratch, &mut cs, false),
                &mut now,
                |_| false,
            );
            assert!(matches!(moved, Exchanged::Blocked));
            assert_eq!(cs.totals.transactions, answered, "pipelined: {pipelined}");
        }
    }

    #[test]
    fn once_ends_the_turn_with_its_transaction_and_a_closed_peer_is_an_eof() {
        let (a, b) = mio::net::UnixStream::pair().unwrap();
        let (mut client, mut server) = (Conn::Unix(a), Conn::Unix(b));
        let (mut rc, mut rs) = (RrClient::new(1, 1), RrServer::new(1, 1));
        let (mut cc, mut cs) = (counters(), counters());
        let mut scratch = vec![0u8; 1024];
        let mut now = Instant::now();
        rc.start(now);
        let always = |_| true;
        exchange(
            &mut rc,
            &mut client,
            turn(&mut scratch, &mut cc, true),
            &mut now,
            always,
        );
        let moved = exchange(
            &mut rs,
            &mut server,
            turn(&mut scratch, &mut cs, true),
            &mut now,
            always,
        );
        assert!(
            matches!(moved, Exchanged::Done),
            "the server's response ends it"
        );
        let moved = exchange(
            &mut rc,
            &mut client,
            turn(&mut scratch, &mut cc, true),
            &mut now,
            always,
        );
        assert!(
            matches!(moved, Exchanged::Done),
            "the client's answer ends it"
        );
        drop(server);
        let mut again = RrServer::new(1, 1);
        let moved = exchange(
            &mut again,
            &mut client,
            turn(&mut scratch, &mut cc, false),
            &mut now,
            always,
        );
        assert!(matches!(moved, Exchanged::Eof));
    }

    /// Requests and answers larger than the sockets' buffers, several
    /// outstanding: each end's write waits for room while the other's does
    /// too, and neither would read unless it reads aside. Both move to the
    /// end of the schedule, every transaction answered.
    #[test]
    fn pipelined_ends_read_aside_while_their_writes_wait() {
        use crate::flow::OpenLoop;
        use linkperf_workload::{Arrival, OfferedLoad, TransactionSizes, TransactionsPerSecond};
        let (a, b) = mio::net::UnixStream::pair().unwrap();
        let (mut client, mut server) = (Conn::Unix(a), Conn::Unix(b));
        let big = 256 * 1024;
        let sizes = TransactionSizes::Fixed {
            request: big,
            response: big,
        };
        let load = OfferedLoad {
            rate: TransactionsPerSecond(1_000_000),
            arrival: Arrival::Fixed,
            max_outstanding: 8,
        };
        let t0 = Instant::now();
        let mut user = OpenLoop::new(sizes.clone(), 0, 1, &load, 1, t0);
        user.start(t0, 1);
        // 40 arrivals due at once, none after.
        user.arrivals(
            t0 + Duration::from_micros(39),
            t0 + Duration::from_micros(40),
        );
        user.arrivals(t0 + Duration::from_secs(1), t0 + Duration::from_micros(40));
        let mut rs = RrServer::with_sizes(sizes, 0).pipelining(true);
        let (mut cc, mut cs) = (counters(), counters());
        let mut scratch = vec![0u8; 64 * 1024];
        let mut now = t0;
        for _ in 0..10_000 {
            let moved = exchange(
                &mut user,
                &mut client,
                turn(&mut scratch, &mut cc, false),
                &mut now,
                |_| false,
            );
            if matches!(moved, Exchanged::Done) {
                break;
            }
            exchange(
                &mut rs,
                &mut server,
                turn(&mut scratch, &mut cs, false),
                &mut now,
                |_| false,
            );
        }
        assert!(user.finished(), "stalled: {:?}", user.counts());
        assert_eq!(cc.totals.transactions, 40);
        assert_eq!(cs.totals.transactions, 40);
        assert_eq!(cc.totals.rx_bytes, 40 * big);
    }
}
