//! Fault and trust tests: real `linkperf serve` and `linkperf run`/`suite`
//! processes on loopback, hostile or broken peers, killed processes, damaged
//! files. Every load is bounded in time and stops by itself.
//!
//! A client SIGKILLed mid-test is covered by `vanished_client_frees_server_resources`
//! in e2e.rs: the server frees its sessions, sockets and threads within 5 s and
//! serves the next test.
//!
//! The control protocol is spoken by hand here (with linkperf-wire's encoder and
//! decoder) where a test must see exactly what the server answers, and when.

// The helpers are shared with e2e.rs; this file does not use all of them.
use crate::util;

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::control::{expect_error, key_file, Control};
use crate::util::{
    exclusive, fds_and_threads, first_run, poll_until, run, run_against, run_json, shared, text,
    Client, ServeSpec, Server, BIN, TIMING,
};
use linkperf_session::AuthKey;
use linkperf_wire::{
    encode_client, encode_frame, ClientMessage, ConnectSeq, DataToken, Preamble, ServerMessage,
    UdpHeader, PREAMBLE_LEN, PROTOCOL_VERSION, UDP_HEADER_LEN,
};
use linkperf_workload::{Placement, Protocol, TestSpec};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Helpers: the control protocol by hand, keys, serve processes of our own.
// ---------------------------------------------------------------------------

/// A 1x1 rr test of `users` and `duration` over TCP, one server worker.
fn test_request(users: u32, duration: Duration) -> ClientMessage {
    test_request_over(Protocol::Tcp, users, duration)
}

/// [`test_request`] over `protocol`.
fn test_request_over(protocol: Protocol, users: u32, duration: Duration) -> ClientMessage {
    let mut spec = TestSpec::new("rr1c-1x1".parse().unwrap(), protocol, users, duration);
    spec.warmup = Duration::from_millis(100);
    ClientMessage::Test {
        spec,
        placement: Placement::with_threads(1),
    }
}

/// The run of `doc` failed for want of the server's results, saying `why`,
/// and kept what the client measured before.
fn gave_up_keeping_what_it_measured(doc: &Value, why: &str) {
    let r = first_run(doc);
    assert_eq!(text(r, "/status"), "failed", "{r}");
    let e = text(r, "/error");
    assert!(e.contains(why), "{e}");
    assert!(util::num(r, "/client/totals/transactions") > 0.0, "{r}");
}

// ---------------------------------------------------------------------------
// 1. Authentication.
// ---------------------------------------------------------------------------

#[test]
fn the_right_key_authenticates_from_the_flag_or_the_environment() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a pre-shared key of some length\n");
    let key = key.to_str().unwrap();
    let server = Server::start(&["--auth-key", key]);
    assert!(
        server.log().contains("clients must authenticate"),
        "{}",
        server.log()
    );
    let addr = server.addr();
    let (code, _, err, doc) = run_against(&server, &["--auth-key", key]);
    assert_eq!(code, 0, "{err}\nserver: {}", server.log());
    util::assert_measured(first_run(&doc), "authenticated");

    // The same key, with the whitespace around it different, from the environment.
    let same = key_file(
        dir.path(),
        "same",
        "  a pre-shared key of some length  \n\n",
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-q", "--server", &addr])
        .args(TIMING)
        .env("LINKPERF_AUTH_KEY_FILE", &same);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_wrong_or_missing_key_fails_before_any_data_endpoint() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "the server's key, 32 bytes long.");
    let wrong = key_file(dir.path(), "w", "not the server's key, but longer");
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);

    // The CLI, wrong key: the server's proof does not match it, so the client
    // stops before answering the challenge; exit 1, a failed run recorded.
    let (code, _, err, doc) = run_against(&server, &["--auth-key", wrong.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("did not prove it holds this client's key") && err.contains("another key"),
        "{err}"
    );
    assert_eq!(text(first_run(&doc), "/status"), "failed");
    assert!(text(first_run(&doc), "/error").contains("did not prove it holds"));

    // The CLI, no key: told to give one.
    let (code, _, err, _) = run_against(&server, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the server requires authentication: give --auth-key"),
        "{err}"
    );

    // By hand: a wrong response is answered by auth_failed, never by `accepted`.
    let mut c = Control::connect(server.address());
    let (_, challenge) = c.hello();
    let challenge = challenge.expect("a server with a key sends a challenge");
    assert_eq!(challenge.len(), 64, "32 bytes in hex: {challenge}");
    c.send(&ClientMessage::Auth {
        response: "00".repeat(32),
    });
    c.send(&test_request(1, Duration::from_secs(1)));
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("auth_failed", "authentication failed")
    );
    assert!(c.recv(Duration::from_secs(5)).is_none(), "the session ends");

    // By hand: a test request without any answer to the challenge.
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&test_request(1, Duration::from_secs(1)));
    let (code, _) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "auth_failed");
    assert!(c.recv(Duration::from_secs(5)).is_none(), "the session ends");

    // No test was ever set up: the server bound no data endpoint.
    let log = server.log();
    assert!(log.contains("authentication failed"), "{log}");
    assert!(!log.contains("running"), "a test ran: {log}");
}

#[test]
fn a_replayed_response_fails_in_another_session() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let secret = "replay protection test key 0123";
    let key = key_file(dir.path(), "k", secret);
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);
    let k = AuthKey::from_bytes(secret.as_bytes()).unwrap();

    // Session A answers its challenge rightly; an eavesdropper records the answer.
    let mut a = Control::connect(server.address());
    let (session_a, challenge_a) = a.hello();
    let recorded = k.respond(&challenge_a.unwrap(), session_a).unwrap();
    a.send(&ClientMessage::Auth {
        response: recorded.clone(),
    });
    a.send(&test_request(1, Duration::from_millis(300)));
    match a.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted { .. }) => {}
        other => panic!("the right response must be accepted: {other:?}"),
    }
    a.send(&ClientMessage::Abort {
        reason: "done".into(),
    });

    // Session B replays it: refused.
    let mut b = Control::connect(server.address());
    let (session_b, challenge_b) = b.hello();
    assert_ne!(session_a, session_b);
    let challenge_b = challenge_b.unwrap();
    assert_ne!(k.respond(&challenge_b, session_b).unwrap(), recorded);
    b.send(&ClientMessage::Auth { response: recorded });
    let (code, _) = expect_error(b.recv(Duration::from_secs(5)));
    assert_eq!(code, "auth_failed");
}

#[test]
fn unusable_key_files_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let short = key_file(dir.path(), "short.key", "fifteen bytes!!\n");
    let short = short.to_str().unwrap();
    let missing = dir.path().join("missing.key");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["serve", "--port", "0", "--auth-key", short],
            "fewer than the 16",
        ),
        (
            &["serve", "--port", "0", "--auth-key", missing],
            "missing.key",
        ),
        (
            &["run", "--server", "127.0.0.1:9", "--auth-key", short],
            "short.key",
        ),
        (
            &["run", "--server", "127.0.0.1:9", "--auth-key", missing],
            "missing.key",
        ),
        (
            &[
                "suite",
                "quick",
                "--server",
                "127.0.0.1:9",
                "--auth-key",
                missing,
            ],
            "missing.key",
        ),
    ];
    for (args, says) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a key the server does not ask for");
    let server = Server::start(&[]);
    let (code, _, err, _) = run_against(&server, &["--auth-key", key.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "did not prove it holds this client's key (it sent no proof: it holds no key)"
        ),
        "{err}"
    );
    let log = server.log();
    assert!(!log.contains("running"), "a test ran: {log}");
}

// ---------------------------------------------------------------------------
// 2. Data connections belong to their session.
// ---------------------------------------------------------------------------

