//! What the server counts for each stream, and when a sender may send. Pure
//! logic: the data loop passes the time in.
//!
//! A test's streams count in the engine's one accounting type, [`Counters`]
//! (one per test, a flow slot per stream): their bytes, and a UDP
//! receiver's datagrams as the engine's sequence accounting ([`SequenceRx`],
//! linkperf's UDP streams' own) tells them apart. Beside them each stream
//! keeps what only iperf3's wire needs, its extension of those counts
//! ([`Iperf3Tally`]): the bytes after the omitted seconds, whole blocks,
//! iperf3's signed loss (gaps in the highest sequence number, one taken back
//! for each datagram from behind, duplicates included), its jitter over every
//! datagram in seconds, and the UDP counts when the omitted seconds ended.

use std::time::{Duration, Instant};

use linkperf_engine::flow::udp_stream::{Arrival, SequenceRx};
use linkperf_engine::flow::Jitter;
use linkperf_engine::Counters;

use crate::codec::UdpHeader;

/// A time on the clock iperf3 stamps its datagrams with (CLOCK_MONOTONIC,
/// its seconds cut to 32 bits): seconds and microseconds, as its header
/// carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub sec: u32,
    pub usec: u32,
}

impl Stamp {
    /// Seconds, as iperf3 reckons its transit times.
    fn secs(self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }

    /// Nanoseconds, for the engine's sequence accounting.
    fn nanos(self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec) * 1_000
    }
}

/// iperf3's extension of one stream's counts in the test's [`Counters`].
#[derive(Debug, Clone)]
pub(crate) struct Iperf3Tally {
    /// The stream's flow slot in the test's counters.
    slot: usize,
    sends: bool,
    udp: bool,
    /// Bytes after the omitted seconds (iperf3's "bytes").
    counted: u64,
    /// Whole blocks sent (a UDP sender's datagrams are its blocks).
    blocks: u64,
    /// A UDP receiver's sequence numbers, as the engine accounts them (it
    /// numbers from 0, iperf3 from 1: each goes in less one).
    seq: Option<SequenceRx>,
    /// UDP receivers: datagrams missing from the sequence, as iperf3 counts
    /// them (iperf_udp.c).
    lost: i64,
    /// UDP receivers: datagrams that came after a later one, duplicates
    /// included.
    out_of_order: u64,
    /// UDP receivers: RFC 1889 jitter over every datagram, seconds.
    jitter: Jitter,
    /// UDP: the counts when the omitted seconds ended (all 0 without
    /// `-O`), as iperf3 keeps them (`iperf_reset_stats`).
    omitted: Omitted,
}

/// A UDP stream's counts at the end of the omitted seconds: what iperf3 3.14
/// and later subtract from the whole test's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Omitted {
    /// Datagrams sent, or the highest sequence number received.
    pub packets: u64,
    /// Datagrams counted lost.
    pub lost: i64,
    /// Datagrams that came after a later one.
    pub out_of_order: u64,
}

impl Iperf3Tally {
    /// Stream `id`'s counts, in a new flow slot of `counters`: a sender's
    /// (`sends`) or a receiver's, of UDP datagrams (`udp`) or a TCP stream.
    pub fn new(counters: &mut Counters, id: u32, sends: bool, udp: bool) -> Self {
        if udp {
            counters.datagrams.activate();
        }
        Iperf3Tally {
            slot: counters.add_flow(id),
            sends,
            udp,
            counted: 0,
            blocks: 0,
            seq: (udp && !sends).then(SequenceRx::new),
            lost: 0,
            out_of_order: 0,
            jitter: Jitter::default(),
            omitted: Omitted::default(),
        }
    }

    /// `n` bytes moved at `now`, sent or received as the stream does;
    /// `counting` once the omitted seconds are over.
    pub fn bytes(&mut self, c: &mut Counters, n: u64, now: Instant, counting: bool) {
        let len = usize::try_from(n).unwrap_or(usize::MAX);
        if self.sends {
            c.tx(self.slot, len, now);
        } else {
            c.rx(self.slot, len, now);
        }
        if counting {
            self.counted += n;
        }
    }

