//! A client worker's flows driven on readiness: request/response over TCP,
//! Unix and UDP, and streams, each as far as its socket lets it go.

use super::*;
use crate::io::exchange::{self, Exchanged};

impl Worker {
    /// Drives an open flow as far as its socket allows.
    /// `now` is a recent time (no older than the last event wait); returns
    /// the latest time this call took (a request/response flow's reads take
    /// it as they complete).
    pub(super) fn drive(&mut self, i: usize, schedule: Schedule, now: Instant) -> Instant {
        if self.flows[i].stage != Stage::Open {
            return now;
        }
        let mut now = now;
        let outcome = match self.flows[i].logic {
            Logic::Rr(_) | Logic::Crr(_) => self.drive_rr(i, schedule, &mut now),
            Logic::Udp(_) => self.drive_udp(i, schedule),
            Logic::Stream(_) => self.drive_stream(i, schedule),
            Logic::UdpStream(_) => self.drive_udp_stream(i, schedule),
            Logic::Open { .. } if self.spec.protocol == Protocol::Udp => {
                self.drive_open_udp(i, schedule, now)
            }
            Logic::Open { .. } => self.drive_open(i, schedule, &mut now),
        };
        match outcome {
            Io::Blocked => return now,
            Io::Again => {
                self.io.again(i);
                return now;
            }
            _ => {}
        }
        let now = Instant::now();
        let id = self.flows[i].id;
        // A stop shuts a parked socket down: its ending is not the server's doing.
        let stopped = self.signals.aborted() || self.signals.expired();
        match outcome {
            Io::Blocked | Io::Again => {}
            Io::Finished => self.close(i),
            Io::Eof if stopped => self.close(i),
            Io::Failed(_) if stopped => self.close(i),
            Io::Eof => {
                let early = schedule.phase(now) < Phase::Draining;
                if early {
                    self.counters.error(now, || format!("flow {id}: the server closed the connection before the end of the test"));
                }
                self.close(i);
            }
            Io::Failed(e) => {
                if let Logic::Crr(_) = self.flows[i].logic {
                    self.crr_failed(i, e, schedule);
                } else {
                    self.counters.error(now, || format!("flow {id}: {e}"));
                    self.close(i);
                }
            }
        }
        now
    }

    pub(super) fn drive_rr(&mut self, i: usize, schedule: Schedule, now: &mut Instant) -> Io {
        let f = &mut self.flows[i];
        let crr = matches!(f.logic, Logic::Crr(_));
        let (Logic::Rr(rr) | Logic::Crr(rr)) = &mut f.logic else {
            return Io::Blocked;
        };
        let Some(conn) = f.conn.as_mut() else {
            return Io::Blocked;
        };
        let turn = exchange::Turn {
            payload: self.bufs.write,
            scratch: &mut self.bufs.read,
            counters: &mut self.counters,
            slot: i,
            blocking: self.blocking,
            // Connect per transaction: the connection ends with it.
            once: crr,
        };
        let stop = |at: Instant| crr || schedule.phase(at) >= Phase::Draining;
        match exchange::exchange(rr, conn, turn, now, stop) {
            Exchanged::Blocked => Io::Blocked,
            Exchanged::Done if crr => {
                f.stage = Stage::AwaitClose;
                // The server closes after its response; wait for that.
                self.after_crr_response(i, schedule)
            }
            Exchanged::Done => Io::Finished,
            Exchanged::Eof => Io::Eof,
            Exchanged::Failed(e) => Io::Failed(e),
        }
    }

    /// An open-loop user: the arrivals due come, what its connection has
    /// room for goes, the answers are read; its timer is armed for the next
    /// arrival.
    pub(super) fn drive_open(&mut self, i: usize, schedule: Schedule, now: &mut Instant) -> Io {
        let f = &mut self.flows[i];
        let (Logic::Open { user, armed }, Some(conn)) = (&mut f.logic, f.conn.as_mut()) else {
            return Io::Blocked;
        };
        // No arrival comes once the window has closed; those due are
        // answered in the drain.
        user.arrivals(*now, schedule.measure_until);
        let turn = exchange::Turn {
            payload: self.bufs.write,
            scratch: &mut self.bufs.read,
            counters: &mut self.counters,
            slot: i,
            blocking: false,
            once: false,
        };
        let moved = exchange::exchange(user.as_mut(), conn, turn, now, |_| false);
        for e in user.take_events() {
            self.counters.open_event(&e);
        }
        if let Some(next) = user.next_arrival(schedule.measure_until) {
            let precise = user.next_goes_at_once();
            arm(&mut self.io.timers, armed, (next, precise), i, f.seq);
        }
        match moved {
            Exchanged::Blocked => Io::Blocked,
            Exchanged::Done => Io::Finished,
            Exchanged::Eof => Io::Eof,
            Exchanged::Failed(e) => Io::Failed(e),
        }
    }

