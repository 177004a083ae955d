//! The daemon's lobby: every control connection waits here, on one event
//! loop (the engine's one [`Acceptor`], which accepts, holds the
//! connections, expires them on the lobby's deadlines and stops), until
//! its handshake is over; only then does it get a thread of its own.
//!
//! The lobby admits, reads each connection's frames as they come and
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

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_engine::worker::{Acceptor, Admission, Conns, Held};
use linkperf_protocol::{encode_server, ErrorCode, FrameDecoder, LimitKind};
use mio::net::TcpStream;

use crate::proto::server::fail::{fail, shutting_down, Fail};
use crate::proto::server::stranger::{Came, Door, Stranger};
use crate::proto::server::table::{per_source, Handshakes};
use crate::shell::daemon::{DaemonConfig, DaemonState, Setting};
use crate::shell::key::new_challenge;
use crate::shell::server::{serve_session, told, Shaken, LINGER, LINGER_BYTES};

/// Most bytes waiting to be sent to one connection in its handshake: a
/// welcome (with an agent's identity, about 1 KiB at most) and an error. A
/// peer that leaves more unread is dropped.
const OUTBOX_MAX: usize = 8 * 1024;
/// The read buffer all connections share.
const SCRATCH: usize = 16 * 1024;
/// Log lines about connections in their handshake in a second; those past
/// it are counted, and the count logged once the second is over.
const LOG_LINES_PER_SECOND: u32 = 20;

