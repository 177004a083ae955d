//! The control port against what is not a good client: malformed frames,
//! `--max-duration`, command-line misuse, and servers that are not linkperf.

use super::*;

// ---------------------------------------------------------------------------
// 6. The control decoder against malformed input.
// ---------------------------------------------------------------------------

/// One control frame: 4-byte big-endian length, then the payload.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

fn hello(version: u32) -> Vec<u8> {
    frame(
        format!(r#"{{"type":"hello","protocol_version":{version},"client_version":"e2e"}}"#)
            .as_bytes(),
    )
}

/// Sends `bytes` on a fresh control connection (then half-closes it if
/// `close`), reads until the server closes it and decodes the reply frames.
fn exchange(server: &Server, bytes: &[u8], close: bool) -> Vec<Value> {
    let mut s =
        TcpStream::connect(("127.0.0.1", server.port())).expect("connect to the control port");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).expect("send");
    if close {
        s.shutdown(Shutdown::Write).expect("half-close");
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the server did not close the connection after {:?}: {e}; got {:?}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&got)
            ),
        }
    }
    let mut frames = Vec::new();
    let mut rest = &got[..];
    while !rest.is_empty() {
        assert!(rest.len() >= 4, "a truncated reply: {got:?}");
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert!(rest.len() >= 4 + len, "a truncated reply frame: {got:?}");
        let v: Value = serde_json::from_slice(&rest[4..4 + len])
            .unwrap_or_else(|e| panic!("reply frame is not JSON ({e}): {got:?}"));
        frames.push(v);
        rest = &rest[4 + len..];
    }
    frames
}

/// The one reply is an error frame with `code`; returns it.
fn error_reply(frames: &[Value], code: &str) -> Value {
    let last = frames
        .last()
        .unwrap_or_else(|| panic!("no reply, expected {code}"));
    assert_eq!(text(last, "/type"), "error", "{frames:?}");
    assert_eq!(text(last, "/code"), code, "{frames:?}");
    assert!(!text(last, "/message").is_empty());
    last.clone()
}

#[test]
fn control_decoder_survives_malformed_input() {
    let _g = shared();
    let mut server = Server::start(&[]);
    // Listening, it holds what an idle server holds.
    let (fds, threads) = fds_and_threads(server.pid());

    // A frame cut short, then the client goes away: the server gives up on it.
    let cut = &hello(1)[..7];
    for f in exchange(&server, cut, true) {
        assert_eq!(text(&f, "/type"), "error", "{f}");
    }

    // Not linkperf at all.
    let replies = exchange(&server, b"GET / HTTP/1.1\r\n\r\n", false);
    assert_eq!(replies.len(), 1, "{replies:?}");
    let code = text(&replies[0], "/code");
    assert!(code == "too_large" || code == "malformed", "{replies:?}");

    // A length prefix of 4 GiB - 1 is refused before any payload.
    let replies = exchange(&server, &[0xFF, 0xFF, 0xFF, 0xFF], false);
    assert_eq!(replies.len(), 1, "{replies:?}");
    error_reply(&replies, "too_large");

    // Another protocol version.
    let ours = linkperf_protocol::PROTOCOL_VERSION;
    for version in [0, ours - 1, ours + 1, 99] {
        let replies = exchange(&server, &hello(version), false);
        assert_eq!(
            replies.len(),
            1,
            "no welcome for version {version}: {replies:?}"
        );
        error_reply(&replies, "version_mismatch");
    }

    // A valid hello, then `start` before any test.
    let mut bytes = hello(linkperf_protocol::PROTOCOL_VERSION);
    bytes.extend(frame(br#"{"type":"start"}"#));
    let replies = exchange(&server, &bytes, false);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(text(&replies[0], "/type"), "welcome");
    assert_eq!(
        int(&replies[0], "/protocol_version"),
        u64::from(linkperf_protocol::PROTOCOL_VERSION)
    );
    error_reply(&replies, "out_of_order");

    // Valid JSON of the wrong shape.
    for payload in [
        &br#"{"foo":[1,2,3]}"#[..],
        br#"[1,2,3]"#,
        br#""hello""#,
        br#"{"type":"launch"}"#,
        br#"{"type":"hello"}"#,
        br#"{"type":"hello","protocol_version":"one","client_version":"e2e"}"#,
    ] {
        let replies = exchange(&server, &frame(payload), false);
        assert_eq!(replies.len(), 1, "{replies:?}");
        error_reply(&replies, "malformed");
    }
    // Not JSON at all.
    let replies = exchange(&server, &frame(b"\x00\xffnot json"), false);
    error_reply(&replies, "malformed");

    // The server is still up, holds nothing for those sessions, and still works.
    assert!(server.is_running(), "serve died: {}", server.log());
    // Their session threads end after they closed: nothing announces it.
    poll_until(Duration::from_secs(5), || {
        let now = fds_and_threads(server.pid());
        (now.0 <= fds + 2 && now.1 <= threads + 2)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "after the malformed sessions, still {now:?} (fds, threads), \
                     expected at most {:?}",
                    (fds + 2, threads + 2)
                )
            })
    });
    let doc = load(&server, "rr1c-1x1", "tcp", 2, &[]);
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
}