    /// An open-loop user over UDP: the answers that came are matched to
    /// their transactions by number, those unanswered past the UDP timeout
    /// are lost, the arrivals due come and what has room goes, one datagram
    /// each; its timer is armed for the next arrival or the next loss.
    pub(super) fn drive_open_udp(&mut self, i: usize, schedule: Schedule, now: Instant) -> Io {
        let tag = self.token.session_tag();
        let timeout = self.spec.udp_timeout;
        let f = &mut self.flows[i];
        let id = f.id;
        let (Logic::Open { user, armed }, Some(sock)) =
            (&mut f.logic, f.conn.as_ref().and_then(Conn::udp))
        else {
            return Io::Blocked;
        };
        loop {
            match sock.recv(&mut self.bufs.read) {
                Ok(k) => {
                    let Ok(h) = UdpHeader::decode(&self.bufs.read[..k]) else {
                        continue;
                    };
                    if h.tag != tag || h.flow != id {
                        continue;
                    }
                    let at = Instant::now();
                    self.counters.rx(i, k - UDP_HEADER_LEN, at);
                    // A late answer to one counted lost is not counted again.
                    if let Some(done) = user.answered(h.seq, at) {
                        self.counters.transactions(i, 1, done.took, at);
                        if let Some(service) = done.service {
                            self.counters.open_completed(done.took, service, at);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error for an earlier datagram: its timeout counts the loss.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Io::Failed(e),
            }
        }
        if let Some(before) = now.checked_sub(timeout) {
            for _ in 0..user.expire(before) {
                self.counters
                    .error(now, || format!("flow {id}: udp transaction timed out"));
            }
        }
        user.arrivals(now, schedule.measure_until);
        while let Some((seq, request)) = user.send_datagram(now) {
            let n = usize::try_from(request).unwrap_or(usize::MAX);
            let len = UDP_HEADER_LEN.saturating_add(n);
            if len > self.bufs.datagram.len() {
                return Io::Failed(io::Error::new(
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
            self.bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
            // A datagram the socket refused (its buffer full, an ICMP error)
            // is as good as lost: its timeout counts it.
            if sock.send(&self.bufs.datagram[..len]).is_ok() {
                self.counters.tx(i, n, now);
            }
        }
        for e in user.take_events() {
            self.counters.open_event(&e);
        }
        if user.finished() {
            return Io::Finished;
        }
        let arrival = user.next_arrival(schedule.measure_until);
        let loss = user.oldest_sent().map(|t| t + timeout);
        let next = match (arrival, loss) {
            (Some(a), Some(l)) if l < a => Some((l, false)),
            (Some(a), _) => Some((a, user.next_goes_at_once())),
            (None, l) => l.map(|l| (l, false)),
        };
        if let Some(next) = next {
            arm(&mut self.io.timers, armed, next, i, f.seq);
        }
        Io::Blocked
    }

    pub(super) fn after_crr_response(&mut self, i: usize, schedule: Schedule) -> Io {
        self.await_close(i, schedule);
        Io::Blocked
    }

    pub(super) fn drive_udp(&mut self, i: usize, schedule: Schedule) -> Io {
        let tag = self.token.session_tag();
        let udp_timeout = self.spec.udp_timeout;
        let f = &mut self.flows[i];
        let Logic::Udp(rr) = &mut f.logic else {
            return Io::Blocked;
        };
        let Some(sock) = f.conn.as_ref().and_then(Conn::udp) else {
            return Io::Blocked;
        };
        loop {
            match rr.want() {
                Want::Write(n) => {
                    let len = UDP_HEADER_LEN + n;
                    if len > self.bufs.datagram.len() {
                        return Io::Failed(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "request larger than a datagram",
                        ));
                    }
                    let mut hdr = [0u8; UDP_HEADER_LEN];
                    UdpHeader {
                        tag,
                        flow: f.id,
                        seq: rr.seq(),
                        sent_ns: 0,
                    }
                    .encode(&mut hdr);
                    self.bufs.datagram[..UDP_HEADER_LEN].copy_from_slice(&hdr);
                    match sock.send(&self.bufs.datagram[..len]) {
                        Ok(_) => {
                            self.counters.tx(i, n, Instant::now());
                            rr.wrote(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // An ICMP error (nobody listening) shows here; the timeout counts the loss.
                        Err(_) => {
                            rr.wrote(n);
                        }
                    }
                }
                Want::Read(_) => match sock.recv(&mut self.bufs.read) {
                    Ok(k) => {
                        let Ok(h) = UdpHeader::decode(&self.bufs.read[..k]) else {
                            continue;
                        };
                        if h.tag != tag || h.flow != f.id || h.seq != rr.seq() {
                            continue; // a late answer to a transaction already counted lost
                        }
                        let now = Instant::now();
                        let payload = k - UDP_HEADER_LEN;
                        self.counters.rx(i, payload, now);
                        let stop = schedule.phase(now) >= Phase::Draining;
                        if let Some(done) = rr.read(payload.max(1), now, stop) {
                            self.counters.transactions(i, 1, done.took, now);
                            f.seq += 1;
                            if !stop {
                                self.io.timers.arm(now + udp_timeout, i, f.seq);
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Io::Blocked,
                    Err(e) => return Io::Failed(e),
                },
                Want::Idle => return Io::Blocked,
                Want::Done => return Io::Finished,
            }
        }
    }

    pub(super) fn drive_stream(&mut self, i: usize, schedule: Schedule) -> Io {
        let f = &mut self.flows[i];
        let (Logic::Stream(halves), Some(conn)) = (&mut f.logic, f.conn.as_mut()) else {
            return Io::Blocked;
        };
        match halves.drive(conn, &mut self.bufs, &mut self.counters, i, Some(&schedule)) {
            StreamIo::Blocked => Io::Blocked,
            StreamIo::Again => Io::Again,
            StreamIo::PeerClosed {
                still_sending: true,
            } => Io::Eof,
            StreamIo::PeerClosed {
                still_sending: false,
            } => Io::Finished,
            StreamIo::Failed(e) => Io::Failed(e),
        }
    }
}

/// Arms an open-loop user's timer for `next` (a time, and whether it must
/// fire to the microsecond: an arrival that goes the moment it is due),
/// unless it is armed so already.
fn arm(
    timers: &mut crate::worker::driver::Timers,
    armed: &mut Option<(Instant, bool)>,
    next: (Instant, bool),
    i: usize,
    seq: u64,
) {
    if *armed == Some(next) {
        return;
    }
    *armed = Some(next);
    if next.1 {
        timers.arm_precise(next.0, i, seq);
    } else {
        timers.arm(next.0, i, seq);
    }
}
