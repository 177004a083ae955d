//! A UDP stream's two halves as state machines: the paced sender, which says
//! when its next datagram is due and what header it carries, and the
//! receiver's accounting, which tells each arriving datagram apart (new, out
//! of order, duplicated, too late) and keeps RFC 3550's interarrival jitter.
//! Neither touches a socket or reads the clock: the worker passes the time in.

use std::time::{Duration, Instant};

use linkperf_protocol::{UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::{BitsPerSecond, StreamDirection, UNPACED};

use super::{Jitter, Pacer};
use crate::counters::{Counters, FlowSlotId};

/// Sequence numbers a receiver remembers behind the highest it has seen: a
/// datagram that far out of order is still told apart (late or duplicated);
/// one further back arrives too late to tell, and stays counted lost. 1024
/// datagrams are 115 ms of a 100 Mbit/s stream of 1400-byte datagrams; 128
/// bytes of bitmap per flow.
pub const REORDER_WINDOW: u64 = 1024;

const WORDS: usize = (REORDER_WINDOW / 64) as usize;

/// What the sender wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxWant {
    /// Send `count` datagrams of `payload` bytes each, the first with this
    /// header and each next one numbered one more.
    Send {
        /// The first one's header.
        header: UdpHeader,
        /// Payload bytes of each.
        payload: usize,
        /// How many are due (at least 1).
        count: usize,
    },
    /// Nothing before this time.
    Wait(Instant),
    /// Not started.
    Idle,
    /// Finished.
    Done,
}

/// The sending half of a UDP stream: datagrams of `message` payload bytes,
/// numbered from 0, each stamped with its send time, paced or not.
#[derive(Debug, Clone)]
pub struct DatagramTx {
    tag: u32,
    flow: u32,
    message: usize,
    seq: u64,
    rate: BitsPerSecond,
    pacer: Option<Pacer>,
    origin: Option<Instant>,
    last_sent: Option<Instant>,
    running: bool,
    done: bool,
}

impl DatagramTx {
    /// A sender for flow `flow` of the session tagged `tag`, at `rate`
    /// (0: as fast as the socket takes), idle until started.
    pub fn new(tag: u32, flow: u32, message: usize, rate: BitsPerSecond) -> Self {
        DatagramTx {
            tag,
            flow,
            message,
            seq: 0,
            rate,
            pacer: None,
            origin: None,
            last_sent: None,
            running: false,
            done: false,
        }
    }

    /// Starts sending at `now`, which is also where its send times count from.
    pub fn start(&mut self, now: Instant) {
        if !self.running && !self.done {
            self.running = true;
            self.origin = Some(now);
            if self.rate != UNPACED {
                self.pacer = Some(Pacer::bits(self.rate, now));
            }
        }
    }

    /// What to do at `now`: one datagram at a time.
    pub fn want(&mut self, now: Instant) -> TxWant {
        self.want_run(now, 1)
    }

    /// What to do at `now`, with up to `max` datagrams at once when that
    /// many are due (all of them, unpaced).
    pub fn want_run(&mut self, now: Instant, max: usize) -> TxWant {
        if self.done {
            return TxWant::Done;
        }
        if !self.running {
            return TxWant::Idle;
        }
        let max = max.max(1);
        let count = match &mut self.pacer {
            Some(p) => match p.due_now(now, self.message as u64 * 8, max as u64) {
                0 => return TxWant::Wait(p.due()),
                n => usize::try_from(n).unwrap_or(max),
            },
            None => max,
        };
        TxWant::Send {
            count,
            header: UdpHeader {
                tag: self.tag,
                flow: self.flow,
                seq: self.seq,
                sent_ns: self.origin.map_or(0, |o| nanos_since(o, now)),
            },
            payload: self.message,
        }
    }