/// A session past its handshake whose 1-user test (of `duration`) the server
/// accepted: the control connection, the data ports and the data token.
fn accepted_test(server: &Server, duration: Duration) -> (Control, Vec<u16>, DataToken) {
    accepted_test_over(server, Protocol::Tcp, duration)
}

/// [`accepted_test`] over `protocol`.
fn accepted_test_over(
    server: &Server,
    protocol: Protocol,
    duration: Duration,
) -> (Control, Vec<u16>, DataToken) {
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&test_request_over(protocol, 1, duration));
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted {
            data_ports, token, ..
        }) => (c, data_ports, token),
        other => panic!("expected accepted, got {other:?}"),
    }
}

/// A data connection to `data` that presents `token` in its preamble.
fn with_preamble(data: SocketAddr, token: DataToken) -> TcpStream {
    let mut s = TcpStream::connect(data).expect("connect to the data port");
    let p = Preamble {
        token,
        flow: 0,
        seq: 0,
    };
    s.write_all(&p.encode()).unwrap();
    s
}

/// Whether the server closes `s` within `within` (a blocking read until
/// its end, or the time).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within.max(Duration::from_millis(1))))
        .unwrap();
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            false
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_data_connection_with_a_wrong_token_is_dropped() {
    let _g = shared();
    let server = Server::start(&[]);
    let (mut c, ports, token) = accepted_test(&server, Duration::from_secs(5));
    let data = SocketAddr::from((Ipv4Addr::LOCALHOST, ports[0]));
    let mut wrong = token.0;
    wrong[15] ^= 1;
    let dropped = |token: DataToken, within: Duration| -> bool {
        closed_within(&mut with_preamble(data, token), within)
    };
    assert!(
        dropped(DataToken(wrong), Duration::from_secs(2)),
        "a wrong token must be dropped at once"
    );
    assert!(
        dropped(DataToken([0; 16]), Duration::from_secs(2)),
        "a zero token must be dropped at once"
    );
    assert!(
        !dropped(token, Duration::from_millis(500)),
        "the session's own token is kept"
    );
    c.send(&ClientMessage::Abort {
        reason: "done".into(),
    });
}

/// How long the server of a UDP request/response test stays stopped: the
/// fault, whose length the count of lost transactions follows (100 ms each).
const UDP_SERVER_STOPPED: Duration = Duration::from_millis(600);

/// UDP: a transaction whose answer does not come within `--udp-timeout` is
/// counted lost, and its flow goes on with the next one; it never hangs. The
/// server is stopped (SIGSTOP) for 600 ms in the window: every user's
/// transactions time out over and over (100 ms each); the answers that come
/// after SIGCONT are late and dropped, and the flows carry on.
#[test]
fn udp_transactions_left_unanswered_are_counted_lost_and_the_flows_go_on() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let client = Client::spawn(&[
        "run",
        "--quiet",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "rr1c-1x1",
        "--users",
        "4",
        "--udp-timeout",
        "100ms",
        "--warmup",
        "200ms",
        "--duration",
        "3s",
    ]);
    // Into the window, then 600 ms without answers.
    client.wait_for_window(Duration::from_secs(20));
    server.signal("-STOP");
    std::thread::sleep(UDP_SERVER_STOPPED);
    server.signal("-CONT");
    let (status, _, err, doc) = client.finish(Duration::from_secs(30));
    assert!(status.success(), "{status}: {err}");
    let r = first_run(&doc);
    // The stop is this test's own doing: what it asserts is the count.
    util::assert_measured(r, "600 ms without answers");
    // Each user lost the transaction in flight when the server stopped, and
    // the ones after it until the server came back: about 6 each.
    let lost = util::int(r, "/errors");
    eprintln!("{lost} transactions lost while the server was stopped");
    assert!(
        (4..=4 * 12).contains(&lost),
        "{lost} lost transactions: {r}"
    );
    assert_eq!(util::int(r, "/client/errors"), lost);
    // The flows went on: the window's last whole second, after the stop, is full.
    let intervals = util::at(r, "/client/intervals").as_array().unwrap();
    let last = intervals
        .iter()
        .rfind(|i| i["length_s"].as_f64().unwrap_or(0.0) > 0.99)
        .expect("a whole interval");
    assert!(
        util::int(last, "/transactions") > 100,
        "the flows did not go on after the stop: {intervals:?}"
    );
    // A late answer is not a transaction: the server answered at least as
    // many requests as the client counted.
    assert!(util::int(r, "/server/transactions") >= util::int(r, "/client/transactions"));
}

/// Datagrams the kernel dropped at process `pid`'s UDP sockets for want of
/// room (`drops` of its sockets in `/proc/PID/net/udp` and `udp6`).
fn udp_drops(pid: u32) -> u64 {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    ["udp", "udp6"]
        .iter()
        .flat_map(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops
            (f.len() >= 13 && inodes.iter().any(|i| i == f[9])).then(|| f[12].parse().unwrap_or(0))
        })
        .sum()
}

/// A receiver that stops reading: the server of a UDP stream is stopped
/// (SIGSTOP) while the stream runs, until the kernel has dropped datagrams at
/// its full socket; then it goes on. The run ends on time, and the datagrams
/// the kernel dropped are counted lost, by the gap in their sequence numbers.
#[test]
fn a_udp_receiver_that_stops_reading_counts_losses_and_does_not_hang() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let client = Client::spawn(&[
        "run",
        "--quiet",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "stream-up:1400",
        "--rate",
        "50m",
        "--warmup",
        "0",
        "--duration",
        "4s",
    ]);
    // The stream flows: its first second is measured.
    client.wait_for_window(Duration::from_secs(20));
    let dropped = udp_drops(server.pid());
    server.signal("-STOP");
    // A kernel counter: nothing announces a drop.
    poll_until(Duration::from_secs(20), || {
        (udp_drops(server.pid()) > dropped)
            .then_some(())
            .ok_or_else(|| "the kernel dropped nothing at the stopped server".to_string())
    });
    server.signal("-CONT");
    let (status, _, err, doc) = client.finish(Duration::from_secs(30));
    assert!(status.success(), "{status}: {err}");
    let r = first_run(&doc);
    util::assert_measured(r, "a receiver stopped until the kernel dropped");
    let d = util::at(r, "/udp/client_to_server");
    let (sent, received, lost) = (
        util::int(d, "/sent"),
        util::int(d, "/received"),
        util::int(d, "/lost"),
    );
    eprintln!("{lost} of {sent} datagrams lost while the receiver was stopped");
    assert!(lost > 0, "no loss counted: {d}");
    assert!(lost <= sent, "{d}");
    assert_eq!(util::int(d, "/expected"), received + lost);
    assert!(util::num(d, "/loss_rate") > 0.0 && util::num(d, "/loss_rate") < 1.0);
    // The losses are in the seconds they happened: some second lost some.
    let seconds = util::at(r, "/intervals").as_array().unwrap();
    assert!(
        seconds
            .iter()
            .any(|i| i["loss_rate"].as_f64().unwrap_or(0.0) > 0.0),
        "{seconds:?}"
    );
    // Nothing else went wrong: no duplicate, nothing out of order.
    assert_eq!(util::int(d, "/duplicates"), 0);
}

