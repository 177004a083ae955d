//! A server worker's UDP streams. Every flow of the worker shares its one
//! datagram socket. A flow registers first (a header-only datagram, from the
//! control connection's host only), which gives it a counting slot and the
//! address its datagrams go to, and is answered; its data datagrams are then
//! counted by its receiver, and its sender sends to that address at its pace.
//! Nothing is kept for a flow that did not register, and a flow is one of
//! the test's users carried by this worker: what is kept stays bounded by
//! the worker's share of the users.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use linkperf_wire::{UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::Workload;

use super::{Source, Worker};
use crate::flow::udp_stream::{nanos_since, UdpStreamHalves};
use crate::io::udp_stream::{receive_due, send_due, Got, Out, Sent};
use crate::schedule::Phase;
use crate::worker::SocketFacts;

/// One registered flow.
#[derive(Debug)]
struct UdpFlow {
    /// Where its datagrams go (where its registration came from).
    addr: SocketAddr,
    halves: UdpStreamHalves,
    /// Its flow (user).
    flow: u32,
    /// Counted among the worker's connections.
    counted: bool,
}

/// A worker's UDP stream flows, by counting slot.
#[derive(Debug)]
pub(super) struct UdpStreams {
    flows: Vec<Option<UdpFlow>>,
    /// Senders whose last turn stopped at its budget.
    pub(super) again: Vec<usize>,
    /// Senders that found the socket buffer full.
    blocked: Vec<usize>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
    /// Whether senders send runs of datagrams in one call (until the kernel
    /// refuses one).
    runs: bool,
}

impl Default for UdpStreams {
    fn default() -> Self {
        UdpStreams {
            flows: Vec::new(),
            again: Vec::new(),
            blocked: Vec::new(),
            clock0: Instant::now(),
            runs: true,
        }
    }
}

impl Worker {
    /// Takes in every datagram waiting: registrations (answered) and data.
    pub(super) fn serve_udp_stream(&mut self) {
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
        let started = self.schedule.is_some();
        let peer = self.udp_peer;
        let (users, workers, index) = (self.spec.users, self.workers.max(1), self.index);
        let mine = |flow: u32| flow < users && flow as usize % workers == index;
        let (slots, open, counters, udp) = (
            &mut self.slots,
            &mut self.open,
            &mut self.counters,
            &mut self.udp,
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
                // A registration: the flow's slot and address, and the answer.
                let slot = match slots.get(&h.flow) {
                    Some(&s) => s,
                    None => {
                        let s = counters.add_flow(h.flow);
                        slots.insert(h.flow, s);
                        open.push(true);
                        s
                    }
                };
                if udp.flows.len() <= slot {
                    udp.flows.resize_with(slot + 1, || None);
                }
                let f = udp.flows[slot].get_or_insert_with(|| UdpFlow {
                    addr: from,
                    halves: UdpStreamHalves::for_side(
                        tag,
                        h.flow,
                        message.as_usize(),
                        direction,
                        rate,
                        false,
                    ),
                    flow: h.flow,
                    counted: false,
                });
                f.addr = from;
                if started {
                    f.halves.start(now);
                }
                let _ = sock.send_to(d, from);
                registered.push(slot);
                return;
            }
            let Some(&slot) = slots.get(&h.flow) else {
                return; // never registered
            };
            let Some(f) = udp.flows.get_mut(slot).and_then(Option::as_mut) else {
                return;
            };
            let clock = nanos_since(udp.clock0, now);
            f.halves
                .received(&h, d.len() - UDP_HEADER_LEN, now, clock, counters, slot);
        });
        for slot in registered {
            // A flow counts as one connection, once.
            if let Some(f) = self.udp.flows.get_mut(slot).and_then(Option::as_mut) {
                if !std::mem::replace(&mut f.counted, true) {
                    self.connections += 1;
                }
            }
            if started {
                self.send_udp(slot);
            }
        }
        if let Got::Again = got {
            // Come back after the other work of this turn.
            self.udp.again.push(usize::MAX);
        }
    }

    /// The test starts at `now`: every registered flow's halves start.
    pub(super) fn start_udp_streams(&mut self, now: Instant) {
        for f in self.udp.flows.iter_mut().flatten() {
            f.halves.start(now);
        }
        for slot in 0..self.udp.flows.len() {
            self.send_udp(slot);
        }
    }

    /// Senders whose time has come.
    pub(super) fn fire_udp_timers(&mut self, now: Instant) {
        // The driver's timers are the senders' (by slot): the worker's
        // other flows wait for readiness only.
        while let Some((at, slot, _)) = self.io.timers.due(now) {
            if let Some(f) = self.udp.flows.get_mut(slot).and_then(Option::as_mut) {
                if f.halves.armed == Some(at) {
                    f.halves.armed = None;
                }
            }
            self.send_udp(slot);
        }
    }

    /// The socket has room again: the senders that found it full go on.
    pub(super) fn udp_writable(&mut self) {
        for slot in std::mem::take(&mut self.udp.blocked) {
            self.send_udp(slot);
        }
    }

    /// Senders (and the receiver, `usize::MAX`) that stopped at their budget.
    pub(super) fn udp_again(&mut self) {
        for slot in std::mem::take(&mut self.udp.again) {
            if slot == usize::MAX {
                self.serve_udp_stream();
            } else {
                self.send_udp(slot);
            }
        }
    }

    /// Sends what flow `slot`'s pacer lets go; its sender stops with the window.
    fn send_udp(&mut self, slot: usize) {
        let Some(schedule) = self.schedule else {
            return;
        };
        let Source::Udp(sock) = &self.source else {
            return;
        };
        let Some(f) = self.udp.flows.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(tx) = &mut f.halves.tx else {
            return;
        };
        if schedule.phase(Instant::now()) >= Phase::Draining {
            tx.finish();
        }
        let mut out = Out {
            sock,
            to: Some(f.addr),
            runs: &mut self.udp.runs,
        };
        match send_due(
            tx,
            &mut out,
            &mut self.bufs.datagram,
            &mut self.counters,
            slot,
        ) {
            Sent::Waiting(at) => {
                if f.halves.armed.is_none_or(|a| at < a) {
                    f.halves.armed = Some(at);
                    self.io.timers.arm(at, slot, 0);
                }
            }
            Sent::Again => self.udp.again.push(slot),
            Sent::Blocked => self.udp.blocked.push(slot),
            Sent::Idle => {}
            Sent::Failed(e) => {
                // Not again at once: the other side's report will say.
                let now = Instant::now();
                let id = f.flow;
                self.counters
                    .error(now, || format!("flow {id}: sending failed: {e}"));
                let at = now + Duration::from_millis(1);
                self.io.timers.arm(at, slot, 0);
            }
        }
    }
}