    /// The first `n` of the datagrams [`DatagramTx::want_run`] asked for
    /// went at `now`; returns the time since the previous send. The sender
    /// stops after them if `stop`.
    pub fn sent(&mut self, now: Instant, n: usize, stop: bool) -> Duration {
        self.seq += n as u64;
        if let Some(p) = &mut self.pacer {
            p.sent_bytes(self.message as u64 * n as u64);
        }
        let since = self
            .last_sent
            .map(|l| now.saturating_duration_since(l))
            .unwrap_or_default();
        self.last_sent = Some(now);
        if stop {
            self.finish();
        }
        since
    }

    /// Stops at once.
    pub fn finish(&mut self) {
        self.running = false;
        self.done = true;
    }

    /// True once stopped.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Payload bytes of each datagram.
    pub fn message(&self) -> usize {
        self.message
    }
}

/// Nanoseconds from `origin` to `now` (0 before it).
pub fn nanos_since(origin: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// What one arriving datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Arrival {
    /// Sequence numbers this arrival accounted for (RFC 3550's "expected"):
    /// how far it moved the highest sequence number seen (the gap it jumped,
    /// counted lost until filled, and itself); 0 for one from behind it.
    pub expected: u64,
    /// It is new and counts as received: in sequence, or late within the
    /// reorder window (filling a gap counted lost).
    pub received: bool,
    /// It came after a datagram with a higher sequence number.
    pub out_of_order: bool,
    /// Its sequence number was received before.
    pub duplicate: bool,
    /// It came from further behind than the reorder window: too late to tell
    /// whether it is new, and left counted lost.
    pub late: bool,
}

/// The receiver's accounting of one flow's datagrams: sequence numbers seen
/// (a bitmap of the last [`REORDER_WINDOW`]), and RFC 3550's interarrival
/// jitter J, updated on every new datagram with D, the difference of its
/// transit time (arrival on the receiver's clock less send time on the
/// sender's) from the previous one's: J += (|D| − J) / 16 (RFC 3550 §6.4.1,
/// A.8). The clocks need not agree: only differences of transit times count.
#[derive(Debug, Clone)]
pub struct SequenceRx {
    /// One more than the highest sequence number seen (0: none yet).
    next: u64,
    /// Bit `s % REORDER_WINDOW`: sequence `s` (within the window below `next`) arrived.
    seen: [u64; WORDS],
    /// In nanoseconds.
    jitter: Jitter,
}

impl Default for SequenceRx {
    fn default() -> Self {
        SequenceRx::new()
    }
}

impl SequenceRx {
    /// A receiver that has seen nothing; sequence numbers start at 0.
    pub fn new() -> Self {
        SequenceRx {
            next: 0,
            seen: [0; WORDS],
            jitter: Jitter::default(),
        }
    }

