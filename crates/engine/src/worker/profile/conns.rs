//! A profile's TCP connections: connect with its preamble, accept behind
//! the preamble gate (bounded, the oldest waiting closed first), hand an
//! accepted connection to the user whose transaction it belongs to, close.

use super::*;

pub(super) const PENDING_BASE: usize = KIND_TOKENS;

/// Longest a new connection may take to send its preamble.
pub(super) const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections accepted for one user's connection slot and not yet taken by
/// it (the next iteration's, arriving before the user reached it), at least;
/// a slot the script opens more sockets on at once may have as many.
pub(super) const ACCEPTED_PER_SLOT: usize = 2;

/// Server: one connection's TCP sockets accepted (their preamble read) and
/// not yet taken by its user, by transaction and ordinal. The n-th accept
/// of a transaction takes the socket the client numbered n, however the
/// preambles' completion reordered them (a slow server accepts one socket,
/// and reads the next one's preamble before the first one's).
///
/// At most `cap` sockets wait (a client cannot make the server hoard
/// descriptors), but the one its user needs next is always let in; one
/// refused for the cap is remembered by its number, so that the accept it
/// was for fails with an error instead of waiting for it for ever.
#[derive(Debug)]
pub(super) struct Accepted<S> {
    /// (transaction, ordinal, the socket or `None` if it was refused), in
    /// that order.
    waiting: VecDeque<(u64, u64, Option<S>)>,
}

/// Numbers of refused sockets remembered per connection; past that, one
/// refused is forgotten (its accept would wait until the client's end).
const MAX_REFUSED: usize = 4096;

/// What an accept found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken<S> {
    /// The socket.
    Socket(S),
    /// The socket came and was refused: more were waiting than allowed.
    Refused,
    /// Not there yet.
    NotYet,
}

impl<S> Default for Accepted<S> {
    fn default() -> Self {
        Accepted {
            waiting: VecDeque::new(),
        }
    }
}

impl<S> Accepted<S> {
    /// Sockets waiting.
    pub(super) fn len(&self) -> usize {
        self.waiting.iter().filter(|w| w.2.is_some()).count()
    }

    /// Socket `ordinal` of transaction `txn` arrived; the user's next
    /// accept takes `next` (transaction, ordinal), and those before it are
    /// stale: dropped. Returns a socket to close: this one, if it is stale,
    /// if its number is already waiting (not a user's), or if `cap` wait
    /// and it is not the next.
    pub(super) fn insert(
        &mut self,
        (txn, ordinal): (u64, u64),
        socket: S,
        next: (u64, u64),
        cap: usize,
    ) -> Option<S> {
        while self.waiting.front().is_some_and(|w| (w.0, w.1) < next) {
            self.waiting.pop_front();
        }
        if (txn, ordinal) < next {
            return Some(socket);
        }
        let at = self
            .waiting
            .partition_point(|w| (w.0, w.1) < (txn, ordinal));
        if self
            .waiting
            .get(at)
            .is_some_and(|w| (w.0, w.1) == (txn, ordinal))
        {
            return Some(socket);
        }
        if (txn, ordinal) != next && self.len() >= cap {
            if self.waiting.len() < cap + MAX_REFUSED {
                self.waiting.insert(at, (txn, ordinal, None));
            }
            return Some(socket);
        }
        self.waiting.insert(at, (txn, ordinal, Some(socket)));
        None
    }

    /// Socket `ordinal` of transaction `txn`, if it came. Those before it
    /// are stale: dropped (closed).
    pub(super) fn take(&mut self, txn: u64, ordinal: u64) -> Taken<S> {
        while self
            .waiting
            .front()
            .is_some_and(|w| (w.0, w.1) < (txn, ordinal))
        {
            self.waiting.pop_front();
        }
        if self
            .waiting
            .front()
            .is_none_or(|w| (w.0, w.1) != (txn, ordinal))
        {
            return Taken::NotYet;
        }
        match self.waiting.pop_front().and_then(|w| w.2) {
            Some(s) => Taken::Socket(s),
            None => Taken::Refused,
        }
    }
}

