//! One stream of a test as the server's worker carries it: a sans-IO flow
//! ([`Stream`]). It says what it wants: to carry its bytes (read what
//! arrived; send whole blocks while its budget, its pacer and the client's
//! end allow), to wait for its pacer's next block, to have its socket's
//! unacknowledged bytes looked at, or nothing more. After the test's end it
//! goes on as a tail: a receiver reads until it is quiet, a TCP sender waits
//! until what it sent is delivered. The kind does the I/O its steps need and
//! tells it what came of it; the time is passed in.

use std::time::{Duration, Instant};

use linkperf_engine::flow::step::{Carried, Deadline, Flow, Step, Told};
use linkperf_engine::flow::Pacer;
use linkperf_engine::Counters;

use crate::server::accounting::{Budget, EndOfSending, Iperf3Tally, Sample};

/// After `TEST_END`: a receiver quiet this long has nothing more coming.
pub(super) const QUIET: Duration = Duration::from_millis(50);
/// How often a sender waiting for the client's acknowledgements looks again
/// (the kernel raises no event when a socket's last byte is acknowledged).
pub(super) const ACK_CHECK: Duration = Duration::from_millis(2);
/// After `TEST_END`: the longest a stream reads what still arrives, or waits
/// for what it sent to be delivered, before the server sends its results.
pub(super) const DRAIN_MAX: Duration = Duration::from_secs(3);
/// Until the client's end is near (see `EndOfSending::near`), how often a
/// sender samples the client's window and reading; then it checks each block.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// How often a holding sender looks again.
const HOLD_CHECK: Duration = Duration::from_millis(1);
/// Shortest wait of a sender held by its pacer: a block that is not quite
/// due is not worth a wake-up of its own.
pub(super) const PACE_FLOOR: Duration = Duration::from_micros(200);

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    /// The test runs: it receives, or sends.
    Run,
    /// After `TEST_END`, a receiver: reads what still arrives until quiet
    /// for [`QUIET`], at most [`DRAIN_MAX`] from `since`.
    Drain { since: Instant, last: Instant },
    /// After `TEST_END`, a TCP sender: has its unacknowledged bytes looked
    /// at from `check` on, every [`ACK_CHECK`], until none are left (at most
    /// [`DRAIN_MAX`] from `since`); then [`QUIET`] longer for the client to
    /// read them.
    Deliver {
        since: Instant,
        check: Instant,
        delivered: Option<Instant>,
    },
    /// A receiver reading whatever comes (the top-up, or a shutdown's wait).
    Read,
    /// Nothing to do for now; its socket stays open.
    Rest,
    /// The client closed it, or it failed: its socket is to be closed.
    Closing,
    /// Closed.
    Closed,
}

/// The I/O a carry of the stream is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Io {
    /// Read what arrived; a sender in its test also sends.
    Move,
    /// Look at its socket's unacknowledged bytes ([`Stream::unacked`]).
    Unacked,
}

/// What a sender does before its next block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Send it.
    Send,
    /// Sample the client's window and reading first ([`Stream::sampled`]).
    Sample,
    /// Not now: its budget is spent, or its pacer or the client's end holds
    /// it (its deadline says until when).
    Stop,
}

/// One stream of the test: sending whole blocks paced as the client asked,
/// or counting what arrives. Its socket is the worker's.
pub(crate) struct Stream {
    pub(super) id: u32,
    pub(super) sends: bool,
    pub(super) tcp: bool,
    pub(super) tally: Iperf3Tally,
    /// Bytes of the current block already written (TCP senders).
    off: usize,
    pacer: Option<Pacer>,
    /// When the client stops counting, and the test's start.
    client_end: Option<(Instant, Instant)>,
    /// The largest window the client advertised (its receive buffer, empty).
    peer_max_window: u32,
    /// When to stop for the client's end.
    end: EndOfSending,
    /// Last time the client's reading was measured.
    sampled: Option<Instant>,
    /// When a sender must look again whatever its socket does: its pacer's
    /// next block, or the next look of a holding sender.
    wake: Option<Instant>,
    pub(super) life: Life,
    /// A sender's TCP retransmits, read as its socket closed.
    pub(super) retransmits: Option<u32>,
}

