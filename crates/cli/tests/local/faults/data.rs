//! Data connections belong to their session: tokens, UDP answers to the
//! control connection's address only, silent connections bounded, and a
//! profile's connections paired by their number.

use super::*;

// ---------------------------------------------------------------------------
// 2. Data connections belong to their session.
// ---------------------------------------------------------------------------

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
