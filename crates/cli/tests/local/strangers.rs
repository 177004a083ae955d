//! Strangers at the control port: connections that have not finished their
//! handshake wait on the daemon's one event loop (its lobby), not on a
//! thread each. Floods of silent and slow-drip connections from several
//! loopback addresses keep a `linkperf serve` child within a few threads of
//! its idle count and within 64 MB, while a real test beside them is
//! served; slowloris connections are closed at the handshake timeout,
//! counted from their accept, whatever they drip.
//!
//! Every load is bounded in count and in time. The flood's pace is its own
//! (a tick of [`TICK`]); what the tests wait for they are told of, through
//! channels or the server's own answers.

use crate::util;

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::util::{exclusive, run_json, shared, Server};
use linkperf_protocol::PROTOCOL_VERSION;
use linkperf_protocol::{decode_server, encode_client, ClientMessage, FrameDecoder, ServerMessage};

/// Connections of each half of the flood: silent, and slow-drip.
const FLOOD: usize = 5_000;
/// Connections each half opens a tick, and the tick: together 2,500
/// connections a second, the flood over in about 4 s.
const BATCH: usize = 25;
const TICK: Duration = Duration::from_millis(20);
/// A slow-drip connection sends a byte of a hello this often, and never
/// more than [`DRIP_BYTES`] of it: its hello never ends.
const DRIP_EVERY: Duration = Duration::from_millis(200);
const DRIP_BYTES: usize = 10;
/// Most connections each half holds open on this side at once: the server
/// holds at most 256 (its --max-handshakes), so a connection this old was
/// pushed out long ago, and the test process never runs short of
/// descriptors (2 × 600 at most, with a hard limit of a few thousand).
const HELD: usize = 600;
/// The source addresses of the flood (all on loopback): four of them fill
/// the handshake table, a quarter each. The real client comes from
/// 127.0.0.1, an address of its own.
const SOURCES: [Ipv4Addr; 4] = [
    Ipv4Addr::new(127, 0, 0, 2),
    Ipv4Addr::new(127, 0, 0, 3),
    Ipv4Addr::new(127, 0, 0, 4),
    Ipv4Addr::new(127, 0, 0, 5),
];
/// The real test starts once the flood has opened this many connections.
const TEST_AFTER: usize = 1_000;
/// What the server may hold beyond its idle self while flooded.
const MAX_EXTRA_THREADS: usize = 16;
const MAX_RSS_KB: u64 = 64 * 1024;
/// Longest any part of a test may take before it fails.
const DEADLINE: Duration = Duration::from_secs(120);

/// Connects to `to` from `source`, a local address: std cannot bind a
/// socket before connecting it, so three system calls are made by hand.
mod from_source {
    use std::io;
    use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::time::Duration;

    const AF_INET: i32 = 2;
    const SOCK_STREAM: i32 = 1;
    const SOCK_CLOEXEC: i32 = 0o2_000_000;

    /// Linux's `struct sockaddr_in`.
    #[repr(C)]
    struct SockaddrIn {
        family: u16,
        /// Network byte order.
        port: [u8; 2],
        addr: [u8; 4],
        zero: [u8; 8],
    }

    impl SockaddrIn {
        fn of(a: SocketAddrV4) -> Self {
            SockaddrIn {
                family: AF_INET as u16,
                port: a.port().to_be_bytes(),
                addr: a.ip().octets(),
                zero: [0; 8],
            }
        }
    }

    extern "C" {
        fn socket(domain: i32, ty: i32, protocol: i32) -> i32;
        fn bind(fd: i32, addr: *const SockaddrIn, len: u32) -> i32;
        fn connect(fd: i32, addr: *const SockaddrIn, len: u32) -> i32;
    }

    const LEN: u32 = std::mem::size_of::<SockaddrIn>() as u32;