impl Stream {
    /// Stream `id` (a sender if `sends`, over TCP if `tcp`), counting in
    /// `tally`, paced by `pacer`, its client counting until `client_end`.
    pub(super) fn new(
        id: u32,
        sends: bool,
        tcp: bool,
        tally: Iperf3Tally,
        pacer: Option<Pacer>,
        client_end: Option<(Instant, Instant)>,
    ) -> Self {
        Stream {
            id,
            sends,
            tcp,
            tally,
            off: 0,
            pacer,
            client_end,
            peer_max_window: 0,
            end: EndOfSending::default(),
            sampled: None,
            wake: None,
            life: Life::Run,
            retransmits: None,
        }
    }

    /// Whether its socket is still open.
    pub(super) fn open(&self) -> bool {
        !matches!(self.life, Life::Closing | Life::Closed)
    }

    /// The I/O its carry is to do.
    pub(super) fn io(&self) -> Io {
        match self.life {
            Life::Deliver { .. } => Io::Unacked,
            _ => Io::Move,
        }
    }

    /// Whether a carry sends (else it only reads).
    pub(super) fn sending(&self) -> bool {
        self.sends && self.life == Life::Run
    }

    /// Whether it starts a block with its next bytes (a datagram always
    /// does).
    pub(super) fn starting(&self) -> bool {
        !self.tcp || self.off == 0
    }

    /// The bytes of `blk`'s block still to go.
    pub(super) fn rest_of_block(&self, blk: usize) -> std::ops::Range<usize> {
        self.off..blk
    }

    /// Before a block at `now` (the turn's time; `at`, the time now):
    /// whether it goes, is held, or the client's reading is to be sampled
    /// first.
    pub(super) fn next_block(&mut self, now: Instant, at: Instant, budget: &Budget) -> Next {
        if !budget.may_start() {
            return Next::Stop;
        }
        if let Some(p) = self.pacer.as_mut() {
            if !p.may_send(now) {
                self.wake = Some(p.due().max(now + PACE_FLOOR));
                return Next::Stop;
            }
        }
        let Some((end, _)) = self.client_end else {
            return Next::Send;
        };
        if !self.tcp {
            // UDP: the client's end has come on the server's clock, which
            // started before the client's (a datagram reaches a client on
            // this host as it is sent; one sent later is never counted).
            return self.hold_if(at >= end, at);
        }
        if !self.end.watching()
            && self
                .sampled
                .is_some_and(|s| at.saturating_duration_since(s) < SAMPLE_EVERY)
        {
            return Next::Send;
        }
        Next::Sample
    }

    /// The client's reading sampled at `at`: the window it advertises now
    /// (if known), the bytes it has not acknowledged, and the next block's
    /// length. A TCP sender stops before the client's end when everything it
    /// sends from now would arrive after the client stops counting.
    pub(super) fn sampled(
        &mut self,
        at: Instant,
        window: Option<u32>,
        unacked: u64,
        blk: usize,
        counters: &Counters,
    ) -> Next {
        let Some((end, start)) = self.client_end else {
            return Next::Send;
        };
        self.sampled = Some(at);
        if let Some(w) = window {
            self.peer_max_window = self.peer_max_window.max(w);
        }
        let unread = window.map_or(0, |w| self.peer_max_window.saturating_sub(w));
        let in_flight = unacked + u64::from(unread);
        let total = self.tally.total(counters);
        self.end.observe(at, total.saturating_sub(in_flight));
        let secs = at.saturating_duration_since(start).as_secs_f64();
        let average = if secs > 0.0 { total as f64 / secs } else { 0.0 };
        let sample = Sample {
            now: at,
            in_flight,
            next: blk as u64,
            average,
        };
        let stop = self.end.near(&sample, end) && self.end.stop(&sample, end);
        self.hold_if(stop, at)
    }

    fn hold_if(&mut self, hold: bool, at: Instant) -> Next {
        if hold {
            self.wake = Some(at + HOLD_CHECK);
            Next::Stop
        } else {
            Next::Send
        }
    }

    /// A carry begins at `now`: what held it last is looked at anew.
    pub(super) fn carrying(&mut self) {
        self.wake = None;
    }