/// The socket settings of a profile connection (`wndsz` sets both buffers).
pub(super) fn conn_settings(o: &ConnOptions) -> Settings {
    let wnd = o.wndsz.map(|w| usize::try_from(w).unwrap_or(usize::MAX));
    Settings {
        nodelay: o.nodelay,
        sndbuf: wnd,
        rcvbuf: wnd,
        cc: o.cc.clone(),
        ..Settings::default()
    }
}

/// A profile's worker as the one accept loop sees it.
struct Accepting<'a> {
    kind: &'a mut ProfileKind,
    core: &'a mut Core,
}

impl Behind for Accepting<'_> {
    type Greeting = SessionPreamble;

    fn listener(&self) -> Option<&Listener> {
        self.kind.listener.as_ref()
    }

    fn retry(&mut self) -> &mut AcceptRetry {
        &mut self.kind.accept_retry
    }

    fn gate(&mut self) -> &mut PreambleGate {
        &mut self.kind.gate
    }

    /// Under token `PENDING_BASE + key`, readable: through the gate, it
    /// leaves the poll until its user's accept takes it.
    fn keep(&mut self, mut conn: Conn, _now: Instant) -> Option<usize> {
        let entry = self.kind.pending.vacant_entry();
        let key = entry.key();
        self.core
            .driver()
            .registry()
            .register(conn.source(), Token(PENDING_BASE + key), Interest::READABLE)
            .ok()?;
        entry.insert(conn);
        Some(key)
    }

    fn close(&mut self, key: usize) {
        self.kind.drop_pending(self.core, key);
    }

    fn greet(&mut self, key: usize, _now: Instant) {
        self.kind.preamble(self.core, key);
    }
}

/// A failure of the step on connection `c`, in the user's words.
pub(super) fn failed(c: usize, why: impl Into<String>) -> Option<Told> {
    Some(Told::Failed(c, io::Error::other(why.into())))
}

impl ProfileKind {
    pub(super) fn connect(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        now: Instant,
    ) -> Option<Told> {
        let udp = Self::user(core, u).script().conn_options[c].udp;
        // A UDP registration under way goes on.
        if self.registering(u, c) {
            return self.await_udp_answer(core, u, c, now);
        }
        // A connect under way goes on; otherwise this one opens another
        // socket, the earlier ones staying open (as uperf's connect does).
        if !self.connecting(u, c) {
            if udp {
                return self.connect_udp(core, u, c, now);
            }
            if self.endpoints.is_empty() {
                return failed(c, "no endpoint to connect to");
            }
            let user = Self::user(core, u);
            let id = user.id;
            let addr = self.endpoints[id as usize % self.endpoints.len()];
            let settings = conn_settings(&user.script().conn_options[c]);
            let conn = match tcp_connect(addr, &settings) {
                Ok(conn) => conn,
                Err(e) => return failed(c, format!("connect to {addr}: {e}")),
            };
            // The transaction it is opened in (an accepting side takes only
            // its current transaction's), the connection, and its number
            // among the connection's connects in the transaction: the
            // server's n-th accept takes the n-th.
            let Ok(txn) = u16::try_from(user.txn()) else {
                return failed(c, "more transactions than a preamble can number");
            };
            let seq = ConnectSeq::new(txn, c as u8, self.next_ordinal(core, u, c));
            let pre = Preamble {
                token: self.token,
                flow: id,
                seq: seq.pack(),
            }
            .encode();
            if let Err(e) = core.attach(u, c, conn) {
                return failed(c, format!("register a connection: {e}"));
            }
            self.sockets[u][c].push(SocketState::Tcp {
                dial: Some(Dial::new(&pre)),
            });
            return None;
        }
        let Some(SocketState::Tcp { dial }) = self.sockets[u][c].last_mut() else {
            return None;
        };
        if let Some(d) = dial {
            let conn = &mut core.slots[u].link(c)?.conn;
            match d.advance(conn) {
                Ok(false) => return None,
                Ok(true) => *dial = None,
                Err(e) => {
                    self.drop_link(core, u, c);
                    let why = match e {
                        DialError::Connect(e) => format!("connect: {e}"),
                        DialError::Greet(e) => format!("send the preamble: {e}"),
                    };
                    return failed(c, why);
                }
            }
        }
        self.count_tcp(core, u, c);
        self.established(core, u, c);
        Some(Told::Connected(c))
    }