    /// A TCP sender wrote the last byte of a block.
    pub fn block_sent(&mut self) {
        self.blocks += 1;
    }

    /// A UDP datagram of `len` bytes went out at `now` (its sequence number
    /// was [`Iperf3Tally::packets`] + 1).
    pub fn datagram_sent(&mut self, c: &mut Counters, len: u64, now: Instant, counting: bool) {
        self.bytes(c, len, now, counting);
        c.datagram_sent(now, 1);
        self.blocks += 1;
    }

    /// A UDP datagram of `len` bytes with header `h` arrived at `now`,
    /// `arrived` on the clock the sender stamps with. The engine tells it
    /// apart; iperf3 counts a gap in the highest sequence number as lost and
    /// takes one back for each datagram from behind it, as long as any are
    /// (iperf_udp.c), and updates its jitter with every datagram.
    pub fn datagram(
        &mut self,
        c: &mut Counters,
        len: u64,
        h: &UdpHeader,
        arrived: Stamp,
        now: Instant,
        counting: bool,
    ) {
        self.bytes(c, len, now, counting);
        let sent = Stamp {
            sec: h.sec,
            usec: h.usec,
        };
        if let Some(rx) = &mut self.seq {
            let a = match h.seq.checked_sub(1) {
                Some(s) => rx.arrive(s, sent.nanos(), arrived.nanos()),
                // iperf3 numbers from 1: a 0 is from behind whatever came.
                None => Arrival {
                    out_of_order: true,
                    late: true,
                    ..Arrival::default()
                },
            };
            c.datagram_received(self.slot, &a, rx.jitter_ns(), now);
            if a.expected > 0 {
                // Ahead of the highest: the gap it jumped is lost.
                self.lost += (a.expected - 1) as i64;
            } else {
                self.out_of_order += 1;
                if self.lost > 0 {
                    self.lost -= 1;
                }
            }
        }
        self.jitter.arrived(arrived.secs() - sent.secs());
    }

    /// The omitted seconds are over: iperf3 keeps the UDP counts so far,
    /// to subtract them, and starts its jitter afresh.
    pub fn omit_over(&mut self) {
        self.omitted = Omitted {
            packets: self.packets(),
            lost: self.lost,
            out_of_order: self.out_of_order,
        };
        self.jitter.restart();
    }

    /// Bytes sent or received over the stream's whole life.
    pub fn total(&self, c: &Counters) -> u64 {
        let t = c.flow_total(self.slot);
        if self.sends {
            t.tx_bytes
        } else {
            t.rx_bytes
        }
    }

    /// Bytes after the omitted seconds (iperf3's "bytes").
    pub fn counted(&self) -> u64 {
        self.counted
    }

    /// Whole blocks sent.
    #[cfg(test)]
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// UDP: datagrams sent, or the highest sequence number received.
    pub fn packets(&self) -> u64 {
        match &self.seq {
            Some(rx) => rx.next(),
            None if self.udp && self.sends => self.blocks,
            None => 0,
        }
    }

    /// UDP receivers: datagrams missing from the sequence, as iperf3 counts
    /// them; it may go below the gaps it saw when datagrams come twice.
    pub fn lost(&self) -> i64 {
        self.lost
    }

    /// UDP receivers: datagrams that came after a later one.
    #[cfg(test)]
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// UDP receivers: RFC 1889 jitter, seconds.
    pub fn jitter_s(&self) -> f64 {
        self.jitter.value()
    }

    /// The UDP counts when the omitted seconds ended.
    pub fn omitted(&self) -> Omitted {
        self.omitted
    }

    /// UDP datagrams counted lost after the omitted seconds.
    pub fn lost_counted(&self) -> i64 {
        self.lost - self.omitted.lost
    }

    /// UDP datagrams sent, or sequence numbers received, after the omitted
    /// seconds.
    pub fn packets_counted(&self) -> u64 {
        self.packets().saturating_sub(self.omitted.packets)
    }
}