    fn bit(&self, seq: u64) -> bool {
        let i = seq % REORDER_WINDOW;
        self.seen[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, seq: u64, on: bool) {
        let i = seq % REORDER_WINDOW;
        let w = &mut self.seen[(i / 64) as usize];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// The datagram numbered `seq`, sent at `sent_ns` on the sender's clock,
    /// arrived at `arrived_ns` on this one's.
    pub fn arrive(&mut self, seq: u64, sent_ns: u64, arrived_ns: u64) -> Arrival {
        let mut a = Arrival::default();
        if seq >= self.next {
            a.expected = (seq - self.next).saturating_add(1);
            // The gap is missing now: forget what its slots held.
            if a.expected >= REORDER_WINDOW {
                self.seen = [0; WORDS];
            } else {
                for s in self.next..seq {
                    self.set(s, false);
                }
            }
            self.set(seq, true);
            self.next = seq.saturating_add(1);
            a.received = true;
        } else if self.next - seq > REORDER_WINDOW {
            a.out_of_order = true;
            a.late = true;
        } else if self.bit(seq) {
            a.duplicate = true;
        } else {
            self.set(seq, true);
            a.received = true;
            a.out_of_order = true;
        }
        if a.received {
            // Exact in an f64 for transits within 104 days.
            self.jitter.arrived(arrived_ns as f64 - sent_ns as f64);
        }
        a
    }

    /// One more than the highest sequence number seen (0: none yet).
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The interarrival jitter so far, nanoseconds.
    pub fn jitter_ns(&self) -> f64 {
        self.jitter.value()
    }

    /// Whether any datagram arrived.
    pub fn started(&self) -> bool {
        self.jitter.started()
    }
}

/// The halves of one UDP stream flow that one side runs: the client sends up
/// and receives down, the server the opposite; both do both for
/// bidirectional streams.
#[derive(Debug, Clone)]
pub struct UdpStreamHalves {
    /// The sending half, if this side sends.
    pub tx: Option<DatagramTx>,
    /// The receiving half, if this side receives.
    pub rx: Option<SequenceRx>,
    /// When the last datagram arrived (a received message's time is the
    /// time since the one before).
    last_rx: Option<Instant>,
}

impl UdpStreamHalves {
    /// The halves one side of flow `flow` runs, sending `message`-byte
    /// datagrams at `rate`, tagged `tag`.
    pub fn for_side(
        tag: u32,
        flow: u32,
        message: usize,
        direction: StreamDirection,
        rate: BitsPerSecond,
        client: bool,
    ) -> Self {
        let sends = match direction {
            StreamDirection::Up => client,
            StreamDirection::Down => !client,
            StreamDirection::Bidir => true,
        };
        let receives = direction == StreamDirection::Bidir || !sends;
        UdpStreamHalves {
            tx: sends.then(|| DatagramTx::new(tag, flow, message, rate)),
            rx: receives.then(SequenceRx::new),
            last_rx: None,
        }
    }

    /// Starts sending (and timing what arrives) at `now`.
    pub fn start(&mut self, now: Instant) {
        if let Some(tx) = &mut self.tx {
            tx.start(now);
        }
        self.last_rx.get_or_insert(now);
    }

    /// A data datagram for this flow with header `h` and `payload` bytes
    /// arrived at `now` (`clock_ns` on this side's clock for jitter):
    /// accounted and counted into `counters` as the flow in `slot`.
    pub(crate) fn received(
        &mut self,
        h: &UdpHeader,
        payload: usize,
        now: Instant,
        clock_ns: u64,
        counters: &mut Counters,
        slot: FlowSlotId,
    ) {
        counters.rx(slot, payload, now);
        let Some(rx) = &mut self.rx else {
            return;
        };
        let a = rx.arrive(h.seq, h.sent_ns, clock_ns);
        counters.datagram_received(slot, &a, rx.jitter_ns(), now);
        if a.received {
            let since = self
                .last_rx
                .map(|l| now.saturating_duration_since(l))
                .unwrap_or_default();
            self.last_rx = Some(now);
            counters.transactions(slot, 1, since, now);
        }
    }
}

/// A registration: a flow's header with no payload (see [`UdpHeader`]).
pub fn registration(tag: u32, flow: u32) -> [u8; UDP_HEADER_LEN] {
    let mut out = [0u8; UDP_HEADER_LEN];
    UdpHeader {
        tag,
        flow,
        seq: 0,
        sent_ns: 0,
    }
    .encode(&mut out);
    out
}

/// Writes `header` at the front of `buf` (whose payload bytes follow) and
/// returns the datagram with `payload` bytes, or `None` when `buf` is too short.
pub fn datagram<'a>(buf: &'a mut [u8], header: &UdpHeader, payload: usize) -> Option<&'a [u8]> {
    let len = UDP_HEADER_LEN.checked_add(payload)?;
    let d = buf.get_mut(..len)?;
    header.encode(d.first_chunk_mut::<UDP_HEADER_LEN>()?);
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (expected, received, out of order, duplicates, late) of `seqs`, sent
    /// 1 ms apart, on a new receiver.
    fn account(seqs: &[u64]) -> (u64, u64, u64, u64, u64) {
        let mut rx = SequenceRx::new();
        let mut t = (0, 0, 0, 0, 0);
        for (i, &s) in seqs.iter().enumerate() {
            let sent = s.wrapping_mul(1_000_000);
            let a = rx.arrive(s, sent, sent.wrapping_add(500_000 + i as u64));
            t.0 += a.expected;
            t.1 += u64::from(a.received);
            t.2 += u64::from(a.out_of_order);
            t.3 += u64::from(a.duplicate);
            t.4 += u64::from(a.late);
        }
        t
    }

