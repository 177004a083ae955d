//! A client worker's connections: connecting its users a bounded number at
//! a time (each with its preamble), setting each flow up and starting it,
//! reconnecting a crr flow per transaction, closing.

use super::*;

/// Connects started but not finished, per worker, at most.
pub(super) const MAX_CONNECTING: usize = 256;

/// Delay before a connect-per-transaction flow retries after a failed connect.
pub(super) const RECONNECT_BACKOFF: Duration = Duration::from_millis(5);

impl Worker {
    pub(super) fn fill_connect_slots(&mut self) {
        while self.connecting < MAX_CONNECTING {
            let Some(i) = self.queued.pop_front() else {
                break;
            };
            if let Err(e) = self.begin_connect(i) {
                let f = &self.flows[i];
                self.connect_error = Some(format!(
                    "flow {} could not connect to {}: {e}",
                    f.id,
                    self.describe_endpoint(f.endpoint)
                ));
                return;
            }
        }
    }

    pub(super) fn describe_endpoint(&self, i: usize) -> String {
        match &self.endpoints {
            DataEndpoints::Tcp(v) | DataEndpoints::Udp(v) => {
                v.get(i).map(|a| a.to_string()).unwrap_or_default()
            }
            DataEndpoints::Unix(v) => v.get(i).map(|n| format!("@{n}")).unwrap_or_default(),
        }
    }

