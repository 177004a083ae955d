//! A server worker's datagram socket, shared by all its UDP flows: one
//! receive path reads it and tells each datagram to its flow; the flows'
//! carries answer requests and send streams on it.
//!
//! A request/response flow is made when its user's first request comes;
//! each request is told to it and its carry answers at once, to where the
//! request came from. A stream flow registers first (a header-only
//! datagram, from the control connection's host only), which gives it a
//! counting slot, a flow of the worker and the address its datagrams go to,
//! and is answered; its data datagrams are then told to its receiver, and
//! its sender sends to that address at its pace (the flow's deadline is its
//! next send). Nothing is kept for a user not seen or not registered, and a
//! flow is one of the test's users carried by this worker: what is kept
//! stays bounded by the worker's share of the users.

use std::collections::VecDeque;

use crate::flow::step::Carried;
use crate::flow::udp_stream::{nanos_since, UdpStreamHalves};
use crate::io::datagram::{receive, receive_one, send_one};
use crate::io::udp_stream::{send_due, Out, Sent, DRIVE_BUDGET};
use crate::schedule::Phase;

use super::*;

/// The datagram socket's state.
#[derive(Debug)]
pub(super) struct UdpState {
    /// The receiver stopped at its budget (at this time): it reads again
    /// at the end of the turn, and the wait does not sleep.
    pub(super) again_at: Option<Instant>,
    /// Flows (keys) whose sends found the socket buffer full.
    blocked: Vec<usize>,
    /// The origin of this worker's clock for jitter (arrival times).
    clock0: Instant,
    /// Whether senders send runs of datagrams in one call (until the kernel
    /// refuses one).
    runs: bool,
    /// Whether the socket's room is watched (a stream's from the start).
    writable_watched: bool,
    /// Whether the socket carries streams (else request/response).
    stream: bool,
    /// Request/response: each transaction's sizes.
    sizes: Option<TransactionSizes>,
    /// Each user's flow, by its number among this worker's users
    /// (`flow / workers`).
    keys: Vec<Option<usize>>,
}

impl UdpState {
    /// The state of a datagram socket carrying `spec`'s flows (a stream's
    /// socket is watched for room from the start).
    pub(super) fn new(spec: &TestSpec) -> Self {
        let stream = spec.is_udp_stream();
        UdpState {
            again_at: None,
            blocked: Vec::new(),
            clock0: Instant::now(),
            runs: true,
            writable_watched: stream,
            stream,
            sizes: spec.workload.transaction_sizes(),
            keys: Vec::new(),
        }
    }
}

impl ServerKind {
    /// Reads every datagram waiting (up to its budget) and tells each to
    /// its flow: a request/response flow's request is answered before the
    /// next read; a stream's registration is answered here.
    pub(super) fn receive_udp(&mut self, core: &mut Core<Self>, now: Instant) {
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
        let fd = sock.as_raw_fd();
        // The read buffer is taken out of the worker while its datagrams
        // are told (their flows' carries use the worker's other buffers).
        let mut buf = std::mem::take(&mut self.bufs.read);
        let mut budget = DRIVE_BUDGET;
        loop {
            if budget == 0 {
                // Come back after the other work of this turn.
                self.udp.again_at = Some(now);
                break;
            }
            // A request/response socket takes no runs: one datagram per
            // read, by the plainer call (recvfrom costs the kernel less than
            // recvmsg with room for control messages).
            let got = if self.udp.stream {
                receive(fd, &mut buf)
            } else {
                receive_one(fd, &mut buf)
            };
            let r = match got {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error for an earlier datagram: the client's
                // report says.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                // Drained (or failing): the next readiness edge reads on.
                Err(_) => break,
            };
            budget = budget.saturating_sub(r.len.max(1));
            let Some(from) = r.from else {
                continue;
            };
            for d in r.datagrams(&buf) {
                self.take_datagram(core, d, from);
            }
        }
        self.bufs.read = buf;
    }

    /// One datagram from `from`: to its flow, if it is one of this test's
    /// users carried by this worker.
    fn take_datagram(&mut self, core: &mut Core<Self>, d: &[u8], from: SocketAddr) {
        if !crate::io::socket::answers(self.udp_peer, from.ip()) {
            return;
        }
        let Ok(header) = UdpHeader::decode(d) else {
            return;
        };
        if header.tag != self.token.session_tag() || !self.flow_is_mine(header.flow) {
            return;
        }
        let now = Instant::now();
        let stream = self.udp.stream;
        if stream && d.len() == UDP_HEADER_LEN {
            self.register(core, d, &header, from, now);
            return;
        }
        let key = match self.udp_flow(&header) {
            Some(key) => key,
            // A stream's data before its registration is nobody's.
            None if stream => return,
            None => {
                // A UDP user has no connection: its flow counts as one when
                // first seen.
                let requests = VecDeque::new();
                self.new_udp_flow(core, header.flow, Logic::UdpRr { requests })
            }
        };
        let told = Told::Datagram {
            conn: 0,
            header,
            payload: d.len() - UDP_HEADER_LEN,
            from,
            // Only a stream's receiver takes jitter.
            clock_ns: if stream {
                nanos_since(self.udp.clock0, now)
            } else {
                0
            },
        };
        core.tell(key, told, now);
        if !stream {
            // Its answer goes before the next read.
            generic::drive(core, self, key, now);
        }
    }