#[test]
fn udp_datagrams_are_answered_to_the_control_connections_address_only() {
    let _g = shared();
    let server = Server::start(&[]);
    let (mut c, ports, token) = accepted_test_over(&server, Protocol::Udp, Duration::from_secs(5));
    let data = SocketAddr::from((Ipv4Addr::LOCALHOST, ports[0]));
    let request = |seq: u64| {
        let mut d = [0x5a_u8; UDP_HEADER_LEN + 1];
        let header = UdpHeader {
            tag: token.session_tag(),
            flow: 0,
            seq,
            sent_ns: 0,
        };
        header.encode(d.first_chunk_mut::<UDP_HEADER_LEN>().unwrap());
        d
    };
    // Answered: the response header echoes the request's.
    let answer = |s: &UdpSocket, seq: u64, within: Duration| -> Option<UdpHeader> {
        s.send_to(&request(seq), data).unwrap();
        s.set_read_timeout(Some(within)).unwrap();
        let mut b = [0u8; 256];
        match s.recv_from(&mut b) {
            Ok((n, from)) => {
                assert_eq!(from, data);
                Some(UdpHeader::decode(&b[..n]).expect("a linkperf datagram"))
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            Err(e) => panic!("receiving: {e}"),
        }
    };
    // The control connection came from 127.0.0.1. A datagram with the
    // session's tag from another address (here 127.0.0.2, as a forged source
    // would be) is not answered, before or after the real client's.
    let elsewhere = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let short = Duration::from_millis(500);
    assert_eq!(answer(&elsewhere, 0, short), None, "answered to 127.0.0.2");
    let h =
        answer(&client, 1, Duration::from_secs(5)).expect("the client's own datagram is answered");
    assert_eq!((h.tag, h.flow, h.seq), (token.session_tag(), 0, 1));
    assert_eq!(answer(&elsewhere, 2, short), None, "answered to 127.0.0.2");
    c.send(&ClientMessage::Abort {
        reason: "done".into(),
    });
}

/// Silent connections a worker with one user lets wait for their preamble:
/// twice its connections, plus 64.
const LET_WAIT: usize = 66;

/// Opens 500 connections to `data` that never send a preamble, far more
/// than a worker with one user lets wait ([`LET_WAIT`]), all well inside the
/// 5 s preamble timeout: the oldest is closed first, and once the worker has
/// taken them all in, all but those it lets wait are closed, the oldest
/// first (the data listener's backlog takes all 500, so the worker accepts
/// them in the order they connected), and the server holds few more
/// descriptors than before. Returns them, the newest still open.
fn silent_connections_stay_bounded(server: &Server, data: SocketAddr) -> Vec<TcpStream> {
    let (before, _) = util::fds_and_threads(server.pid());
    let mut silent = Vec::with_capacity(500);
    for i in 0..500 {
        silent.push(TcpStream::connect(data).unwrap_or_else(|e| panic!("connection {i}: {e}")));
    }
    assert!(
        closed_within(&mut silent[0], Duration::from_secs(2)),
        "the oldest silent connection is closed for the newer ones"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let closing = silent.len() - LET_WAIT;
    for (i, s) in silent.iter_mut().enumerate().take(closing) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            closed_within(s, left),
            "the worker closed {i} of the {closing} oldest of 500 silent connections"
        );
    }
    let (during, _) = util::fds_and_threads(server.pid());
    assert!(
        during < before + 100,
        "the server holds {during} descriptors, {before} before 500 silent connections"
    );
    silent
}

#[test]
fn silent_connections_to_a_data_port_stay_bounded_and_the_oldest_go_first() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let (mut c, ports, token) = accepted_test(&server, Duration::from_secs(5));
    let data = SocketAddr::from((Ipv4Addr::LOCALHOST, ports[0]));
    let mut silent = silent_connections_stay_bounded(&server, data);
    // A real user's connection, with its preamble, is served and kept.
    let mut real = with_preamble(data, token);
    assert!(
        !closed_within(&mut real, Duration::from_millis(500)),
        "a connection with the session's token is kept"
    );
    assert!(
        !closed_within(&mut silent[499], Duration::from_millis(200)),
        "the newest silent connections wait out their preamble timeout"
    );
    c.send(&ClientMessage::Abort {
        reason: "done".into(),
    });
    drop(silent);
    still_serves(&server);
}

// ---------------------------------------------------------------------------
// 3. Limits: each refusal says which limit.
// ---------------------------------------------------------------------------

/// No session thread died: the server still runs a test, and its log says
/// nothing of a panic.
fn still_serves(server: &Server) {
    let (code, _, err, _) = run_against(server, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

#[test]
fn users_duration_and_connections_limits_refuse_with_their_flag() {
    let _g = shared();
    let server = Server::start(&[
        "--max-users",
        "3",
        "--max-duration",
        "2s",
        "--max-connections",
        "5",
    ]);
    // The server says the limit and its figures; the client names the
    // server's setting.
    let cases: [(&[&str], &str, &str); 3] = [
        (
            &["--users", "4"],
            "4 users exceed this server's limit of 3 per test",
            "(the server's --max-users)",
        ),
        (
            &["--duration", "3s"],
            "exceeds this server's limit of 2 s",
            "(the server's --max-duration)",
        ),
        (&["--users", "3", "--threads", "1"], "", ""),
    ];
    for (extra, says, flag) in cases {
        let (code, _, err, doc) = run_against(&server, extra);
        if says.is_empty() {
            assert_eq!(code, 0, "{extra:?}: {err}");
            continue;
        }
        assert_eq!(code, 1, "{extra:?}: {err}");
        assert!(
            err.contains(says) && err.contains("(limit)") && err.contains(flag),
            "{extra:?}: {err}"
        );
        let recorded = text(first_run(&doc), "/error");
        assert!(
            recorded.contains(says) && recorded.contains(flag),
            "{recorded}"
        );
    }

    // Connections: a running 3-user test holds 3 of the 5; a second of 3 is refused.
    let addr = server.addr();
    let long = util::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--users",
        "3",
        "--duration",
        "1500ms",
        "--warmup",
        "100ms",
    ]);
    // The 3-user case above ran one already; wait for this one.
    server.wait_for_log("the second 3-user test", Duration::from_secs(30), |l| {
        l.matches("running rr1c-1x1--3").count() >= 2
    });
    let (code, _, err, _) = run_against(&server, &["--users", "3"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("needs 3 data connections, this server may hold 5 (3 in use by other tests)")
            && err.contains("--max-connections"),
        "{err}"
    );
    // One more fits beside it.
    let (code, _, err, _) = run_against(&server, &["--users", "2"]);
    assert_eq!(code, 0, "{err}");
    let (status, _, err) = long.finish(util::RUN_DEADLINE);
    assert!(status.success(), "{err}");
}

#[test]
fn sessions_limit_counts_sessions_past_their_handshake() {
    let _g = shared();
    let server = Server::start(&["--max-sessions", "1"]);
    // Connections that never say hello do not take the one slot.
    let idle: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port())).unwrap())
        .collect();
    let (code, _, err, _) = run_against(&server, &[]);
    assert_eq!(code, 0, "{err}");
    // A session past its hello does.
    let mut holder = Control::connect(server.address());
    holder.hello();
    let (code, _, err, doc) = run_against(&server, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("already serving 1 sessions") && err.contains("--max-sessions"),
        "{err}"
    );
    assert!(text(first_run(&doc), "/error").contains("--max-sessions"));
    drop(holder);
    drop(idle);
}

#[test]
fn bytes_per_session_limit_stops_the_test() {
    let _g = shared();
    let server = Server::start(&["--max-bytes-per-session", "20m"]);
    let started = Instant::now();
    let (code, _, err, doc) = run_against(
        &server,
        &[
            "--workload",
            "stream-up:64k",
            "--duration",
            "20s",
            "--warmup",
            "100ms",
        ],
    );
    let took = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(
        took < Duration::from_secs(10),
        "stopped early, not after the window: {took:?}"
    );
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "failed");
    let e = text(r, "/error");
    assert!(
        e.contains("past this server's limit of 20,971,520 per session") && e.contains("(limit)"),
        "{e}"
    );
    // What the client measured is kept.
    assert!(util::num(r, "/client/totals/tx_bytes") > 0.0, "{r}");
    assert!(
        server.log().contains("(its --max-bytes-per-session)"),
        "{}",
        server.log()
    );
}