/// Slack kept between the estimated end of a sender's data in flight and the
/// moment the receiver stops counting.
pub(crate) const STOP_SAFETY: Duration = Duration::from_millis(20);
/// How much longer than its estimate the data in flight is given to drain:
/// a receiver's reading slows down when it loses the CPU.
const DRAIN_FACTOR: f64 = 3.0;
/// How often the receiver's reading rate is measured.
const RATE_SAMPLE: Duration = Duration::from_millis(50);
/// How long before the stop, at the least, a sender starts checking every
/// block (until then it samples every millisecond or so; what it sends
/// between two samples drains well within this).
const WATCH_AHEAD: Duration = Duration::from_millis(50);
/// How long before the receiver's end a sender checks every block when
/// there is no rate to estimate the drain by.
const WATCH_BLIND: Duration = Duration::from_secs(2);

/// When a sender must stop so that all it sent is read, and so counted, by
/// a receiver that stops counting at a time the sender knows (iperf3 clients
/// count only while their test runs). What is in flight (not yet
/// acknowledged, or received and not yet read) reaches the receiver's
/// application at the rate it reads; that rate is measured over the last
/// [`RATE_SAMPLE`] or more, and the estimate tripled for safety.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EndOfSending {
    mark: Option<(Instant, u64)>,
    rate: Option<f64>,
    /// The end is near: every block is checked from now on.
    watching: bool,
}

/// What a sender knows when it checks whether to go on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub now: Instant,
    /// Bytes sent and not read yet by the receiver.
    pub in_flight: u64,
    /// The next block's bytes.
    pub next: u64,
    /// The sender's rate so far, bytes per second.
    pub average: f64,
}

/// How long the data in flight takes to be read.
enum Drain {
    /// No rate to judge by, nothing waiting: no reason to hold.
    Unknown,
    /// Data waits and the receiver reads nothing.
    Stalled,
    /// This long, with the safety factor.
    Takes(Duration),
}

impl EndOfSending {
    /// The receiver has read `consumed` bytes in all by `now`.
    pub fn observe(&mut self, now: Instant, consumed: u64) {
        match self.mark {
            None => self.mark = Some((now, consumed)),
            Some((t, c)) if now.saturating_duration_since(t) >= RATE_SAMPLE => {
                let dt = now.saturating_duration_since(t).as_secs_f64();
                self.rate = Some(consumed.saturating_sub(c) as f64 / dt);
                self.mark = Some((now, consumed));
            }
            Some(_) => {}
        }
    }

    /// The receiver's recent reading rate, bytes per second, if measured.
    #[cfg(test)]
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Whether the end is near enough at `now` that every block must be
    /// checked with [`EndOfSending::stop`]: the stop could come within twice
    /// the drain estimated from this sample and [`WATCH_AHEAD`] (without a
    /// rate, within [`WATCH_BLIND`] of `end`). Once near, always near.
    /// Before that, a sample every millisecond or so is enough, and a fast
    /// sender keeps its writes free of the two socket queries a check costs.
    pub fn near(&mut self, s: &Sample, end: Instant) -> bool {
        if !self.watching {
            let ahead = match self.drain(s) {
                Drain::Takes(d) => d * 2 + WATCH_AHEAD + STOP_SAFETY,
                Drain::Unknown | Drain::Stalled => WATCH_BLIND,
            };
            self.watching = s.now + ahead >= end;
        }
        self.watching
    }

    /// True once [`EndOfSending::near`] has been.
    pub fn watching(&self) -> bool {
        self.watching
    }

    /// Whether to hold the next block at the sample's time, the receiver
    /// stopping its count at `end`. The sender's average rate stands in until
    /// the receiver's is measured. A receiver that reads nothing while data
    /// waits holds the sender; one that has read everything lets it go on.
    pub fn stop(&self, s: &Sample, end: Instant) -> bool {
        if s.now + STOP_SAFETY >= end {
            return true;
        }
        match self.drain(s) {
            Drain::Unknown => false,
            Drain::Stalled => true,
            Drain::Takes(d) => s.now + d + STOP_SAFETY >= end,
        }
    }