/// Regression: an empty frame was answered with `too_large`.
#[test]
fn empty_control_frame_is_malformed_not_too_large() {
    let server = Server::start(&[]);
    let replies = exchange(&server, &[0, 0, 0, 0], false);
    assert_eq!(replies.len(), 1, "{replies:?}");
    error_reply(&replies, "malformed");
}

// ---------------------------------------------------------------------------
// 7. --max-duration.
// ---------------------------------------------------------------------------

#[test]
fn test_longer_than_max_duration_is_refused() {
    let server = Server::start(&["--max-duration", "2s"]);
    let addr = server.addr();
    let args = [
        "run",
        "--server",
        &addr,
        "--duration",
        "5s",
        "--warmup",
        "200ms",
    ];
    let (code, _out, err, doc) = run_json(&args);
    assert_ne!(code, 0, "stderr: {err}");
    assert_eq!(
        code, 1,
        "a refused test is a failed test, not misuse: {err}"
    );
    assert!(err.contains("max-duration"), "stderr: {err}");
    // The failed run is recorded, with no figures.
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(text(r, "/status"), "failed");
    assert!(text(r, "/error").contains("max-duration"), "{r}");
    for absent in [
        "throughput",
        "transaction_time_us",
        "cpu",
        "efficiency",
        "client",
        "server",
    ] {
        assert!(r.get(absent).is_none(), "a failed run has no {absent}: {r}");
    }
    assert_eq!(int(r, "/errors"), 0);
    assert!(at(r, "/intervals").as_array().unwrap().is_empty());
}

// ---------------------------------------------------------------------------
// 8. CLI misuse.
// ---------------------------------------------------------------------------

#[test]
fn cli_misuse_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("never.json");
    let json = json.to_str().unwrap();
    // Port 9 (discard) refuses: anything that slipped through would fail with 1.
    let cases: [(&[&str], &str); 15] = [
        (&["--workload", "rr2c-1x1"], "unknown workload"),
        (&["--users", "0"], "users"),
        (&["--protocol", "sctp"], "sctp"),
        // A UDP stream's message is one datagram.
        (
            &["--workload", "str-readx64k", "--protocol", "udp"],
            "UDP message must be between 1 and 65483",
        ),
        (&["--workload", "crr:1x1", "--protocol", "udp"], "udp"),
        (&["--duration", "abc"], "--duration"),
        (&["--affinity", "x"], "--affinity"),
        (&["--affinity", "1000"], "not available"),
        (&["--placement", "spread"], "expected same, split or free"),
        (
            &[
                "--placement",
                "split",
                "--affinity",
                "0",
                "--server-affinity",
                "0",
            ],
            "--placement split has no effect",
        ),
        (&["--frobnicate"], "--frobnicate"),
        // Regression: a lookup failure with exit 1.
        (
            &["--server", "127.0.0.1:abc"],
            "'127.0.0.1:abc' is not a server address: 'abc' is not a port",
        ),
        (&["--iperf3-server", "h:x"], "'x' is not a port"),
        (&["--cc", "no/such"], "is not a name"),
        // Not an address of this host (nothing is sent to it).
        (
            &["--protocol", "unix", "--server", "198.18.0.1:9"],
            "needs the server on this host",
        ),
    ];
    for (bad, says) in cases {
        let mut args = vec!["run", "--json", json];
        if !bad.contains(&"--server") && !bad.contains(&"--iperf3-server") {
            args.extend(["--server", "127.0.0.1:9"]);
        }
        args.extend(bad);
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{bad:?}: stdout {out} stderr {err}");
        assert!(
            err.contains(says),
            "{bad:?}: stderr should mention {says:?}: {err}"
        );
        assert!(out.is_empty(), "{bad:?}: nothing on stdout: {out}");
        assert!(
            !std::path::Path::new(json).exists(),
            "{bad:?} wrote results"
        );
    }
}

