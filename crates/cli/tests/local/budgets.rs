//! Budgets that hold under attack (docs/security.md): each attack replayed
//! on loopback against a real `linkperf serve` child, bounded in count and
//! time, with what the server holds read from /proc (threads, descriptors,
//! resident memory, the host's TCP memory), and a legitimate test beside it
//! that must be served whole: every user carried.
//!
//! - failed handshakes (a bad length prefix; without a key, after a valid
//!   hello) hold their handshake slot, or their session slot, until closed;
//! - a server at its descriptor limit takes the users it could not accept
//!   once descriptors are free again, and a run whose users were never
//!   carried is `failed`, never an exit 0;
//! - a profile's statistics are charged (and refused past `--max-memory`),
//!   and its memory is returned after the test;
//! - a download whose client never reads holds at most the send buffers the
//!   budget charges, in the kernel's TCP memory.
//!
//! Waits are on events (the server's answers, a child's exit); what gives
//! no event (a process's descriptors, a listener's backlog) is polled with
//! [`poll_until`], bounded.

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linkperf_protocol::{encode_client, ClientMessage, Preamble, ServerMessage, PROTOCOL_VERSION};
use linkperf_workload::{Bytes, Placement, Protocol, StreamDirection, TestSpec, Workload};

use crate::strangers::connect_from;
use crate::util::control::Control;
use crate::util::process::{poll_until, proc_status};
use crate::util::{self, exclusive, run_json, spawn, ServeSpec, Server};

/// Loopback source addresses of a flood: four fill a handshake table (a
/// quarter each); real clients come from 127.0.0.1.
const SOURCES: [Ipv4Addr; 4] = [
    Ipv4Addr::new(127, 0, 0, 2),
    Ipv4Addr::new(127, 0, 0, 3),
    Ipv4Addr::new(127, 0, 0, 4),
    Ipv4Addr::new(127, 0, 0, 5),
];
/// Longest any wait of these tests may take before it fails.
const DEADLINE: Duration = Duration::from_secs(120);

/// The host's TCP memory in pages (`mem` of /proc/net/sockstat's TCP line).
fn tcp_pages() -> u64 {
    let text = std::fs::read_to_string("/proc/net/sockstat").expect("/proc/net/sockstat");
    let line = text
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .expect("a TCP line in /proc/net/sockstat");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "mem").expect("mem");
    words[at + 1].parse().expect("a page count")
}

/// Raises this test process's open-file limit for its side of a flood.
fn enough_descriptors(n: u64) {
    if let Err(e) = linkperf_metrics::raise_fd_limit(n) {
        panic!("these tests need {n} descriptors on their side: {e}");
    }
}

/// The highest thread and descriptor counts of `pid` until `stop`.
fn watch(pid: u32, stop: &AtomicBool) -> (usize, usize) {
    let mut peak = (0, 0);
    while !stop.load(Ordering::Acquire) {
        let (fds, threads) = util::fds_and_threads(pid);
        peak = (peak.0.max(threads), peak.1.max(fds));
        // A sampling interval, not a synchronisation: the flood's end is
        // what the watcher waits for.
        std::thread::sleep(Duration::from_millis(5));
    }
    peak
}

/// A hello frame, as any client sends it.
fn hello() -> Vec<u8> {
    encode_client(&ClientMessage::Hello {
        protocol_version: PROTOCOL_VERSION,
        client_version: "attacker".into(),
        challenge: None,
    })
}

/// Connections each sending `payload` (then left open, at most `held` at
/// once on this side, the oldest closed), `count` of them from
/// [`SOURCES`], `batch` every 20 ms.
fn flood(port: u16, payload: &[u8], count: usize, batch: usize, held: usize) {
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut open: VecDeque<TcpStream> = VecDeque::new();
    let t0 = Instant::now();
    let mut tick = t0;
    let mut sent = 0;
    while sent < count {
        assert!(t0.elapsed() < DEADLINE, "the flood took over {DEADLINE:?}");
        for _ in 0..batch.min(count - sent) {
            let source = SOURCES[sent % SOURCES.len()];
            let mut s = connect_from(source, to, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("flood connection {sent}: {e}"));
            // The server may have closed it already: what it does is the test.
            let _ = s.write_all(payload);
            open.push_back(s);
            sent += 1;
        }
        while open.len() > held {
            open.pop_front();
        }
        tick += Duration::from_millis(20);
        // The flood's own pace (a load generator's tick), not a wait for
        // the server.
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
    }
}