    /// How long the bytes in flight and the next block take to be read, at
    /// the receiver's measured rate (the sender's average until there is
    /// one, or when nothing waits), times [`DRAIN_FACTOR`].
    fn drain(&self, s: &Sample) -> Drain {
        let Sample {
            in_flight,
            next,
            average,
            ..
        } = *s;
        let rate = if in_flight == 0 {
            let r = self.rate.unwrap_or(0.0).max(average);
            if r <= 0.0 {
                return Drain::Unknown;
            }
            r
        } else {
            match self.rate {
                Some(r) if r <= 0.0 => return Drain::Stalled,
                Some(r) => r,
                None if average > 0.0 => average,
                None => return Drain::Unknown,
            }
        };
        Drain::Takes(Duration::from_secs_f64(
            (DRAIN_FACTOR * (in_flight + next) as f64 / rate).min(60.0),
        ))
    }
}

/// `-n` and `-k`: how much the server may send in all, all streams together.
/// A block is sent whole once started.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Budget {
    bytes: Option<u64>,
    blocks: Option<u64>,
    bytes_started: u64,
    blocks_started: u64,
}

impl Budget {
    pub fn new(bytes: Option<u64>, blocks: Option<u64>) -> Self {
        Budget {
            bytes,
            blocks,
            ..Budget::default()
        }
    }

    pub fn may_start(&self) -> bool {
        let under = |limit: Option<u64>, used: u64| match limit {
            Some(l) => used < l,
            None => true,
        };
        under(self.bytes, self.bytes_started) && under(self.blocks, self.blocks_started)
    }

    pub fn start_block(&mut self, len: u64) {
        self.bytes_started += len;
        self.blocks_started += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_engine::Schedule;

    fn dgram(seq: u64, sent_ms: u64) -> UdpHeader {
        UdpHeader {
            sec: (sent_ms / 1000) as u32,
            usec: ((sent_ms % 1000) * 1000) as u32,
            seq,
        }
    }

    /// `ms` milliseconds on the senders' clock.
    fn stamp(ms: u64) -> Stamp {
        Stamp {
            sec: (ms / 1000) as u32,
            usec: ((ms % 1000) * 1000) as u32,
        }
    }

    /// A test's counters, counting from `t0` for 10 s.
    fn counters(t0: Instant) -> Counters {
        let mut c = Counters::new(false);
        c.set_schedule(Schedule::new(
            t0,
            Duration::ZERO,
            Duration::from_secs(10),
            Duration::ZERO,
        ));
        c
    }

    /// A UDP receiver's tally, and its counters, fed `seqs` (all sent at 0
    /// and arrived 500 ms later, at `t0`).
    fn received(seqs: &[u64]) -> (Iperf3Tally, Counters) {
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, true);
        for &seq in seqs {
            s.datagram(&mut c, 100, &dgram(seq, 0), stamp(500), t0, true);
        }
        (s, c)
    }