    /// The socket took `n` bytes of a block of `blk` at `now`.
    pub(super) fn wrote(
        &mut self,
        n: usize,
        blk: usize,
        counters: &mut Counters,
        now: Instant,
        counting: bool,
    ) {
        if let Some(p) = &mut self.pacer {
            p.sent_bytes(n as u64);
        }
        let len = n as u64;
        if self.tcp {
            self.tally.bytes(counters, len, now, counting);
            self.off += n;
            if self.off >= blk {
                self.off = 0;
                self.tally.block_sent();
            }
        } else {
            self.tally.datagram_sent(counters, len, now, counting);
        }
    }

    /// An ICMP error from an earlier datagram at `now`: the next may pass,
    /// a little later.
    pub(super) fn refused(&mut self, now: Instant) {
        self.wake = Some(now + PACE_FLOOR);
    }

    /// Bytes arrived at `now` (a receiver's drain goes on while they come).
    pub(super) fn arrived(&mut self, now: Instant) {
        if let Life::Drain { last, .. } = &mut self.life {
            *last = now;
        }
    }

    /// The test ended at `now` (the client's `TEST_END`): a receiver drains
    /// what still arrives, a TCP sender waits until what it sent is
    /// delivered; a UDP sender is done.
    pub(super) fn test_end(&mut self, now: Instant) {
        if !self.open() {
            return;
        }
        self.life = if !self.sends {
            Life::Drain {
                since: now,
                last: now,
            }
        } else if self.tcp {
            Life::Deliver {
                since: now,
                check: now,
                delivered: None,
            }
        } else {
            Life::Rest
        };
    }

    /// A receiver reads whatever comes (the top-up, a shutdown's wait); a
    /// sender rests.
    pub(super) fn read_on(&mut self) {
        if self.open() {
            self.life = if self.sends { Life::Rest } else { Life::Read };
        }
    }

    /// It has nothing more to do for now.
    pub(super) fn rest(&mut self) {
        if self.open() {
            self.life = Life::Rest;
        }
    }

    /// Whether its tail is over (or it closed).
    pub(super) fn settled(&self) -> bool {
        matches!(self.life, Life::Rest | Life::Closed)
    }

    /// Its socket's unacknowledged bytes at `now`.
    pub(super) fn unacked(&mut self, unacked: u64, now: Instant) {
        if let Life::Deliver {
            since,
            check,
            delivered: delivered @ None,
        } = &mut self.life
        {
            if unacked == 0 || now.saturating_duration_since(*since) >= DRAIN_MAX {
                *delivered = Some(now);
            } else {
                *check = now + ACK_CHECK;
            }
        }
    }
}

impl Flow for Stream {
    type Counts = Counters;

    fn step(&mut self, now: Instant, _counts: &mut Counters) -> Step {
        match self.life {
            Life::Closed => Step::Done,
            Life::Closing => Step::Close(0),
            Life::Rest => Step::Wait,
            // Held by its pacer or the client's end until its deadline.
            Life::Run if self.sends && self.wake.is_some_and(|w| now < w) => Step::Wait,
            Life::Run | Life::Read => Step::Carry(0),
            Life::Drain { since, last } => {
                if now.saturating_duration_since(last) >= QUIET
                    || now.saturating_duration_since(since) >= DRAIN_MAX
                {
                    self.life = Life::Rest;
                    Step::Wait
                } else {
                    Step::Carry(0)
                }
            }
            Life::Deliver {
                delivered: Some(at),
                ..
            } => {
                if now >= at + QUIET {
                    self.life = Life::Rest;
                }
                Step::Wait
            }
            Life::Deliver { check, .. } if now >= check => Step::Carry(0),
            Life::Deliver { .. } => Step::Wait,
        }
    }