/// Every user of `run` was carried by the server, and its run completed.
fn assert_served_whole(doc: &serde_json::Value, users: u64, what: &str) {
    let run = util::at(doc, "/tests/0/runs/0");
    util::assert_measured(run, what);
    assert_eq!(
        run["flows"]["flows"].as_u64(),
        Some(users),
        "{what}: {}",
        run["flows"]
    );
    assert_eq!(
        run["flows"]["no_progress"].as_u64(),
        Some(0),
        "{what}: {}",
        run["flows"]
    );
}

/// 4,000 connections, 2,500 a second, that each fail their handshake on
/// a bad length prefix (without a key: after a valid hello, so each takes
/// a session and its thread): the server never holds more threads than
/// its sessions (16 here) allow, nor more descriptors than its handshake
/// slots and sessions; a test beside the flood (with the key) or after it
/// (without) is served whole.
fn failed_handshakes(with_key: bool) {
    const FLOOD: usize = 4_000;
    const SESSIONS: usize = 16;
    let _g = exclusive();
    enough_descriptors(4096);
    let dir = tempfile::tempdir().unwrap();
    let key = crate::util::control::key_file(dir.path(), "k", "a key for the failed handshakes");
    let key = key.to_str().unwrap().to_string();
    let mut extra = vec!["--max-sessions", "16"];
    if with_key {
        extra.extend(["--auth-key", key.as_str()]);
    }
    let server = Server::start(&extra);
    let (pid, port, addr) = (server.pid(), server.port(), server.addr());
    let (idle_fds, idle_threads) = util::fds_and_threads(pid);
    // A length prefix of 4 GiB - 1, past any --max-frame.
    let bad: Vec<u8> = if with_key {
        vec![0xff; 4]
    } else {
        [hello(), vec![0xff; 4]].concat()
    };
    let stop = AtomicBool::new(false);
    let key_args: Vec<&str> = if with_key {
        vec!["--auth-key", key.as_str()]
    } else {
        vec![]
    };
    let run_args = |users: &'static str| {
        let mut a = vec![
            "run",
            "-q",
            "--server",
            &addr,
            "-u",
            users,
            "--duration",
            "2s",
            "--warmup",
            "300ms",
        ];
        a.extend(&key_args);
        a
    };
    let (peak, beside) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch(pid, &stop));
        let flooding = s.spawn(|| flood(port, &bad, FLOOD, 50, 600));
        // With the key, the flood waits in the lobby: a test beside it is
        // served. Without, it takes the session slots a second each, so a
        // test may find none (it is refused, and says why): it runs after.
        let beside = with_key.then(|| run_json(&run_args("8")));
        flooding.join().expect("the flood");
        stop.store(true, Ordering::Release);
        (watcher.join().expect("the watcher"), beside)
    });
    let after = run_json(&run_args("8"));
    eprintln!(
        "{FLOOD} failed handshakes (key: {with_key}): threads idle {idle_threads}, at most {}; \
         descriptors idle {idle_fds}, at most {}",
        peak.0, peak.1
    );
    for (what, outcome) in [("beside", beside), ("after", Some(after))] {
        let Some((code, _, err, doc)) = outcome else {
            continue;
        };
        assert_eq!(code, 0, "the test {what} the flood: {err}");
        assert_served_whole(
            &doc,
            8,
            &format!("a test {what} a flood of failed handshakes"),
        );
    }
    // The sessions' threads (a lingering one each, at most), and the
    // test's own (its workers, its sampler): 2 workers on 2 CPUs, a few
    // more on a larger host.
    let test_threads = std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
    // A session gives its slot back as its thread's work ends; the kernel
    // counts the thread until it has exited, a moment later, and on a busy
    // host a few such moments overlap a new session's start (seen: 2).
    const EXITING: usize = 4;
    assert!(
        peak.0 <= idle_threads + SESSIONS + test_threads + EXITING,
        "the server held {} threads ({idle_threads} idle)",
        peak.0
    );
    // The handshake table's 256, the sessions', and the test's (8 users,
    // their waiting room, the workers' own).
    let test_fds = 8 + 16 + 64 * test_threads + 3 * test_threads + 4;
    assert!(
        peak.1 <= idle_fds + 256 + SESSIONS + test_fds,
        "the server held {} descriptors ({idle_fds} idle)",
        peak.1
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

#[test]
fn failed_handshakes_without_a_key_hold_no_more_threads_than_the_sessions() {
    failed_handshakes(false);
}

#[test]
fn failed_handshakes_with_a_key_stay_in_their_slots_and_a_test_beside_is_served() {
    failed_handshakes(true);
}

/// The socket inodes of `pid`'s descriptors.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Connections waiting in the backlogs of `pid`'s TCP listeners other than
/// the one on `control`: /proc/net/tcp's receive queue of a listening
/// socket is its accept queue.
fn data_backlog(pid: u32, control: u16) -> u64 {
    let inodes = socket_inodes(pid);
    let text = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state, queues, inode) = (f.get(1)?, f.get(3)?, f.get(4)?, f.get(9)?);
            let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            let inode: u64 = inode.parse().ok()?;
            let waiting = u64::from_str_radix(queues.split(':').nth(1)?, 16).ok()?;
            (*state == "0A" && port != control && inodes.contains(&inode)).then_some(waiting)
        })
        .sum()
}