    fn lost((expected, received, ..): (u64, u64, u64, u64, u64)) -> u64 {
        expected - received
    }

    #[test]
    fn a_stream_in_order_loses_nothing() {
        let seqs: Vec<u64> = (0..5000).collect();
        let t = account(&seqs);
        assert_eq!(t, (5000, 5000, 0, 0, 0));
        assert_eq!(lost(t), 0);
    }

    #[test]
    fn gaps_are_lost() {
        // 3, 4 and 7..=9 never come.
        let t = account(&[0, 1, 2, 5, 6, 10, 11]);
        assert_eq!(t, (12, 7, 0, 0, 0));
        assert_eq!(lost(t), 5);
        // The first datagrams lost: sequence numbers start at 0.
        assert_eq!(lost(account(&[3, 4])), 3);
    }

    #[test]
    fn a_late_arrival_fills_its_gap() {
        // 2 comes after 5: out of order, not lost.
        let t = account(&[0, 1, 3, 4, 5, 2, 6]);
        assert_eq!(t, (7, 7, 1, 0, 0));
        assert_eq!(lost(t), 0);
        // Swapped pairs all along.
        let seqs: Vec<u64> = (0..100).map(|i| i ^ 1).collect();
        let t = account(&seqs);
        assert_eq!(t, (100, 100, 50, 0, 0));
    }

    #[test]
    fn duplicates_are_counted_once() {
        let t = account(&[0, 1, 1, 2, 0, 3, 3, 3]);
        assert_eq!(t, (4, 4, 0, 4, 0));
        assert_eq!(lost(t), 0);
        // A late one then its duplicate: the first fills the gap, the second is a duplicate.
        let t = account(&[0, 2, 1, 1, 3]);
        assert_eq!(t, (4, 4, 1, 1, 0));
    }

    #[test]
    fn a_lost_one_duplicated_later_is_still_told_apart() {
        // 1 lost; 2 duplicated; the gap left open.
        let t = account(&[0, 2, 2, 3]);
        assert_eq!(t, (4, 3, 0, 1, 0));
        assert_eq!(lost(t), 1);
    }

    #[test]
    fn beyond_the_reorder_window_it_is_too_late_to_tell() {
        let w = REORDER_WINDOW;
        // 1 missing until 1 + W + 1 has been seen: its slot is forgotten.
        let mut seqs: Vec<u64> = (0..w + 3).filter(|&s| s != 1).collect();
        seqs.push(1);
        let t = account(&seqs);
        assert_eq!(t, (w + 3, w + 2, 1, 0, 1));
        assert_eq!(lost(t), 1, "stays lost");
        // Just inside the window it still fills its gap.
        let mut seqs: Vec<u64> = (0..=w).filter(|&s| s != 1).collect();
        seqs.push(1);
        let t = account(&seqs);
        assert_eq!(t, (w + 1, w + 1, 1, 0, 0));
        // A duplicate from that far back is late as well, never double-counted.
        let mut seqs: Vec<u64> = (0..w + 5).collect();
        seqs.push(2);
        assert_eq!(account(&seqs), (w + 5, w + 5, 1, 0, 1));
    }

