//! A profile's UDP connections: the client's registration of each socket
//! with the server (and the server's record of them, by ordinal), and the
//! server's demultiplexing of its datagram socket by user and connection.

use super::*;

/// Datagrams queued on a server worker per (user, connection) before each
/// user reads them; more are dropped (the path is then losing them anyway).
pub(super) const MAX_QUEUED: usize = 8192;

pub(super) const UDP: Token = Token(usize::MAX - 2);

const _: () = assert!(usize::MAX - 2 >= KIND_TOKENS);

/// Server: one connection's UDP registrations not yet accepted. A client
/// sends a registration again until it is answered, so the same socket's
/// may arrive twice, late, or after the next socket's: each names its
/// socket's ordinal, and the n-th accept takes the n-th socket.
#[derive(Debug, Default)]
pub(super) struct Registrations {
    /// Not yet accepted: (transaction, ordinal, address), by ordinal.
    waiting: VecDeque<(u64, u64, SocketAddr)>,
    /// The ordinal of the socket accepted last.
    taken: u64,
}

impl Registrations {
    /// A registration arrived. Ordinal 0 (a client that does not number
    /// its sockets) replaces whatever waits.
    pub(super) fn register(&mut self, txn: u64, ordinal: u64, from: SocketAddr) {
        if ordinal == 0 {
            self.waiting.clear();
            self.waiting.push_back((txn, 0, from));
            return;
        }
        if ordinal <= self.taken || self.waiting.iter().any(|w| w.1 == ordinal) {
            return;
        }
        if self.waiting.len() >= MAX_QUEUED {
            return;
        }
        let at = self.waiting.partition_point(|w| w.1 < ordinal);
        self.waiting.insert(at, (txn, ordinal, from));
    }

    /// The address of the next socket registered in transaction `txn`;
    /// those of earlier transactions (the client ran ahead of a timed
    /// transaction's end) are dropped.
    pub(super) fn take(&mut self, txn: u64) -> Option<SocketAddr> {
        while self.waiting.front().is_some_and(|w| w.0 < txn) {
            self.waiting.pop_front();
        }
        let &(t, ordinal, addr) = self.waiting.front()?;
        if t != txn {
            return None;
        }
        self.waiting.pop_front();
        self.taken = self.taken.max(ordinal);
        Some(addr)
    }
}

/// Writes a datagram's header into `buf`: the session's tag, the user, the
/// connection in the sequence's top 16 bits. Returns the datagram's length
/// with `len` payload bytes.
pub(super) fn datagram(
    buf: &mut [u8],
    tag: u32,
    user: u32,
    conn: usize,
    seq: u64,
    len: u64,
) -> usize {
    let payload = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(buf.len() - UDP_HEADER_LEN);
    let header = UdpHeader {
        tag,
        flow: user,
        seq: ((conn as u64) << 48) | (seq & ((1 << 48) - 1)),
        sent_ns: 0,
    };
    if let Some(h) = buf.first_chunk_mut::<UDP_HEADER_LEN>() {
        header.encode(h);
    }
    UDP_HEADER_LEN + payload
}

impl ProfileKind {
    /// A UDP "connection": a socket connected to the server's datagram
    /// endpoint, registered with the server (a header-only datagram naming
    /// the user, the connection and the transaction, which the server
    /// answers) so that the server knows where to send before the client
    /// sends anything: a connection the server writes to first works too.
    pub(super) fn connect_udp(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        now: Instant,
    ) -> Option<Told> {
        if self.udp_endpoints.is_empty() {
            return failed(c, "the server offered no datagram endpoint");
        }
        let user = Self::user(core, u);
        let id = user.id;
        let addr = self.udp_endpoints[id as usize % self.udp_endpoints.len()];
        let settings = conn_settings(&user.script().conn_options[c]);
        let conn = match udp_connect(addr, None, &settings) {
            Ok(s) => s,
            Err(e) => return failed(c, format!("connect to {addr}: {e}")),
        };
        if let Err(e) = core.attach(u, c, conn) {
            return failed(c, format!("register a connection: {e}"));
        }
        let ordinal = self.udp_opened.entry((u, c)).or_default();
        *ordinal += 1;
        let ordinal = *ordinal;
        // No deadline of its own: the connect's timeout bounds it.
        let register = Register::new(self.registration(core, u, c, ordinal), now, None);
        self.sockets[u][c].push(SocketState::Udp {
            seq: 0,
            register: Some(register),
        });
        self.await_udp_answer(core, u, c, now)
    }

    /// Whether connection `c`'s newest socket is a UDP registration the
    /// server has not answered yet.
    pub(super) fn registering(&self, u: usize, c: usize) -> bool {
        matches!(
            self.sockets[u][c].last(),
            Some(SocketState::Udp {
                register: Some(_),
                ..
            })
        )
    }

