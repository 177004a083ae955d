//! Limits: each refusal says which limit, the timeouts end silent sessions,
//! and requests are charged against the budget before anything is held.

use super::*;

// ---------------------------------------------------------------------------
// 3. Limits: each refusal says which limit.
// ---------------------------------------------------------------------------

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
    let server = Server::start(&["--max-threads", "24", "--max-descriptors", "8000"]);
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
    // refused with the figures (each of the two charged 1,564: 1,024
    // connections, 512 more that 8 workers let wait for their preamble, the
    // workers' own and the session's).
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&request("rr1c-1x1", 5000, 2));
    let (code, message) = expect_error(c.recv(Duration::from_secs(10)));
    assert_eq!(code, "limit", "{message}");
    assert_eq!(
        message,
        "needs 5,138 descriptors, this server may use 8,000 (3,128 in use by other tests)"
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
