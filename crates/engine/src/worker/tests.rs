//! Both sides of a test on loopback, in process: a client side
//! ([`ClientTest`]) and a server side ([`ServerTest`]) on real sockets and
//! real worker threads, or one side against a peer written here that speaks
//! the data protocol (a preamble, a registration, UDP requests) itself.
//! These pin what the client and server workers do today: the blocking
//! single-flow fast path on both sides, a crr flow's connection per
//! transaction, a UDP stream's registration and end, UDP request/response
//! answers, and a stop ending a parked flow.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linkperf_protocol::{DataToken, Preamble, UdpHeader, PREAMBLE_LEN, UDP_HEADER_LEN};
use linkperf_workload::{BitsPerSecond, Protocol, TestSpec, Workload};

use crate::io::DataEndpoints;
use crate::schedule::Schedule;
use crate::{ClientConfig, ClientTest, EngineError, ServerConfig, ServerTest, WorkerReport};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const TOKEN: DataToken = DataToken([7; 16]);
/// Long enough that a side still running at its end has not ended with the
/// window: every bound below is far inside it.
const DRAIN: Duration = Duration::from_secs(30);
/// How long a client may take to connect its users (generous: a busy host).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn spec(workload: &str, protocol: Protocol, users: u32, duration: Duration) -> TestSpec {
    let w: Workload = workload.parse().expect("a workload name");
    let mut s = TestSpec::new(w, protocol, users, duration);
    s.warmup = Duration::from_millis(200);
    s
}

fn server_config(spec: &TestSpec) -> ServerConfig {
    ServerConfig {
        spec: spec.clone(),
        threads: 1,
        affinity: None,
        busy_poll: false,
        bind_ip: LOCALHOST,
        token: TOKEN,
        preamble_timeout: Duration::from_secs(5),
        live: None,
        udp_peer: Some(LOCALHOST),
    }
}

fn client_config(spec: &TestSpec, endpoints: DataEndpoints) -> ClientConfig {
    ClientConfig {
        spec: spec.clone(),
        threads: 1,
        affinity: None,
        busy_poll: false,
        endpoints,
        token: TOKEN,
        connect_timeout: CONNECT_TIMEOUT,
        live: None,
        greeting: None,
    }
}

/// What one run of both sides came to.
struct Both {
    client: Vec<WorkerReport>,
    server: Vec<WorkerReport>,
    schedule: Schedule,
    /// When the client's workers had all returned.
    client_done: Instant,
}

/// Binds a server, connects a client to it, runs the test and finishes the
/// server once the client's workers have returned, as a session does.
fn run_both(spec: &TestSpec) -> Both {
    let server = ServerTest::bind(server_config(spec)).expect("the server binds");
    let client = ClientTest::connect(client_config(spec, server.endpoints().clone()))
        .expect("the client connects every user");
    // Both sides on one schedule: each counts in the same window (in a
    // session each side starts its own as it is told to, a moment apart).
    let schedule = client.start(DRAIN);
    server.start_on(schedule);
    let client = client.wait().expect("the client's workers return");
    let client_done = Instant::now();
    let server = server.finish().expect("the server's workers return");
    Both {
        client,
        server,
        schedule,
        client_done,
    }
}

fn window_transactions(reports: &[WorkerReport]) -> u64 {
    reports.iter().map(|r| r.counters.transactions).sum()
}

fn life_transactions(reports: &[WorkerReport]) -> u64 {
    reports.iter().map(|r| r.counters.totals.transactions).sum()
}

fn connections(reports: &[WorkerReport]) -> u64 {
    reports.iter().map(|r| r.connections).sum()
}

fn errors(reports: &[WorkerReport]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| r.counters.error_samples.iter().cloned())
        .collect()
}

