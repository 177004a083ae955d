//! A server worker's carries on connections: each connection's flow on
//! its socket, and its close.

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
        match core.slots.get(key).map(|s| &s.flow.logic) {
            Some(Logic::UdpStream { .. }) => return self.send_udp(core, key),
            Some(Logic::UdpRr { .. }) => return self.answer_udp(core, key),
            _ => {}
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
}