/// The EMFILE attack: a server whose descriptors a flood of silent
/// control connections has taken (its open-file limit 1,024, its handshake
/// slots set past what is left) while a 300-user test connects, so that
/// some users' connections wait in a data listener's backlog. `release`:
/// the flood is closed once they are seen waiting, and every user must
/// then be served; else it is held until the test ends, and the run must
/// be `failed`, exit code 1.
fn at_the_descriptor_limit(release: bool) -> (i32, String, serde_json::Value) {
    const LIMIT: u64 = 1024;
    let _g = exclusive();
    enough_descriptors(4096);
    let dir = tempfile::tempdir().unwrap();
    let key = crate::util::control::key_file(dir.path(), "k", "a key for the descriptor limit");
    let key = key.to_str().unwrap().to_string();
    let nofile = format!("--nofile={LIMIT}:{LIMIT}");
    // Slots for all the flood, and a budget the operator set past what the
    // limit leaves (the descriptors that run out are not the budget's).
    let server = Server::start_spec(&ServeSpec {
        under: &["prlimit", &nofile],
        port: Some(0),
        extra: &[
            "--auth-key",
            &key,
            "--max-handshakes",
            "1000",
            "--handshake-timeout",
            "60s",
            "--max-descriptors",
            "100000",
        ],
        ..ServeSpec::default()
    });
    let (pid, port, addr) = (server.pid(), server.port(), server.addr());
    let (idle, _) = util::fds_and_threads(pid);
    // Leave the session about 150 descriptors: fewer than its 300 users.
    let silent = (LIMIT as usize).saturating_sub(idle + 150);
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut flood: Vec<TcpStream> = (0..silent)
        .map(|i| {
            connect_from(SOURCES[i % SOURCES.len()], to, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("silent connection {i}: {e}"))
        })
        .collect();
    poll_until(DEADLINE, || {
        let (fds, _) = util::fds_and_threads(pid);
        (fds >= idle + silent).then_some(()).ok_or(format!(
            "the server holds {fds} descriptors, {silent} silent connections not all taken"
        ))
    });
    let client = spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--auth-key",
        &key,
        "-u",
        "300",
        "--server-threads",
        "1",
        "--warmup",
        "1s",
        "--duration",
        "3s",
        "--json",
        dir.path().join("r.json").to_str().unwrap(),
    ]);
    let waiting = poll_until(DEADLINE, || {
        let n = data_backlog(pid, port);
        (n > 0)
            .then_some(n)
            .ok_or_else(|| "no user waits in a data listener's backlog yet".to_string())
    });
    if release {
        flood.clear();
    }
    let (status, _, err) = client.finish(DEADLINE);
    let code = status.code().unwrap_or(-1);
    let left = data_backlog(pid, port);
    drop(flood);
    eprintln!(
        "at the descriptor limit ({LIMIT}; {silent} silent connections, release: {release}): \
         {waiting} users seen waiting in the backlog, {left} still at the end; exit {code}"
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
    let doc = util::read_doc(&dir.path().join("r.json"));
    (code, err, doc)
}