#[test]
fn one_rr_user_parks_on_both_sides() {
    let spec = spec("rr:1x1", Protocol::Tcp, 1, Duration::from_secs(1));
    let run = run_both(&spec);
    assert_eq!(run.client.len(), 1, "one client worker for one user");
    assert_eq!(run.server.len(), 1, "one server worker for one user");
    assert!(
        run.client[0].parked,
        "the client's one rr flow waits in its own blocking read"
    );
    assert!(
        run.server[0].parked,
        "the server's one rr flow waits in its own blocking read"
    );
    let (c, s) = (
        window_transactions(&run.client),
        window_transactions(&run.server),
    );
    assert!(c > 0, "transactions in the window");
    // Every response the server wrote the client read: the whole-life counts
    // are the same.
    assert_eq!(
        life_transactions(&run.client),
        life_transactions(&run.server),
        "whole-life transactions, client and server"
    );
    // The server counts a transaction when the request's read ended, the
    // client when the response's did, and the next request goes after
    // that: their times alternate, so in one window the two counts differ
    // by the one transaction crossing an edge at most.
    assert!(
        c.abs_diff(s) <= 1,
        "window transactions: client {c}, server {s}"
    );
    assert_eq!(errors(&run.client), Vec::<String>::new());
    assert_eq!(errors(&run.server), Vec::<String>::new());
    assert_eq!(connections(&run.client), 1);
    assert_eq!(connections(&run.server), 1);
}

/// A TCP peer standing in for the server of a crr test: it takes one
/// connection at a time, reads its preamble and its one request, answers
/// and closes; it returns each connection's preamble (`None`: the client
/// closed it before its preamble). Connections are taken in the order they
/// were made; it ends at the first one whose preamble is all zeros.
fn crr_peer(
    listener: TcpListener,
    request: usize,
    response: usize,
) -> std::thread::JoinHandle<Vec<Option<Preamble>>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        // Bounded: far more connections than a few seconds of crr make.
        for _ in 0..10_000_000 {
            let Ok((mut c, _)) = listener.accept() else {
                break;
            };
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut p = [0u8; PREAMBLE_LEN];
            if c.read_exact(&mut p).is_err() {
                seen.push(None);
                continue;
            }
            if p == [0u8; PREAMBLE_LEN] {
                break;
            }
            seen.push(Preamble::decode(&p).ok());
            let mut req = vec![0u8; request];
            if c.read_exact(&mut req).is_ok() {
                let _ = c.write_all(&vec![0u8; response]);
            }
        }
        seen
    })
}

#[test]
fn crr_connects_once_per_transaction_and_each_preamble_numbers_it() {
    let users = 2u32;
    let spec = spec("crr:1x1", Protocol::Tcp, users, Duration::from_secs(1));

    // Against the real server: one connection per transaction, both sides.
    let run = run_both(&spec);
    let client_txns = life_transactions(&run.client);
    let server_txns = life_transactions(&run.server);
    let client_conns = connections(&run.client);
    let server_conns = connections(&run.server);
    assert!(
        window_transactions(&run.client) > 0,
        "transactions in the window"
    );
    assert_eq!(errors(&run.client), Vec::<String>::new());
    // Each flow connects for its next transaction only once the last one's
    // answer came and the server closed; a flow stops at the window's end
    // after its transaction's close, so all its connections carried one
    // (the first was made at setup, before the start).
    assert_eq!(
        client_conns, client_txns,
        "the client's connections and its transactions"
    );
    // The server counts a connection once its preamble came through, and a
    // transaction once it wrote the answer: every connection the client
    // made and finished.
    assert_eq!(
        server_conns, client_conns,
        "connections accepted by the server and made by the client"
    );
    assert_eq!(
        server_txns, client_txns,
        "transactions answered by the server and completed by the client"
    );
    // In the window, as for rr: one transaction a flow crossing an edge.
    let (c, s) = (
        window_transactions(&run.client),
        window_transactions(&run.server),
    );
    assert!(
        c.abs_diff(s) <= u64::from(users),
        "window transactions: client {c}, server {s}"
    );

    // Against a peer that reads the preambles: each connection of a flow
    // carries the flow and its number in it, 0, 1, 2, ...
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = crr_peer(listener, 1, 1);
    let client = ClientTest::connect(client_config(&spec, DataEndpoints::Tcp(vec![addr])))
        .expect("the client connects to the peer");
    client.start(DRAIN);
    let reports = client.wait().expect("the client's workers return");
    // The peer's last connection: it ends there.
    TcpStream::connect(addr)
        .and_then(|mut s| s.write_all(&[0u8; PREAMBLE_LEN]))
        .expect("the peer is told to end");
    let seen = peer.join().expect("the peer thread");
    assert_eq!(
        seen.len() as u64,
        connections(&reports),
        "every connection the client made reached the peer"
    );
    let mut next = vec![0u64; users as usize];
    for p in &seen {
        let p = p.expect("every connection presents its preamble");
        assert_eq!(p.token, TOKEN, "the session's token");
        let flow = p.flow as usize;
        assert!(flow < users as usize, "flow {flow} is one of the users");
        assert_eq!(p.seq, next[flow], "flow {flow}'s connections in order");
        next[flow] += 1;
    }
    assert!(
        next.iter().all(|&n| n > 1),
        "each flow reconnected for its transactions: {next:?}"
    );
    assert_eq!(
        next.iter().sum::<u64>(),
        life_transactions(&reports),
        "one connection per transaction"
    );
}