    /// The key of the flow of `header`'s user (one of this worker's), if
    /// it was seen.
    fn udp_flow(&self, header: &UdpHeader) -> Option<usize> {
        *self
            .udp
            .keys
            .get(header.flow as usize / self.workers.max(1))?
    }

    /// A new flow for user `flow` carrying `logic`, counted as a
    /// connection; its key.
    fn new_udp_flow(&mut self, core: &mut Core<Self>, flow: u32, logic: Logic) -> usize {
        self.connections += 1;
        let slot = match self.slots.get(&flow) {
            Some(&s) => s,
            None => self.add_slot(core, flow),
        };
        self.open[slot] = true;
        let key = core.add(ServerFlow::new(slot, logic));
        let mine = flow as usize / self.workers.max(1);
        if self.udp.keys.len() <= mine {
            self.udp.keys.resize(mine + 1, None);
        }
        self.udp.keys[mine] = Some(key);
        key
    }

    /// A stream's registration `d` from `from`: its flow (made the first
    /// time) sends to `from` from now on, and the registration is answered.
    fn register(
        &mut self,
        core: &mut Core<Self>,
        d: &[u8],
        header: &UdpHeader,
        from: SocketAddr,
        now: Instant,
    ) {
        let Workload::Stream {
            message, direction, ..
        } = self.spec.workload
        else {
            return;
        };
        let Some(rate) = self.spec.stream_rate() else {
            return;
        };
        let key = match self.udp_flow(header) {
            Some(key) => key,
            None => {
                let halves = UdpStreamHalves::for_side(
                    header.tag,
                    header.flow,
                    message.as_usize(),
                    direction,
                    rate,
                    false,
                );
                let logic = Logic::UdpStream {
                    addr: from,
                    flow: header.flow,
                    halves: Box::new(halves),
                    next: None,
                };
                self.new_udp_flow(core, header.flow, logic)
            }
        };
        if let Some(Logic::UdpStream { addr, halves, .. }) =
            core.slots.get_mut(key).map(|s| &mut s.flow.logic)
        {
            *addr = from;
            if self.started {
                halves.start(now);
            }
        }
        if let Source::Udp(sock) = &self.source {
            let _ = send_one(sock, d, Some(from));
        }
        if self.started {
            core.driver().again(key);
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

    /// Answers the requests flow `key` was told, oldest first, each to
    /// where it came from, until the socket buffer is full.
    pub(super) fn answer_udp(&mut self, core: &mut Core<Self>, key: usize) -> Told {
        let blocked = Told::Carried {
            conn: 0,
            how: Carried::Blocked,
        };
        let Source::Udp(sock) = &self.source else {
            return blocked;
        };
        let Some(sizes) = &self.udp.sizes else {
            return blocked;
        };
        let Core { slots, counts, .. } = core;
        let Some(s) = slots.get_mut(key) else {
            return blocked;
        };
        let slot = s.flow.slot;
        let Logic::UdpRr { requests } = &mut s.flow.logic else {
            return blocked;
        };
        while let Some((h, to)) = requests.front() {
            let resp = usize::try_from(sizes.at(h.flow, h.seq).1).unwrap_or(usize::MAX);
            let Some(out) = (UDP_HEADER_LEN.checked_add(resp))
                .and_then(|len| self.bufs.datagram.get_mut(..len))
            else {
                // Larger than any answer of the test: not a request of it.
                requests.pop_front();
                continue;
            };
            let mut hdr = [0u8; UDP_HEADER_LEN];
            h.encode(&mut hdr);
            out[..UDP_HEADER_LEN].copy_from_slice(&hdr);
            match send_one(sock, out, Some(*to)) {
                Ok(_) => {
                    let now = Instant::now();
                    counts.tx(slot, resp, now);
                    counts.transactions(slot, 1, Duration::ZERO, now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // It goes when the socket has room.
                    self.udp.blocked.push(key);
                    self.watch_writable(core);
                    return blocked;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Lost, as the network could lose it: the client's report
                // says.
                Err(_) => {}
            }
            requests.pop_front();
        }
        blocked
    }

    /// Has the datagram socket's room reported from now on. A
    /// request/response socket is watched for reading only until an answer
    /// finds its buffer full: watched for room, every datagram it sends
    /// would raise an edge and wake the next wait.
    fn watch_writable(&mut self, core: &mut Core<Self>) {
        if self.udp.writable_watched {
            return;
        }
        if let Source::Udp(sock) = &mut self.source {
            let both = Interest::READABLE | Interest::WRITABLE;
            if core
                .driver()
                .registry()
                .reregister(sock, LISTENER, both)
                .is_ok()
            {
                self.udp.writable_watched = true;
            }
        }
    }
}