    /// User `u` opened (client) or took (server) one more TCP socket on
    /// connection `c` in its transaction: the next is numbered one higher.
    fn count_tcp(&mut self, core: &Core, u: usize, c: usize) {
        let txn = Self::user(core, u).txn() as u64;
        let count = &mut self.tcp_count[u][c];
        if count.0 != txn {
            *count = (txn, 0);
        }
        count.1 += 1;
    }

    /// A TCP connection of user `u` on connection `c` is open (the client
    /// sent its preamble, the server took it).
    pub(super) fn established(&mut self, core: &mut Core, u: usize, c: usize) {
        self.connections += 1;
        if self.socket.is_none() {
            if let Some(l) = core.slots[u].link(c) {
                let conn = &l.conn;
                self.socket = Some(SocketFacts::read(conn.as_raw_fd(), conn.local_ip(), true));
            }
        }
    }

    /// The number of the next TCP connection of user `u` on connection
    /// `c` in its current transaction, from 1: one more than those
    /// established in it (a user's connects on one connection follow one
    /// another, and one that fails is not counted).
    pub(super) fn next_ordinal(&self, core: &Core, u: usize, c: usize) -> u64 {
        let txn = Self::user(core, u).txn() as u64;
        match self.tcp_count[u][c] {
            (t, n) if t == txn => n + 1,
            _ => 1,
        }
    }

    /// Whether connection `c`'s newest socket is a connect under way.
    pub(super) fn connecting(&self, u: usize, c: usize) -> bool {
        matches!(
            self.sockets[u][c].last(),
            Some(SocketState::Tcp { dial: Some(_) })
        )
    }

    /// Closes connection `c`'s newest socket.
    pub(super) fn drop_link(&mut self, core: &mut Core, u: usize, c: usize) {
        if let Some(l) = self.sockets[u][c].pop() {
            if l.socket() {
                core.close(u, c, false);
            }
        }
    }

    pub(super) fn take_accepted(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        _now: Instant,
    ) -> Option<Told> {
        let user = Self::user(core, u);
        let txn = user.txn() as u64;
        if user.script().conn_options[c].udp {
            // A datagram "connection" is there once the client registered it
            // in this transaction.
            let addr = self.peers.get_mut(&(u, c)).and_then(|r| r.take(txn))?;
            self.sockets[u][c].push(SocketState::Peer { addr, seq: 0 });
            self.connections += 1;
            return Some(Told::Accepted(c));
        }
        // The socket the client numbered as this accept; those opened for
        // an earlier transaction (the other side ran ahead of a timed
        // transaction's end) are stale and closed.
        let ordinal = ConnectSeq::new(0, 0, self.next_ordinal(core, u, c)).ordinal;
        let taken = match self.accepted.get_mut(&(u, c)) {
            Some(q) => q.take(txn, ordinal),
            None => Taken::NotYet,
        };
        let conn = match taken {
            Taken::Socket(s) => s,
            Taken::NotYet => return None,
            Taken::Refused => {
                // Counted, so that the next accept takes the next socket.
                self.count_tcp(core, u, c);
                return failed(
                    c,
                    "the server closed this connection at once: more of its sockets waited \
                     to be accepted than the user holds open",
                );
            }
        };
        // Counted before its options, which may fail (canfail goes on).
        self.count_tcp(core, u, c);
        let settings = conn_settings(&Self::user(core, u).script().conn_options[c]);
        if let Err(e) = conn.apply(&settings) {
            return failed(c, format!("socket options: {e}"));
        }
        if let Err(e) = core.attach(u, c, conn) {
            return failed(c, format!("register a connection: {e}"));
        }
        self.sockets[u][c].push(SocketState::Tcp { dial: None });
        self.established(core, u, c);
        Some(Told::Accepted(c))
    }