/// Regression: the byte limit bounded workloads only; a profile ran past it.
#[test]
fn bytes_per_session_limit_stops_a_profile_too() {
    let _g = shared();
    let server = Server::start(&["--max-bytes-per-session", "20m"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("upload.xml");
    std::fs::write(
        &profile,
        "<profile name=upload><group nthreads=1>\
         <transaction iterations=1><flowop type=connect/></transaction>\
         <transaction duration=20s><flowop type=write options=\"size=64k\"/></transaction>\
         </group></profile>",
    )
    .unwrap();
    let addr = server.addr();
    let started = Instant::now();
    let (code, _, err, doc) = run_json(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--profile",
        profile.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(took < Duration::from_secs(10), "stopped early: {took:?}");
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "failed", "{r}");
    assert!(
        text(r, "/error").contains("past this server's limit of 20,971,520 per session"),
        "{r}"
    );
}

/// Regression: the server computed with a client's profile before checking
/// it, and a session thread panicked on durations that overflow when summed.
/// Every bound the parser keeps holds for a profile from the wire too.
#[test]
fn a_profile_out_of_bounds_from_the_wire_is_refused_and_the_server_goes_on() {
    use linkperf_workload::profile::{FlowopKind, Limit, Size};
    let _g = shared();
    let server = Server::start(&[]);
    let base = linkperf_workload::profile::parse_profile(
        "<profile name=p><group nthreads=1>\
         <transaction iterations=1><flowop type=connect/></transaction>\
         <transaction duration=1s><flowop type=write options=\"size=10\"/></transaction>\
         <transaction duration=1s><flowop type=write options=\"size=10\"/></transaction>\
         </group></profile>",
        &|_| None,
    )
    .unwrap();
    let mut huge_times = base.clone();
    for t in &mut huge_times.groups[0].transactions[1..] {
        t.limit = Limit::Duration(Duration::from_secs(u64::MAX));
    }
    let mut wrapping_users = base.clone();
    wrapping_users.groups[0].users = u32::MAX;
    wrapping_users.groups.push(base.groups[0].clone());
    wrapping_users.groups[1].users = 2;
    // Regression: a transaction without flowops spun a server worker forever
    // (the parser refuses one; the wire did not).
    let mut empty = base.clone();
    empty.groups[0].transactions[1].flowops.clear();
    let mut bad_rand = base.clone();
    if let FlowopKind::Write(x) = &mut bad_rand.groups[0].transactions[1].flowops[0].kind {
        x.size = Size::Rand {
            min: 0,
            max: u64::MAX,
        };
    }
    for (profile, says) in [
        (huge_times, "duration="),
        (wrapping_users, "nthreads="),
        (bad_rand, "between 1 and 64m"),
        (empty, "has 0 flowops"),
    ] {
        let mut c = profile_asked(&server, profile);
        let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
        assert_eq!(code, "malformed", "{message}");
        assert!(
            message.contains("out of bounds") && message.contains(says),
            "{says}: {message}"
        );
    }
    still_serves(&server);
}

/// Regression: the server summed a client's warmup and duration before
/// anything bounded them, and a session thread panicked on the overflow.
#[test]
fn a_test_whose_times_overflow_is_refused_and_the_server_goes_on() {
    let _g = shared();
    let server = Server::start(&[]);
    let mut spec = TestSpec::new("rr1c-1x1".parse().unwrap(), Protocol::Tcp, 1, Duration::MAX);
    spec.warmup = Duration::MAX;
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&ClientMessage::Test {
        spec,
        placement: Placement::with_threads(1),
    });
    let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
    assert_eq!(code, "refused", "{message}");
    assert!(message.contains("longer than a test may last"), "{message}");
    still_serves(&server);
}

/// Silent connections cannot lock clients out: when the handshake slots are
/// full, the oldest is dropped for the new one, long before its timeout.
#[test]
fn silent_handshakes_cannot_lock_out_a_client_the_oldest_is_dropped() {
    let _g = shared();
    let server = Server::start(&["--max-handshakes", "2", "--handshake-timeout", "60s"]);
    let silent: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port())).unwrap())
        .collect();
    // A real client gets through at once, though fifty stay silent.
    let (code, _, err, doc) = run_against(&server, &[]);
    assert_eq!(code, 0, "{err}");
    util::assert_measured(first_run(&doc), "beside fifty silent connections");
    // The oldest silent one was dropped by the server, not by its timeout.
    let mut first = &silent[0];
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    let started = Instant::now();
    match first.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the oldest silent connection is still held: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    still_serves(&server);
}

/// Before its handshake a stranger may send a hello's worth: a frame
/// announced longer than 4 KiB is refused at once, whatever `--max-frame`,
/// with or without a key; after the handshake `--max-frame` holds.
#[test]
fn a_stranger_may_send_no_more_than_a_handshake_needs() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a pre-shared key of some length\n");
    for extra in [vec![], vec!["--auth-key", key.to_str().unwrap()]] {
        let server = Server::start(&extra);
        let mut c = Control::connect(server.address());
        // A 1 MiB frame announced, none of it sent.
        c.stream.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
        let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
        assert_eq!(code, "too_large", "{message}");
        assert!(message.contains("4096"), "{message}");
        let (code, _, err, _) = run_against(&server, &extra);
        assert_eq!(code, 0, "{err}");
    }
}

/// `serve` beyond loopback without a key says so loudly. The daemon binds
/// 0.0.0.0 inside a network namespace of its own (unshare), so that it is
/// reachable from nowhere while the test looks at what it prints.
#[test]
fn serving_beyond_loopback_without_a_key_warns_loudly() {
    let _g = shared();
    if !util::can_unshare_net() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // What it printed by the time it listens.
    let warned = |extra: &[&str]| -> String {
        Server::start_spec(&ServeSpec {
            under: &["unshare", "--net"],
            listen: Some("0.0.0.0"),
            port: Some(7410),
            extra,
            ..ServeSpec::default()
        })
        .log()
    };
    let open = warned(&[]);
    assert!(open.contains("WARNING"), "{open}");
    let key = key_file(dir.path(), "k", "a key for the warning test......");
    let keyed = warned(&["--auth-key", key.to_str().unwrap()]);
    assert!(!keyed.contains("WARNING"), "{keyed}");
}

#[test]
fn control_and_start_timeouts_are_flags_and_end_silent_sessions() {
    let _g = shared();
    let server = Server::start(&["--control-timeout", "500ms", "--start-timeout", "1s"]);
    // Past the handshake, no test request.
    let mut c = Control::connect(server.address());
    c.hello();
    let t0 = Instant::now();
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "refused");
    assert!(
        message.contains("no test request within 500ms") && message.contains("--control-timeout"),
        "{message}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // Accepted, and never started.
    let (mut c, ports, _) = accepted_test(&server, Duration::from_secs(5));
    let t0 = Instant::now();
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "refused");
    assert!(
        message.contains("no start within 1s of the test's acceptance"),
        "{message}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // Its data endpoints are gone with it: the session closes them before
    // it logs its end, which it does before it sends the error.
    assert!(
        server.log().contains("no start within 1s"),
        "{}",
        server.log()
    );
    assert!(
        TcpStream::connect(("127.0.0.1", ports[0])).is_err(),
        "data port still open"
    );
    still_serves(&server);
    // And they are checked like the other times.
    let (code, _, err) = run(&["serve", "--start-timeout", "0s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--start-timeout must be more than 0"), "{err}");
}

