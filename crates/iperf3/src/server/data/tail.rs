//! The data phase's end: after `TEST_END`, what is still arriving is read
//! until the streams are quiet, and what the server sent is delivered; once
//! the client's results are in, the receivers are read until they hold all
//! the client says it sent; at a shutdown, the client is told before its
//! streams close.

use std::io::Write;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use linkperf_engine::driver::{self, Driver, Polled, Turn};
use linkperf_engine::Counters;
use mio::Events;

use super::{read_control, receive, DataOutcome, Live};
use crate::server::plan::TestPlan;
use crate::sys;
use crate::codec::{State, TestResults};

/// After `TEST_END`: a receiver quiet this long has nothing more coming.
const QUIET: Duration = Duration::from_millis(50);
/// How often the wait for the client's acknowledgements looks again.
const ACK_CHECK: Duration = Duration::from_millis(2);
/// After `TEST_END`: the longest the server waits for data to arrive or to be
/// delivered before it sends its results anyway.
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// At a shutdown, how long the streams stay open after SERVER_TERMINATE for
/// the client to read it (it closes its control connection when it has).
const TERMINATE_WAIT: Duration = Duration::from_secs(1);

/// The data phase once it has ended: what it counted, and its receiving
/// streams, still open, for [`DataPhase::top_up`].
pub(crate) struct DataPhase {
    /// What it counted.
    pub out: DataOutcome,
    pub(super) tail: Tail,
}

/// What the data phase leaves for [`DataPhase::top_up`].
pub(super) struct Tail {
    pub(super) driver: Driver,
    pub(super) events: Events,
    /// The receiving streams, each with the index of its record.
    pub(super) receivers: Vec<(usize, Live)>,
    pub(super) buf: Vec<u8>,
    pub(super) counting: bool,
}

impl DataPhase {
    /// Once the client's results are in: reads the receiving streams until
    /// they have all the client says it sent, so that the server reports
    /// everything the client sent however late its last bytes came (the
    /// drain after `TEST_END` stops when nothing arrives for [`QUIET`]).
    /// TCP: the client's bytes over the streams the server receives on
    /// (summed: a client that numbers its streams in another order than the
    /// server accepted them pairs the counts differently, as linkperf's own
    /// client may), when nothing was omitted (the client counts from its own
    /// omit timer). UDP: each stream's datagrams, by sequence number. At most
    /// [`DRAIN_MAX`]; a UDP stream that has lost datagrams may have lost its
    /// last ones too, so then only while more arrive, [`QUIET`] at a time.
    pub(crate) fn top_up(&mut self, theirs: &TestResults, plan: &TestPlan) {
        let records = &mut self.out.records;
        let counters = &mut self.out.counters;
        let t = &mut self.tail;
        let theirs_of = |l: &Live| theirs.stream(i64::from(l.st.id));
        let tcp = |l: &Live| l.sock.is_tcp();
        let tcp_wanted: u64 = if plan.omit.is_zero() {
            t.receivers
                .iter()
                .filter(|(_, l)| tcp(l))
                .filter_map(|(_, l)| theirs_of(l))
                .map(|s| s.bytes)
                .sum()
        } else {
            0
        };
        let tcp_records: Vec<usize> = t
            .receivers
            .iter()
            .filter(|(_, l)| tcp(l))
            .map(|(i, _)| *i)
            .collect();
        let t0 = Instant::now();
        let mut last = t0;
        let errors = &mut self.out.errors;
        let (receivers, buf, counting) = (&mut t.receivers, &mut t.buf, t.counting);
        let mut turn = Polled::new(&mut t.driver, |now| {
            let tcp_had: u64 = tcp_records
                .iter()
                .map(|i| records[*i].tally.total(counters))
                .sum();
            let tcp_short = tcp_had < tcp_wanted;
            receivers.retain(|(_, l)| {
                l.st.open
                    && if tcp(l) {
                        tcp_short
                    } else {
                        theirs_of(l).is_some_and(|s| (l.st.tally.packets() as i64) < s.packets)
                    }
            });
            if receivers.is_empty() {
                return Turn::Stop;
            }
            let mut got = 0;
            for (i, l) in receivers.iter_mut() {
                got += receive(
                    &mut l.st,
                    &mut l.sock,
                    counters,
                    buf,
                    plan,
                    counting,
                    now,
                    errors,
                );
                records[*i].tally = l.st.tally.clone();
            }
            let now = Instant::now();
            if got > 0 {
                last = now;
            }
            let lossy = receivers
                .iter()
                .any(|(_, l)| !tcp(l) && l.st.tally.lost() > 0);
            if now - t0 >= DRAIN_MAX || (lossy && now - last >= QUIET) {
                return Turn::Stop;
            }
            Turn::Wait((t0 + DRAIN_MAX).saturating_duration_since(now).min(QUIET))
        });
        let _ = driver::run(&mut turn, &mut t.events);
    }
}