    /// A connection to `to` from `source` (port chosen by the kernel),
    /// its connect waiting at most `within`.
    pub fn connect_from(
        source: Ipv4Addr,
        to: SocketAddrV4,
        within: Duration,
    ) -> io::Result<TcpStream> {
        // SAFETY: socket(2) takes plain integers; a non-negative result is
        // a descriptor no one else owns, handed to the TcpStream at once.
        let fd = unsafe { socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new socket that nothing else owns; the stream
        // closes it when dropped (on every error below too).
        let stream = unsafe { TcpStream::from_raw_fd(fd) };
        // The connect waits at most this long (SO_SNDTIMEO).
        stream.set_write_timeout(Some(within))?;
        let from = SockaddrIn::of(SocketAddrV4::new(source, 0));
        // SAFETY: `from` is a valid sockaddr_in of LEN bytes, alive for the call.
        if unsafe { bind(stream.as_raw_fd(), &from, LEN) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let to = SockaddrIn::of(to);
        // SAFETY: as for bind.
        if unsafe { connect(stream.as_raw_fd(), &to, LEN) } != 0 {
            return Err(io::Error::last_os_error());
        }
        stream.set_write_timeout(None)?;
        Ok(stream)
    }
}

pub(crate) use from_source::connect_from;

/// The first bytes of a hello, as a client would send them.
fn hello() -> Vec<u8> {
    encode_client(&ClientMessage::Hello {
        protocol_version: PROTOCOL_VERSION,
        client_version: "stranger".into(),
        challenge: None,
    })
}

/// Raises this process's open-file limit for the flood's client side: it
/// holds 2 × [`HELD`] connections at most, and the tests beside it a few.
fn enough_descriptors() {
    let wanted = 2 * HELD as u64 + 1024;
    if let Err(e) = linkperf_metrics::raise_fd_limit(wanted) {
        panic!("the flood needs {wanted} descriptors on its side: {e}");
    }
}

/// What one half of the flood did.
#[derive(Debug, Default)]
struct Tally {
    opened: usize,
    /// Connections the server closed while this side still dripped into
    /// them (pushed out of its table, or timed out).
    closed_by_server: usize,
    took: Duration,
}

/// A slow-drip connection: the next byte of the hello, and when.
struct Dripping {
    stream: TcpStream,
    sent: usize,
    next: Instant,
}

/// One half of the flood: [`FLOOD`] connections to `port` from [`SOURCES`]
/// in turn, [`BATCH`] a [`TICK`], each silent or (with `drip`) sending a
/// byte of a hello every [`DRIP_EVERY`], never all of it. At most [`HELD`]
/// stay open on this side. Says on `started` once it has opened half of
/// [`TEST_AFTER`].
fn flood(port: u16, drip: bool, started: mpsc::Sender<()>) -> Tally {
    let hello = hello();
    let t0 = Instant::now();
    let mut held: VecDeque<Dripping> = VecDeque::with_capacity(HELD + BATCH);
    let mut tally = Tally::default();
    let mut tick = t0;
    while tally.opened < FLOOD {
        assert!(t0.elapsed() < DEADLINE, "the flood took over {DEADLINE:?}");
        for _ in 0..BATCH.min(FLOOD - tally.opened) {
            let source = SOURCES[tally.opened % SOURCES.len()];
            let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
            let stream = connect_from(source, to, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("flood connection {}: {e}", tally.opened));
            tally.opened += 1;
            if tally.opened == TEST_AFTER / 2 {
                let _ = started.send(());
            }
            held.push_back(Dripping {
                stream,
                sent: 0,
                next: Instant::now(),
            });
        }
        let now = Instant::now();
        if drip {
            held.retain_mut(|d| {
                if d.sent >= DRIP_BYTES || now < d.next {
                    return true;
                }
                match d.stream.write_all(&hello[d.sent..d.sent + 1]) {
                    Ok(_) => {
                        d.sent += 1;
                        d.next = now + DRIP_EVERY;
                        true
                    }
                    Err(_) => {
                        tally.closed_by_server += 1;
                        false
                    }
                }
            });
        }
        while held.len() > HELD {
            held.pop_front();
        }
        tick += TICK;
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
    }
    tally.took = t0.elapsed();
    tally
}

/// The highest thread count and resident memory (kB) seen of `pid` until
/// `stop`, looking every 10 ms.
fn watch(pid: u32, stop: &AtomicBool) -> (usize, u64) {
    let mut peak = (0, 0);
    while !stop.load(Ordering::Acquire) {
        let (threads, rss, _) = util::proc_status(pid);
        peak = (peak.0.max(threads), peak.1.max(rss));
        std::thread::sleep(Duration::from_millis(10));
    }
    peak
}

/// A real test beside a flood of 5,000 silent and 5,000 slow-drip
/// connections to a server (with `key`, the test holds it too): the test
/// is served, and measured whole; the server stays within
/// [`MAX_EXTRA_THREADS`] of its idle thread count and under 64 MB.
fn a_flood_beside_a_test(key: Option<&Path>) {
    let _g = exclusive();
    enough_descriptors();
    let key_args: Vec<&str> = match key {
        Some(k) => vec!["--auth-key", k.to_str().expect("utf-8 key path")],
        None => vec![],
    };
    let server = Server::start(&key_args);
    let pid = server.pid();
    let (_, idle) = util::fds_and_threads(pid);
    let stop = AtomicBool::new(false);
    let (started_tx, started) = mpsc::channel();
    let (addr, port) = (server.addr(), server.port());
    let (silent, dripping, (peak_threads, peak_rss), outcome, test_took) =
        std::thread::scope(|s| {
            let watcher = s.spawn(|| watch(pid, &stop));
            let silent = {
                let tx = started_tx.clone();
                s.spawn(move || flood(port, false, tx))
            };
            let dripping = s.spawn(move || flood(port, true, started_tx));
            for _ in 0..2 {
                started
                    .recv_timeout(DEADLINE)
                    .expect("the flood did not get under way");
            }
            let t0 = Instant::now();
            let mut args = vec![
                "run",
                "-q",
                "--server",
                &addr,
                "--duration",
                "2s",
                "--warmup",
                "200ms",
            ];
            args.extend(&key_args);
            let outcome = run_json(&args);
            let test_took = t0.elapsed();
            let silent = silent.join().expect("the silent flood");
            let dripping = dripping.join().expect("the slow-drip flood");
            stop.store(true, Ordering::Release);
            let peak = watcher.join().expect("the watcher");
            (silent, dripping, peak, outcome, test_took)
        });
    let (_, rss_now, hwm) = util::proc_status(pid);
    let (code, _, err, doc) = outcome;
    let run = util::at(&doc, "/tests/0/runs/0");
    eprintln!(
        "flood of {FLOOD} silent and {FLOOD} slow-drip connections (key: {}): silent {silent:?}, \
         slow-drip {dripping:?}; server threads idle {idle}, at most {peak_threads}; VmRSS at \
         most {peak_rss} kB ({rss_now} kB after), VmHWM {hwm} kB; the real test took \
         {test_took:?}, status {}, failed checks {:?}",
        key.is_some(),
        run["status"],
        util::failed_checks(run),
    );
    assert_eq!(code, 0, "the real test beside the flood: {err}");
    util::assert_measured(run, "a test beside a flood of strangers");
    assert_eq!((silent.opened, dripping.opened), (FLOOD, FLOOD));
    assert!(
        dripping.closed_by_server > 0,
        "the server closed none of the slow-drip connections: {dripping:?}"
    );
    assert!(
        peak_threads <= idle + MAX_EXTRA_THREADS,
        "the server held {peak_threads} threads, {idle} idle"
    );
    assert!(
        hwm < MAX_RSS_KB,
        "the server's resident memory peaked at {hwm} kB"
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

#[test]
fn a_flood_of_strangers_holds_no_thread_each_and_a_test_beside_it_is_served() {
    a_flood_beside_a_test(None);
}

#[test]
fn a_flood_of_strangers_holds_no_thread_each_and_a_test_with_the_key_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    std::fs::write(&key, "a pre-shared key for the flood test\n").unwrap();
    a_flood_beside_a_test(Some(&key));
}

/// How one slowloris connection ended.
#[derive(Debug)]
struct Ended {
    /// From its connect to the end of what the server sent.
    lived: Duration,
    /// The server's last message before it closed.
    last: Option<ServerMessage>,
}

/// Reads what the server sends on `stream` until it closes (failing after
/// `within`): how long the connection lived from `t0`.
fn until_closed(mut stream: TcpStream, t0: Instant, within: Duration) -> Ended {
    stream.set_read_timeout(Some(within)).expect("read timeout");
    let mut decoder = FrameDecoder::default();
    let mut last = None;
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => decoder.feed(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "a slowloris connection still open after {:?} (or failed): {e}",
                t0.elapsed()
            ),
        }
        while let Some(f) = decoder.next_frame().expect("a good frame") {
            last = Some(decode_server(&f).expect("a server message"));
        }
    }
    Ended {
        lived: t0.elapsed(),
        last,
    }
}

/// Slowloris: connections that drip a byte every 3 s, of a hello or (with
/// the key) of the answer to the challenge after a whole hello, are closed
/// at the handshake timeout of 4 s counted from their accept, with the
/// server saying why; the bytes they drip do not extend it.
#[test]
fn slowloris_connections_are_closed_at_the_handshake_timeout() {
    const CONNECTIONS: usize = 32;
    const TIMEOUT: Duration = Duration::from_secs(4);
    const EVERY: Duration = Duration::from_secs(3);
    /// Far past the timeout: a server whose timeout each byte extended
    /// would hold them all until then.
    const LIMIT: Duration = Duration::from_secs(30);
    let _g = shared();
    enough_descriptors();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    std::fs::write(&key, "a pre-shared key for the slowloris test\n").unwrap();
    let server = Server::start(&[
        "--handshake-timeout",
        "4s",
        "--auth-key",
        key.to_str().unwrap(),
    ]);
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, server.port());
    let hello = hello();
    let auth = encode_client(&ClientMessage::Auth {
        response: "ab".repeat(32),
    });
    let t0 = Instant::now();
    // Even ones drip a hello; odd ones send a hello whole, then drip an answer.
    let mut conns = Vec::new();
    for i in 0..CONNECTIONS {
        let source = SOURCES[i % SOURCES.len()];
        let mut stream = connect_from(source, to, Duration::from_secs(10)).expect("connect");
        let first = if i % 2 == 0 {
            hello[..1].to_vec()
        } else {
            [&hello[..], &auth[..1]].concat()
        };
        stream.write_all(&first).expect("the first bytes");
        conns.push((stream, i % 2 == 1));
    }
    let (closed_tx, closed) = mpsc::channel();
    let ended: Vec<Ended> = std::thread::scope(|s| {
        let readers: Vec<_> = conns
            .iter()
            .map(|(stream, _)| {
                let stream = stream.try_clone().expect("clone");
                let tx = closed_tx.clone();
                s.spawn(move || {
                    let e = until_closed(stream, t0, LIMIT);
                    let _ = tx.send(());
                    e
                })
            })
            .collect();
        // A byte every 3 s to each, until all are closed.
        let mut open = CONNECTIONS;
        let mut sent = 1;
        let mut next = t0 + EVERY;
        while open > 0 {
            assert!(t0.elapsed() < LIMIT, "still open: {open}");
            match closed.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Ok(()) => open -= 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    for (stream, answers) in &mut conns {
                        let drip = if *answers { &auth } else { &hello };
                        let _ = stream.write_all(&drip[sent..sent + 1]);
                    }
                    sent += 1;
                    next += EVERY;
                }
                Err(e) => panic!("{e}"),
            }
        }
        readers
            .into_iter()
            .map(|r| r.join().expect("a reader"))
            .collect()
    });
    let lived: Vec<Duration> = ended.iter().map(|e| e.lived).collect();
    eprintln!(
        "{CONNECTIONS} slowloris connections, a byte every {EVERY:?}, handshake timeout \
         {TIMEOUT:?}: closed after {:?} to {:?}",
        lived.iter().min().unwrap(),
        lived.iter().max().unwrap()
    );
    for (i, e) in ended.iter().enumerate() {
        let awaited = if i % 2 == 0 {
            "hello"
        } else {
            "authentication"
        };
        match &e.last {
            Some(ServerMessage::Error { code, message, .. }) => {
                assert_eq!(code.to_string(), "limit", "{message}");
                assert!(
                    message.starts_with(&format!("no {awaited} within"))
                        && message.contains("--handshake-timeout of 4s"),
                    "{message}"
                );
            }
            other => panic!("connection {i}: expected the timeout's error, got {other:?}"),
        }
        // Never before the timeout; and closed at all though it dripped a
        // byte every 3 s, so its bytes did not extend it.
        assert!(
            e.lived >= TIMEOUT,
            "connection {i} closed after {:?}",
            e.lived
        );
    }
    // And a client with the key is served at once.
    let addr = server.addr();
    let (code, _, err, doc) = run_json(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--auth-key",
        key.to_str().unwrap(),
        "--duration",
        "500ms",
        "--warmup",
        "200ms",
    ]);
    assert_eq!(code, 0, "{err}");
    util::assert_measured(util::at(&doc, "/tests/0/runs/0"), "a test after slowloris");
}