/// Serves the lobby on `acceptor` until the daemon shuts down; the
/// sessions it hands over run on. An error is the event wait's.
pub(crate) fn serve(
    acceptor: Acceptor,
    config: &Arc<DaemonConfig>,
    state: &Arc<DaemonState>,
) -> io::Result<()> {
    let door = Door {
        key: config.auth_key.as_ref(),
        identity: config.identity.as_ref(),
        limit: config.handshake_timeout,
        max_frame: config.max_frame,
        limit_setting: config.name(Setting::HandshakeTimeout),
        frame_setting: config.name(Setting::MaxFrame),
    };
    let mut lobby = Lobby {
        config,
        state,
        door,
        table: Handshakes::new(config.max_handshakes),
        scratch: vec![0; SCRATCH].into_boxed_slice(),
        log: LogBudget::default(),
    };
    acceptor.run(&mut lobby)
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

impl Held for Conn<'_> {
    fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
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
    /// Nothing more until its next event, which must come when it is
    /// writable too (a write would have blocked).
    WantWrites,
    /// Its handshake failed.
    Fail(Fail),
    /// Through its handshake, all of it sent.
    HandOver,
    /// Closed: why, for the log (`None`: nothing worth a line).
    Close(Option<&'static str>),
}

impl Conn<'_> {
    /// Reads, writes and decides what it can without blocking.
    fn advance(&mut self, scratch: &mut [u8]) -> Next {
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
                    self.writable = true;
                    return Next::WantWrites;
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

/// The lobby: what becomes of the control connections in their handshake,
/// on the engine's acceptor (which holds them, and accepts, expires and
/// stops).
struct Lobby<'a> {
    config: &'a Arc<DaemonConfig>,
    state: &'a Arc<DaemonState>,
    door: Door<'a>,
    table: Handshakes,
    scratch: Box<[u8]>,
    log: LogBudget,
}

/// The connections the lobby's acceptor holds.
type InLobby<'c, 'a> = Conns<'c, Conn<'a>>;

impl<'a> Admission for Lobby<'a> {
    type Conn = Conn<'a>;

    /// A new connection begins its handshake: it takes a slot of the
    /// table (pushing out the oldest when full), and what it sent with its
    /// connection is read at once.
    fn admit(
        &mut self,
        conns: &mut InLobby<'_, 'a>,
        key: usize,
        stream: TcpStream,
        peer: SocketAddr,
        now: Instant,
    ) {
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
            self.push_out(conns, old, now);
        }
        conns.insert(
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
            Some(f) => self.fail(conns, key, f, now),
            None => self.progress(conns, key, now),
        }
    }

    /// Moves connection `key` on as far as it goes without blocking.
    fn progress(&mut self, conns: &mut InLobby<'_, 'a>, key: usize, now: Instant) {
        // Each round either ends or moves the connection to a later phase.
        for _ in 0..4 {
            let Some(conn) = conns.get_mut(key) else {
                return;
            };
            match conn.advance(&mut self.scratch) {
                Next::Wait => return,
                Next::WantWrites => {
                    if conns.want_writes(key).is_err() {
                        self.close(conns, key);
                    }
                    return;
                }
                Next::Fail(f) => self.fail(conns, key, f, now),
                Next::HandOver => match self.hand_over(conns, key) {
                    Ok(()) => return,
                    Err(f) => self.fail(conns, key, f, now),
                },
                Next::Close(why) => {
                    if let Some(why) = why {
                        self.say_of(conns, key, now, why);
                    }
                    self.close(conns, key);
                    return;
                }
            }
        }
    }

    fn due(&mut self, now: Instant) -> Option<usize> {
        self.table.due(now)
    }

    /// Connection `key`'s deadline passed: one in its handshake is late,
    /// one closing (or not reading its welcome) is closed.
    fn expire(&mut self, conns: &mut InLobby<'_, 'a>, key: usize, now: Instant) {
        let Some(conn) = conns.get(key) else {
            self.table.remove(key);
            return;
        };
        match &conn.phase {
            Phase::Shaking(s) => {
                let late = s.late();
                self.fail(conns, key, late, now);
                self.progress(conns, key, now);
            }
            Phase::Through(_) => {
                self.say_of(
                    conns,
                    key,
                    now,
                    "left its welcome unread past the handshake timeout",
                );
                self.close(conns, key);
            }
            Phase::Closing { .. } => self.close(conns, key),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        [self.table.next_deadline(), self.log.due()]
            .into_iter()
            .flatten()
            .min()
    }

    fn turn(&mut self, now: Instant) {
        self.tell_left_out(now);
    }

    fn stopping(&self) -> bool {
        self.state.shutting_down()
    }

    /// The daemon shuts down: every connection still in its handshake is
    /// told so, if its socket takes the words at once, and closed.
    fn stop(&mut self, conns: &mut InLobby<'_, 'a>) {
        let words = encode_server(&shutting_down().message());
        for (_, mut conn) in conns.drain() {
            if matches!(conn.phase, Phase::Shaking(_)) {
                let _ = conn.stream.write(&words);
            }
        }
        self.table.drain();
    }
}

impl<'a> Lobby<'a> {
    /// Connection `key`'s handshake failed: it is logged, sent the error,
    /// and closed within [`LINGER`].
    fn fail(&mut self, conns: &mut InLobby<'_, 'a>, key: usize, f: Fail, now: Instant) {
        let words = told(&f, self.config);
        self.say_of(conns, key, now, &words);
        let Some(conn) = conns.get_mut(key) else {
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
            self.close(conns, key);
            return;
        }
        self.table.set_deadline(key, now + LINGER);
    }

    /// Connection `key` is through its handshake and has been sent all it
    /// was to be sent: it takes a session slot and is handed to a thread of
    /// its own (closed, and logged, if none can be started). `Err`: no
    /// session slot is free; it stays in the lobby to be told so.
    fn hand_over(&mut self, conns: &mut InLobby<'_, 'a>, key: usize) -> Result<(), Fail> {
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
        let Some(conn) = conns.remove(key) else {
            self.state.sessions.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        };
        self.table.remove(key);
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
    fn push_out(&mut self, conns: &mut InLobby<'_, 'a>, key: usize, now: Instant) {
        let max = self.config.max_handshakes;
        let why = format!(
            "dropped for a newer connection: this server holds at most {max} connections in \
             their handshake, {} from one address",
            per_source(max).min(max.max(1))
        );
        self.say_of(conns, key, now, &why);
        self.close(conns, key);
    }

    /// Closes connection `key`.
    fn close(&mut self, conns: &mut InLobby<'_, 'a>, key: usize) {
        self.table.remove(key);
        conns.close(key);
    }

    /// Logs `what` of connection `key`, within the log's budget.
    fn say_of(&mut self, conns: &InLobby<'_, 'a>, key: usize, now: Instant, what: &str) {
        if !self.config.log {
            return;
        }
        let Some(conn) = conns.get(key) else {
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
