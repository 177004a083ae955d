//! The daemon's lobby: every control connection waits here, on one event
//! loop (the engine's [`Driver`], turned by [`driver::run`]), until its
//! handshake is over; only then does it get a thread of its own.
//!
//! The lobby accepts, reads each connection's frames as they come and
//! writes its welcome without blocking: the handshake itself is
//! [`Stranger`]'s, bytes in and bytes out. A connection in its handshake
//! holds a slot of the handshake table ([`Handshakes`]: at most
//! `--max-handshakes`, a quarter from one address, the oldest pushed out
//! for a new one), at most one frame of 4 KiB read and at most
//! [`OUTBOX_MAX`] bytes to send, for at most the handshake timeout from its
//! accept. One whose handshake fails is sent the error, shut for writing,
//! and read for at most [`LINGER`] more (so that closing with unread bytes
//! does not reset it before its client reads the error), still in its
//! slot. One through its handshake takes a session slot (or is refused on
//! the loop when there is none) and is handed, with what it sent past the
//! handshake, to a thread of its own ([`serve_session`]).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_engine::driver::{self, Driver, Flows, Turn};
use linkperf_engine::io::{accept_next, Accept, AcceptRetry, Listener};
use linkperf_engine::worker::WAKER;
use linkperf_wire::{encode_server, ErrorCode, FrameDecoder, LimitKind};
use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Token};

use crate::proto::server::fail::{fail, shutting_down, Fail};
use crate::proto::server::stranger::{Came, Door, Stranger};
use crate::proto::server::table::{per_source, Handshakes};
use crate::shell::daemon::{DaemonConfig, DaemonState, Setting};
use crate::shell::key::new_challenge;
use crate::shell::server::{serve_session, told, Shaken, LINGER, LINGER_BYTES};

const LISTENER: Token = Token(0);
const FIRST_CONN: usize = 1;
/// Most connections accepted in one go before the others' bytes are read.
const ACCEPT_BATCH: usize = 64;
/// Longest sleep with nothing due (a shutdown wakes the loop at once).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Most bytes waiting to be sent to one connection in its handshake: a
/// welcome (with an agent's identity, about 1 KiB at most) and an error. A
/// peer that leaves more unread is dropped.
const OUTBOX_MAX: usize = 8 * 1024;
/// The read buffer all connections share.
const SCRATCH: usize = 16 * 1024;
/// Log lines about connections in their handshake in a second; those past
/// it are counted, and the count logged once the second is over.
const LOG_LINES_PER_SECOND: u32 = 20;

/// Serves the lobby on `listener` until the daemon shuts down; the
/// sessions it hands over run on. An error is the event wait's.
pub(crate) fn serve(
    driver: Driver,
    mut listener: TcpListener,
    config: &Arc<DaemonConfig>,
    state: &Arc<DaemonState>,
) -> io::Result<()> {
    driver
        .registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let listener = Listener::Tcp(listener);
    let door = Door {
        key: config.auth_key.as_ref(),
        identity: config.identity.as_ref(),
        limit: config.handshake_timeout,
        max_frame: config.max_frame,
        limit_setting: config.name(Setting::HandshakeTimeout),
        frame_setting: config.name(Setting::MaxFrame),
    };
    let mut lobby = Lobby {
        driver,
        listener,
        config,
        state,
        door,
        table: Handshakes::new(config.max_handshakes),
        conns: HashMap::new(),
        next_key: FIRST_CONN,
        accept_more: false,
        retry_accept: AcceptRetry::default(),
        scratch: vec![0; SCRATCH].into_boxed_slice(),
        log: LogBudget::default(),
    };
    driver::run(&mut lobby, &mut Events::with_capacity(1024))
}

/// Bytes waiting to be sent to one connection, at most [`OUTBOX_MAX`].
#[derive(Debug, Default)]
struct Outbox {
    buf: Vec<u8>,
}

/// The peer left more than [`OUTBOX_MAX`] unread.
#[derive(Debug, PartialEq, Eq)]
struct Overflow;

