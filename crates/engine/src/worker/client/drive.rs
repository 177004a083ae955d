//! A client worker's carries: request/response over TCP, Unix and UDP,
//! open-loop users, and streams, each as far as its socket lets it go.

use std::io;
use std::time::Instant;

use linkperf_protocol::{UdpHeader, UDP_HEADER_LEN};
use linkperf_workload::Protocol;

use super::flow::{Logic, Stage};
use super::ClientKind;
use crate::flow::step::{Carried, Deadline, Told};
use crate::flow::Want;
use crate::io::datagram::{receive_connected, send_one};
use crate::io::exchange::{self, Exchanged};
use crate::io::stream::StreamIo;
use crate::io::Conn;
use crate::schedule::Phase;
use crate::worker::generic::Core;

fn carried(e: Exchanged) -> Carried {
    match e {
        Exchanged::Blocked => Carried::Blocked,
        Exchanged::Done => Carried::Finished,
        Exchanged::Eof => Carried::Eof,
        Exchanged::Failed(e) => Carried::Failed(e),
    }
}

impl ClientKind {
    /// Carries open flow `key` as far as its socket allows. `now` is a
    /// recent time (no older than the last event wait), moved on to the
    /// latest time the carry took (a request/response flow's reads take it
    /// as they complete).
    pub(super) fn carry(&mut self, core: &mut Core<Self>, key: usize, now: &mut Instant) -> Told {
        let Some(schedule) = core.slots[key].flow.schedule else {
            return Told::Carried {
                conn: 0,
                how: Carried::Blocked,
            };
        };
        let how = match core.slots[key].flow.logic {
            Logic::Rr(_) | Logic::Crr(_) => self.carry_rr(core, key, now),
            Logic::Udp(_) => self.carry_udp(core, key),
            Logic::Stream(_) => self.carry_stream(core, key),
            Logic::UdpStream(_) => self.carry_udp_stream(core, key),
            Logic::Open(_) if self.spec.protocol == Protocol::Udp => {
                self.carry_open_udp(core, key, *now)
            }
            Logic::Open(_) => self.carry_open(core, key, now),
        };
        let _ = schedule;
        let how = self.carried(core, key, how);
        Told::Carried { conn: 0, how }
    }

    fn carry_rr(&mut self, core: &mut Core<Self>, key: usize, now: &mut Instant) -> Carried {
        let blocking = core.blocking();
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let crr = matches!(f.logic, Logic::Crr(_));
        let schedule = f.schedule;
        let (Logic::Rr(rr) | Logic::Crr(rr)) = &mut f.logic else {
            return Carried::Blocked;
        };
        let Some(link) = slot.links.last_mut() else {
            return Carried::Blocked;
        };
        let turn = exchange::Turn {
            payload: self.bufs.write,
            scratch: &mut self.bufs.read,
            counters: counts,
            slot: key,
            blocking,
            // Connect per transaction: the connection ends with it.
            once: crr,
        };
        let stop = |at: Instant| crr || schedule.is_some_and(|s| s.phase(at) >= Phase::Draining);
        match exchange::exchange(rr, &mut link.conn, turn, now, stop) {
            Exchanged::Done if crr => {
                // The server closes after its response: read to its close
                // now (it may have come with the response's edge).
                f.stage = Stage::AwaitClose;
                Carried::Finished
            }
            e => carried(e),
        }
    }

    /// An open-loop user: the arrivals due come, what its connection has
    /// room for goes, the answers are read; it wakes for the next arrival.
    fn carry_open(&mut self, core: &mut Core<Self>, key: usize, now: &mut Instant) -> Carried {
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let Some(end) = f.schedule.map(|s| s.measure_until) else {
            return Carried::Blocked;
        };
        let (Logic::Open(user), Some(link)) = (&mut f.logic, slot.links.last_mut()) else {
            return Carried::Blocked;
        };
        // No arrival comes once the window has closed; those due are
        // answered in the drain.
        user.arrivals(*now, end);
        let turn = exchange::Turn {
            payload: self.bufs.write,
            scratch: &mut self.bufs.read,
            counters: counts,
            slot: key,
            blocking: false,
            once: false,
        };
        let moved = exchange::exchange(user.as_mut(), &mut link.conn, turn, now, |_| false);
        for e in user.take_events() {
            counts.open_event(&e);
        }
        if let Some(next) = user.next_arrival(end) {
            let precise = user.next_goes_at_once();
            f.wake = Some(Deadline { at: next, precise });
        }
        carried(moved)
    }

