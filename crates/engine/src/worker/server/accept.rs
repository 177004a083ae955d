//! A server worker's admission: accepting data connections behind the
//! preamble gate (bounded, the oldest waiting closed first, expired after
//! their timeout), matching each to a flow of its own, closing.

use super::*;

impl Worker {
    /// Closes the connections whose time for their preamble ran out.
    pub(super) fn expire_preambles(&mut self, now: Instant) {
        while let Some(k) = self.gate.expired(now) {
            self.close(k);
        }
    }

    pub(super) fn close(&mut self, k: usize) {
        if self.flows.contains(k) {
            let mut f = self.flows.remove(k);
            if matches!(f.logic, Logic::Preamble) {
                self.gate.forget(k);
            } else if let Some(o) = self.open.get_mut(f.slot) {
                if std::mem::take(o) {
                    self.connected -= 1;
                }
            }
            // A flow that ends in the window, or as it closes (a single
            // flow's client closes right after its last transaction), is
            // sampled now, before its socket goes.
            if !matches!(f.logic, Logic::Preamble) {
                let crr = matches!(f.logic, Logic::Crr(_));
                self.window
                    .closing(&f.conn, f.retrans_before, crr, self.schedule.as_ref());
            }
            let _ = self.io.registry().deregister(f.conn.source());
        }
    }

    pub(super) fn on_source(&mut self) {
        match &self.source {
            Source::Listener(_) => self.accept_all(),
            Source::Udp(_) => self.serve_udp(),
        }
    }

    pub(super) fn accept_all(&mut self) {
        loop {
            let Source::Listener(listener) = &self.source else {
                return;
            };
            let mut conn = match accept_next(listener) {
                Accept::Conn(conn) => conn,
                Accept::Drained => return,
                // Out of descriptors: keep serving; the rest wait in the
                // backlog for the retry.
                Accept::Stopped(_) => {
                    self.accept_retry.stopped(Instant::now());
                    return;
                }
            };
            if conn.apply(&self.opts).is_err() {
                continue;
            }
            let entry = self.flows.vacant_entry();
            let k = entry.key();
            if self
                .io
                .registry()
                .register(
                    conn.source(),
                    Token(k),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .is_err()
            {
                continue;
            }
            entry.insert(ServerFlow {
                conn,
                parked: None,
                retrans_before: 0,
                slot: usize::MAX,
                logic: Logic::Preamble,
            });
            // Connections that never present a preamble (anyone may open one
            // to a data port) stay bounded: the one waiting longest is closed
            // to make room.
            let now = Instant::now();
            self.gate
                .set_cap(crate::io::gate::preamble_cap(self.expected, self.connected));
            if let Some(oldest) = self.gate.admit(k, now) {
                self.close(oldest);
            }
            self.drive(k, now);
        }
    }

    pub(super) fn read_preamble(&mut self, k: usize, now: Instant) -> Io {
        let Some(f) = self.flows.get_mut(k) else {
            return Io::Close;
        };
        let p = match self.gate.read(k, &mut f.conn) {
            Presented::Waiting => return Io::Blocked,
            Presented::Refused => return Io::Close,
            Presented::Through(p) => p,
        };
        // A user whose first connection is taken only once the window has
        // closed (it waited in the backlog while the process was out of
        // descriptors) was not served in it: it is not counted as a flow
        // this side carried, so the run says it was never served. (A
        // connect-per-transaction flow's later connections are its own.)
        let closed = self.schedule.is_some_and(|s| now >= s.measure_until);
        if closed && !self.slots.contains_key(&p.flow) {
            return Io::Close;
        }
        // The client numbers its users from 0 and sends user `i` to worker
        // `i % workers`: any other flow is not one of this test's, whatever
        // token it shows.
        if !self.flow_is_mine(p.flow) {
            return Io::Close;
        }
        let slot = match self.slots.get(&p.flow) {
            Some(&s) => s,
            None => self.add_slot(p.flow),
        };
        // One connection per flow at a time: a second is not a user's.
        if self.open[slot] {
            return Io::Close;
        }
        let Some(f) = self.flows.get_mut(k) else {
            return Io::Close;
        };
        f.logic = new_logic(&self.spec, p.flow);
        f.slot = slot;
        self.open[slot] = true;
        self.connected += 1;
        // A connection of the test: counted (junk and refused ones never are).
        self.connections += 1;
        if self.socket.is_none() {
            self.socket = Some(SocketFacts::read(
                f.conn.as_raw_fd(),
                f.conn.local_ip(),
                f.conn.is_tcp(),
            ));
        }
        if let (Some(_), Logic::Stream(halves)) = (self.schedule, &mut f.logic) {
            halves.start(now);
        }
        self.drive_flow(k, now)
    }

    /// Whether flow `flow` is one of this test's users carried by this worker.
    pub(super) fn flow_is_mine(&self, flow: u32) -> bool {
        flow < self.spec.users && flow as usize % self.workers.max(1) == self.index
    }

    /// A counting slot for a flow seen for the first time.
    pub(super) fn add_slot(&mut self, flow: u32) -> FlowSlotId {
        let s = self.counters.add_flow(flow);
        self.slots.insert(flow, s);
        self.open.push(false);
        s
    }
}
