//! A server worker's flows driven on readiness: UDP request/response on
//! the worker's socket, and each accepted connection's flow.

use super::*;
use crate::io::exchange::{self, Exchanged};

impl Worker {
    pub(super) fn serve_udp(&mut self) {
        if self.spec.is_udp_stream() {
            return self.serve_udp_stream();
        }
        let Source::Udp(sock) = &self.source else {
            return;
        };
        let Some(sizes) = self.spec.workload.transaction_sizes() else {
            return;
        };
        let tag = self.token.session_tag();
        loop {
            let (n, from): (usize, SocketAddr) = match sock.recv_from(&mut self.bufs.read) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => continue,
            };
            if !crate::io::socket::answers(self.udp_peer, from.ip()) {
                continue;
            }
            let Ok(h) = UdpHeader::decode(&self.bufs.read[..n]) else {
                continue;
            };
            // Only this test's users, each on its own worker.
            if h.tag != tag || !self.flow_is_mine(h.flow) {
                continue;
            }
            let slot = match self.slots.get(&h.flow) {
                Some(&s) => s,
                None => {
                    // A UDP user has no connection; count its flow when first seen.
                    self.connections += 1;
                    let s = self.counters.add_flow(h.flow);
                    self.slots.insert(h.flow, s);
                    self.open.push(true);
                    s
                }
            };
            let now = Instant::now();
            self.counters.rx(slot, n - UDP_HEADER_LEN, now);
            let resp = usize::try_from(sizes.at(h.flow, h.seq).1).unwrap_or(usize::MAX);
            let len = UDP_HEADER_LEN + resp;
            if len > self.bufs.datagram.len() {
                continue;
            }
            let mut hdr = [0u8; UDP_HEADER_LEN];
            h.encode(&mut hdr);
            self.bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
            if sock.send_to(&self.bufs.datagram[..len], from).is_ok() {
                let now = Instant::now();
                self.counters.tx(slot, resp, now);
                self.counters.transactions(slot, 1, Duration::ZERO, now);
            }
            if self.socket.is_none() {
                self.socket = Some(SocketFacts::read(
                    sock.as_raw_fd(),
                    sock.local_addr().ok().map(|a| a.ip()),
                    false,
                ));
            }
        }
    }

    /// Drives connection `k` as far as its socket lets it; `now` is a
    /// recent time (no older than the last event wait).
    pub(super) fn drive(&mut self, k: usize, now: Instant) {
        let outcome = match self
            .flows
            .get(k)
            .map(|f| matches!(f.logic, Logic::Preamble))
        {
            None => return,
            Some(true) => self.read_preamble(k, now),
            Some(false) => self.drive_flow(k, now),
        };
        match outcome {
            Io::Close => self.close(k),
            Io::Again => self.io.again(k),
            Io::Blocked => {}
        }
    }

    pub(super) fn drive_flow(&mut self, k: usize, now: Instant) -> Io {
        self.last_read = None;
        let Some(f) = self.flows.get_mut(k) else {
            return Io::Close;
        };
        let conn = &mut f.conn;
        let slot = f.slot;
        // A single flow's blocking socket: a read or write that moved only
        // part of a message returns to the loop (its intervals, its window
        // edges) before the next part.
        let blocking = f.parked.is_some();
        match &mut f.logic {
            Logic::Preamble => Io::Blocked,
            logic @ (Logic::Rr(_) | Logic::Crr(_)) => {
                let crr = matches!(logic, Logic::Crr(_));
                let (Logic::Rr(rr) | Logic::Crr(rr)) = logic else {
                    return Io::Blocked;
                };
                let turn = exchange::Turn {
                    payload: self.bufs.write,
                    scratch: &mut self.bufs.read,
                    counters: &mut self.counters,
                    slot,
                    blocking,
                    // Connect per transaction: the server closes first.
                    once: crr,
                };
                let mut at = now;
                let moved = exchange::exchange(rr, conn, turn, &mut at, |_| false);
                // The next turn of a single flow goes on from the time its
                // last read (or part of a write) ended.
                self.last_read = (at != now).then_some(at);
                match moved {
                    // The next request raises a fresh readiness edge.
                    Exchanged::Blocked => Io::Blocked,
                    // The client is done (or gone), or a crr response is out.
                    Exchanged::Done | Exchanged::Eof | Exchanged::Failed(_) => Io::Close,
                }
            }
            Logic::Stream(halves) => {
                match halves.drive(
                    conn,
                    &mut self.bufs,
                    &mut self.counters,
                    slot,
                    self.schedule.as_ref(),
                ) {
                    StreamIo::Blocked => Io::Blocked,
                    StreamIo::Again => Io::Again,
                    // The client is done (or gone): close, whatever this side was sending.
                    StreamIo::PeerClosed { .. } | StreamIo::Failed(_) => Io::Close,
                }
            }
        }
    }
}