    /// An open-loop user over UDP: the answers that came are matched to
    /// their transactions by number, those unanswered past the UDP timeout
    /// are lost, the arrivals due come and what has room goes, one datagram
    /// each; it wakes for the next arrival or the next loss.
    fn carry_open_udp(&mut self, core: &mut Core<Self>, key: usize, now: Instant) -> Carried {
        let tag = self.token.session_tag();
        let timeout = self.spec.udp_timeout;
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let id = f.id;
        let Some(end) = f.schedule.map(|s| s.measure_until) else {
            return Carried::Blocked;
        };
        let (Logic::Open(user), Some(sock)) =
            (&mut f.logic, slot.links.last().and_then(|l| l.conn.udp()))
        else {
            return Carried::Blocked;
        };
        let bufs = &mut self.bufs;
        loop {
            match receive_connected(sock, &mut bufs.read) {
                Ok(k) => {
                    let Ok(h) = UdpHeader::decode(&bufs.read[..k]) else {
                        continue;
                    };
                    if h.tag != tag || h.flow != id {
                        continue;
                    }
                    let at = Instant::now();
                    counts.rx(key, k - UDP_HEADER_LEN, at);
                    // A late answer to one counted lost is not counted again.
                    if let Some(done) = user.answered(h.seq, at) {
                        counts.transactions(key, 1, done.took, at);
                        if let Some(service) = done.service {
                            counts.open_completed(done.took, service, at);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error for an earlier datagram: its timeout counts the loss.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Carried::Failed(e),
            }
        }
        if let Some(before) = now.checked_sub(timeout) {
            for _ in 0..user.expire(before) {
                counts.error(now, || format!("flow {id}: udp transaction timed out"));
            }
        }
        user.arrivals(now, end);
        while let Some((seq, request)) = user.send_datagram(now) {
            let n = usize::try_from(request).unwrap_or(usize::MAX);
            let len = UDP_HEADER_LEN.saturating_add(n);
            if len > bufs.datagram.len() {
                return Carried::Failed(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "request larger than a datagram",
                ));
            }
            let mut hdr = [0u8; UDP_HEADER_LEN];
            UdpHeader {
                tag,
                flow: id,
                seq,
                sent_ns: 0,
            }
            .encode(&mut hdr);
            bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
            // A datagram the socket refused (its buffer full, an ICMP error)
            // is as good as lost: its timeout counts it.
            if send_one(sock, &bufs.datagram[..len], None).is_ok() {
                counts.tx(key, n, now);
            }
        }
        for e in user.take_events() {
            counts.open_event(&e);
        }
        if user.finished() {
            return Carried::Finished;
        }
        let arrival = user.next_arrival(end);
        let loss = user.oldest_sent().map(|t| t + timeout);
        let next = match (arrival, loss) {
            (Some(a), Some(l)) if l < a => Some(Deadline::at(l)),
            (Some(a), _) => Some(Deadline {
                at: a,
                precise: user.next_goes_at_once(),
            }),
            (None, l) => l.map(Deadline::at),
        };
        if next.is_some() {
            f.wake = next;
        }
        Carried::Blocked
    }

    fn carry_udp(&mut self, core: &mut Core<Self>, key: usize) -> Carried {
        let tag = self.token.session_tag();
        let udp_timeout = self.spec.udp_timeout;
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let id = f.id;
        let schedule = f.schedule;
        let Logic::Udp(rr) = &mut f.logic else {
            return Carried::Blocked;
        };
        let Some(sock) = slot.links.last().and_then(|l| l.conn.udp()) else {
            return Carried::Blocked;
        };
        let bufs = &mut self.bufs;
        loop {
            match rr.want() {
                Want::Write(n) => {
                    let len = UDP_HEADER_LEN + n;
                    if len > bufs.datagram.len() {
                        return Carried::Failed(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "request larger than a datagram",
                        ));
                    }
                    let mut hdr = [0u8; UDP_HEADER_LEN];
                    UdpHeader {
                        tag,
                        flow: id,
                        seq: rr.seq(),
                        sent_ns: 0,
                    }
                    .encode(&mut hdr);
                    bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
                    match send_one(sock, &bufs.datagram[..len], None) {
                        Ok(_) => {
                            counts.tx(key, n, Instant::now());
                            rr.wrote(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Carried::Blocked,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // An ICMP error (nobody listening) shows here; the timeout counts the loss.
                        Err(_) => {
                            rr.wrote(n);
                        }
                    }
                }
                Want::Read(_) => match receive_connected(sock, &mut bufs.read) {
                    Ok(k) => {
                        let Ok(h) = UdpHeader::decode(&bufs.read[..k]) else {
                            continue;
                        };
                        if h.tag != tag || h.flow != id || h.seq != rr.seq() {
                            continue; // a late answer to a transaction already counted lost
                        }
                        let now = Instant::now();
                        let payload = k - UDP_HEADER_LEN;
                        counts.rx(key, payload, now);
                        let stop = schedule.is_some_and(|s| s.phase(now) >= Phase::Draining);
                        if let Some(done) = rr.read(payload.max(1), now, stop) {
                            counts.transactions(key, 1, done.took, now);
                            f.seq += 1;
                            f.udp_due = (!stop).then(|| now + udp_timeout);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Carried::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        return Carried::Blocked
                    }
                    Err(e) => return Carried::Failed(e),
                },
                Want::Idle => return Carried::Blocked,
                Want::Done => return Carried::Finished,
            }
        }
    }

    fn carry_stream(&mut self, core: &mut Core<Self>, key: usize) -> Carried {
        let Core { slots, counts, .. } = core;
        let slot = &mut slots[key];
        let f = &mut slot.flow;
        let schedule = f.schedule;
        let (Logic::Stream(halves), Some(link)) = (&mut f.logic, slot.links.last_mut()) else {
            return Carried::Blocked;
        };
        let conn: &mut Conn = &mut link.conn;
        match halves.drive(conn, &mut self.bufs, counts, key, schedule.as_ref()) {
            StreamIo::Blocked => Carried::Blocked,
            StreamIo::Again => Carried::Again,
            StreamIo::PeerClosed {
                still_sending: true,
            } => Carried::Eof,
            StreamIo::PeerClosed {
                still_sending: false,
            } => Carried::Finished,
            StreamIo::Failed(e) => Carried::Failed(e),
        }
    }
}
