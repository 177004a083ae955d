//! The flows over an in-memory pair, in virtual time: two ends joined by a
//! link that carries bytes at a fixed rate after a fixed delay, each end's
//! writes and reads cut into pieces of arbitrary size (a seeded sequence),
//! nothing real but the flows' own state machines. What a flow records must
//! follow from the link alone: a transaction takes two delays and the
//! serialisation of its request and response, whatever the pieces; a stream
//! carries the link's rate; both ends agree on every byte but those still
//! on the link.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::flow::{RrClient, RrServer, StreamRx, StreamTx, Want};

/// One direction of the link: bytes leave one at a time at `per_byte`,
/// each arriving `delay` after it left.
struct Link {
    per_byte: Duration,
    delay: Duration,
    /// When the link is free to send the next byte.
    free: Instant,
    /// Pieces on their way: (arrival of their last byte, bytes).
    flying: VecDeque<(Instant, usize)>,
    /// Arrived, not yet read.
    arrived: usize,
}

impl Link {
    fn new(per_byte: Duration, delay: Duration, t0: Instant) -> Link {
        Link {
            per_byte,
            delay,
            free: t0,
            flying: VecDeque::new(),
            arrived: 0,
        }
    }

    /// `n` bytes written at `now`.
    fn send(&mut self, now: Instant, n: usize) {
        let start = self.free.max(now);
        self.free = start + self.per_byte * u32::try_from(n).unwrap();
        self.flying.push_back((self.free + self.delay, n));
    }

    /// Moves what has arrived by `now` to the reader.
    fn deliver(&mut self, now: Instant) {
        while self.flying.front().is_some_and(|(at, _)| *at <= now) {
            self.arrived += self.flying.pop_front().unwrap().1;
        }
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.flying.front().map(|(at, _)| *at)
    }

    fn on_the_wire(&self) -> usize {
        self.flying.iter().map(|(_, n)| n).sum()
    }
}

/// Piece sizes from 1 to `max`, the same sequence every run.
struct Pieces(u64, usize);

impl Pieces {
    fn next(&mut self, want: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        want.min(1 + (self.0 % self.1 as u64) as usize)
    }
}

const NS_PER_BYTE_1G: Duration = Duration::from_nanos(8);

#[test]
fn a_transaction_takes_two_delays_and_its_bytes_serialised_whatever_the_pieces() {
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(1);
    let delay = Duration::from_micros(100);
    let (request, response) = (200u64, 1000u64);
    let mut up = Link::new(NS_PER_BYTE_1G, delay, t0);
    let mut down = Link::new(NS_PER_BYTE_1G, delay, t0);
    let mut client = RrClient::new(request, response);
    let mut server = RrServer::new(request, response);
    let mut pieces = Pieces(0x9e37_79b9_7f4a_7c15, 700);
    let (mut wrote_c, mut read_s, mut wrote_s, mut read_c) = (0usize, 0usize, 0usize, 0usize);
    let mut took = Vec::new();
    client.start(t0);
    let mut now = t0;
    while now <= end {
        // Each end does all it can at `now`, in pieces.
        loop {
            let mut moved = false;
            if let Want::Write(n) = client.want() {
                let k = pieces.next(n);
                up.send(now, k);
                client.wrote(k);
                wrote_c += k;
                moved = true;
            }
            up.deliver(now);
            if let (Want::Read(n), true) = (server.want(), up.arrived > 0) {
                let k = pieces.next(n.min(up.arrived));
                up.arrived -= k;
                server.read(k);
                read_s += k;
                moved = true;
            }
            if let Want::Write(n) = server.want() {
                let k = pieces.next(n);
                down.send(now, k);
                server.wrote(k);
                wrote_s += k;
                moved = true;
            }
            down.deliver(now);
            if let (Want::Read(n), true) = (client.want(), down.arrived > 0) {
                let k = pieces.next(n.min(down.arrived));
                down.arrived -= k;
                read_c += k;
                if let Some(done) = client.read(k, now, false) {
                    took.push(done.took);
                }
                moved = true;
            }
            if !moved {
                break;
            }
        }
        // Time moves to the next arrival on either link.
        match [up.next_arrival(), down.next_arrival()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(next) => now = next,
            None => break,
        }
    }
    let each = 2 * delay + NS_PER_BYTE_1G * (request + response) as u32;
    assert_eq!(each, Duration::from_nanos(209_600));
    assert!(took.iter().all(|t| *t == each), "{:?}", &took[..5]);
    // 1 s / 209.6 µs = 4770.99: the 4771st ends 1.6 µs after the second.
    assert_eq!(took.len(), 4770);
    // Every byte is either read or still on the link.
    assert_eq!(wrote_c, read_s + up.on_the_wire() + up.arrived);
    assert_eq!(wrote_s, read_c + down.on_the_wire() + down.arrived);
}

#[test]
fn a_stream_carries_the_links_rate_and_the_receiver_counts_whole_messages() {
    let t0 = Instant::now();
    let end = t0 + Duration::from_millis(100);
    let delay = Duration::from_micros(50);
    let message = 30 * 1024u64;
    // The sender's socket buffer: it writes only while the link holds less.
    let buffer: usize = 256 * 1024;
    let mut link = Link::new(NS_PER_BYTE_1G, delay, t0);
    let mut tx = StreamTx::new(message);
    let mut rx = StreamRx::new(message);
    let mut pieces = Pieces(0x2545_f491_4f6c_dd1d, 64 * 1024);
    let (mut sent, mut received, mut messages) = (0usize, 0usize, 0u64);
    tx.start(t0);
    rx.start(t0);
    let mut now = t0;
    while now < end {
        loop {
            let mut moved = false;
            if let Want::Write(n) = tx.want() {
                let room = buffer.saturating_sub(link.on_the_wire());
                if room > 0 {
                    let k = pieces.next(n.min(room));
                    link.send(now, k);
                    tx.wrote(k, now, false);
                    sent += k;
                    moved = true;
                }
            }
            link.deliver(now);
            if link.arrived > 0 {
                let k = pieces.next(link.arrived);
                link.arrived -= k;
                received += k;
                messages += rx.read(k, now).0;
                moved = true;
            }
            if !moved {
                break;
            }
        }
        match link.next_arrival() {
            Some(next) => now = next,
            None => break,
        }
    }
    // The link was never idle after the first byte's delay: what arrived in
    // the 100 ms is the rate times (100 ms − one delay), to a piece.
    let expected = (Duration::from_millis(100) - delay).as_nanos() / 8;
    let got = received as u128;
    assert!(
        got <= expected && expected - got < 64 * 1024,
        "{got} bytes received, {expected} carried"
    );
    assert_eq!(messages, received as u64 / message, "whole messages only");
    assert_eq!(sent, received + link.on_the_wire() + link.arrived);
}