/// At a shutdown: tells the client SERVER_TERMINATE with its streams still
/// open (a client writing into a closed stream would see a reset before it
/// reads the state), and reads what it still sends until it closes its
/// control connection, at most [`TERMINATE_WAIT`].
#[allow(clippy::too_many_arguments)]
pub(super) fn terminate(
    mut ctrl: &TcpStream,
    driver: &mut Driver,
    events: &mut Events,
    live: &mut [Live],
    counters: &mut Counters,
    buf: &mut [u8],
    plan: &TestPlan,
    errors: &mut Vec<String>,
) {
    let _ = ctrl.write(&[State::ServerTerminate.to_byte()]);
    let t0 = Instant::now();
    let mut turn = Polled::new(driver, |now| {
        if now - t0 >= TERMINATE_WAIT {
            return Turn::Stop;
        }
        for l in live.iter_mut().filter(|l| !l.st.sends) {
            receive(
                &mut l.st,
                &mut l.sock,
                counters,
                buf,
                plan,
                false,
                now,
                errors,
            );
        }
        if read_control(ctrl).is_some() {
            return Turn::Stop;
        }
        Turn::Wait(Duration::from_millis(5))
    });
    let _ = driver::run(&mut turn, events);
}

/// After `TEST_END`: reads what the client sent before it, until nothing more
/// arrives for [`QUIET`] (at most [`DRAIN_MAX`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn drain(
    driver: &mut Driver,
    events: &mut Events,
    live: &mut [Live],
    counters: &mut Counters,
    buf: &mut [u8],
    plan: &TestPlan,
    counting: bool,
    errors: &mut Vec<String>,
) {
    let t0 = Instant::now();
    let mut last = t0;
    let mut turn = Polled::new(driver, |at| {
        let mut got = 0;
        for l in live.iter_mut().filter(|l| !l.st.sends) {
            got += receive(
                &mut l.st,
                &mut l.sock,
                counters,
                buf,
                plan,
                counting,
                at,
                errors,
            );
        }
        let now = Instant::now();
        if got > 0 {
            last = now;
        }
        let open = live.iter().any(|l| !l.st.sends && l.st.open);
        if !open || now - last >= QUIET || now - t0 >= DRAIN_MAX {
            return Turn::Stop;
        }
        Turn::Wait(Duration::from_millis(5))
    });
    let _ = driver::run(&mut turn, events);
}

/// After `TEST_END`: waits until the client's kernel has acknowledged all the
/// server sent on TCP, then [`QUIET`] longer for the client to read it; at
/// most [`DRAIN_MAX`] for the acknowledgements. The kernel raises no event
/// when a socket's last byte is acknowledged, so the loop looks at the
/// sockets' unacknowledged bytes every [`ACK_CHECK`], in its event wait.
pub(super) fn wait_delivered(driver: &mut Driver, events: &mut Events, live: &[Live]) {
    let fds: Vec<RawFd> = live
        .iter()
        .filter(|l| l.st.sends && l.st.open && l.sock.is_tcp())
        .map(|l| l.sock.as_raw_fd())
        .collect();
    if fds.is_empty() {
        return;
    }
    let t0 = Instant::now();
    let mut delivered = None;
    let mut turn = Polled::new(driver, |now| {
        let at = match delivered {
            Some(at) => at,
            None => {
                let acked = fds
                    .iter()
                    .all(|fd| sys::unacked_bytes(*fd).unwrap_or(0) == 0);
                if !acked && now - t0 < DRAIN_MAX {
                    return Turn::Wait(ACK_CHECK);
                }
                *delivered.insert(now)
            }
        };
        match (at + QUIET).checked_duration_since(now) {
            Some(left) if !left.is_zero() => Turn::Wait(left),
            _ => Turn::Stop,
        }
    });
    let _ = driver::run(&mut turn, events);
}