/// `--help` and the README say the same of the workloads, the durations and
/// the quick suite (they had drifted: no `mix:` in --help, a "one-minute"
/// suite that takes half a minute).
#[test]
fn help_and_readme_agree() {
    let readme = include_str!("../../../../../README.md");
    let help = |args: &[&str]| {
        let (code, out, err) = run(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let run_help = help(&["run", "--help"]);
    for form in [
        "rr:REQxRESP",
        "crr:REQxRESP",
        "stream-up:SIZE",
        "stream-down:SIZE",
        "stream-bidir:SIZE",
        "mix:REQxRESP*W",
    ] {
        assert!(run_help.contains(form), "run --help lacks {form}");
        assert!(readme.contains(form), "the README lacks {form}");
    }
    for (args, options) in [
        (
            &["run", "--help"][..],
            &["--duration", "--warmup", "--udp-timeout"][..],
        ),
        (&["suite", "--help"], &["--duration", "--warmup"]),
        (&["lab", "run", "--help"], &["--duration", "--warmup"]),
        (
            &["serve", "--help"],
            &[
                "--max-duration",
                "--handshake-timeout",
                "--control-timeout",
                "--start-timeout",
            ],
        ),
    ] {
        let text = help(args);
        for option in options {
            let at = text
                .find(&format!("{option} <"))
                .unwrap_or_else(|| panic!("{args:?}: no {option}"));
            let own = &text[at..];
            let own = &own[..own[1..].find("\n      -").map_or(own.len(), |i| i + 1)];
            assert!(
                own.contains("bare number of seconds"),
                "{args:?} {option}: {own}"
            );
        }
    }
    assert!(readme.contains("a bare number of seconds: `-d 10` is 10 s"));
    let list = help(&["suite", "--list"]);
    let quick = list
        .lines()
        .find_map(|l| l.strip_prefix("quick"))
        .expect("the quick suite is listed");
    let what = quick.trim().split(':').next().unwrap();
    assert!(
        readme.contains(&format!("`quick` ({what}"))
            && readme.contains(&format!("# the main job: {what}")),
        "the README calls the quick suite what --list does ({what})"
    );
}

/// Regression: `-d 5` was refused ("time unit needed"). A bare number is
/// seconds, as iperf3's `-t 10` and netperf's `-l 10`, in every duration
/// option: the server's limits and timeouts, the test's times, a suite's.
#[test]
fn a_bare_number_is_seconds_in_every_duration_option() {
    let _g = shared();
    let server = Server::start(&[
        "--max-duration",
        "60",
        "--handshake-timeout",
        "5",
        "--control-timeout",
        "5",
        "--start-timeout",
        "30",
    ]);
    let addr = server.addr();
    let args = [
        "run",
        "--quiet",
        "--server",
        &addr,
        "-w",
        "rr:1x1",
        "--protocol",
        "udp",
        "-d",
        "1",
        "--warmup",
        "0",
        "--udp-timeout",
        "0.5",
    ];
    let (code, out, err, doc) = run_json(&args);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let spec = at(&doc, "/tests/0/spec");
    for (key, secs, nanos) in [
        ("duration", 1, 0),
        ("warmup", 0, 0),
        ("udp_timeout", 0, 500_000_000),
    ] {
        assert_eq!(int(spec, &format!("/{key}/secs")), secs, "{key}: {spec}");
        assert_eq!(int(spec, &format!("/{key}/nanos")), nanos, "{key}: {spec}");
    }
    // The server reads its limits the same way: 2 s is over `--max-duration 1`.
    let strict = Server::start(&["--max-duration", "1"]);
    let addr = strict.addr();
    let (code, _, err) = run(&["run", "--server", &addr, "-d", "2", "--warmup", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("limit of 1 s") && err.contains("--max-duration"),
        "{err}"
    );
    // A suite's: the same plan as with units.
    let plan = |d: &str, w: &str| {
        let (code, out, err) = run(&[
            "suite",
            "quick",
            "--dry-run",
            "--duration",
            d,
            "--warmup",
            w,
        ]);
        assert_eq!(code, 0, "{err}");
        out
    };
    assert_eq!(plan("2", "0"), plan("2s", "0s"));
}

/// Regression: `--cc nosuchcc` failed the test with "No such file or
/// directory (os error 2)", printed twice, exit 1. This host is checked
/// before anything runs, and the error lists what it has.
#[test]
fn a_congestion_control_this_host_lacks_is_refused_before_anything_runs() {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("never.json");
    let json = json.to_str().unwrap();
    // Port 9 refuses: a check made by connecting would fail otherwise.
    for server in [&["--server", "127.0.0.1:9"][..], &[]] {
        let mut args = vec!["run", "--cc", "nosuchcc", "--json", json];
        args.extend(server);
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
        let says = "--cc nosuchcc: on this host, congestion control 'nosuchcc' is not available";
        assert_eq!(err.matches(says).count(), 1, "once: {err}");
        for cc in available.split_whitespace() {
            assert!(err.contains(cc), "the error lists {cc}: {err}");
        }
        assert!(out.is_empty(), "nothing ran: {out}");
        assert!(!std::path::Path::new(json).exists(), "nothing was written");
    }
}

/// A server refuses a test whose congestion control its host lacks, naming
/// the ones it has (a client on another host cannot check them).
#[test]
fn a_server_refuses_a_congestion_control_its_host_lacks() {
    use linkperf_protocol::{encode_client, ClientMessage, PROTOCOL_VERSION};
    use linkperf_workload::{Placement, Protocol, TestSpec};
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    let server = Server::start(&[]);
    let mut spec = TestSpec::new(
        "stream-up:16k".parse().unwrap(),
        Protocol::Tcp,
        1,
        Duration::from_secs(1),
    );
    spec.socket.cc = Some("nosuchcc".into());
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(encode_client(&ClientMessage::Test {
        spec,
        placement: Placement::with_threads(1),
    }));
    let replies = exchange(&server, &bytes, true);
    let e = error_reply(&replies, "refused");
    let message = text(&e, "/message");
    assert!(
        message.starts_with(
            "on the server's host, congestion control 'nosuchcc' is not available (available: "
        ),
        "{message}"
    );
    for cc in available.split_whitespace() {
        assert!(message.contains(cc), "the refusal lists {cc}: {message}");
    }
}

/// `linkperf run --server ADDR` against what is there, to the end: exit
/// code, stderr, and how long it took.
fn run_toward(addr: &str) -> (i32, String, Duration) {
    let t0 = Instant::now();
    let (code, _, err) = run(&["run", "--server", addr, "-d", "1", "--warmup", "0"]);
    (code, err, t0.elapsed())
}

/// Regression: an HTTP server at `--server` gave "control frame of
/// 1213486160 bytes exceeds the limit" ("HTTP" read as a length).
#[test]
fn a_server_that_speaks_http_is_named_as_such() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let http = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        // What a web server does with a request line it cannot parse.
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf);
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let (code, err, took) = run_toward(&addr);
    http.join().unwrap();
    assert_eq!(code, 1, "a test that did not run: {err}");
    assert!(
        err.contains(&format!(
            "reach a linkperf server at {addr}: this port speaks HTTP, not linkperf \
             (it answered \"HTTP/1.1 400 Bad Request\")"
        )),
        "{err}"
    );
    assert!(!err.contains("exceeds the limit"), "{err}");
    assert!(
        took < Duration::from_secs(10),
        "told from its answer, not a timeout: {took:?}"
    );
}

/// Regression: a stock `iperf3 -s` at `--server` gave "no welcome within
/// 15s": its one state byte after the (hello read as a) cookie says iperf3.
#[test]
fn a_server_that_speaks_iperf3_is_named_with_the_option_for_it() {
    util::iperf3::require_iperf3();
    let iperf3 = util::iperf3::StockServer::start();
    let addr = iperf3.addr();
    let (code, err, took) = run_toward(&addr);
    assert_eq!(code, 1, "a test that did not run: {err}");
    assert!(
        err.contains(&format!(
            "reach a linkperf server at {addr}: this port speaks iperf3, not linkperf: to test \
             against an iperf3 server, use --iperf3-server {addr}"
        )),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(10),
        "told from its answer, not a timeout: {took:?}"
    );
}

/// Issue 35: nothing listening at `--server` said only "Connection
/// refused"; it now asks whether `linkperf serve` runs there, at the address
/// it tried. The port was bound and let go, so nothing listens on it.
#[test]
fn nothing_listening_asks_whether_linkperf_serve_runs_there() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let (code, err, _) = run_toward(&addr);
    assert_eq!(code, 1, "a test that did not run: {err}");
    assert!(
        err.contains(&format!("reach the linkperf server at {addr}: ")),
        "{err}"
    );
    assert!(
        err.trim_end()
            .ends_with(&format!("is `linkperf serve` running on {addr}?")),
        "{err}"
    );
    // Said once, and the test's figures were never printed.
    assert_eq!(err.matches("`linkperf serve`").count(), 1, "{err}");
}