    #[test]
    fn a_jump_past_the_window_clears_it() {
        // A huge gap: everything in it lost; what was seen before is forgotten
        // but can no longer come back inside the window.
        let t = account(&[0, 1, 5000, 5001, 4999, 4990]);
        assert_eq!(t, (5002, 6, 2, 0, 0));
        let mut rx = SequenceRx::new();
        assert_eq!(rx.next(), 0, "nothing seen");
        for s in [0, 1, 5000, 5001, 4999] {
            rx.arrive(s, 0, 0);
        }
        assert_eq!(rx.next(), 5002, "one past the highest, whatever came late");
        assert_eq!(lost(t), 4996);
        let t = account(&[0, u64::MAX - 1]);
        assert_eq!(t.0, u64::MAX, "no overflow");
        let mut rx = SequenceRx::new();
        assert_eq!(rx.arrive(u64::MAX, 0, 0).expected, u64::MAX);
        assert!(rx.arrive(u64::MAX, 0, 0).expected <= 1);
    }

    #[test]
    fn jitter_is_rfc3550s() {
        let mut rx = SequenceRx::new();
        // Sent every 10 ms; transit alternates 1 ms and 3 ms: |D| = 2 ms each time.
        let mut j = 0.0f64;
        for s in 0..200u64 {
            let sent = s * 10_000_000;
            let transit = if s % 2 == 0 { 1_000_000 } else { 3_000_000 };
            rx.arrive(s, sent, sent + transit + 7_000_000_000);
            if s > 0 {
                j += (2_000_000.0 - j) / 16.0;
            }
            assert!((rx.jitter_ns() - j).abs() < 1e-6, "{s}");
        }
        // It converges to |D|.
        assert!((rx.jitter_ns() - 2_000_000.0).abs() < 1_000.0);
        // A constant transit time has no jitter, whatever the clocks' offset.
        let mut rx = SequenceRx::new();
        for s in 0..50u64 {
            rx.arrive(s, 1_000_000_000_000 + s * 1000, s * 1000);
        }
        assert_eq!(rx.jitter_ns(), 0.0);
        assert!(rx.started());
        // Duplicates do not move it.
        let mut rx = SequenceRx::new();
        rx.arrive(0, 0, 100);
        rx.arrive(0, 0, 5_000_100);
        assert_eq!(rx.jitter_ns(), 0.0);
    }

    #[test]
    fn the_sender_numbers_stamps_and_stops() {
        let t0 = Instant::now();
        let mut tx = DatagramTx::new(0xabcd, 3, 1000, BitsPerSecond(8_000_000));
        assert_eq!(tx.want(t0), TxWant::Idle);
        tx.start(t0);
        let now = t0 + Duration::from_micros(20);
        let TxWant::Send {
            header,
            payload,
            count,
        } = tx.want_run(now, 10)
        else {
            panic!("the first datagram goes at once")
        };
        assert_eq!(count, 1, "one is due");
        assert_eq!(
            header,
            UdpHeader {
                tag: 0xabcd,
                flow: 3,
                seq: 0,
                sent_ns: 20_000
            }
        );
        assert_eq!(payload, 1000);
        tx.sent(now, 1, false);
        assert_eq!(tx.want(now), TxWant::Wait(t0 + Duration::from_millis(1)));
        let later = t0 + Duration::from_millis(1);
        let TxWant::Send { header, .. } = tx.want(later) else {
            panic!("due")
        };
        assert_eq!(header.seq, 1);
        // 3.5 ms later three are due: a run of three.
        let TxWant::Send { header, count, .. } =
            tx.want_run(later + Duration::from_micros(2500), 10)
        else {
            panic!("due")
        };
        assert_eq!((header.seq, count), (1, 3));
        assert_eq!(tx.sent(later, 1, true), later - now);
        assert_eq!(tx.message(), 1000);
        assert_eq!(tx.want(later), TxWant::Done);
        assert!(tx.is_done());
        // Unpaced: always due.
        let mut tx = DatagramTx::new(1, 0, 10, BitsPerSecond(0));
        tx.start(t0);
        for s in 0..100 {
            let TxWant::Send { header, count, .. } = tx.want_run(t0, 7) else {
                panic!("unpaced")
            };
            assert_eq!((header.seq, count), (s * 7, 7), "always a full run");
            tx.sent(t0, 7, false);
        }
    }
}
