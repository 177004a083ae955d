//! A server worker's UDP streams. Every flow of the worker shares its one
//! datagram socket. A flow registers first (a header-only datagram, from the
//! control connection's host only), which gives it a counting slot, a flow
//! of the worker and the address its datagrams go to, and is answered; its
//! data datagrams are then counted by its receiver, and its sender sends to
//! that address at its pace (the flow's deadline is its next send).
//! Nothing is kept for a flow that did not register, and a flow is one of
//! the test's users carried by this worker: what is kept stays bounded by
//! the worker's share of the users.

use crate::flow::step::Carried;
use crate::flow::udp_stream::{nanos_since, UdpStreamHalves};
use crate::io::udp_stream::{receive_due, send_due, Got, Out, Sent};
use crate::schedule::Phase;

use super::*;

/// The datagram socket's state.
#[derive(Debug)]
pub(super) struct UdpState {
    /// The receiver stopped at its budget (at this time): it reads again
    /// at the end of the turn, and the wait does not sleep.
    pub(super) again_at: Option<Instant>,
    /// Senders (flow keys) that found the socket buffer full.
    blocked: Vec<usize>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
    /// Whether senders send runs of datagrams in one call (until the kernel
    /// refuses one).
    runs: bool,
}

impl Default for UdpState {
    fn default() -> Self {
        UdpState {
            again_at: None,
            blocked: Vec::new(),
            clock0: Instant::now(),
            runs: true,
        }
    }
}

impl ServerKind {
    /// Takes in every datagram waiting: registrations (answered) and data.
    pub(super) fn serve_udp_stream(&mut self, core: &mut Core<Self>, now: Instant) {
        let tag = self.token.session_tag();
        let Workload::Stream {
            message, direction, ..
        } = self.spec.workload
        else {
            return;
        };
        let Some(rate) = self.spec.stream_rate() else {
            return;
        };
        let Source::Udp(sock) = &self.source else {
            return;
        };
        if self.socket.is_none() {
            self.socket = Some(SocketFacts::read(
                sock.as_raw_fd(),
                sock.local_addr().ok().map(|a| a.ip()),
                false,
            ));
        }
        let started = self.started;
        let peer = self.udp_peer;
        let (users, workers, index) = (self.spec.users, self.workers.max(1), self.index);
        let mine = |flow: u32| flow < users && flow as usize % workers == index;
        let (slots, open, keys, clock0) = (
            &mut self.slots,
            &mut self.open,
            &mut self.udp_keys,
            self.udp.clock0,
        );
        let mut registered = Vec::new();
        let got = receive_due(sock, &mut self.bufs.read, |d, from| {
            let Some(from) = from.filter(|f| crate::io::socket::answers(peer, f.ip())) else {
                return;
            };
            let Ok(h) = UdpHeader::decode(d) else {
                return;
            };
            if h.tag != tag || !mine(h.flow) {
                return;
            }
            let now = Instant::now();
            if d.len() == UDP_HEADER_LEN {
                // A registration: the flow's slot, flow and address, and the
                // answer.
                let slot = match slots.get(&h.flow) {
                    Some(&s) => s,
                    None => {
                        let s = core.counts.add_flow(h.flow);
                        slots.insert(h.flow, s);
                        open.push(true);
                        s
                    }
                };
                if keys.len() <= slot {
                    keys.resize(slot + 1, None);
                }
                let key = match keys[slot] {
                    Some(k) => k,
                    None => {
                        let halves = UdpStreamHalves::for_side(
                            tag,
                            h.flow,
                            message.as_usize(),
                            direction,
                            rate,
                            false,
                        );
                        let logic = Logic::UdpStream {
                            addr: from,
                            flow: h.flow,
                            halves: Box::new(halves),
                            next: None,
                        };
                        let k = core.add(ServerFlow::new(slot, logic));
                        keys[slot] = Some(k);
                        registered.push(k);
                        k
                    }
                };
                if let Some(Logic::UdpStream { addr, halves, .. }) =
                    core.slots.get_mut(key).map(|s| &mut s.flow.logic)
                {
                    *addr = from;
                    if started {
                        halves.start(now);
                    }
                }
                let _ = sock.send_to(d, from);
                if started {
                    core.driver().again(key);
                }
                return;
            }
            let Some(&slot) = slots.get(&h.flow) else {
                return; // never registered
            };
            let Some(Some(key)) = keys.get(slot) else {
                return;
            };
            let Core { slots, counts, .. } = &mut *core;
            if let Some(Logic::UdpStream { halves, .. }) =
                slots.get_mut(*key).map(|s| &mut s.flow.logic)
            {
                let clock = nanos_since(clock0, now);
                halves.received(&h, d.len() - UDP_HEADER_LEN, now, clock, counts, slot);
            }
        });
        // A flow counts as one connection, once.
        self.connections += registered.len() as u64;
        if let Got::Again = got {
            // Come back after the other work of this turn.
            self.udp.again_at = Some(now);
        }
    }

    /// The socket has room again: the senders that found it full go on.
    pub(super) fn udp_writable(&mut self, core: &mut Core<Self>) {
        for key in std::mem::take(&mut self.udp.blocked) {
            core.driver().again(key);
        }
    }

    /// Sends what flow `key`'s pacer lets go; its sender stops with the
    /// window.
    pub(super) fn send_udp(&mut self, core: &mut Core<Self>, key: usize) -> Told {
        let blocked = Told::Carried {
            conn: 0,
            how: Carried::Blocked,
        };
        let Some(schedule) = core.schedule().copied() else {
            return blocked;
        };
        let Source::Udp(sock) = &self.source else {
            return blocked;
        };
        let Core { slots, counts, .. } = core;
        let Some(s) = slots.get_mut(key) else {
            return blocked;
        };
        let slot = s.flow.slot;
        let Logic::UdpStream {
            addr,
            flow,
            halves,
            next,
        } = &mut s.flow.logic
        else {
            return blocked;
        };
        let Some(tx) = &mut halves.tx else {
            return blocked;
        };
        if schedule.phase(Instant::now()) >= Phase::Draining {
            tx.finish();
        }
        let mut out = Out {
            sock,
            to: Some(*addr),
            runs: &mut self.udp.runs,
        };
        match send_due(tx, &mut out, &mut self.bufs.datagram, counts, slot) {
            Sent::Waiting(at) => *next = Some(at),
            Sent::Again => {
                return Told::Carried {
                    conn: 0,
                    how: Carried::Again,
                }
            }
            Sent::Blocked => self.udp.blocked.push(key),
            Sent::Idle => {}
            Sent::Failed(e) => {
                // Not again at once: the other side's report will say.
                let now = Instant::now();
                let id = *flow;
                counts.error(now, || format!("flow {id}: sending failed: {e}"));
                *next = Some(now + Duration::from_millis(1));
            }
        }
        blocked
    }
}