#[test]
fn a_udp_stream_registers_then_both_halves_end_with_the_window() {
    let mut spec = spec("stream-bidir:1k", Protocol::Udp, 2, Duration::from_secs(1));
    // 2 Mbit/s a user: about 250 datagrams a second each way.
    let rate = BitsPerSecond(2_000_000);
    spec.rate = Some(rate);
    assert_eq!(spec.stream_rate(), Some(rate));
    let run = run_both(&spec);
    assert!(
        run.client_done < run.schedule.drain_until,
        "the client's streams ended with the window, not with the drain: \
         they returned {:?} after the window closed",
        run.client_done.duration_since(run.schedule.measure_until)
    );
    assert!(
        run.client_done >= run.schedule.measure_until,
        "the client's streams ran until the window closed"
    );
    // Every user registered: the server counted each as a connection.
    assert_eq!(connections(&run.server), 2, "each user registered once");
    assert_eq!(connections(&run.client), 2);
    let counts = |reports: &[WorkerReport]| {
        let mut c = crate::Counters::new(false);
        for r in reports {
            c.merge(&r.counters);
        }
        c.datagrams.report().expect("a UDP stream's counts")
    };
    let (client, server) = (counts(&run.client), counts(&run.server));
    assert!(client.sent > 0, "the client sent in the window");
    assert!(server.sent > 0, "the server sent in the window");
    assert!(server.received > 0, "the server received the client's half");
    assert!(client.received > 0, "the client received the server's half");
    // Over their whole lives, each side received no more payload than the
    // other sent: what came was the test's datagrams (registrations carry
    // no payload).
    let bytes = |reports: &[WorkerReport], f: fn(&crate::Counters) -> u64| -> u64 {
        reports.iter().map(|r| f(&r.counters)).sum()
    };
    let tx = |c: &crate::Counters| c.totals.tx_bytes;
    let rx = |c: &crate::Counters| c.totals.rx_bytes;
    let (client_tx, client_rx) = (bytes(&run.client, tx), bytes(&run.client, rx));
    let (server_tx, server_rx) = (bytes(&run.server, tx), bytes(&run.server, rx));
    assert!(
        0 < server_rx && server_rx <= client_tx,
        "{server_rx} of {client_tx}"
    );
    assert!(
        0 < client_rx && client_rx <= server_tx,
        "{client_rx} of {server_tx}"
    );
    // Each sender is paced: over the warm-up and the window (and its end
    // within the drain), no more than its rate lets through, with room for
    // a busy host's catching up: each side sent in its whole life at most
    // three times what the rate allows in the time the test ran. (The
    // server's sender ending with the window is not seen apart from this:
    // the server is finished as soon as the client returns, and only
    // watching it for a while after the window could show it sending on.)
    let ran = run.client_done.duration_since(run.schedule.start);
    let budget = (rate.0 / 8) as f64 * ran.as_secs_f64() * 2.0 * 3.0;
    for (side, reports) in [("client", &run.client), ("server", &run.server)] {
        let sent: u64 = reports.iter().map(|r| r.counters.totals.tx_bytes).sum();
        assert!(sent > 0, "the {side} sent");
        assert!(
            (sent as f64) < budget,
            "the {side} sent {sent} bytes in {ran:?}, paced to {} bit/s a user",
            rate.0
        );
    }
}