    /// The header of user `u`'s registration of connection `c`'s socket
    /// `ordinal` in its current transaction. The ordinal, the socket's place
    /// among the connects of its user and connection from 1 (the server's
    /// n-th accept takes the n-th), goes where the streams put their send
    /// time.
    fn registration(&self, core: &Core, u: usize, c: usize, ordinal: u64) -> [u8; UDP_HEADER_LEN] {
        let user = Self::user(core, u);
        let txn = user.txn() as u64;
        let mut out = [0u8; UDP_HEADER_LEN];
        UdpHeader {
            tag: self.token.session_tag(),
            flow: user.id,
            seq: ((c as u64) << 48) | (txn & ((1 << 48) - 1)),
            sent_ns: ordinal,
        }
        .encode(&mut out);
        out
    }

    /// Reads the server's answer to connection `c`'s registration, sending
    /// the registration (again) when it is due; the connect's end once
    /// answered.
    pub(super) fn await_udp_answer(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        now: Instant,
    ) -> Option<Told> {
        let Some(SocketState::Udp { register, .. }) = self.sockets[u][c].last_mut() else {
            return None;
        };
        let reg = register.as_mut()?;
        let slot = &mut core.slots[u];
        let sock = slot.link(c)?.conn.udp()?;
        match reg.read(sock) {
            Registration::Registered => *register = None,
            Registration::NotYet => {
                let _ = reg.send_due(sock, now);
                // Looked at again then, if no answer comes before.
                slot.flow.retry = Some(reg.due());
                return None;
            }
            Registration::Failed(e) => {
                return failed(c, format!("register with the server: {e}"));
            }
        }
        self.connections += 1;
        Some(Told::Connected(c))
    }

    /// Server: takes in every datagram waiting on the worker's socket,
    /// tells each to its user (for its connection), and runs the users that
    /// got one.
    pub(super) fn receive_datagrams(&mut self, core: &mut Core) {
        let tag = self.token.session_tag();
        let me = self.worker_index(core);
        let mut woken: Vec<usize> = Vec::new();
        // A user keeps what it is told for its read, which takes its own
        // time: one time for the whole batch.
        let now = Instant::now();
        loop {
            let Some(sock) = self.udp.as_ref() else {
                return;
            };
            match receive_one(sock.as_raw_fd(), &mut self.buf) {
                Ok(Received {
                    len: k,
                    from: Some(from),
                    ..
                }) => {
                    if !crate::io::socket::answers(self.udp_peer, from.ip()) {
                        continue;
                    }
                    let Ok(h) = UdpHeader::decode(&self.buf[..k]) else {
                        continue;
                    };
                    let id = h.flow as usize;
                    if h.tag != tag || id % self.workers != me {
                        continue;
                    }
                    let u = id / self.workers;
                    let c = (h.seq >> 48) as usize;
                    if u >= self.users || c >= Self::user(core, u).conns() {
                        continue;
                    }
                    if k == UDP_HEADER_LEN {
                        // A registration: where this connection's datagrams
                        // go, answered with itself.
                        let txn = h.seq & ((1 << 48) - 1);
                        self.peers
                            .entry((u, c))
                            .or_default()
                            .register(txn, h.sent_ns, from);
                        let _ = send_one(sock, &self.buf[..k], Some(from));
                        if !woken.contains(&u) {
                            woken.push(u);
                        }
                        continue;
                    }
                    let told = Told::Datagram {
                        conn: c,
                        header: h,
                        payload: k - UDP_HEADER_LEN,
                        from,
                        clock_ns: 0,
                    };
                    core.tell(u, told, now);
                    if !woken.contains(&u) {
                        woken.push(u);
                    }
                }
                // A datagram with no address (none comes on UDP): not a user's.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        for u in woken {
            core.driver().again(u);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Registrations;
    use std::net::SocketAddr;

    pub(super) fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    pub(super) fn each_accept_takes_the_next_socket_whatever_order_and_repeats_arrive_in() {
        let mut r = Registrations::default();
        // The second socket's registration overtakes the first's, and the
        // first is sent twice.
        r.register(0, 2, at(2));
        r.register(0, 1, at(1));
        r.register(0, 1, at(1));
        assert_eq!(r.take(0), Some(at(1)));
        // A late repeat of an accepted socket is not accepted again.
        r.register(0, 1, at(1));
        assert_eq!(r.take(0), Some(at(2)));
        assert_eq!(r.take(0), None);
        // The same port again (the kernel may reuse it) is a new socket.
        r.register(0, 3, at(1));
        assert_eq!(r.take(0), Some(at(1)));
    }

    #[test]
    pub(super) fn registrations_of_an_earlier_transaction_are_dropped() {
        let mut r = Registrations::default();
        r.register(4, 1, at(1));
        r.register(5, 2, at(2));
        assert_eq!(r.take(5), Some(at(2)));
        // One of a later transaction waits for it.
        r.register(6, 3, at(3));
        assert_eq!(r.take(5), None);
        assert_eq!(r.take(6), Some(at(3)));
    }

    #[test]
    pub(super) fn a_client_that_does_not_number_its_sockets_is_taken_as_it_comes() {
        let mut r = Registrations::default();
        r.register(0, 0, at(1));
        r.register(0, 0, at(1));
        assert_eq!(r.take(0), Some(at(1)));
        assert_eq!(r.take(0), None);
    }
}