    /// Starts connecting flow `i` (UDP sockets are ready at once).
    pub(super) fn begin_connect(&mut self, i: usize) -> io::Result<()> {
        let ep = self.flows[i].endpoint;
        let token = Token(i);
        match &self.endpoints {
            DataEndpoints::Udp(addrs) => {
                let mut s = udp_connect(addrs[ep], None, &self.opts)?;
                let stream = matches!(self.flows[i].logic, Logic::UdpStream(_));
                let interest = if stream {
                    // A stream's sender waits for room in its socket buffer.
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                self.io.registry().register(s.source(), token, interest)?;
                if stream {
                    // Runs of datagrams in one read, where the kernel has them so.
                    crate::io::datagram::receive_runs(s.as_raw_fd());
                }
                if self.socket.is_none() {
                    self.socket = Some(SocketFacts::read(s.as_raw_fd(), s.local_ip(), false));
                }
                let f = &mut self.flows[i];
                f.conn = Some(s);
                self.connections += 1;
                if stream {
                    self.connecting += 1;
                    self.register(i, Instant::now())?;
                } else {
                    f.stage = Stage::Open;
                    self.open += 1;
                }
                Ok(())
            }
            DataEndpoints::Tcp(addrs) => {
                let conn = tcp_connect(addrs[ep], &self.opts)?;
                self.register_connecting(i, conn)
            }
            DataEndpoints::Unix(names) => {
                let conn = unix_connect(&names[ep], &self.opts)?;
                self.register_connecting(i, conn)
            }
        }
    }

    pub(super) fn register_connecting(&mut self, i: usize, mut conn: Conn) -> io::Result<()> {
        self.io.registry().register(
            conn.source(),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let dial = self.dial(i);
        let f = &mut self.flows[i];
        f.conn = Some(conn);
        f.retrans_before = 0;
        f.stage = Stage::Dialing(dial);
        self.connecting += 1;
        self.connections += 1;
        Ok(())
    }

    /// How flow `i` dials the server: its preamble (the session's token,
    /// the flow, its connection's number), or the greeting the test was
    /// given (iperf3's cookie).
    pub(super) fn dial(&self, i: usize) -> Dial {
        let f = &self.flows[i];
        match &self.greeting {
            Some(g) => Dial::new(g),
            None => Dial::new(
                &Preamble {
                    token: self.token,
                    flow: f.id,
                    seq: f.seq,
                }
                .encode(),
            ),
        }
    }

    /// Moves a dialing flow on: connect completion, then the preamble.
    /// Returns true once the flow is open.
    pub(super) fn advance_connect(&mut self, i: usize) -> io::Result<bool> {
        let f = &mut self.flows[i];
        let (Some(conn), Stage::Dialing(dial)) = (f.conn.as_mut(), &mut f.stage) else {
            return Ok(f.stage == Stage::Open);
        };
        if !dial.advance(conn).map_err(DialError::into_inner)? {
            return Ok(false);
        }
        f.stage = Stage::Open;
        if self.socket.is_none() {
            self.socket = Some(SocketFacts::read(
                conn.as_raw_fd(),
                conn.local_ip(),
                conn.is_tcp(),
            ));
        }
        Ok(true)
    }

    pub(super) fn advance_setup(&mut self, i: usize) {
        if i >= self.flows.len() {
            return;
        }
        if matches!(self.flows[i].stage, Stage::Registering { .. }) {
            self.await_registration(i);
            return;
        }
        match self.advance_connect(i) {
            Ok(true) => {
                self.connecting -= 1;
                self.open += 1;
            }
            Ok(false) => {}
            Err(e) => {
                let f = &self.flows[i];
                self.connect_error = Some(format!(
                    "flow {} could not connect to {}: {e}",
                    f.id,
                    self.describe_endpoint(f.endpoint)
                ));
            }
        }
    }

    pub(super) fn start_flow(&mut self, i: usize, now: Instant, schedule: Schedule) {
        let f = &mut self.flows[i];
        match &mut f.logic {
            Logic::Rr(rr) | Logic::Crr(rr) | Logic::Udp(rr) => {
                rr.start(now);
                if let Logic::Udp(_) = f.logic {
                    let seq = f.seq;
                    self.io.timers.arm(now + self.spec.udp_timeout, i, seq);
                }
            }
            Logic::Stream(halves) => halves.start(now),
            Logic::Open { user, .. } => user.start(now, self.spec.users),
            Logic::UdpStream(halves) => {
                halves.start(now);
                // Both halves end with the window: a flow that only receives
                // hears of it from this timer.
                let seq = f.seq;
                self.io.timers.arm(schedule.measure_until, i, seq);
            }
        }
    }

    /// A connect-per-transaction connection failed: count it, retry after a pause.
    pub(super) fn crr_failed(&mut self, i: usize, e: io::Error, schedule: Schedule) {
        let now = Instant::now();
        let id = self.flows[i].id;
        self.counters.error(now, || format!("flow {id}: {e}"));
        self.drop_conn(i);
        if schedule.phase(now) == Phase::Measuring || schedule.phase(now) == Phase::Warmup {
            self.flows[i].stage = Stage::Waiting;
            let seq = self.flows[i].seq;
            self.io.timers.arm(now + RECONNECT_BACKOFF, i, seq);
        } else {
            self.flows[i].stage = Stage::Closed;
            self.open -= 1;
        }
    }

    pub(super) fn drop_conn(&mut self, i: usize) {
        if let Some(mut c) = self.flows[i].conn.take() {
            let _ = self.io.registry().deregister(c.source());
        }
    }

    pub(super) fn close(&mut self, i: usize) {
        if self.flows[i].stage != Stage::Closed {
            // A flow that ends in the window, or as it closes, is sampled now, before its socket goes.
            let f = &self.flows[i];
            if let Some(c) = &f.conn {
                let crr = matches!(f.logic, Logic::Crr(_));
                let schedule = self.signals.schedule();
                self.window
                    .closing(c, f.retrans_before, crr, schedule.as_ref());
            }
            if self.window.watched() {
                // Its last second's retransmits are read after it is gone.
                self.flows[i].retrans_at_close = self.flows[i].retransmits();
            }
            self.drop_conn(i);
            if matches!(
                self.flows[i].stage,
                Stage::Open
                    | Stage::AwaitClose
                    | Stage::Waiting
                    | Stage::Dialing(_)
                    | Stage::Registering { .. }
            ) {
                self.open = self.open.saturating_sub(1);
            }
            self.flows[i].stage = Stage::Closed;
        }
    }

    pub(super) fn reconnect(&mut self, i: usize, now: Instant, schedule: Schedule) {
        let ep = self.flows[i].endpoint;
        let r = match &self.endpoints {
            DataEndpoints::Tcp(a) => tcp_connect(a[ep], &self.opts),
            DataEndpoints::Unix(n) => unix_connect(&n[ep], &self.opts),
            DataEndpoints::Udp(_) => return,
        };
        let token = Token(i);
        match r.and_then(|mut c| {
            self.io.registry().register(
                c.source(),
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(c)
        }) {
            Ok(c) => {
                let dial = self.dial(i);
                let f = &mut self.flows[i];
                f.conn = Some(c);
                // A new connection counts its retransmits from its connect.
                f.retrans_before = 0;
                f.stage = Stage::Dialing(dial);
                if let Logic::Crr(rr) = &mut f.logic {
                    rr.restart_at(now);
                }
                self.connections += 1;
            }
            Err(e) => self.crr_failed(i, e, schedule),
        }
    }

    /// Reads a connect-per-transaction connection until the server closes it.
    pub(super) fn await_close(&mut self, i: usize, schedule: Schedule) {
        let Some(conn) = self.flows[i].conn.as_mut() else {
            return;
        };
        loop {
            match conn.read(&mut self.bufs.read) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.drop_conn(i);
        let now = Instant::now();
        let stop = schedule.phase(now) >= Phase::Draining;
        let f = &mut self.flows[i];
        if stop {
            f.stage = Stage::Closed;
            self.open -= 1;
        } else {
            f.seq += 1;
            self.reconnect(i, now, schedule);
        }
    }
}