#[test]
fn frame_size_limit_refuses_large_control_messages() {
    let _g = shared();
    let server = Server::start(&["--max-frame", "4k"]);
    let mut c = Control::connect(server.address());
    c.hello();
    let mut frame = Vec::new();
    encode_frame(&vec![b' '; 5000], &mut frame);
    c.stream.write_all(&frame[..4]).unwrap();
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "too_large");
    assert!(
        message.contains("5000 bytes exceeds the limit of 4096") && message.contains("--max-frame"),
        "{message}"
    );
    // A normal test still fits.
    let (code, _, err, _) = run_against(&server, &[]);
    assert_eq!(code, 0, "{err}");
}

/// How often a slow client drips a byte of its hello: the fault's pace.
const SLOWLORIS_BYTE_EVERY: Duration = Duration::from_millis(200);

#[test]
fn handshake_timeout_drops_silent_and_slow_clients() {
    let _g = shared();
    let server = Server::start(&["--handshake-timeout", "1s"]);
    // Silent.
    let start = Instant::now();
    let mut silent = Control::connect(server.address());
    let (code, message) = expect_error(silent.recv(Duration::from_secs(5)));
    let took = start.elapsed();
    assert_eq!(code, "limit");
    assert!(message.contains("--handshake-timeout of 1s"), "{message}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(silent.recv(Duration::from_secs(3)).is_none(), "then closed");

    // Slow: a hello dripped a byte every 200 ms would take seconds; the limit
    // counts from the connection, not from the last byte.
    let start = Instant::now();
    let mut slow = Control::connect(server.address());
    let hello = encode_client(&ClientMessage::Hello {
        protocol_version: PROTOCOL_VERSION,
        client_version: "slow".into(),
        challenge: None,
    });
    // A byte, then up to 200 ms for the server's answer, then the next:
    // the answer ends the drip.
    let mut answer = None;
    for b in &hello[..10] {
        if slow.stream.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        answer = slow.recv_within(SLOWLORIS_BYTE_EVERY);
        if answer.is_some() {
            break;
        }
    }
    let answer = answer.unwrap_or_else(|| slow.recv(Duration::from_secs(5)));
    let (code, _) = expect_error(answer);
    assert_eq!(code, "limit");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    // With a key, answering the challenge counts too.
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a key for the handshake test..");
    let keyed = Server::start(&[
        "--handshake-timeout",
        "1s",
        "--auth-key",
        key.to_str().unwrap(),
    ]);
    let mut c = Control::connect(keyed.address());
    c.hello();
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "limit", "{message}");
    assert!(message.contains("no authentication"), "{message}");
}

// ---------------------------------------------------------------------------
// 4. SIGTERM / SIGINT on serve.
// ---------------------------------------------------------------------------

fn serve_signal_aborts_running_tests(sig: &str) {
    let _g = shared();
    let mut serve = Server::start(&[]);
    let addr = serve.addr();
    let client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--users",
        "4",
        "--duration",
        "20s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(20));
    serve.signal(sig);
    let signalled = Instant::now();
    let status = serve
        .exit_within(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("serve still running 5 s after {sig}: {}", serve.log()));
    let took = signalled.elapsed();
    assert!(status.success(), "{status}: {}", serve.log());
    eprintln!("serve exited {took:?} after {sig}");
    assert!(
        serve.log().contains("1 running test aborted"),
        "{}",
        serve.log()
    );
    let (status, _, err, doc) = client.finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{err}");
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    assert!(text(r, "/error").contains("shutting down"), "{r}");
    // The client keeps what it measured.
    assert!(util::num(r, "/client/totals/transactions") > 0.0, "{r}");
    assert!(r.get("throughput").is_some(), "{r}");
}

#[test]
fn ctrl_c_on_run_while_its_users_connect_stops_at_once_and_keeps_the_record() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let addr = server.addr();
    let mut client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--users",
        "2000",
        "--duration",
        "10s",
    ]);
    // The server has taken the test on: its 2,000 users connect now, and
    // take longer than the interrupt takes to come; wherever it lands, the
    // run stops, says so and writes what it has.
    server.wait_for_line("running rr1c-1x1--2000", Duration::from_secs(30));
    client.signal("-INT");
    let signalled = Instant::now();
    let status = client
        .exit_within(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("run still going 5 s after SIGINT"));
    eprintln!("run exited {:?} after SIGINT", signalled.elapsed());
    assert_eq!(status.code(), Some(1), "{status}");
    let doc = client.doc();
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    assert!(text(r, "/error").contains("interrupted"), "{r}");
    still_serves(&server);
}

#[test]
fn sigterm_on_serve_aborts_the_running_test_and_exits_within_5s() {
    serve_signal_aborts_running_tests("-TERM");
}

#[test]
fn sigint_on_serve_aborts_the_running_test_and_exits_within_5s() {
    serve_signal_aborts_running_tests("-INT");
}

// ---------------------------------------------------------------------------
// 5. A server killed mid-suite, then resumed against a restarted one.
// ---------------------------------------------------------------------------

/// How far into the second test of its suite the server is killed: its
/// users connected, its window open (the suite says nothing while a test
/// runs; killed as it sets the test up, the client could fail another way).
const INTO_THE_SECOND_TEST: Duration = Duration::from_millis(500);

#[test]
fn server_killed_mid_suite_keeps_completed_runs_and_resume_completes() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("three.toml");
    std::fs::write(
        &suite,
        r#"name = "three"
duration = "1s"
warmup = "100ms"

[[test]]
workload = "rr1c-1x1"
users = 1

[[test]]
workload = "rr1c-1x1"
users = 2

[[test]]
workload = "rr1c-1x1"
users = 3
"#,
    )
    .unwrap();
    let out = dir.path().join("out.json");
    let mut serve = Server::start(&[]);
    let port = serve.port();
    let addr = serve.addr();
    let suite_args = |resume: bool| {
        let mut a = vec![
            "suite".to_string(),
            suite.to_str().unwrap().into(),
            "-q".into(),
            "--server".into(),
            addr.clone(),
            "--threads".into(),
            "1".into(),
            "--server-threads".into(),
            "1".into(),
            "--out".into(),
            out.to_str().unwrap().into(),
            // One run per test, whatever a busy host makes of its checks.
            "--retry-suspect".into(),
            "0".into(),
        ];
        if resume {
            a.push("--resume".into());
        }
        a
    };
    // A run that completed: ok, or suspect on a busy host.
    let completed = |statuses: Vec<String>| {
        statuses.len() == 1 && (statuses[0] == "ok" || statuses[0] == "suspect")
    };
    let args = suite_args(false);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let client = util::spawn(&args);
    // Kill the server while the second test runs: it has taken the test on,
    // and its traffic flows well into the second of its window (a suite
    // says nothing while a test runs).
    serve.wait_for_line("running rr1c-1x1--2", Duration::from_secs(30));
    std::thread::sleep(INTO_THE_SECOND_TEST);
    serve.kill();
    let (status, stdout, stderr) = client.finish(util::RUN_DEADLINE);
    let code = status.code().unwrap_or(-1);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    // Which test failed and why.
    let failed_line = stdout
        .lines()
        .find(|l| l.starts_with("rr1c-1x1--2 run 1/1") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("no failed line for rr1c-1x1--2: {stdout}"));
    assert!(
        failed_line.contains("the server closed the control connection"),
        "{failed_line}"
    );
    let doc = util::read_doc(&out);
    let status = |doc: &Value, name: &str| -> Vec<String> {
        doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == name)
            .flat_map(|t| t["runs"].as_array().unwrap().iter())
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        completed(status(&doc, "rr1c-1x1--1")),
        "the completed test is kept: {:?}",
        status(&doc, "rr1c-1x1--1")
    );
    assert_eq!(status(&doc, "rr1c-1x1--2"), ["failed"]);
    assert_eq!(
        status(&doc, "rr1c-1x1--3"),
        ["failed"],
        "unreachable server"
    );

    // A new server on the same port; --resume runs only what did not complete.
    let _serve = Server::start_on(port, &[]);
    let args = suite_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("rr1c-1x1--1 run"),
        "test 1 ran again: {stdout}"
    );
    let doc = util::read_doc(&out);
    for name in ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"] {
        assert!(
            completed(status(&doc, name)),
            "{name}: {:?}",
            status(&doc, name)
        );
    }
}

