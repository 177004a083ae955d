//! A server worker's admission: accepting data connections behind the
//! preamble gate (bounded, the oldest waiting closed first, expired after
//! their timeout), outside the worker's flows until their preamble names
//! one, then matching each to a flow of its own (its events, under the
//! token it was accepted under, then drive that flow).

use super::*;

/// A server worker as the one accept loop sees it.
struct Accepting<'a> {
    kind: &'a mut ServerKind,
    core: &'a mut Core<ServerKind>,
}

impl Behind for Accepting<'_> {
    type Greeting = SessionPreamble;

    fn listener(&self) -> Option<&Listener> {
        match &self.kind.source {
            Source::Listener(l) => Some(l),
            Source::Udp(_) => None,
        }
    }

    fn retry(&mut self) -> &mut AcceptRetry {
        &mut self.kind.accept_retry
    }

    fn gate(&mut self) -> &mut PreambleGate {
        &mut self.kind.gate
    }

    /// Under token `KIND_TOKENS + k`, readable and writable (its flow's
    /// events come under it once it is through); the gate's bound follows
    /// the flows connected now.
    fn keep(&mut self, mut conn: Conn, _now: Instant) -> Option<usize> {
        let kind = &mut *self.kind;
        conn.apply(&kind.opts).ok()?;
        let entry = kind.pending.vacant_entry();
        let k = entry.key();
        self.core
            .driver()
            .registry()
            .register(
                conn.source(),
                Token(KIND_TOKENS + k),
                Interest::READABLE | Interest::WRITABLE,
            )
            .ok()?;
        entry.insert(Pending::Gate(conn));
        kind.gate
            .set_cap(crate::io::gate::preamble_cap(kind.expected, kind.connected));
        Some(k)
    }

    fn close(&mut self, key: usize) {
        self.kind.close_pending(self.core, key);
    }

    fn greet(&mut self, key: usize, now: Instant) {
        self.kind.read_preamble(self.core, key, now);
    }
}

impl ServerKind {
    /// Closes the connections whose time for their preamble ran out.
    pub(super) fn expire_preambles(&mut self, core: &mut Core<Self>, now: Instant) {
        while let Some(k) = self.gate.expired(now) {
            self.close_pending(core, k);
        }
    }

    /// Closes connection `k` behind the gate.
    fn close_pending(&mut self, core: &mut Core<Self>, k: usize) {
        if let Some(Pending::Gate(_)) = self.pending.get(k) {
            if let Some(Pending::Gate(mut conn)) = self.pending.try_remove(k) {
                let _ = core.driver().registry().deregister(conn.source());
            }
            self.gate.forget(k);
        }
    }

    /// Accepts every connection waiting, behind the gate.
    pub(super) fn accept_all(&mut self, core: &mut Core<Self>) {
        accept_behind(&mut Accepting { kind: self, core });
    }

    /// Reads what connection `k` behind the gate presented: through it, it
    /// becomes its flow's connection, driven in this turn.
    pub(super) fn read_preamble(&mut self, core: &mut Core<Self>, k: usize, now: Instant) {
        let Some(Pending::Gate(conn)) = self.pending.get_mut(k) else {
            return;
        };
        let p = match self.gate.read(k, conn) {
            Presented::Waiting => return,
            Presented::Refused => return self.close_pending(core, k),
            Presented::Through(p) => p,
        };
        // A user whose first connection is taken only once the window has
        // closed (it waited in the backlog while the process was out of
        // descriptors) was not served in it: it is not counted as a flow
        // this side carried, so the run says it was never served. (A
        // connect-per-transaction flow's later connections are its own.)
        let closed = core.schedule().is_some_and(|s| now >= s.measure_until);
        if closed && !self.slots.contains_key(&p.flow) {
            return self.close_pending(core, k);
        }
        // The client numbers its users from 0 and sends user `i` to worker
        // `i % workers`: any other flow is not one of this test's, whatever
        // token it shows.
        if !self.flow_is_mine(p.flow) {
            return self.close_pending(core, k);
        }
        let slot = match self.slots.get(&p.flow) {
            Some(&s) => s,
            None => self.add_slot(core, p.flow),
        };
        // One connection per flow at a time: a second is not a user's.
        if self.open[slot] {
            return self.close_pending(core, k);
        }
        let mut logic = new_logic(&self.spec, p.flow);
        if let (true, Logic::Stream(halves)) = (self.started, &mut logic) {
            halves.start(now);
        }
        let conn = match std::mem::replace(&mut self.pending[k], Pending::Flow(usize::MAX)) {
            Pending::Gate(conn) => conn,
            // Read above: behind the gate.
            Pending::Flow(_) => return,
        };
        self.gate.forget(k);
        let key = core.add(ServerFlow::new(slot, logic).routed(k));
        self.pending[k] = Pending::Flow(key);
        if self.socket.is_none() {
            self.socket = Some(SocketFacts::read(
                conn.as_raw_fd(),
                conn.local_ip(),
                conn.is_tcp(),
            ));
        }
        // Its events, under the token it was accepted under, drive its flow.
        core.adopt(key, 0, conn);
        self.open[slot] = true;
        self.connected += 1;
        // A connection of the test: counted (junk and refused ones never are).
        self.connections += 1;
        // What came behind the preamble is carried now, before the next
        // connection is taken.
        generic::drive(core, self, key, now);
    }

    /// Whether flow `flow` is one of this test's users carried by this worker.
    pub(super) fn flow_is_mine(&self, flow: u32) -> bool {
        flow < self.spec.users && flow as usize % self.workers.max(1) == self.index
    }

    /// A counting slot for a flow seen for the first time.
    pub(super) fn add_slot(&mut self, core: &mut Core<Self>, flow: u32) -> FlowSlotId {
        let s = core.counts.add_flow(flow);
        self.slots.insert(flow, s);
        self.open.push(false);
        s
    }
}
