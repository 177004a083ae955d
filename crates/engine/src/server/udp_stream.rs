//! A server worker's UDP streams. Every flow of the worker shares its one
//! datagram socket. A flow registers first (a header-only datagram, from the
//! control connection's host only), which gives it a counting slot and the
//! address its datagrams go to, and is answered; its data datagrams are then
//! counted by its receiver, and its sender sends to that address at its pace.
//! Nothing is kept for a flow that did not register, and a flow is one of
//! the test's users carried by this worker: what is kept stays bounded by
//! the worker's share of the users.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use linkperf_wire::{UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::Workload;

use super::{Source, Worker};
use crate::schedule::Phase;
use crate::udp_stream::{datagram, nanos_since, TxWant, UdpStreamHalves};
use crate::worker::SocketFacts;

/// Most payload bytes one turn moves each way before the worker goes on.
const DRIVE_BUDGET: usize = 1024 * 1024;

/// One registered flow.
#[derive(Debug)]
struct UdpFlow {
    /// Where its datagrams go (where its registration came from).
    addr: SocketAddr,
    halves: UdpStreamHalves,
}

/// A worker's UDP stream flows, by counting slot.
#[derive(Debug)]
pub(super) struct UdpStreams {
    flows: Vec<Option<UdpFlow>>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Senders whose last turn stopped at its budget.
    pub(super) again: Vec<usize>,
    /// Senders that found the socket buffer full.
    blocked: Vec<usize>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
}

impl Default for UdpStreams {
    fn default() -> Self {
        UdpStreams {
            flows: Vec::new(),
            timers: BinaryHeap::new(),
            again: Vec::new(),
            blocked: Vec::new(),
            clock0: Instant::now(),
        }
    }
}

impl UdpStreams {
    /// When the next sender is due, if one waits.
    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
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
        let mut budget = DRIVE_BUDGET;
        loop {
            let Source::Udp(sock) = &self.source else {
                return;
            };
            if budget == 0 {
                // Come back after the other work of this turn.
                self.udp.again.push(usize::MAX);
                return;
            }
            let (n, from): (usize, SocketAddr) = match sock.recv_from(&mut self.bufs.read) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => continue,
            };
            budget = budget.saturating_sub(n);
            if !crate::transport::answers(self.udp_peer, from.ip()) {
                continue;
            }
            let Ok(h) = UdpHeader::decode(&self.bufs.read[..n]) else {
                continue;
            };
            if h.tag != tag || !self.flow_is_mine(h.flow) {
                continue;
            }
            let now = Instant::now();
            if n == UDP_HEADER_LEN {
                // A registration: the flow's slot and address, and the answer.
                let slot = match self.slots.get(&h.flow) {
                    Some(&s) => s,
                    None => {
                        self.connections += 1;
                        let s = self.counters.add_flow(h.flow);
                        self.slots.insert(h.flow, s);
                        self.open.push(true);
                        s
                    }
                };
                if self.udp.flows.len() <= slot {
                    self.udp.flows.resize_with(slot + 1, || None);
                }
                let started = self.schedule.is_some();
                let f = self.udp.flows[slot].get_or_insert_with(|| UdpFlow {
                    addr: from,
                    halves: UdpStreamHalves::for_side(
                        tag,
                        h.flow,
                        message.as_usize(),
                        direction,
                        rate,
                        false,
                    ),
                });
                f.addr = from;
                if started {
                    f.halves.start(now);
                }
                let _ = sock.send_to(&self.bufs.read[..n], from);
                if self.socket.is_none() {
                    self.socket = Some(SocketFacts::read(
                        sock.as_raw_fd(),
                        sock.local_addr().ok().map(|a| a.ip()),
                        false,
                    ));
                }
                if started {
                    self.send_udp(slot);
                }
                continue;
            }
            let Some(&slot) = self.slots.get(&h.flow) else {
                continue; // never registered
            };
            let Some(f) = self.udp.flows.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let clock = nanos_since(self.udp.clock0, now);
            f.halves
                .received(&h, n - UDP_HEADER_LEN, now, clock, &mut self.counters, slot);
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
        while let Some(Reverse((at, slot))) = self.udp.timers.peek().copied() {
            if at > now {
                break;
            }
            self.udp.timers.pop();
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
        let mut budget = DRIVE_BUDGET;
        loop {
            if budget == 0 {
                self.udp.again.push(slot);
                return;
            }
            let now = Instant::now();
            match tx.want(now) {
                TxWant::Send { header, payload } => {
                    let Some(d) = datagram(&mut self.bufs.datagram, &header, payload) else {
                        tx.finish();
                        return;
                    };
                    match sock.send_to(d, f.addr) {
                        Ok(_) => {
                            budget = budget.saturating_sub(d.len());
                            let took = tx.sent(now, false);
                            self.counters.tx(slot, payload, now);
                            self.counters.datagram_sent(now);
                            self.counters.transactions(slot, 1, took, now);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.udp.blocked.push(slot);
                            return;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // An ICMP error of an earlier datagram (the client's
                        // port is gone, or not yet there): its report will say.
                        Err(_) => {
                            let id = header.flow;
                            self.counters
                                .error(now, || format!("flow {id}: a datagram could not be sent"));
                            // Not again at once.
                            let at = now + Duration::from_millis(1);
                            self.udp.timers.push(Reverse((at, slot)));
                            return;
                        }
                    }
                }
                TxWant::Wait(at) => {
                    if f.halves.armed.is_none_or(|a| at < a) {
                        f.halves.armed = Some(at);
                        self.udp.timers.push(Reverse((at, slot)));
                    }
                    return;
                }
                TxWant::Idle | TxWant::Done => return,
            }
        }
    }
}