#[test]
fn users_left_in_the_backlog_at_the_descriptor_limit_are_served_once_descriptors_are_free() {
    let (code, err, doc) = at_the_descriptor_limit(true);
    assert_eq!(code, 0, "{err}");
    assert_served_whole(
        &doc,
        300,
        "a test whose users waited out a flood at the descriptor limit",
    );
}

#[test]
fn a_run_whose_users_were_never_accepted_is_failed_and_exits_1() {
    let (code, err, doc) = at_the_descriptor_limit(false);
    let run = util::at(&doc, "/tests/0/runs/0");
    assert_eq!(run["status"], "failed", "{run}");
    let e = run["error"].as_str().unwrap_or_default();
    assert!(e.contains("of 300 users were never served"), "{e}");
    assert_eq!(code, 1, "a run with users never served exits 1: {err}");
}

/// A profile of `groups` groups of `transactions` 1-byte request/response
/// transactions, one user each.
fn many_transactions(groups: usize, transactions: usize) -> String {
    // Compact: the file is at most 1 MiB, and so is the control frame that
    // carries the profile to the server.
    let mut x = String::from("<?xml version=\"1.0\"?><profile name=\"many\">");
    for _ in 0..groups {
        x += "<group nthreads=\"1\"><transaction iterations=\"1\"><flowop type=\"connect\"/></transaction>";
        for _ in 0..transactions.saturating_sub(2) {
            x += "<transaction iterations=\"20\"><flowop type=\"write\" options=\"size=1\"/><flowop type=\"read\" options=\"size=1\"/></transaction>";
        }
        x += "<transaction iterations=\"1\"><flowop type=\"disconnect\"/></transaction></group>";
    }
    x + "</profile>\n"
}