// ---------------------------------------------------------------------------
// 6. A thousand hostile connections.
// ---------------------------------------------------------------------------

#[test]
fn a_thousand_garbage_or_silent_connections_do_not_stop_a_real_test() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let mut hostile = Vec::with_capacity(1000);
    for i in 0..1000u32 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port()))
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        match i % 4 {
            // Nothing at all.
            0 | 1 => {}
            // Not linkperf.
            2 => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            }
            // Half a frame, then nothing.
            _ => {
                let _ = s.write_all(&[0, 0, 0, 200, b'{']);
            }
        }
        hostile.push(s);
    }
    let (code, _, err, doc) = run_against(
        &server,
        &["--users", "2", "--duration", "1s", "--warmup", "200ms"],
    );
    assert_eq!(code, 0, "{err}\nserver: {}", server.log());
    util::assert_measured(first_run(&doc), "beside a thousand hostile connections");
    drop(hostile);
    let mut server = server;
    assert!(server.is_running());
}

// ---------------------------------------------------------------------------
// 7. Damaged results files: compare and report refuse them, naming the file.
// ---------------------------------------------------------------------------

/// A real results document.
fn good_results(dir: &Path) -> PathBuf {
    let p = dir.join("good.json");
    let (code, _, err) = run(&[
        "run",
        "-q",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--threads",
        "1",
        "--server-threads",
        "1",
        "--json",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    p
}

/// Runs `linkperf ARGS`; fails clearly if the subcommand does not exist.
fn run_subcommand(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = run(args);
    assert!(
        !err.contains("unrecognized subcommand"),
        "`linkperf {}` does not exist in this build: {err}",
        args[0]
    );
    (code, out, err)
}

#[test]
fn damaged_results_files_are_refused_by_compare_and_report() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let good = good_results(dir.path());
    let text_of_good = std::fs::read_to_string(&good).unwrap();
    let mut doc: Value = serde_json::from_str(&text_of_good).unwrap();

    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text_of_good[..text_of_good.len() / 2]).unwrap();

    let wrong_types = dir.path().join("hand-edited.json");
    doc["tests"][0]["runs"][0]["run"] = Value::String("one".into());
    std::fs::write(&wrong_types, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    let newer = dir.path().join("newer.json");
    let mut d: Value = serde_json::from_str(&text_of_good).unwrap();
    d["schema"] = Value::String("linkperf/results/v99".into());
    std::fs::write(&newer, serde_json::to_string_pretty(&d).unwrap()).unwrap();

    let good = good.to_str().unwrap();
    for (bad, problem) in [
        (&truncated, "truncated"),
        (&wrong_types, "shape"),
        (&newer, "newer linkperf"),
    ] {
        let bad = bad.to_str().unwrap();
        let name = Path::new(bad).file_name().unwrap().to_str().unwrap();
        for args in [
            vec!["compare", good, bad],
            vec!["compare", bad, good],
            vec!["report", bad],
        ] {
            let (code, out, err) = run_subcommand(&args);
            assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
            assert!(
                err.contains(name) && err.contains(problem),
                "{args:?}: the message must name {name} and say {problem:?}: {err}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 8. The path cut mid-test (the lab: network namespaces joined by a veth pair).
// ---------------------------------------------------------------------------

/// A lab configuration brought up for one test, and the server in it; both
/// taken down when dropped.
struct Lab {
    name: String,
    serve: Option<Server>,
}

impl Lab {
    /// `linkperf lab up veth,name=NAME`; `None` (with the reason printed) where
    /// this host cannot run the lab (no root, no iproute2), or a failure saying
    /// what is missing with LINKPERF_LAB_REQUIRED=1 (scripts/test.sh as root).
    fn up(name: &str) -> Option<Lab> {
        let (code, out, err) = run(&["lab", "up", &format!("veth,name={name}")]);
        assert!(
            !err.contains("unrecognized subcommand"),
            "`linkperf lab` does not exist in this build: {err}"
        );
        if code == 2 && err.contains("cannot run on this host") {
            assert!(
                std::env::var("LINKPERF_LAB_REQUIRED").as_deref() != Ok("1"),
                "LINKPERF_LAB_REQUIRED=1, but the lab cannot run here: {err}"
            );
            eprintln!("skipped: the lab cannot run here: {err}");
            return None;
        }
        assert_eq!(code, 0, "lab up: {out}\n{err}");
        Some(Lab {
            name: name.to_string(),
            serve: None,
        })
    }

    fn server_ns(&self) -> String {
        format!("lp-{}-s1", self.name)
    }

    /// Starts `linkperf serve` on the server's address (198.18.1.1, the lab's
    /// address plan) in the server's namespace; returns it once it listens.
    fn serve(&mut self) -> &Server {
        let ns = self.server_ns();
        self.serve.insert(Server::start_in(&ns, "198.18.1.1"))
    }

    fn client_ns(&self) -> String {
        format!("lp-{}-c1", self.name)
    }

    /// `linkperf run ARGS` in the client's namespace (see [`Client`]).
    fn client(&self, args: &[&str]) -> Client {
        Client::spawn_under(&["ip", "netns", "exec", &self.client_ns()], args)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        drop(self.serve.take());
        let _ = Command::new(BIN)
            .args(["lab", "down", &self.name])
            .stdin(std::process::Stdio::null())
            .output();
    }
}

#[test]
fn a_path_cut_mid_test_ends_the_client_with_a_clear_error_in_bounded_time() {
    let _g = exclusive();
    let Some(mut lab) = Lab::up(&format!("faults-cut-{}", std::process::id())) else {
        return;
    };
    // The lab's address plan: server 198.18.1.1 on lp-s1, client 198.18.1.2.
    lab.serve();
    let started = Instant::now();
    let mut client = lab.client(&[
        "run",
        "-q",
        "--server",
        "198.18.1.1",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    // Cut the path: the server's end of the veth pair goes down.
    let down = Command::new("ip")
        .args(["-n", &lab.server_ns(), "link", "set", "lp-s1", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let cut = Instant::now();
    // The client gives up by itself: the window (2 s), the drain (3 s), then the
    // control timeout for the server's results (30 s); never a hang.
    let status = client
        .exit_within(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the client still runs 60 s after the path was cut"));
    let took = cut.elapsed();
    let (_, _, err, doc) = client.finish(Duration::from_secs(5));
    eprintln!(
        "the client gave up {took:?} after the cut, {:?} after starting",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(60));
    gave_up_keeping_what_it_measured(&doc, "no results from the server within 30s");
}

/// A client whose host goes silent mid-test: its end of the link goes down,
/// then the client is killed, so that not even its kernel's FIN or RST reach
/// the server. Nothing moves on the data connections any more, and the
/// server's keepalive probes on the silent control connection go unanswered:
/// 3 s of both, and the server ends the session and frees its sockets and
/// threads (the test's window had 60 s to go).
#[test]
fn a_client_whose_host_goes_silent_is_let_go_by_the_server_within_5_s() {
    let _g = exclusive();
    let Some(mut lab) = Lab::up(&format!("faults-gone-{}", std::process::id())) else {
        return;
    };
    // Listening, its threads and descriptors are those of an idle server.
    let pid = lab.serve().pid();
    let idle = util::fds_and_threads(pid);
    let mut client = lab.client(&[
        "run",
        "-q",
        "--server",
        "198.18.1.1",
        "--users",
        "4",
        "--duration",
        "60s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    let busy = util::fds_and_threads(pid);
    assert!(
        busy.0 > idle.0,
        "the test holds no descriptors: {busy:?} vs {idle:?}"
    );
    let down = Command::new("ip")
        .args(["-n", &lab.client_ns(), "link", "set", "lp-c1", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    client.kill();
    let gone = Instant::now();
    let serve = lab.serve.as_ref().expect("serving");
    // Threads and descriptors: nothing announces their end.
    let freed = poll_until(Duration::from_secs(20), || {
        let now = util::fds_and_threads(pid);
        if now.0 <= idle.0 + 2 && now.1 <= idle.1 {
            Ok(gone.elapsed())
        } else {
            Err(format!(
                "the server still holds the session after its client went silent: \
                 {now:?} descriptors and threads, {idle:?} idle; log: {}",
                serve.log()
            ))
        }
    });
    eprintln!("the server let the silent client go after {freed:?}");
    assert!(
        freed < Duration::from_secs(8),
        "freed only after {freed:?}: {}",
        serve.log()
    );
    assert!(serve.log().contains("vanished"), "{}", serve.log());
}

/// Regression: a worker carrying one request/response flow waits in its
/// socket's blocking read without a timeout. When the server stops answering
/// (here: stopped by SIGSTOP, so its sockets stay open and nothing closes),
/// the client still releases that worker after the drain and gives up with
/// a clear error instead of hanging.
#[test]
fn a_server_that_stops_answering_does_not_hang_a_one_user_client() {
    let _g = shared();
    let serve = Server::start(&[]);
    let addr = serve.addr();
    let mut client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--workload",
        "rr1c-1x1",
        "--users",
        "1",
        "--threads",
        "1",
        "--server-threads",
        "1",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    serve.signal("-STOP");
    let outcome = client.exit_within(Duration::from_secs(60));
    serve.signal("-CONT");
    drop(serve);
    let Some(status) = outcome else {
        panic!("the client still runs 60 s after its server stopped answering")
    };
    let (_, _, err, doc) = client.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(1), "{err}");
    gave_up_keeping_what_it_measured(&doc, "no results from the server within 30s");
}

/// A session past its handshake that asked `server` to run `profile` with
/// one thread: the control connection, the answer not read yet.
fn profile_asked(server: &Server, profile: linkperf_workload::profile::Profile) -> Control {
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&ClientMessage::Profile {
        profile,
        placement: Placement::with_threads(1),
        client_ports: vec![],
    });
    c
}

/// [`profile_asked`], accepted and started: the control connection, the
/// first data port and the data token.
fn profile_started(
    server: &Server,
    profile: linkperf_workload::profile::Profile,
) -> (Control, u16, DataToken) {
    let mut c = profile_asked(server, profile);
    let (port, token) = match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted {
            data_ports, token, ..
        }) => (data_ports[0], token),
        other => panic!("expected accepted, got {other:?}"),
    };
    c.send(&ClientMessage::Start);
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Started) => {}
        other => panic!("expected started, got {other:?}"),
    }
    (c, port, token)
}

#[test]
fn a_profile_client_that_ends_transactions_out_of_order_is_refused_and_the_server_goes_on() {
    let _g = shared();
    let server = Server::start(&[]);
    let profile = linkperf_workload::profile::parse_profile(
        "<profile name=p><group nthreads=1>\
         <transaction iterations=1><flowop type=connect/></transaction>\
         <transaction duration=300m><flowop type=write options=\"size=10\"/>\
         <flowop type=read options=\"size=10\"/></transaction>\
         </group></profile>",
        &|_| None,
    )
    .unwrap();
    let ask = |txn: u32| {
        let (mut c, _, _) = profile_started(&server, profile.clone());
        // Transaction 0 is not timed; transaction 7 does not exist.
        c.send(&ClientMessage::TxnEnd {
            txn,
            iterations: vec![1],
        });
        expect_error(c.recv(Duration::from_secs(10)))
    };
    for txn in [0, 7] {
        let (code, message) = ask(txn);
        assert_eq!(code, "out_of_order", "{message}");
        assert!(message.contains("not a timed transaction"), "{message}");
    }
    // The server still runs tests.
    let (code, out, err) = run(&[
        "run",
        "--server",
        &server.addr(),
        "-w",
        "rr1c-1x1",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "-q",
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A profile of one user that connects `connects` times (one iteration
/// each), then writes 10 bytes and reads 11 on its newest connection,
/// started on `server`: the control connection, the data address, and the
/// preamble of the user's connection numbered `ordinal`.
fn connects_then_writes_10_reads_11(
    server: &Server,
    connects: u32,
) -> (Control, SocketAddr, impl Fn(u64) -> [u8; PREAMBLE_LEN]) {
    let profile = linkperf_workload::profile::parse_profile(
        &format!(
            "<profile name=p><group nthreads=1>\
             <transaction iterations={connects}><flowop type=connect/></transaction>\
             <transaction iterations=1><flowop type=write options=\"size=10\"/>\
             <flowop type=read options=\"size=11\"/></transaction>\
             </group></profile>"
        ),
        &|_| None,
    )
    .unwrap();
    let (control, port, token) = profile_started(server, profile);
    let data = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let preamble = move |ordinal| {
        Preamble {
            token,
            flow: 0,
            seq: ConnectSeq::new(0, 0, ordinal).pack(),
        }
        .encode()
    };
    (control, data, preamble)
}

#[test]
fn a_users_connections_pair_by_their_number_whatever_order_their_preambles_complete_in() {
    // uperf's connect in every iteration: a user opens two connections on
    // one name and then talks on the newest. Here the second's preamble
    // reaches the server before the first's (as a slow server sees it when
    // it reads a later connection's preamble before an earlier one's, or a
    // path reorders them): the server must still take the second as the
    // newest and answer on it.
    let _g = shared();
    let server = Server::start(&[]);
    // The control connection stays open while the data flows.
    let (_control, data, preamble) = connects_then_writes_10_reads_11(&server, 2);
    // The second connection is there, preamble and all, before the first
    // (the server accepts them in that order), and the first's preamble
    // comes in two pieces.
    let mut second = TcpStream::connect(data).unwrap();
    second.write_all(&preamble(2)).unwrap();
    let mut first = TcpStream::connect(data).unwrap();
    first.write_all(&preamble(1)[..10]).unwrap();
    first.write_all(&preamble(1)[10..]).unwrap();
    // Transaction 1 on the newest: 10 bytes out, 11 back.
    second.write_all(&[7; 10]).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = [0u8; 11];
    second
        .read_exact(&mut answer)
        .expect("the server answers on the newest connection");
    // Nothing was answered on the older one: it is open, or closed at the
    // end of the server's script, with nothing in it.
    let mut nothing = [0u8; 1];
    first.set_nonblocking(true).unwrap();
    match first.read(&mut nothing) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the older connection got {other:?}"),
    }
}

#[test]
fn silent_connections_to_a_profiles_data_port_stay_bounded_and_its_user_is_served() {
    // The profile path's acceptor has the same preamble gate as a test's:
    // connections that never present a preamble cannot make it hoard
    // descriptors, and the oldest go first.
    let _g = exclusive();
    let server = Server::start(&[]);
    let (_control, data, preamble) = connects_then_writes_10_reads_11(&server, 1);
    let silent = silent_connections_stay_bounded(&server, data);
    // The user's connection, with its preamble, is served.
    let mut real = TcpStream::connect(data).unwrap();
    real.write_all(&preamble(1)).unwrap();
    real.write_all(&[7; 10]).unwrap();
    real.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = [0u8; 11];
    real.read_exact(&mut answer)
        .expect("the server answers its user past the silent connections");
    drop(silent);
}

// ---------------------------------------------------------------------------
// A daemon that cannot be made to hoard: budgets charged at admission.
// ---------------------------------------------------------------------------

/// The server process's resident memory, bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A raw test request with `threads` server workers.
fn request(workload: &str, users: u32, threads: u32) -> ClientMessage {
    let mut spec = TestSpec::new(
        workload.parse().unwrap(),
        Protocol::Tcp,
        users,
        Duration::from_secs(5),
    );
    spec.warmup = Duration::from_millis(100);
    ClientMessage::Test {
        spec,
        placement: Placement::with_threads(threads),
    }
}

/// The attack's request, 1,024 users on 1,024 server threads with 64 MiB
/// responses, never started, is refused for its threads before anything is
/// held; within the budget the same users on a few threads hold memory that
/// does not grow with the message size; and a test that would need more
/// descriptors than the server may use is refused with both figures.
#[test]
fn requests_are_charged_against_the_budget_before_anything_is_held() {
    let _g = exclusive();
    let server = Server::start(&["--max-threads", "24", "--max-descriptors", "6000"]);
    let pid = server.pid();
    let (fds0, threads0) = fds_and_threads(pid);
    let rss0 = rss_bytes(pid);

    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&request("rr:1x64m", 1024, 1024));
    let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
    assert_eq!(code, "limit", "{message}");
    assert_eq!(message, "needs 1,026 threads, this server may use 24");
    // Nothing was held for it: once its session has ended (it lingers a
    // moment to let the client read the refusal), the daemon is as it was
    // (but for a descriptor the random source may keep open).
    drop(c);
    // Threads and descriptors: nothing announces their end.
    poll_until(Duration::from_secs(10), || {
        let (fds, threads) = fds_and_threads(pid);
        (fds <= fds0 + 1 && threads <= threads0)
            .then_some(())
            .ok_or_else(|| {
                format!("still held: {fds} fds (from {fds0}), {threads} threads (from {threads0})")
            })
    });

    // 1,024 users on 8 threads, 64 MiB responses, accepted and never started:
    // what it holds is charged, and is what 64 KiB responses would hold.
    let mut held = Vec::new();
    for workload in ["rr:1x64m", "rr:1x64k"] {
        let mut c = Control::connect(server.address());
        c.hello();
        c.send(&request(workload, 1024, 8));
        match c.recv(Duration::from_secs(10)) {
            Some(ServerMessage::Accepted { .. }) => {}
            other => panic!("{workload}: expected accepted, got {other:?}"),
        }
        held.push(c);
    }
    let (fds, threads) = fds_and_threads(pid);
    let rss = rss_bytes(pid);
    eprintln!(
        "two accepted 1,024-user tests on 8 threads each hold {} fds, {} threads, {} MiB more",
        fds - fds0,
        threads - threads0,
        (rss.saturating_sub(rss0)) >> 20
    );
    assert!(threads <= threads0 + 2 * (8 + 2), "{threads} threads");
    // Two sessions of 8 workers: each worker's buffers are a few hundred KiB.
    assert!(
        rss.saturating_sub(rss0) < 64 << 20,
        "{} MiB",
        rss.saturating_sub(rss0) >> 20
    );

    // A third would pass the descriptors the server may use with the two:
    // refused with the figures (each of the two charged 2,588).
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&request("rr1c-1x1", 2500, 2));
    let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
    assert_eq!(code, "limit", "{message}");
    assert_eq!(
        message,
        "needs 3,150 descriptors, this server may use 6,000 (5,176 in use by other tests)"
    );
    assert!(
        server.log().contains("(its --max-descriptors)"),
        "{}",
        server.log()
    );
    drop(held);
    still_serves(&server);
}

/// A test larger than what the server's open-file limit allows is refused
/// before it starts, naming both figures (it reported `ok` with 466 users
/// never served, when the server ran out of descriptors mid-test).
#[test]
fn a_test_larger_than_the_servers_descriptors_is_refused_before_it_starts() {
    let _g = shared();
    let server = Server::start_under(&["prlimit", "--nofile=2048"], &[]);
    let (code, _, err, doc) = run_against(&server, &["--users", "2500", "--threads", "2"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("descriptors, this server may use") && err.contains("--max-descriptors"),
        "{err}"
    );
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "failed", "{r}");
    assert!(r.get("client").is_none(), "nothing ran: {r}");
    still_serves(&server);
}

/// A token admits no more data connections at once than its test's users:
/// a second connection for a flow, or one for a flow that is not the test's,
/// is closed, and none of them is counted.
#[test]
fn a_token_admits_no_more_connections_than_its_users() {
    let _g = shared();
    let server = Server::start(&["--max-users", "1", "--max-connections", "10"]);
    let (mut c, ports, token) = accepted_test(&server, Duration::from_millis(800));
    let data = SocketAddr::from((Ipv4Addr::LOCALHOST, ports[0]));
    let mut user = with_preamble(data, token);
    // 200 more with the valid token: as flow 0 again, or as flows 1..
    let mut extra: Vec<TcpStream> = (0..200u32)
        .map(|i| {
            let mut s = TcpStream::connect(data).unwrap();
            let p = Preamble {
                token,
                flow: i % 2,
                seq: 0,
            };
            s.write_all(&p.encode()).unwrap();
            s
        })
        .collect();
    for (i, s) in extra.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(10)),
            "connection {i} held"
        );
    }
    assert!(
        !closed_within(&mut user, Duration::from_millis(100)),
        "the user's is kept"
    );
    // Run the 1-user test on the one connection, then ask for the results.
    c.send(&ClientMessage::Start);
    assert!(matches!(
        c.recv(Duration::from_secs(10)),
        Some(ServerMessage::Started)
    ));
    let t0 = Instant::now();
    let mut buf = [0u8; 1];
    while t0.elapsed() < Duration::from_millis(1500) {
        user.write_all(&[1]).unwrap();
        user.read_exact(&mut buf).unwrap();
    }
    c.send(&ClientMessage::Finished);
    match c.recv(Duration::from_secs(30)) {
        Some(ServerMessage::Results { report, .. }) => {
            assert_eq!(report.connections, 1, "only the user's connection counts");
            assert_eq!(report.flows.len(), 1);
            assert!(report.transactions > 0);
        }
        other => panic!("expected results, got {other:?}"),
    }
}

/// What the command line refuses, the server refuses too: a hand-made mix
/// with a weight of 0, or more entries than a mix may have.
#[test]
fn the_server_refuses_the_mixes_the_command_line_refuses() {
    let _g = shared();
    let server = Server::start(&[]);
    let entry = |weight| linkperf_workload::MixEntry {
        request: linkperf_workload::Bytes(200),
        response: linkperf_workload::Bytes(200),
        weight,
    };
    for (entries, says) in [
        (vec![entry(1), entry(0)], "weight 0"),
        ((0..65).map(|_| entry(1)).collect(), "more than 64"),
    ] {
        let mut c = Control::connect(server.address());
        c.hello();
        let spec = TestSpec::new(
            linkperf_workload::Workload::Mix { entries },
            Protocol::Tcp,
            1,
            Duration::from_secs(1),
        );
        c.send(&ClientMessage::Test {
            spec,
            placement: Placement::with_threads(1),
        });
        let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
        assert_eq!(code, "refused", "{message}");
        assert!(message.contains(says), "{message}");
    }
    still_serves(&server);
}