    pub(super) fn disconnect(
        &mut self,
        core: &mut Core,
        u: usize,
        c: usize,
        now: Instant,
    ) -> Option<Told> {
        let Some(last) = self.sockets[u][c].last() else {
            // uperf: "Connection already closed".
            return failed(c, "the connection is not open");
        };
        let tcp = matches!(last, SocketState::Tcp { .. });
        if !tcp || self.role == Role::Client {
            // Datagrams have no close to wait for.
            self.drop_link(core, u, c);
            return Some(Told::Closed(c));
        }
        // The server closes once the client has: read to its EOF.
        {
            let generic::Core { slots, counts, .. } = &mut *core;
            let Some(l) = slots[u].link(c) else {
                return Some(Told::Closed(c));
            };
            let closed = drain_to_close(&mut l.conn, &mut self.buf, |n| {
                counts.drained(n as u64, now)
            });
            if !closed {
                return None;
            }
        }
        self.drop_link(core, u, c);
        Some(Told::Closed(c))
    }

    /// Accepts every connection waiting, behind the gate.
    pub(super) fn accept_all(&mut self, core: &mut Core) {
        accept_behind(&mut Accepting { kind: self, core });
    }

    /// Reads a new connection's preamble and hands it to its user.
    pub(super) fn preamble(&mut self, core: &mut Core, key: usize) {
        let Some(conn) = self.pending.get_mut(key) else {
            return;
        };
        let pre = match self.gate.read(key, conn) {
            Presented::Waiting => return,
            Presented::Refused => {
                self.drop_pending(core, key);
                return;
            }
            Presented::Through(p) => p,
        };
        let mut conn = self.pending.remove(key);
        let _ = core.driver().registry().deregister(conn.source());
        let id = pre.flow as usize;
        if id % self.workers != self.worker_index(core) {
            return;
        }
        let u = id / self.workers;
        let seq = ConnectSeq::unpack(pre.seq);
        let (txn, c) = (u64::from(seq.txn), usize::from(seq.conn));
        if u >= self.users || c >= Self::user(core, u).conns() {
            return;
        }
        // No more may wait than the user's connection holds open, but
        // always the socket its user takes next.
        let user = Self::user(core, u);
        let most = usize::try_from(user.script().peaks[c])
            .unwrap_or(usize::MAX)
            .max(ACCEPTED_PER_SLOT);
        let next = (
            user.txn() as u64,
            ConnectSeq::new(0, 0, self.next_ordinal(core, u, c)).ordinal,
        );
        // It waits off the poll: the user's accept registers it (and is
        // told at once if it is readable by then).
        let queue = self.accepted.entry((u, c)).or_default();
        if let Some(refused) = queue.insert((txn, seq.ordinal), conn, next, most) {
            drop(refused);
            return;
        }
        core.driver().again(u);
    }

    /// Closes a connection that has not presented its preamble.
    pub(super) fn drop_pending(&mut self, core: &mut Core, key: usize) {
        self.gate.forget(key);
        if let Some(mut conn) = self.pending.try_remove(key) {
            let _ = core.driver().registry().deregister(conn.source());
        }
    }

    /// Closes the connections whose time for their preamble ran out.
    pub(super) fn expire_pending(&mut self, core: &mut Core, now: Instant) {
        while let Some(key) = self.gate.expired(now) {
            self.drop_pending(core, key);
        }
    }
}

/// How many accepted connections may wait for their preamble at once on a
/// worker carrying `users`: twice the connections they hold open at once,
/// and some.
pub(super) fn pending_cap(users: &[User]) -> usize {
    let conns = users.iter().fold(0usize, |n, u| {
        let peaks = u.script().peaks.iter().map(|p| *p as usize);
        n.saturating_add(peaks.fold(0usize, usize::saturating_add))
    });
    crate::io::gate::preamble_cap(conns, 0)
}