impl Outbox {
    /// Queues `bytes`, unless that would pass [`OUTBOX_MAX`].
    fn queue(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        if self.buf.len() + bytes.len() > OUTBOX_MAX {
            return Err(Overflow);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Writes what it can without blocking: whether all of it is sent.
    fn flush(&mut self, w: &mut impl Write) -> io::Result<bool> {
        while !self.buf.is_empty() {
            match w.write(&self.buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// How far a connection in the lobby is.
enum Phase<'k> {
    /// In its handshake.
    Shaking(Stranger<'k>),
    /// Through it: once what is queued is sent, its session's thread takes
    /// it, with what came past the handshake.
    Through(FrameDecoder),
    /// Its handshake failed: once the error is sent it is shut for writing,
    /// and what still comes is read and dropped, at most `left` bytes more.
    Closing { shut: bool, left: usize },
}

/// A connection in the lobby.
struct Conn<'k> {
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    phase: Phase<'k>,
    outbox: Outbox,
    /// Registered for writability too: a write would have blocked.
    writable: bool,
}

/// What a connection's turn came to.
#[derive(Debug)]
enum Next {
    /// Nothing more until its next event.
    Wait,
    /// Its handshake failed.
    Fail(Fail),
    /// Through its handshake, all of it sent.
    HandOver,
    /// Closed: why, for the log (`None`: nothing worth a line).
    Close(Option<&'static str>),
}

impl Conn<'_> {
    /// Reads, writes and decides what it can without blocking.
    fn advance(&mut self, key: usize, scratch: &mut [u8], registry: &mio::Registry) -> Next {
        if let Phase::Shaking(s) = &mut self.phase {
            let Ok((came, said)) = read_handshake(&mut self.stream, s, scratch) else {
                return Next::Close(None);
            };
            // The welcome goes first, even when what followed it failed.
            if self.outbox.queue(&said).is_err() {
                return Next::Close(Some("left too much unread"));
            }
            match came {
                Came::Waiting => {}
                Came::Through => self.through(),
                Came::Failed(f) => return Next::Fail(f),
            }
        }
        match self.outbox.flush(&mut self.stream) {
            Ok(true) => {}
            Ok(false) => {
                if !self.writable {
                    let both = Interest::READABLE | Interest::WRITABLE;
                    self.writable = true;
                    if registry
                        .reregister(&mut self.stream, Token(key), both)
                        .is_err()
                    {
                        return Next::Close(None);
                    }
                }
                return Next::Wait;
            }
            Err(_) => return Next::Close(None),
        }
        match &mut self.phase {
            Phase::Shaking(_) => Next::Wait,
            Phase::Through(_) => Next::HandOver,
            Phase::Closing { shut, left } => {
                if !*shut {
                    *shut = true;
                    let _ = self.stream.shutdown(std::net::Shutdown::Write);
                }
                linger(&mut self.stream, scratch, left)
            }
        }
    }

    /// Its handshake is over: what came past it is the session's.
    fn through(&mut self) {
        let closing = Phase::Closing {
            shut: false,
            left: 0,
        };
        if let Phase::Shaking(s) = std::mem::replace(&mut self.phase, closing) {
            self.phase = Phase::Through(s.into_rest());
        }
    }
}

/// Reads `s`'s bytes as far as they have come: what they came to, and
/// what to send. `Err`: the socket failed.
fn read_handshake(
    stream: &mut TcpStream,
    s: &mut Stranger<'_>,
    scratch: &mut [u8],
) -> Result<(Came, Vec<u8>), ()> {
    let mut said = Vec::new();
    loop {
        let room = s.room().min(scratch.len());
        if room == 0 {
            // Only past the handshake, which returned already.
            return Ok((Came::Waiting, said));
        }
        match stream.read(&mut scratch[..room]) {
            Ok(0) => return Ok((Came::Failed(s.closed()), said)),
            Ok(n) => match s.heard(&scratch[..n], &mut said) {
                Came::Waiting => {}
                came => return Ok((came, said)),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((Came::Waiting, said)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                return Ok((Came::Failed(s.closed()), said))
            }
            Err(_) => return Err(()),
        }
    }
}

/// Reads and drops what a failed connection still sends, at most `left`
/// bytes more: closed at its end, a failure, or when `left` runs out.
fn linger(stream: &mut impl Read, scratch: &mut [u8], left: &mut usize) -> Next {
    loop {
        if *left == 0 {
            return Next::Close(None);
        }
        let n = scratch.len().min(*left);
        match stream.read(&mut scratch[..n]) {
            Ok(0) => return Next::Close(None),
            Ok(n) => *left -= n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close(None),
        }
    }
}

/// Log lines about connections in their handshake: at most
/// [`LOG_LINES_PER_SECOND`] a second, so that a flood of connections does
/// not flood the log (nor stall the loop on a slow stderr); those left out
/// are counted, and the count told once their second is over.
#[derive(Debug, Default)]
struct LogBudget {
    /// When the current second began.
    since: Option<Instant>,
    said: u32,
    left_out: u64,
}

impl LogBudget {
    /// Whether a line may be logged at `now` (call [`LogBudget::left_out`]
    /// first).
    fn line(&mut self, now: Instant) -> bool {
        if self.since.is_none_or(|s| now >= s + Duration::from_secs(1)) {
            self.since = Some(now);
            self.said = 0;
        }
        if self.said < LOG_LINES_PER_SECOND {
            self.said += 1;
            true
        } else {
            self.left_out += 1;
            false
        }
    }

    /// How many lines were left out, once their second is over at `now`.
    fn left_out(&mut self, now: Instant) -> Option<u64> {
        let over = self.since? + Duration::from_secs(1);
        if self.left_out == 0 || now < over {
            return None;
        }
        self.since = None;
        Some(std::mem::take(&mut self.left_out))
    }

    /// When a count of lines left out is due.
    fn due(&self) -> Option<Instant> {
        (self.left_out > 0)
            .then_some(self.since)
            .flatten()
            .map(|s| s + Duration::from_secs(1))
    }
}

/// The lobby: the control listener and the connections in their handshake.
struct Lobby<'a> {
    driver: Driver,
    listener: Listener,
    config: &'a Arc<DaemonConfig>,
    state: &'a Arc<DaemonState>,
    door: Door<'a>,
    table: Handshakes,
    conns: HashMap<usize, Conn<'a>>,
    next_key: usize,
    /// The last accept stopped at its batch: accept more next turn.
    accept_more: bool,
    retry_accept: AcceptRetry,
    scratch: Box<[u8]>,
    log: LogBudget,
}

impl Flows for Lobby<'_> {
    fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    fn turn(&mut self, now: Instant) -> Turn {
        if self.state.shutting_down() {
            self.close_all();
            return Turn::Stop;
        }
        if self.retry_accept.due(now) || self.accept_more {
            self.accept(now);
        }
        while let Some(key) = self.table.due(now) {
            self.expire(key, now);
        }
        self.tell_left_out(now);
        if self.accept_more {
            return Turn::Wait(Duration::ZERO);
        }
        let wake = [
            self.table.next_deadline(),
            self.retry_accept.deadline(),
            self.log.due(),
        ]
        .into_iter()
        .flatten()
        .fold(now + IDLE_WAIT, Instant::min);
        Turn::Wait(wake.saturating_duration_since(now))
    }

    fn event(&mut self, event: &Event, now: Instant) {
        match event.token() {
            LISTENER => self.accept(now),
            Token(key) => self.progress(key, now),
        }
    }
}

impl<'a> Lobby<'a> {
    /// Accepts what waits, at most [`ACCEPT_BATCH`] this turn.
    fn accept(&mut self, now: Instant) {
        self.accept_more = false;
        for _ in 0..ACCEPT_BATCH {
            let stream = match accept_next(&self.listener) {
                Accept::Conn(linkperf_engine::io::Conn::Tcp(stream)) => stream,
                Accept::Conn(_) => continue,
                Accept::Drained => return,
                Accept::Stopped(_) => {
                    // Out of descriptors or similar: the backlog waits a
                    // moment (the handshakes ending free some).
                    self.retry_accept.stopped(now);
                    return;
                }
            };
            // Reset before it was taken: gone.
            if let Ok(peer) = stream.peer_addr() {
                self.admit(stream, peer, now);
            }
        }
        self.accept_more = true;
    }

    /// A key no connection holds.
    fn new_key(&mut self) -> usize {
        loop {
            let key = self.next_key;
            self.next_key = key.wrapping_add(1).max(FIRST_CONN);
            if key != WAKER.0 && !self.conns.contains_key(&key) {
                return key;
            }
        }
    }

    /// A new connection begins its handshake: it takes a slot of the
    /// table (pushing out the oldest when full), and what it sent with its
    /// connection is read at once.
    fn admit(&mut self, mut stream: TcpStream, peer: SocketAddr, now: Instant) {
        let key = self.new_key();
        if self
            .driver
            .registry()
            .register(&mut stream, Token(key), Interest::READABLE)
            .is_err()
        {
            return;
        }
        let id = self.state.next_session.fetch_add(1, Ordering::Relaxed) + 1;
        let challenge = self.door.key.map(|_| new_challenge()).transpose();
        let (challenge, failed) = match challenge {
            Ok(c) => (c, None),
            Err(e) => (
                None,
                Some(fail(ErrorCode::Internal, format!("random challenge: {e}"))),
            ),
        };
        let stranger = Stranger::new(self.door, id, now, challenge);
        for old in self.table.admit(key, peer.ip(), stranger.deadline()) {
            self.push_out(old, now);
        }
        self.conns.insert(
            key,
            Conn {
                stream,
                peer,
                id,
                phase: Phase::Shaking(stranger),
                outbox: Outbox::default(),
                writable: false,
            },
        );
        match failed {
            Some(f) => self.fail(key, f, now),
            None => self.progress(key, now),
        }
    }

    /// Moves connection `key` on as far as it goes without blocking.
    fn progress(&mut self, key: usize, now: Instant) {
        // Each round either ends or moves the connection to a later phase.
        for _ in 0..4 {
            let Some(conn) = self.conns.get_mut(&key) else {
                return;
            };
            match conn.advance(key, &mut self.scratch, self.driver.registry()) {
                Next::Wait => return,
                Next::Fail(f) => self.fail(key, f, now),
                Next::HandOver => match self.hand_over(key) {
                    Ok(()) => return,
                    Err(f) => self.fail(key, f, now),
                },
                Next::Close(why) => {
                    if let Some(why) = why {
                        self.say_of(key, now, why);
                    }
                    self.close(key);
                    return;
                }
            }
        }
    }

    /// Connection `key`'s handshake failed: it is logged, sent the error,
    /// and closed within [`LINGER`].
    fn fail(&mut self, key: usize, f: Fail, now: Instant) {
        let words = told(&f, self.config);
        self.say_of(key, now, &words);
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        if matches!(conn.phase, Phase::Closing { .. }) {
            return;
        }
        conn.phase = Phase::Closing {
            shut: false,
            left: LINGER_BYTES,
        };
        if conn.outbox.queue(&encode_server(&f.message())).is_err() {
            self.close(key);
            return;
        }
        self.table.set_deadline(key, now + LINGER);
    }

    /// Connection `key`'s deadline passed: one in its handshake is late,
    /// one closing (or not reading its welcome) is closed.
    fn expire(&mut self, key: usize, now: Instant) {
        let Some(conn) = self.conns.get(&key) else {
            self.table.remove(key);
            return;
        };
        match &conn.phase {
            Phase::Shaking(s) => {
                let late = s.late();
                self.fail(key, late, now);
                self.progress(key, now);
            }
            Phase::Through(_) => {
                self.say_of(
                    key,
                    now,
                    "left its welcome unread past the handshake timeout",
                );
                self.close(key);
            }
            Phase::Closing { .. } => self.close(key),
        }
    }

    /// Connection `key` is through its handshake and has been sent all it
    /// was to be sent: it takes a session slot and is handed to a thread of
    /// its own (closed, and logged, if none can be started). `Err`: no
    /// session slot is free; it stays in the lobby to be told so.
    fn hand_over(&mut self, key: usize) -> Result<(), Fail> {
        let config = self.config;
        if !self.state.take_session(config.max_sessions) {
            return Err(fail(
                ErrorCode::Limit,
                format!(
                    "the server is already serving {} sessions, its {}; try again later",
                    config.max_sessions,
                    config.name(Setting::Limit(LimitKind::Sessions))
                ),
            ));
        }
        let Some(mut conn) = self.conns.remove(&key) else {
            self.state.sessions.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        };
        self.table.remove(key);
        let _ = self.driver.registry().deregister(&mut conn.stream);
        let Phase::Through(rest) = conn.phase else {
            self.state.sessions.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        };
        let stream: std::net::TcpStream = conn.stream.into();
        if stream.set_nonblocking(false).is_err() {
            self.state.sessions.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        }
        let id = conn.id;
        let shaken = Shaken { stream, rest, id };
        let (config, state) = (Arc::clone(self.config), Arc::clone(self.state));
        self.state.threads.up();
        let spawned = std::thread::Builder::new()
            .name(format!("lp-session-{id}"))
            .spawn(move || {
                serve_session(shaken, &config, &state);
                state.threads.down();
            });
        if let Err(e) = spawned {
            self.state.threads.down();
            self.state.sessions.fetch_sub(1, Ordering::AcqRel);
            if self.config.log {
                eprintln!("linkperf serve: session {id}: no thread for it: {e}");
            }
        }
        Ok(())
    }

    /// Connection `key` was pushed out of the full table for a newer one:
    /// it is closed (and logged), nothing sent.
    fn push_out(&mut self, key: usize, now: Instant) {
        let max = self.config.max_handshakes;
        let why = format!(
            "dropped for a newer connection: this server holds at most {max} connections in \
             their handshake, {} from one address",
            per_source(max).min(max.max(1))
        );
        self.say_of(key, now, &why);
        self.close(key);
    }

    /// Closes connection `key`.
    fn close(&mut self, key: usize) {
        self.table.remove(key);
        if let Some(mut conn) = self.conns.remove(&key) {
            let _ = self.driver.registry().deregister(&mut conn.stream);
        }
    }

    /// The daemon shuts down: every connection still in its handshake is
    /// told so, if its socket takes the words at once, and closed.
    fn close_all(&mut self) {
        let words = encode_server(&shutting_down().message());
        for (_, mut conn) in self.conns.drain() {
            if matches!(conn.phase, Phase::Shaking(_)) {
                let _ = conn.stream.write(&words);
            }
        }
        self.table.drain();
    }

    /// Logs `what` of connection `key`, within the log's budget.
    fn say_of(&mut self, key: usize, now: Instant, what: &str) {
        if !self.config.log {
            return;
        }
        let Some(conn) = self.conns.get(&key) else {
            return;
        };
        let (id, peer) = (conn.id, conn.peer);
        self.tell_left_out(now);
        if self.log.line(now) {
            eprintln!("linkperf serve: session {id} from {peer}: {what}");
        }
    }

    /// Logs how many lines the budget left out, once their second is over.
    fn tell_left_out(&mut self, now: Instant) {
        if let Some(n) = self.log.left_out(now) {
            eprintln!(
                "linkperf serve: {n} more control connections ended in their handshake within \
                 that second (not logged one by one)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes `room` bytes, then would block.
    struct Narrow {
        got: Vec<u8>,
        room: usize,
        fail: bool,
    }

    impl Write for Narrow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.fail {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.room).min(3);
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.room -= n;
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_outbox_is_bounded_and_sends_what_the_socket_takes_in_order() {
        let mut o = Outbox::default();
        o.queue(b"welcome").unwrap();
        assert_eq!(o.queue(&vec![0; OUTBOX_MAX]), Err(Overflow));
        o.queue(b", error").unwrap();
        let mut sock = Narrow {
            got: Vec::new(),
            room: 5,
            fail: false,
        };
        assert!(!o.flush(&mut sock).unwrap(), "the socket took 5 bytes");
        assert_eq!(sock.got, b"welco");
        sock.room = 100;
        assert!(o.flush(&mut sock).unwrap());
        assert_eq!(sock.got, b"welcome, error");
        assert!(o.flush(&mut sock).unwrap(), "nothing left");
        o.queue(b"x").unwrap();
        sock.fail = true;
        assert!(o.flush(&mut sock).is_err());
    }

    /// Bytes to read, then would block or end.
    struct Coming {
        bytes: usize,
        end: bool,
    }

    impl Read for Coming {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.bytes == 0 {
                return if self.end {
                    Ok(0)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
            let n = buf.len().min(self.bytes);
            self.bytes -= n;
            Ok(n)
        }
    }

    #[test]
    fn lingering_reads_what_comes_until_its_end_or_its_bytes_run_out() {
        let mut scratch = [0u8; 64];
        let mut left = 1000;
        let mut quiet = Coming {
            bytes: 100,
            end: false,
        };
        assert!(matches!(
            linger(&mut quiet, &mut scratch, &mut left),
            Next::Wait
        ));
        assert_eq!(left, 900);
        let mut ended = Coming {
            bytes: 10,
            end: true,
        };
        assert!(matches!(
            linger(&mut ended, &mut scratch, &mut left),
            Next::Close(None)
        ));
        let mut endless = Coming {
            bytes: usize::MAX,
            end: false,
        };
        assert!(matches!(
            linger(&mut endless, &mut scratch, &mut left),
            Next::Close(None)
        ));
        assert_eq!(left, 0);
    }

    #[test]
    fn the_log_says_twenty_lines_a_second_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut log = LogBudget::default();
        assert_eq!(log.due(), None);
        let said = (0..100).filter(|_| log.line(t0)).count();
        assert_eq!(said, LOG_LINES_PER_SECOND as usize);
        let second = t0 + Duration::from_secs(1);
        assert_eq!(log.due(), Some(second));
        assert_eq!(log.left_out(t0 + Duration::from_millis(999)), None);
        assert_eq!(log.left_out(second), Some(80));
        assert_eq!(log.left_out(second), None);
        assert_eq!(log.due(), None);
        // A new second, a new budget.
        assert!(log.line(second));
        assert_eq!(log.left_out(second + Duration::from_secs(5)), None);
    }
}