/// A request of `size` payload bytes for user `flow` of session `tag`.
fn udp_request(tag: u32, flow: u32, seq: u64, size: usize) -> Vec<u8> {
    let mut d = vec![0u8; UDP_HEADER_LEN + size];
    let h = UdpHeader {
        tag,
        flow,
        seq,
        sent_ns: 0,
    };
    let mut hdr = [0u8; UDP_HEADER_LEN];
    h.encode(&mut hdr);
    d[..UDP_HEADER_LEN].copy_from_slice(&hdr);
    d
}

#[test]
fn a_udp_rr_server_answers_each_request_of_a_burst_in_order_to_where_it_came_from() {
    // Two users, each on its own socket, each sending a burst of requests
    // without waiting for answers (as an open loop with several requests
    // outstanding does), and a stranger of another session.
    const BURST: u64 = 50;
    let spec = spec("rr:100x200", Protocol::Udp, 2, Duration::from_secs(60));
    let server = ServerTest::bind(server_config(&spec)).expect("the server binds");
    let DataEndpoints::Udp(addrs) = server.endpoints().clone() else {
        panic!("a UDP test's endpoints are UDP");
    };
    server.start(DRAIN);
    let socket = || {
        let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        s.connect(addrs[0]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    let tag = TOKEN.session_tag();
    let stranger = socket();
    stranger
        .send(&udp_request(tag.wrapping_add(1), 0, 0, 100))
        .unwrap();
    let users = [socket(), socket()];
    for (flow, s) in (0u32..).zip(&users) {
        for seq in 0..BURST {
            s.send(&udp_request(tag, flow, seq, 100)).unwrap();
        }
    }
    let mut buf = [0u8; 2048];
    for (flow, s) in (0u32..).zip(&users) {
        for seq in 0..BURST {
            let n = s.recv(&mut buf).expect("an answer to each request");
            assert_eq!(n, UDP_HEADER_LEN + 200, "the response size");
            let h = UdpHeader::decode(&buf[..n]).unwrap();
            assert_eq!(
                (h.tag, h.flow, h.seq),
                (tag, flow, seq),
                "each answer echoes its request's header, in order, to the user's own socket"
            );
        }
    }
    // The stranger's datagram was read before the users' (loopback
    // delivers as it is sent, and one socket is read in order): an answer
    // to it would be waiting by now.
    stranger.set_nonblocking(true).unwrap();
    let unanswered = stranger.recv(&mut buf);
    assert!(
        matches!(&unanswered, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "another session's datagram is not answered: {unanswered:?}"
    );
    let reports = server.finish().expect("the server's workers return");
    assert_eq!(connections(&reports), 2, "one flow per user seen");
    assert_eq!(life_transactions(&reports), 2 * BURST);
    let bytes =
        |f: fn(&crate::Counters) -> u64| -> u64 { reports.iter().map(|r| f(&r.counters)).sum() };
    assert_eq!(bytes(|c| c.totals.rx_bytes), 2 * BURST * 100);
    assert_eq!(bytes(|c| c.totals.tx_bytes), 2 * BURST * 200);
    assert_eq!(errors(&reports), Vec::<String>::new());
}

#[test]
fn a_registration_never_answered_fails_setup_naming_the_endpoint() {
    // A UDP socket that takes the registrations and never answers.
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = silent.local_addr().unwrap();
    let spec = spec("stream-up:1k", Protocol::Udp, 1, Duration::from_secs(1));
    let began = Instant::now();
    let r = ClientTest::connect(client_config(&spec, DataEndpoints::Udp(vec![addr])));
    let took = began.elapsed();
    let Err(EngineError::Connect(why)) = r else {
        panic!(
            "the setup fails to connect, got {:?}",
            r.map(|_| ()).map_err(|e| e.to_string())
        );
    };
    assert!(
        why.contains(&format!("could not register with {addr}")),
        "{why}"
    );
    assert!(why.contains("no answer to its UDP datagrams"), "{why}");
    // It gave up on its own (after its 5 s), not at the connect timeout.
    assert!(took >= Duration::from_secs(5), "gave up after {took:?}");
    assert!(took < CONNECT_TIMEOUT, "gave up after {took:?}");
    // It asked more than once, each time as the session's flow 0.
    silent.set_nonblocking(true).unwrap();
    let mut asked = 0;
    let mut buf = [0u8; 2048];
    for _ in 0..100_000 {
        match silent.recv(&mut buf) {
            Ok(n) => {
                assert_eq!(n, UDP_HEADER_LEN, "a registration is a header alone");
                let h = UdpHeader::decode(&buf[..n]).unwrap();
                assert_eq!((h.tag, h.flow), (TOKEN.session_tag(), 0));
                asked += 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("reading the registrations: {e}"),
        }
    }
    assert!(asked >= 2, "the registration was sent again: {asked} seen");
}

/// A server side with one rr user whose client (written here) made one
/// transaction and then fell silent, its connection open; `stop` stops the
/// side. Returns how long the stop took to end the server's workers, and
/// their reports.
fn stop_parked(
    stop: impl FnOnce(ServerTest) -> Vec<WorkerReport> + Send + 'static,
) -> (Duration, Vec<WorkerReport>) {
    // The test would run a minute, and its server workers give up on their
    // own only 10 s after the drain: what ends them below is the stop.
    let spec = spec("rr:1x1", Protocol::Tcp, 1, Duration::from_secs(60));
    let server = ServerTest::bind(server_config(&spec)).expect("the server binds");
    let DataEndpoints::Tcp(addrs) = server.endpoints().clone() else {
        panic!("a TCP test's endpoints are TCP");
    };
    let mut c = TcpStream::connect(addrs[0]).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let preamble = Preamble {
        token: TOKEN,
        flow: 0,
        seq: 0,
    };
    c.write_all(&preamble.encode()).unwrap();
    server.start(DRAIN);
    // One transaction after the start: the server serves the flow.
    c.write_all(&[1]).unwrap();
    let mut answer = [0u8; 1];
    c.read_exact(&mut answer).expect("the server answers");
    // The client is silent now. The server parks its flow in a turn after
    // the one that served it (or before it), and then waits in its read:
    // the stop comes once the socket is parked.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.parked_sockets() == 0 {
        assert!(
            Instant::now() < deadline,
            "the server never parked its flow"
        );
        std::thread::yield_now();
    }
    let (tx, rx) = mpsc::channel();
    let began = Instant::now();
    let stopper = std::thread::spawn(move || {
        let reports = stop(server);
        let _ = tx.send(began.elapsed());
        reports
    });
    let took = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the stop ended the server's workers");
    let reports = stopper.join().expect("the stopping thread");
    // The server closed the connection as it ended.
    let mut rest = Vec::new();
    let closed = c.read_to_end(&mut rest);
    assert!(
        matches!(closed, Ok(0))
            || matches!(&closed, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "the server closed the connection: {closed:?}"
    );
    drop(c);
    (took, reports)
}

#[test]
fn a_stop_ends_a_parked_server_flow_within_max_sleep() {
    // An abort (what a session does when it fails or is interrupted), then
    // the finish that collects the reports; and a finish alone (the client
    // said it is done).
    let aborted = stop_parked(|s| {
        s.abort();
        s.finish().expect("the server's workers return")
    });
    let finished = stop_parked(|s| s.finish().expect("the server's workers return"));
    for (how, (took, reports)) in [("abort", aborted), ("finish", finished)] {
        assert_eq!(reports.len(), 1);
        assert!(reports[0].parked, "{how}: the server's flow was parked");
        assert_eq!(
            reports[0].counters.totals.transactions, 1,
            "{how}: the one transaction was answered"
        );
        // Nothing wakes a parked read but the stop (it has no timeout): a
        // worker that missed it would run to its own end, over a minute on.
        assert!(
            took < Duration::from_secs(2),
            "{how}: the server's workers ended {took:?} after the stop"
        );
    }
}