/// A profile's statistics are charged: 8 groups of 1,024 transactions are
/// refused by `--max-memory 200m` before anything is allocated; one of 200
/// transactions is admitted and run, and what its statistics took is
/// given back after it (the server's resident memory back within 16 MiB of
/// what it was).
#[test]
fn a_profiles_statistics_are_charged_and_returned_after_the_test() {
    let _g = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // 8,192 transactions take about 2.4 MB of JSON: a server that takes
    // frames that large.
    let server = Server::start(&["--max-memory", "200m", "--max-frame", "4m"]);
    let (pid, addr) = (server.pid(), server.addr());
    let (_, rss_idle, _) = proc_status(pid);
    let huge = dir.path().join("huge.xml");
    std::fs::write(&huge, many_transactions(8, 1024)).unwrap();
    let (code, _, err, _) = run_json(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--profile",
        huge.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("MiB of memory, this server may use 200 MiB"),
        "{err}"
    );
    let (_, rss_refused, _) = proc_status(pid);
    let fits = dir.path().join("fits.xml");
    std::fs::write(&fits, many_transactions(1, 200)).unwrap();
    let (code, _, err, doc) = run_json(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--profile",
        fits.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let run = util::at(&doc, "/tests/0/runs/0");
    assert!(run["status"] != "failed", "{run}");
    // The session ends after its results are sent: wait for its thread.
    let idle_threads = poll_until(DEADLINE, || {
        let (threads, _, _) = proc_status(pid);
        (threads <= 3)
            .then_some(threads)
            .ok_or(format!("{threads} threads: the session still ends"))
    });
    let (_, rss_after, hwm) = proc_status(pid);
    eprintln!(
        "profile statistics: VmRSS idle {rss_idle} kB, after the refusal {rss_refused} kB, peak \
         {hwm} kB, after the 200-transaction profile {rss_after} kB ({idle_threads} threads)"
    );
    assert!(rss_refused < rss_idle + 8 * 1024, "the refusal allocated");
    assert!(hwm < 200 * 1024 + rss_idle, "past the budget: {hwm} kB");
    assert!(
        rss_after < rss_idle + 16 * 1024,
        "{rss_after} kB resident after the test, {rss_idle} kB before"
    );
}

/// A download of 300 users whose client never reads: each server socket's
/// send buffer is locked at what the budget charges (twice its share of the
/// test's allowance, 256 MiB or an eighth of the host's TCP memory), so the
/// host's TCP memory grows by at most that (and the client's
/// receive buffers, which do not grow unread: 128 KiB each, 384 KiB as
/// the kernel counts them at most), not the 1.2 GB that send buffers grown
/// to 4 MiB would hold; a test beside it is served whole.
#[test]
fn a_download_nobody_reads_holds_at_most_the_charged_send_buffers() {
    const USERS: u32 = 300;
    let _g = exclusive();
    enough_descriptors(4096);
    let server = Server::start(&[]);
    let (port, addr) = (server.port(), server.addr());
    let before = tcp_pages();
    let mut spec = TestSpec::new(
        Workload::Stream {
            message: Bytes(30 * 1024),
            direction: StreamDirection::Down,
        },
        Protocol::Tcp,
        USERS,
        Duration::from_secs(6),
    );
    spec.warmup = Duration::from_millis(200);
    let locked = linkperf_engine::io::server_sndbuf(&spec).expect("a TCP stream's is locked");
    let mut c = Control::connect(("127.0.0.1", port));
    c.hello();
    c.send(&ClientMessage::Test {
        spec,
        placement: Placement::with_threads(2),
    });
    let (ports, token) = match c.recv(Duration::from_secs(30)) {
        Some(ServerMessage::Accepted {
            data_ports, token, ..
        }) => (data_ports, token),
        other => panic!("expected accepted, got {other:?}"),
    };
    let socks: Vec<TcpStream> = (0..USERS)
        .map(|flow| {
            let p = ports[flow as usize % ports.len()];
            let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, p)).expect("connect a user");
            s.write_all(
                &Preamble {
                    token,
                    flow,
                    seq: 0,
                }
                .encode(),
            )
            .expect("preamble");
            s
        })
        .collect();
    c.send(&ClientMessage::Start);
    match c.recv(Duration::from_secs(30)) {
        Some(ServerMessage::Started) => {}
        other => panic!("expected started, got {other:?}"),
    }
    // The peak of the host's TCP memory while the server writes into
    // sockets nobody reads, beside a legitimate test.
    let stop = AtomicBool::new(false);
    let (peak, beside) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut peak = 0;
            while !stop.load(Ordering::Acquire) {
                peak = peak.max(tcp_pages());
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        let beside = run_json(&[
            "run", "-q", "--server", &addr, "-u", "8", "-d", "2s", "--warmup", "300ms",
        ]);
        stop.store(true, Ordering::Release);
        (watcher.join().expect("the watcher"), beside)
    });
    c.send(&ClientMessage::Abort {
        reason: "the attacker leaves".into(),
    });
    drop(socks);
    let grown_kib = peak.saturating_sub(before) * 4;
    let charged_kib = u64::from(USERS) * 2 * locked as u64 / 1024;
    eprintln!(
        "a {USERS}-user download nobody reads: the host's TCP memory grew by {grown_kib} KiB at \
         most (from {before} pages), {charged_kib} KiB of send buffers charged"
    );
    let (code, _, err, doc) = beside;
    assert_eq!(code, 0, "{err}");
    assert_served_whole(&doc, 8, "a test beside a download nobody reads");
    // The server's send buffers, the client's receive buffers, and the
    // test beside's (64 MiB).
    let bound = charged_kib + u64::from(USERS) * 384 + 64 * 1024;
    assert!(
        grown_kib <= bound,
        "the host's TCP memory grew by {grown_kib} KiB, over {bound} KiB"
    );
}