    #[test]
    fn udp_losses_and_reordering_are_counted_like_iperf3() {
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, true);
        for (seq, at) in [(1, 0), (2, 1), (5, 4), (4, 5), (6, 6)] {
            s.datagram(&mut c, 100, &dgram(seq, at), stamp(at + 500), t0, true);
        }
        assert_eq!(s.packets(), 6, "highest sequence number seen");
        assert_eq!(s.lost(), 1, "3 and 4 missing, 4 came late");
        assert_eq!(s.out_of_order(), 1);
        assert_eq!((s.total(&c), s.counted()), (500, 500));
        // The engine's counts of the same: the bytes in the stream's slot,
        // 6 sequence numbers accounted for, 5 of them received.
        assert_eq!(c.flow_total(0).rx_bytes, 500);
        let iv = &c.intervals()[0];
        assert_eq!((iv.datagrams, iv.expected), (Some(5), Some(6)));
    }

    #[test]
    fn the_omitted_seconds_udp_counts_are_kept_apart() {
        // As iperf3's server: losses and sequence numbers by the end of the
        // omitted seconds, subtracted from the whole test's by 3.14+ clients.
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, true);
        for seq in [1, 2, 5] {
            s.datagram(&mut c, 100, &dgram(seq, 0), stamp(500), t0, false);
        }
        s.omit_over();
        for seq in [6, 9, 8] {
            s.datagram(&mut c, 100, &dgram(seq, 0), stamp(500), t0, true);
        }
        let at_omit = Omitted {
            packets: 5,
            lost: 2,
            out_of_order: 0,
        };
        assert_eq!(s.omitted(), at_omit);
        assert_eq!((s.packets(), s.lost(), s.out_of_order()), (9, 3, 1));
        assert_eq!((s.packets_counted(), s.lost_counted()), (4, 1));
        // A sender's datagrams sent by then.
        let mut s = Iperf3Tally::new(&mut c, 2, true, true);
        s.datagram_sent(&mut c, 100, t0, false);
        s.omit_over();
        s.datagram_sent(&mut c, 100, t0, true);
        assert_eq!((s.packets(), s.omitted().packets, s.counted()), (2, 1, 100));
        assert_eq!((s.total(&c), s.blocks()), (200, 2));
    }

    #[test]
    fn jitter_follows_rfc1889() {
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, true);
        // Transit 10 ms, then 12 ms: D = 2 ms, J = 2/16 ms.
        s.datagram(&mut c, 1, &dgram(1, 0), stamp(10), t0, true);
        assert_eq!(s.jitter_s(), 0.0);
        s.datagram(&mut c, 1, &dgram(2, 1000), stamp(1012), t0, true);
        let j = s.jitter_s();
        assert!((j - 0.002 / 16.0).abs() < 1e-9, "{j}");
        s.omit_over();
        assert_eq!(s.jitter_s(), 0.0);
        // The engine's jitter of the same datagrams, in its own unit.
        let us = c.intervals()[0].jitter_us.unwrap();
        assert!((us - 2000.0 / 16.0).abs() < 1e-6, "{us}");
    }

    #[test]
    fn omitted_bytes_are_totalled_not_counted() {
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, false);
        s.bytes(&mut c, 10, t0, false);
        s.bytes(&mut c, 5, t0, true);
        assert_eq!((s.total(&c), s.counted()), (15, 5));
    }

    #[test]
    fn a_datagram_that_comes_twice_takes_a_loss_back_in_iperf3s_count_only() {
        // iperf3 counts lost as the gaps in the highest sequence number less
        // every datagram from behind it, a duplicate too; the engine tells
        // the duplicate apart and leaves the gap lost.
        let (s, c) = received(&[1, 3, 3]);
        assert_eq!((s.packets(), s.lost(), s.out_of_order()), (3, 0, 1));
        let iv = &c.intervals()[0];
        assert_eq!((iv.datagrams, iv.expected), (Some(2), Some(3)));
        // After the omitted seconds, iperf3's loss can go below zero.
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut s = Iperf3Tally::new(&mut c, 1, false, true);
        for (seq, counting) in [(1, false), (4, false), (4, true), (4, true)] {
            if counting && s.omitted() == Omitted::default() {
                s.omit_over();
            }
            s.datagram(&mut c, 100, &dgram(seq, 0), stamp(500), t0, counting);
        }
        assert_eq!((s.omitted().lost, s.lost(), s.lost_counted()), (2, 0, -2));
        assert_eq!(s.packets_counted(), 0);
    }

    #[test]
    fn a_sequence_number_0_is_from_behind_as_iperf3_has_it() {
        // iperf3 numbers from 1: a 0 never moves the highest.
        let (s, c) = received(&[0, 1, 0, 3]);
        assert_eq!((s.packets(), s.lost(), s.out_of_order()), (3, 1, 2));
        let iv = &c.intervals()[0];
        assert_eq!((iv.datagrams, iv.expected), (Some(2), Some(3)));
    }

    #[test]
    fn each_stream_counts_in_its_own_slot_of_the_tests_counters() {
        let t0 = Instant::now();
        let mut c = counters(t0);
        let mut tcp_out = Iperf3Tally::new(&mut c, 1, true, false);
        let mut tcp_in = Iperf3Tally::new(&mut c, 3, false, false);
        tcp_out.bytes(&mut c, 100, t0, true);
        tcp_out.block_sent();
        tcp_in.bytes(&mut c, 7, t0, true);
        assert_eq!((tcp_out.total(&c), tcp_in.total(&c)), (100, 7));
        assert_eq!((c.totals.tx_bytes, c.totals.rx_bytes), (100, 7));
        assert_eq!(
            c.flow_totals().iter().map(|f| f.0).collect::<Vec<_>>(),
            [1, 3]
        );
        // TCP streams have no datagrams; a TCP sender's blocks are not packets.
        assert_eq!(
            (tcp_out.blocks(), tcp_out.packets(), tcp_in.packets()),
            (1, 0, 0)
        );
    }

    fn at(now: Instant, in_flight: u64, next: u64, average: f64) -> Sample {
        Sample {
            now,
            in_flight,
            next,
            average,
        }
    }

    #[test]
    fn a_sender_stops_when_its_data_in_flight_would_arrive_too_late() {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(1);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut e = EndOfSending::default();
        // The receiver reads 1 GB/s: 10 MB in flight take 10 ms, 30 ms tripled,
        // plus the slack: hold from 50 ms before the end.
        e.observe(ms(0), 0);
        e.observe(ms(100), 100_000_000);
        assert!((e.rate().unwrap() - 1e9).abs() < 1.0);
        assert!(!e.stop(&at(ms(949), 10_000_000, 0, 2e9), end));
        assert!(e.stop(&at(ms(951), 10_000_000, 0, 2e9), end));
        // A receiver that reads nothing while data waits holds the sender.
        e.observe(ms(200), 100_000_000);
        assert_eq!(e.rate(), Some(0.0));
        assert!(e.stop(&at(ms(201), 1, 0, 2e9), end));
        // Once it has read everything, the sender goes on (its own rate counts).
        assert!(!e.stop(&at(ms(201), 0, 128 * 1024, 2e9), end));
        // Before any measure: the sender's average; with none, only the slack.
        assert!(!EndOfSending::default().stop(&at(ms(0), 0, 128 * 1024, 0.0), end));
        assert!(!EndOfSending::default().stop(&at(ms(1), 65_536, 128 * 1024, 0.0), end));
        assert!(EndOfSending::default().stop(&at(ms(981), 0, 0, 0.0), end));
    }

    #[test]
    fn a_sender_checks_every_block_only_once_its_end_is_near() {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(10);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut e = EndOfSending::default();
        // No rate yet, nothing sent: near only within the blind window.
        assert!(!e.near(&at(ms(0), 0, 0, 0.0), end));
        assert!(!e.clone().near(&at(ms(7_999), 0, 0, 0.0), end));
        assert!(e.clone().near(&at(ms(8_000), 0, 0, 0.0), end));
        // Read at 1 GB/s: 10 MB in flight drain in 30 ms (tripled), so the
        // stop comes 50 ms before the end; near from twice that, plus 50 ms
        // ahead and the 20 ms slack: 130 ms before the end.
        e.observe(ms(0), 0);
        e.observe(ms(100), 100_000_000);
        assert!(!e.near(&at(ms(9_869), 10_000_000, 0, 2e9), end));
        assert!(!e.watching());
        assert!(e.near(&at(ms(9_871), 10_000_000, 0, 2e9), end));
        // Once near, always near, whatever a later sample says.
        assert!(e.near(&at(ms(9_872), 0, 0, 2e9), end));
        assert!(e.watching());
        // Near comes before the stop.
        assert!(!e.stop(&at(ms(9_871), 10_000_000, 0, 2e9), end));
        // A receiver that stalls with data waiting: the blind window.
        let mut s = EndOfSending::default();
        s.observe(ms(0), 0);
        s.observe(ms(100), 0);
        assert!(!s.clone().near(&at(ms(7_999), 1, 0, 2e9), end));
        assert!(s.near(&at(ms(8_000), 1, 0, 2e9), end));
    }

    #[test]
    fn the_budget_counts_whole_blocks() {
        let mut b = Budget::new(Some(300), None);
        let mut blocks = 0;
        while b.may_start() {
            b.start_block(128);
            blocks += 1;
        }
        assert_eq!(blocks, 3, "300 bytes take three 128-byte blocks");
        let mut b = Budget::new(None, Some(2));
        b.start_block(1);
        b.start_block(1);
        assert!(!b.may_start());
        assert!(Budget::new(None, None).may_start());
    }
}
