//! A server worker's carries: each connection's flow on its socket, and
//! UDP request/response answered on the worker's socket as it comes.

use super::*;
use crate::flow::step::Carried;
use crate::io::exchange::{self, Exchanged};
use crate::io::stream::StreamIo;

impl ServerKind {
    /// Moves flow `key`'s bytes on its connection as far as its socket lets
    /// it; `now` is a recent time (no older than the last event wait),
    /// moved on to when its last read ended.
    pub(super) fn carry(
        &mut self,
        core: &mut Core<Self>,
        key: usize,
        c: usize,
        now: &mut Instant,
    ) -> Told {
        // A single flow's blocking socket: a read or write that moved only
        // part of a message returns to the loop (its intervals, its window
        // edges) before the next part.
        let udp = core.slots.get(key).map(|s| &s.flow.logic);
        if matches!(udp, Some(Logic::UdpStream { .. })) {
            return self.send_udp(core, key);
        }
        let blocking = core.blocking();
        let schedule = core.schedule().copied();
        let Core { slots, counts, .. } = core;
        let Some(s) = slots.get_mut(key) else {
            return Told::Closed(c);
        };
        let slot = s.flow.slot;
        let how = match &mut s.flow.logic {
            logic @ (Logic::Rr(_) | Logic::Crr(_)) => {
                let crr = matches!(logic, Logic::Crr(_));
                let (Logic::Rr(rr) | Logic::Crr(rr)) = logic else {
                    return Told::Carried {
                        conn: c,
                        how: Carried::Blocked,
                    };
                };
                let Some(link) = s.links.last_mut() else {
                    return Told::Closed(c);
                };
                let turn = exchange::Turn {
                    payload: self.bufs.write,
                    scratch: &mut self.bufs.read,
                    counters: counts,
                    slot,
                    blocking,
                    // Connect per transaction: the server closes first.
                    once: crr,
                };
                match exchange::exchange(rr, &mut link.conn, turn, now, |_| false) {
                    // The next request raises a fresh readiness edge.
                    Exchanged::Blocked => Carried::Blocked,
                    // The client is done (or gone), or a crr response is out.
                    Exchanged::Done => Carried::Finished,
                    Exchanged::Eof => Carried::Eof,
                    Exchanged::Failed(e) => Carried::Failed(e),
                }
            }
            Logic::Stream(halves) => {
                let Some(link) = s.links.last_mut() else {
                    return Told::Closed(c);
                };
                match halves.drive(
                    &mut link.conn,
                    &mut self.bufs,
                    counts,
                    slot,
                    schedule.as_ref(),
                ) {
                    StreamIo::Blocked => Carried::Blocked,
                    StreamIo::Again => Carried::Again,
                    // The client is done (or gone): close, whatever this
                    // side was sending.
                    StreamIo::PeerClosed { .. } => Carried::Eof,
                    StreamIo::Failed(e) => Carried::Failed(e),
                }
            }
            Logic::UdpStream { .. } | Logic::UdpRr { .. } => Carried::Blocked,
        };
        Told::Carried { conn: c, how }
    }

    /// Closes flow `key`'s connection: its flow is no longer connected.
    pub(super) fn close(&mut self, core: &mut Core<Self>, key: usize, c: usize) -> Told {
        let Some(s) = core.slots.get(key) else {
            return Told::Closed(c);
        };
        let (slot, crr, route) = (s.flow.slot, s.flow.per_transaction(), s.flow.route);
        // A flow that ends in the window, or as it closes (a single flow's
        // client closes right after its last transaction), is sampled now,
        // before its socket goes.
        core.close(key, c, crr);
        if let Some(k) = route {
            self.pending.try_remove(k);
        }
        if let Some(o) = self.open.get_mut(slot) {
            if std::mem::take(o) {
                self.connected -= 1;
            }
        }
        Told::Closed(c)
    }

    /// Answers every request waiting on the worker's UDP socket.
    pub(super) fn serve_udp(&mut self, core: &mut Core<Self>) {
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
                Some(&s) => {
                    if let Some(Some(k)) = self.udp_keys.get(s) {
                        if let Some(Logic::UdpRr { addr }) =
                            core.slots.get_mut(*k).map(|s| &mut s.flow.logic)
                        {
                            *addr = from;
                        }
                    }
                    s
                }
                None => {
                    // A UDP user has no connection; count its flow when first seen.
                    self.connections += 1;
                    let s = core.counts.add_flow(h.flow);
                    self.slots.insert(h.flow, s);
                    self.open.push(true);
                    let key = core.add(ServerFlow::new(s, Logic::UdpRr { addr: from }));
                    if self.udp_keys.len() <= s {
                        self.udp_keys.resize(s + 1, None);
                    }
                    self.udp_keys[s] = Some(key);
                    s
                }
            };
            let now = Instant::now();
            core.counts.rx(slot, n - UDP_HEADER_LEN, now);
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
                core.counts.tx(slot, resp, now);
                core.counts.transactions(slot, 1, Duration::ZERO, now);
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
}