    fn told(&mut self, what: Told, _now: Instant, _counts: &mut Counters) {
        match what {
            Told::Carried {
                how: Carried::Eof | Carried::Failed(_),
                ..
            } if self.life != Life::Closed => self.life = Life::Closing,
            Told::Closed(_) => self.life = Life::Closed,
            // Its pacer's block or its next look is due.
            Told::Timer(_) => self.wake = None,
            _ => {}
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        let at = match self.life {
            Life::Run if self.sends => self.wake,
            Life::Drain { since, last } => Some((last + QUIET).min(since + DRAIN_MAX)),
            Life::Deliver {
                delivered: Some(at),
                ..
            } => Some(at + QUIET),
            Life::Deliver { check, .. } => Some(check),
            _ => None,
        };
        at.map(Deadline::at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A stream paced at `rate` bits per second, if given.
    fn stream(sends: bool, tcp: bool, rate: Option<u64>, start: Instant) -> (Stream, Counters) {
        let mut counters = Counters::new(false);
        let tally = Iperf3Tally::new(&mut counters, 1, sends, !tcp);
        let pacer = rate.map(|r| Pacer::new(r, start, None));
        (Stream::new(1, sends, tcp, tally, pacer, None), counters)
    }

    fn carried(how: Carried) -> Told {
        Told::Carried { conn: 0, how }
    }

    #[test]
    fn a_receiver_carries_while_open_and_is_done_once_its_client_closes() {
        let t0 = Instant::now();
        let (mut s, mut c) = stream(false, true, None, t0);
        assert_eq!(s.step(t0, &mut c), Step::Carry(0));
        assert_eq!(s.deadline(), None, "driven by its socket only");
        s.told(carried(Carried::Eof), t0, &mut c);
        assert_eq!(s.step(t0, &mut c), Step::Close(0), "its socket goes");
        assert!(!s.open());
        s.told(Told::Closed(0), t0, &mut c);
        assert_eq!(s.step(t0, &mut c), Step::Done);
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn a_paced_sender_sends_its_block_then_waits_until_the_next_is_due() {
        // 8 kbit/s of 1000-byte datagrams: one a second.
        let t0 = Instant::now();
        let (mut s, mut c) = stream(true, false, Some(8_000), t0);
        let budget = Budget::new(None, None);
        assert_eq!(s.step(t0, &mut c), Step::Carry(0));
        s.carrying();
        assert_eq!(
            s.next_block(t0, t0, &budget),
            Next::Send,
            "the first at once"
        );
        s.wrote(1000, 1000, &mut c, t0, true);
        assert_eq!(s.next_block(t0, t0, &budget), Next::Stop);
        let wake = s.deadline().expect("held by its pacer").at;
        assert!(wake >= t0 + ms(900) && wake <= t0 + ms(1100), "{wake:?}");
        // Driven by an event before then: it waits.
        assert_eq!(s.step(t0 + ms(500), &mut c), Step::Wait);
        // Its deadline comes: it carries, and the block goes.
        s.told(Told::Timer(wake), wake, &mut c);
        assert_eq!(s.step(wake, &mut c), Step::Carry(0));
        assert_eq!(s.next_block(wake, wake, &budget), Next::Send);
        assert_eq!(s.tally.packets(), 1);
    }

    #[test]
    fn a_sender_whose_budget_is_spent_sends_nothing_more_and_sets_no_deadline() {
        let t0 = Instant::now();
        let (mut s, _c) = stream(true, true, None, t0);
        let mut budget = Budget::new(Some(1000), None);
        assert_eq!(s.next_block(t0, t0, &budget), Next::Send);
        budget.start_block(1000);
        assert_eq!(s.next_block(t0, t0, &budget), Next::Stop);
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn a_udp_sender_holds_from_the_clients_end_and_looks_again_soon() {
        let t0 = Instant::now();
        let (mut s, _c) = stream(true, false, None, t0);
        s.client_end = Some((t0 + ms(100), t0));
        let budget = Budget::new(None, None);
        assert_eq!(s.next_block(t0, t0 + ms(99), &budget), Next::Send);
        assert_eq!(s.next_block(t0, t0 + ms(100), &budget), Next::Stop);
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + ms(100) + HOLD_CHECK)));
    }

    #[test]
    fn a_tcp_sender_samples_the_clients_reading_at_most_every_millisecond_far_from_its_end() {
        let t0 = Instant::now();
        let (mut s, c) = stream(true, true, None, t0);
        s.client_end = Some((t0 + Duration::from_secs(10), t0));
        let budget = Budget::new(None, None);
        assert_eq!(s.next_block(t0, t0, &budget), Next::Sample);
        // Far from the end: it goes, and is not sampled again at once.
        assert_eq!(s.sampled(t0, Some(65536), 0, 1000, &c), Next::Send);
        assert_eq!(s.next_block(t0, t0 + ms(0), &budget), Next::Send);
        assert_eq!(s.next_block(t0, t0 + SAMPLE_EVERY, &budget), Next::Sample);
    }

    #[test]
    fn after_test_end_a_receiver_drains_until_quiet_then_rests() {
        let t0 = Instant::now();
        let (mut s, mut c) = stream(false, true, None, t0);
        s.test_end(t0);
        assert_eq!(s.step(t0, &mut c), Step::Carry(0));
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + QUIET)));
        // Bytes at 30 ms put the quiet off.
        s.arrived(t0 + ms(30));
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + ms(30) + QUIET)));
        assert_eq!(s.step(t0 + QUIET, &mut c), Step::Carry(0));
        assert!(!s.settled());
        let quiet = t0 + ms(30) + QUIET;
        s.told(Told::Timer(quiet), quiet, &mut c);
        assert_eq!(s.step(quiet, &mut c), Step::Wait);
        assert!(s.settled());
        assert!(s.open(), "its socket stays open for the top-up");
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn a_receiver_that_never_goes_quiet_stops_draining_at_the_most() {
        let t0 = Instant::now();
        let (mut s, mut c) = stream(false, true, None, t0);
        s.test_end(t0);
        let mut now = t0;
        while now < t0 + DRAIN_MAX {
            s.arrived(now);
            assert_eq!(s.step(now, &mut c), Step::Carry(0));
            now += ms(10);
        }
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + DRAIN_MAX)));
        assert_eq!(s.step(t0 + DRAIN_MAX, &mut c), Step::Wait);
        assert!(s.settled());
    }

    #[test]
    fn after_test_end_a_tcp_sender_checks_its_acknowledgements_at_its_deadline_then_waits_quiet() {
        let t0 = Instant::now();
        let (mut s, mut c) = stream(true, true, None, t0);
        s.test_end(t0);
        assert_eq!(s.step(t0, &mut c), Step::Carry(0));
        assert_eq!(s.io(), Io::Unacked);
        s.unacked(5000, t0);
        // Asks to look again at its deadline, not before.
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + ACK_CHECK)));
        assert_eq!(s.step(t0 + ms(1), &mut c), Step::Wait);
        let check = t0 + ACK_CHECK;
        s.told(Told::Timer(check), check, &mut c);
        assert_eq!(s.step(check, &mut c), Step::Carry(0));
        s.unacked(0, check);
        assert_eq!(s.deadline(), Some(Deadline::at(check + QUIET)));
        assert_eq!(s.step(check + ms(10), &mut c), Step::Wait);
        assert!(!s.settled());
        assert_eq!(s.step(check + QUIET, &mut c), Step::Wait);
        assert!(s.settled());
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn a_sender_whose_bytes_are_never_acknowledged_gives_up_at_the_most() {
        let t0 = Instant::now();
        let (mut s, mut c) = stream(true, true, None, t0);
        s.test_end(t0);
        s.unacked(1, t0 + DRAIN_MAX);
        assert_eq!(s.deadline(), Some(Deadline::at(t0 + DRAIN_MAX + QUIET)));
        assert_eq!(s.step(t0 + DRAIN_MAX + QUIET, &mut c), Step::Wait);
        assert!(s.settled());
    }

    #[test]
    fn a_udp_sender_has_no_tail_and_a_closed_stream_none_either() {
        let t0 = Instant::now();
        let (mut udp, mut c) = stream(true, false, None, t0);
        udp.test_end(t0);
        assert!(udp.settled());
        assert_eq!(udp.step(t0, &mut c), Step::Wait);
        let (mut gone, mut c) = stream(false, true, None, t0);
        gone.told(
            carried(Carried::Failed(std::io::Error::other("x"))),
            t0,
            &mut c,
        );
        assert_eq!(gone.step(t0, &mut c), Step::Close(0));
        gone.told(Told::Closed(0), t0, &mut c);
        gone.test_end(t0);
        assert_eq!(gone.step(t0, &mut c), Step::Done);
        gone.read_on();
        assert_eq!(gone.step(t0, &mut c), Step::Done);
    }

    /// The stream is sans-IO: outside its tests, it names no socket, no
    /// event wait, no system call and reads no clock (the kind does).
    #[test]
    fn the_stream_flow_touches_no_socket_and_reads_no_clock() {
        let text = include_str!("stream.rs");
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for banned in [
            "Instant::now",
            "SystemTime::now",
            "sys::",
            "mio::",
            "Conn",
            "TcpStream",
            "UdpSocket",
            "engine::io",
            "RawFd",
        ] {
            assert!(!code.contains(banned), "stream.rs names {banned}");
        }
    }
}