/// A preamble numbers a connection in 8 bits.
const _: () = assert!(super::MAX_CONNS <= 1 << 8);

#[cfg(test)]
mod tests {
    use super::{Accepted, Taken};

    #[test]
    fn each_accept_takes_the_socket_numbered_as_it_whatever_order_preambles_complete_in() {
        let mut a = Accepted::default();
        // The second socket's preamble completes before the first's: the
        // first accept waits for the first socket.
        assert_eq!(a.insert((0, 2), "second", (0, 1), 2), None);
        assert_eq!(a.take(0, 1), Taken::NotYet);
        assert_eq!(a.len(), 1, "the second waits for its turn");
        assert_eq!(a.insert((0, 1), "first", (0, 1), 2), None);
        assert_eq!(a.take(0, 1), Taken::Socket("first"));
        assert_eq!(a.take(0, 2), Taken::Socket("second"));
        assert_eq!(a.take(0, 3), Taken::NotYet);
    }

    #[test]
    fn a_number_already_waiting_or_already_taken_is_closed() {
        let mut a = Accepted::default();
        assert_eq!(a.insert((1, 1), "one", (1, 1), 2), None);
        assert_eq!(a.insert((1, 1), "again", (1, 1), 2), Some("again"));
        assert_eq!(a.insert((2, 1), "next transaction's", (1, 1), 2), None);
        assert_eq!(a.len(), 2);
        assert_eq!(a.take(1, 1), Taken::Socket("one"));
        // Once the user is past it, a late repeat is stale.
        assert_eq!(a.insert((1, 1), "late", (1, 2), 2), Some("late"));
    }

    #[test]
    fn sockets_of_an_earlier_transaction_or_number_are_dropped() {
        let mut a = Accepted::default();
        // The client ran ahead of a timed transaction's end: its last
        // socket of transaction 1 was never taken.
        assert_eq!(a.insert((1, 7), "stale", (1, 7), 2), None);
        assert_eq!(a.insert((2, 1), "current", (1, 7), 2), None);
        assert_eq!(a.take(2, 1), Taken::Socket("current"));
        assert_eq!(a.len(), 0);
        assert_eq!(a.insert((2, 3), "third", (2, 2), 2), None);
        assert_eq!(a.take(2, 2), Taken::NotYet);
        assert_eq!(a.len(), 1, "the third waits");
    }

    #[test]
    fn the_next_socket_always_gets_in_and_one_refused_fails_its_accept_instead_of_hanging() {
        let mut a = Accepted::default();
        // Two later sockets fill the cap before the one the user needs.
        assert_eq!(a.insert((0, 2), "second", (0, 1), 2), None);
        assert_eq!(a.insert((0, 3), "third", (0, 1), 2), None);
        assert_eq!(a.insert((0, 4), "fourth", (0, 1), 2), Some("fourth"));
        assert_eq!(
            a.insert((0, 1), "first", (0, 1), 2),
            None,
            "the next gets in"
        );
        assert_eq!(a.take(0, 1), Taken::Socket("first"));
        assert_eq!(a.take(0, 2), Taken::Socket("second"));
        assert_eq!(a.take(0, 3), Taken::Socket("third"));
        // The fourth was refused: its accept learns so at once.
        assert_eq!(a.take(0, 4), Taken::Refused);
        assert_eq!(a.take(0, 5), Taken::NotYet);
    }

    #[test]
    fn refused_numbers_are_remembered_within_a_bound() {
        let mut a = Accepted::default();
        assert_eq!(a.insert((0, 2), "kept", (0, 1), 1), None);
        for n in 3..(3 + super::MAX_REFUSED as u64 + 10) {
            assert_eq!(a.insert((0, n), "more", (0, 1), 1), Some("more"));
        }
        assert_eq!(a.len(), 1);
        assert!(a.waiting.len() <= 1 + super::MAX_REFUSED);
    }
}
