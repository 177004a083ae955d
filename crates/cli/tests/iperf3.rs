//! iperf3 on the wire, end to end, with Debian's real `iperf3` binary on
//! 127.0.0.1: stock `iperf3 -c` clients against `linkperf serve --iperf3`
//! (every option linkperf serves, both directions, several clients at once,
//! UDP, refusals, bad clients), and `linkperf run --iperf3-server` against a
//! stock `iperf3 -s`. The numbers must agree: what iperf3 counted and what
//! linkperf counted differ by at most one block per stream.
//!
//! The tests take the machine one at a time (the agreement at the end of a
//! test depends on both ends getting the CPU); all of them take about 40 s.

#[allow(dead_code)]
mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::iperf3::{client, done_lines, finish, require_iperf3, serve, spawn_client, StockServer};
use util::{at, exclusive, int, run, run_json, text, Server};

const KIB: u64 = 1024;

/// `|a - b| <= slack`, with the numbers in the message.
fn assert_close(what: &str, a: u64, b: u64, slack: u64) {
    assert!(
        a.abs_diff(b) <= slack,
        "{what}: {a} and {b} differ by {} (more than {slack})",
        a.abs_diff(b)
    );
}

fn bytes(v: &Value, ptr: &str) -> u64 {
    int(v, ptr)
}

/// Runs `iperf3 -c … -J ARGS` against a fresh `linkperf serve --iperf3`,
/// asserts it exited 0, and checks that iperf3's sender and receiver totals
/// agree within one block per stream and that linkperf's server log counted
/// the same. Returns iperf3's JSON.
fn agreed(args: &[&str], block: u64, streams: u64) -> Value {
    let (server, port) = serve(&[]);
    let mut all = vec!["-J"];
    all.extend_from_slice(args);
    let out = client(port, &all);
    assert_eq!(
        out.code,
        0,
        "iperf3 -c {args:?} failed: {}\n{}\nserver: {}",
        out.stdout,
        out.stderr,
        server.log()
    );
    let j = out.json();
    assert!(
        j.get("error").is_none(),
        "iperf3 reported an error: {}",
        j["error"]
    );
    let sent = bytes(&j, "/end/sum_sent/bytes");
    let received = bytes(&j, "/end/sum_received/bytes");
    assert!(sent > 0, "nothing was sent: {args:?}");
    assert_close(
        &format!("iperf3 {args:?} sender vs receiver"),
        sent,
        received,
        block * streams,
    );
    // linkperf's server counted the same (its log line: the whole test).
    std::thread::sleep(Duration::from_millis(100));
    let lines = done_lines(&server.log());
    assert_eq!(lines.len(), 1, "one test in the log: {}", server.log());
    let (srv_received, srv_sent) = lines[0];
    let reverse = args.contains(&"-R");
    let (mine, theirs) = if reverse {
        (srv_sent, received)
    } else {
        (srv_received, sent)
    };
    // With -O both count from their own omit timer; the log has the whole test.
    if !args.contains(&"--bidir") && !args.contains(&"-O") {
        assert_close(
            &format!("linkperf's server vs iperf3 {args:?}"),
            mine,
            theirs,
            block * streams,
        );
    }
    j
}

#[test]
fn tcp_for_a_time() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-t", "1"], 128 * KIB, 1);
    assert_eq!(text(&j, "/start/test_start/protocol"), "TCP");
    assert!(at(&j, "/end/sum_received/seconds").as_f64().unwrap() > 0.9);
}

#[test]
fn tcp_bytes_and_blocks() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-n", "20M"], 128 * KIB, 1);
    assert_eq!(bytes(&j, "/end/sum_sent/bytes"), 20 * KIB * KIB);
    assert_eq!(bytes(&j, "/end/sum_received/bytes"), 20 * KIB * KIB);
    let j = agreed(&["-k", "200", "-l", "64K"], 64 * KIB, 1);
    assert_eq!(bytes(&j, "/end/sum_received/bytes"), 200 * 64 * KIB);
    // The server sends them with -R: exactly, to the block.
    let j = agreed(&["-n", "10M", "-R", "-P", "2"], 128 * KIB, 2);
    assert_eq!(bytes(&j, "/end/sum_sent/bytes"), 10 * KIB * KIB);
    assert_eq!(bytes(&j, "/end/sum_received/bytes"), 10 * KIB * KIB);
    // -k with -R: the server sends exactly 50 blocks. A 3.12 client counts
    // every read as a block and stops counting when it has done 50 reads, so
    // when a block arrives in two reads it counts a little less.
    let (server, port) = serve(&[]);
    let o = client(port, &["-J", "-k", "50", "-l", "32K", "-R"]);
    assert_eq!(
        o.code,
        0,
        "{}{}\nserver: {}",
        o.stdout,
        o.stderr,
        server.log()
    );
    let j = o.json();
    assert_eq!(bytes(&j, "/end/sum_sent/bytes"), 50 * 32 * KIB);
    let received = bytes(&j, "/end/sum_received/bytes");
    assert!(
        (45 * 32 * KIB..=50 * 32 * KIB).contains(&received),
        "{received}"
    );
}

#[test]
fn tcp_parallel_streams_are_numbered_like_iperf3s() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-t", "1", "-P", "4"], 128 * KIB, 4);
    assert_eq!(at(&j, "/end/streams").as_array().unwrap().len(), 4);
    assert_eq!(at(&j, "/start/connected").as_array().unwrap().len(), 4);
}

#[test]
fn tcp_reverse() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-t", "1", "-R"], 128 * KIB, 1);
    assert!(bytes(&j, "/end/sum_received/bytes") > 0);
    agreed(&["-t", "1", "-R", "-P", "3", "-l", "64K"], 64 * KIB, 3);
}

#[test]
fn tcp_bidirectional() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-t", "1", "--bidir", "-P", "2"], 128 * KIB, 2);
    // The client's sending streams come first, then its receiving ones.
    let sent = bytes(&j, "/end/sum_sent_bidir_reverse/bytes");
    let received = bytes(&j, "/end/sum_received_bidir_reverse/bytes");
    assert!(sent > 0, "the server sent nothing back");
    assert_close("--bidir server to client", sent, received, 2 * 128 * KIB);
    let streams = at(&j, "/end/streams").as_array().unwrap();
    assert_eq!(streams.len(), 4);
}

#[test]
fn tcp_socket_options() {
    require_iperf3();
    let _m = exclusive();
    agreed(&["-t", "1", "-l", "16K"], 16 * KIB, 1);
    agreed(&["-t", "1", "-w", "256K"], 128 * KIB, 1);
    agreed(&["-t", "1", "-M", "1200"], 128 * KIB, 1);
    agreed(&["-t", "1", "-N", "-l", "8K"], 8 * KIB, 1);
    let j = agreed(&["-t", "1", "-C", "reno"], 128 * KIB, 1);
    assert_eq!(text(&j, "/end/sender_tcp_congestion"), "reno");
    assert_eq!(
        text(&j, "/end/receiver_tcp_congestion"),
        "reno",
        "linkperf's server used the client's congestion control"
    );
}

#[test]
fn tcp_omit() {
    require_iperf3();
    let _m = exclusive();
    // Both ends start counting when their own omit timer fires; paced at
    // 400 Mbit/s, little is in flight at that moment.
    let j = agreed(&["-t", "2", "-O", "1", "-b", "400M"], 128 * KIB, 2);
    let omitted = at(&j, "/intervals")
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["sum"]["omitted"] == true)
        .count();
    assert!(omitted >= 1, "no omitted interval: {}", j["intervals"]);
    let secs = at(&j, "/end/sum_received/seconds").as_f64().unwrap();
    assert!(
        (1.5..2.5).contains(&secs),
        "counted over {secs} s, not the 2 after the omitted one"
    );
}

#[test]
fn server_output_text_and_json() {
    require_iperf3();
    let _m = exclusive();
    let j = agreed(&["-t", "1", "-P", "2", "--get-server-output"], 128 * KIB, 2);
    let out = text(&j, "/server_output_text");
    assert!(
        out.starts_with("Accepted connection from 127.0.0.1, port "),
        "{out}"
    );
    assert!(out.contains("receiver"), "{out}");
    assert!(out.contains("[SUM]"), "{out}");
    // Without -J the client prints it.
    let (_s, port) = serve(&[]);
    let o = client(port, &["-t", "1", "--get-server-output"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("Server output:"), "{}", o.stdout);
    assert!(o.stdout.contains("iperf Done."), "{}", o.stdout);
}

#[test]
fn udp_both_ways() {
    require_iperf3();
    let _m = exclusive();
    for reverse in [false, true] {
        let mut args = vec!["-u", "-b", "10M", "-t", "1"];
        if reverse {
            args.push("-R");
        }
        let j = agreed(&args, 32 * KIB, 1);
        let sent = &j["end"]["sum_sent"];
        let received = &j["end"]["sum_received"];
        assert_eq!(text(&j, "/start/test_start/protocol"), "UDP");
        // 10 Mbit/s for a second: about 1.25 MB.
        let b = sent["bytes"].as_u64().unwrap();
        assert!(
            (1_000_000..1_600_000).contains(&b),
            "{args:?}: {b} bytes sent"
        );
        assert_eq!(received["lost_packets"], 0, "{args:?}: {received}");
        assert_eq!(sent["packets"], received["packets"], "{args:?}");
        assert!(received["jitter_ms"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn several_clients_at_once() {
    require_iperf3();
    let _m = exclusive();
    let (server, port) = serve(&[]);
    let tcp: Vec<_> = (0..3)
        .map(|i| {
            let r = if i == 1 { "-R" } else { "-N" };
            spawn_client(port, &["-J", "-t", "2", "-P", "2", r])
        })
        .collect();
    let udp = spawn_client(port, &["-J", "-u", "-b", "5M", "-t", "2"]);
    let mut received = Vec::new();
    for c in tcp.into_iter().chain([udp]) {
        let o = finish(c);
        assert_eq!(
            o.code,
            0,
            "{}{}\nserver: {}",
            o.stdout,
            o.stderr,
            server.log()
        );
        let j = o.json();
        let (s, r) = (
            bytes(&j, "/end/sum_sent/bytes"),
            bytes(&j, "/end/sum_received/bytes"),
        );
        assert_close("a concurrent client", s, r, 2 * 128 * KIB);
        received.push(r);
    }
    std::thread::sleep(Duration::from_millis(100));
    let lines = done_lines(&server.log());
    assert_eq!(lines.len(), 4, "{}", server.log());
}

#[test]
fn refusals_reach_the_client() {
    require_iperf3();
    let _m = exclusive();
    let (server, port) = serve(&["--max-duration", "3s", "--max-sessions", "1"]);
    // Longer than --max-duration.
    let o = client(port, &["-t", "5"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("test duration too long"), "{}", o.stderr);
    // A congestion control this host does not have.
    let o = client(port, &["-t", "1", "-C", "nosuchcc"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("unable to set TCP_CONGESTION"),
        "{}",
        o.stderr
    );
    // Busy: one test at a time here (--max-sessions 1).
    let first = spawn_client(port, &["-t", "2"]);
    std::thread::sleep(Duration::from_millis(500));
    let o = client(port, &["-t", "1"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("the server is busy running a test"),
        "{}",
        o.stderr
    );
    assert_eq!(finish(first).code, 0);
    let log = server.log();
    assert!(log.contains("refused: 5 s asked"), "{log}");
    assert!(
        log.contains("refused: congestion control nosuchcc"),
        "{log}"
    );
}

/// SIGTERM to `serve --iperf3` mid-test: the iperf3 test ends as iperf3's
/// own server ends one (SERVER_TERMINATE: the client says the server has
/// terminated), is counted as aborted, and the daemon exits within 5 s.
/// Regression: the test was dropped with the process and the client saw its
/// control socket close unexpectedly.
#[test]
fn sigterm_ends_running_iperf3_tests_as_iperf3s_server_does() {
    require_iperf3();
    let _m = exclusive();
    let (mut server, port) = serve(&[]);
    let first = spawn_client(port, &["-t", "20"]);
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = sigterm(&server);
    exits_within_5s_of(&mut server, signalled);
    let o = finish(first);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        format!("{}{}", o.stdout, o.stderr).contains("the server has terminated"),
        "{}{}",
        o.stdout,
        o.stderr
    );
    let log = server.log();
    assert!(
        log.contains("aborted: the server is shutting down"),
        "{log}"
    );
    assert!(
        log.contains("shut down; 1 running test(s) aborted"),
        "{log}"
    );
}

/// SIGTERM to `serve --iperf3` while tests set up: each client is told
/// SERVER_TERMINATE at once, as iperf3's own server tells it, whether it was
/// sending its parameters or connecting its streams, and the daemon exits
/// within 5 s counting both as aborted. Before, those clients saw their
/// control connection close without a word.
#[test]
fn sigterm_tells_tests_still_setting_up_server_terminate() {
    require_iperf3();
    let _m = exclusive();
    let (mut server, port) = serve(&[]);
    let read_byte = |s: &mut TcpStream| -> u8 {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).expect("a state byte");
        b[0]
    };
    // Waiting for its parameters.
    let mut params = poke(port, &cookie(b'a'));
    assert_eq!(read_byte(&mut params), 9, "PARAM_EXCHANGE");
    // Waiting for the second of its two streams.
    let mut streams = poke(port, &cookie(b'b'));
    assert_eq!(read_byte(&mut streams), 9, "PARAM_EXCHANGE");
    let j = br#"{"tcp":true,"time":5,"parallel":2}"#;
    streams.write_all(&(j.len() as u32).to_be_bytes()).unwrap();
    streams.write_all(j).unwrap();
    assert_eq!(read_byte(&mut streams), 10, "CREATE_STREAMS");
    let _one = poke(port, &cookie(b'b'));
    std::thread::sleep(Duration::from_millis(200));
    let signalled = sigterm(&server);
    assert_eq!(until_closed(params), [11], "SERVER_TERMINATE, then closed");
    assert_eq!(until_closed(streams), [11], "SERVER_TERMINATE, then closed");
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "told after {:?}",
        signalled.elapsed()
    );
    exits_within_5s_of(&mut server, signalled);
    let log = server.log();
    assert_eq!(
        log.matches("aborted in setup: the server is shutting down")
            .count(),
        2,
        "{log}"
    );
    assert!(
        log.contains("shut down; 2 running test(s) aborted"),
        "{log}"
    );
}

/// Sends SIGTERM to `serve`; when it was sent.
fn sigterm(server: &Server) -> Instant {
    let signalled = Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    signalled
}

/// Waits for `serve` to exit, at most 5 s after `signalled`.
fn exits_within_5s_of(server: &mut Server, signalled: Instant) {
    while server.is_running() {
        assert!(
            signalled.elapsed() < Duration::from_secs(5),
            "serve still runs 5 s after SIGTERM: {}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A cookie of 36 `c`s and its NUL.
fn cookie(c: u8) -> Vec<u8> {
    let mut v = vec![c; 36];
    v.push(0);
    v
}

/// Connects to the iperf3 port and sends `bytes`.
fn poke(port: u16, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).expect("write");
    s
}

/// Reads until the server closes; what it sent.
fn until_closed(mut s: TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn the_server_survives_bad_clients() {
    require_iperf3();
    let _m = exclusive();
    let (mut server, port) = serve(&["--handshake-timeout", "1s"]);
    // Garbage instead of a cookie: closed.
    let s = poke(
        port,
        b"GET / HTTP/1.1\r\nHost: linkperf\r\n\r\n\x00\x01\x02",
    );
    let t0 = Instant::now();
    assert!(until_closed(s).is_empty());
    assert!(t0.elapsed() < Duration::from_secs(2));
    // A cookie, then silence: PARAM_EXCHANGE, then closed at the handshake timeout.
    let s = poke(port, &cookie(b'q'));
    let t0 = Instant::now();
    assert_eq!(until_closed(s), [9]);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    // Half a cookie, then silence: closed at the handshake timeout.
    let s = poke(port, b"abc");
    assert!(until_closed(s).is_empty());
    // A length no JSON needs: SERVER_ERROR (unable to receive parameters).
    let mut s = poke(port, &cookie(b'r'));
    s.write_all(&0xffff_fff0u32.to_be_bytes()).unwrap();
    assert_eq!(until_closed(s), [9, 0xfe, 0, 0, 0, 114, 0, 0, 0, 0]);
    // Broken JSON and the wrong JSON: the same.
    let mut s = poke(port, &cookie(b's'));
    s.write_all(&[0, 0, 0, 5]).unwrap();
    s.write_all(b"{\"a\":").unwrap();
    assert_eq!(until_closed(s)[1], 0xfe);
    let mut s = poke(port, &cookie(b't'));
    s.write_all(&[0, 0, 0, 5]).unwrap();
    s.write_all(b"[1,2]").unwrap();
    assert_eq!(until_closed(s)[1], 0xfe);
    // SCTP is refused as "protocol does not exist" (131).
    let mut s = poke(port, &cookie(b'u'));
    let j = br#"{"sctp":true,"time":1}"#;
    s.write_all(&(j.len() as u32).to_be_bytes()).unwrap();
    s.write_all(j).unwrap();
    assert_eq!(until_closed(s), [9, 0xfe, 0, 0, 0, 131, 0, 0, 0, 0]);
    // A test whose client never connects its streams: SERVER_ERROR at the timeout.
    let mut s = poke(port, &cookie(b'v'));
    let j = br#"{"tcp":true,"time":1,"parallel":2}"#;
    s.write_all(&(j.len() as u32).to_be_bytes()).unwrap();
    s.write_all(j).unwrap();
    // One stream with the right cookie, one with a cookie nobody knows.
    let _stream = poke(port, &cookie(b'v'));
    let stranger = poke(port, &cookie(b'w'));
    let got = until_closed(s);
    assert_eq!(&got[..2], [9, 10], "PARAM_EXCHANGE, CREATE_STREAMS");
    assert_eq!(got[2], 0xfe, "then SERVER_ERROR: {got:?}");
    assert_eq!(
        until_closed(stranger),
        [9],
        "a stranger's cookie is a new client"
    );
    // A client killed in the middle of its test.
    let mut victim = spawn_client(port, &["-t", "5", "-R"]);
    std::thread::sleep(Duration::from_millis(700));
    let _ = victim.kill();
    let _ = victim.wait();
    // Still serving, and serving right.
    assert!(server.is_running());
    let o = client(port, &["-J", "-t", "1"]);
    assert_eq!(
        o.code,
        0,
        "{}{}\nserver: {}",
        o.stdout,
        o.stderr,
        server.log()
    );
    let j = o.json();
    assert_close(
        "after the bad clients",
        bytes(&j, "/end/sum_sent/bytes"),
        bytes(&j, "/end/sum_received/bytes"),
        128 * KIB,
    );
    std::thread::sleep(Duration::from_millis(300));
    let log = server.log();
    assert!(log.contains("refused: unreadable parameters"), "{log}");
    assert!(log.contains("the client went away"), "{log}");
    assert!(log.contains("refused: SCTP is not supported"), "{log}");
}

/// `linkperf run --iperf3-server` against a stock `iperf3 -s`: linkperf's
/// client counts and iperf3's server counts agree within a block per stream.
fn against_stock_server(workload: &str, users: u64) {
    let stock = StockServer::start();
    let addr = stock.addr();
    let u = users.to_string();
    let args = [
        "run",
        "--quiet",
        "--iperf3-server",
        &addr,
        "--workload",
        workload,
        "--users",
        &u,
        "--duration",
        "1s",
        "--warmup",
        "300ms",
    ];
    let (code, out, err, doc) = run_json(&args);
    assert_eq!(code, 0, "linkperf {args:?}: {out}{err}");
    let srv = stock.finish();
    let r = at(&doc, "/tests/0/runs/0");
    util::assert_measured(r, "against a stock iperf3 server");
    assert!(
        r.get("server").is_none(),
        "iperf3 sends no linkperf record: {r}"
    );
    assert!(r["cpu"]["server"].is_null());
    assert!(int(r, "/client/tx_bytes") + int(r, "/client/rx_bytes") > 0);
    assert!(r["client"]["cpu"]["process_s"].as_f64().unwrap() > 0.0);
    let note = text(r, "/client/error_samples/0");
    assert!(note.starts_with("iperf3 server reported: "), "{note}");
    assert_eq!(int(r, "/errors"), 0, "{r}");
    assert!(text(&doc, "/tests/0/config/server").starts_with("iperf3 127.0.0.1:"));
    let block = 128 * KIB;
    let (tx, rx) = (
        int(r, "/client/totals/tx_bytes"),
        int(r, "/client/totals/rx_bytes"),
    );
    let e = &srv["end"];
    let (srv_rx, srv_tx) = match workload {
        "stream-bidir:128k" => (
            e["sum_received"]["bytes"].as_u64().unwrap(),
            e["sum_sent_bidir_reverse"]["bytes"].as_u64().unwrap(),
        ),
        _ => (
            e["sum_received"]["bytes"].as_u64().unwrap(),
            e["sum_sent"]["bytes"].as_u64().unwrap(),
        ),
    };
    assert_close(
        &format!("{workload} x{users}: linkperf sent, iperf3 received"),
        tx,
        srv_rx,
        block * users,
    );
    assert_close(
        &format!("{workload} x{users}: iperf3 sent, linkperf received"),
        rx,
        srv_tx,
        block * users,
    );
    assert!(tx + rx > 0);
    let streams = srv["end"]["streams"].as_array().unwrap().len() as u64;
    let each_way = if workload.starts_with("stream-bidir") {
        2
    } else {
        1
    };
    assert_eq!(
        streams,
        users * each_way,
        "iperf3 saw every user as a stream"
    );
    assert!(
        note.contains(&format!("over {} stream", users * each_way)),
        "{note}"
    );
}

#[test]
fn linkperf_drives_a_stock_iperf3_server_up() {
    require_iperf3();
    let _m = exclusive();
    against_stock_server("stream-up:128k", 1);
    against_stock_server("stream-up:128k", 4);
}

#[test]
fn linkperf_drives_a_stock_iperf3_server_down() {
    require_iperf3();
    let _m = exclusive();
    against_stock_server("stream-down:128k", 1);
    against_stock_server("stream-down:128k", 4);
}

#[test]
fn linkperf_drives_a_stock_iperf3_server_both_ways() {
    require_iperf3();
    let _m = exclusive();
    against_stock_server("stream-bidir:128k", 2);
}

#[test]
fn linkperf_client_and_server_speak_iperf3_to_each_other() {
    let _m = exclusive();
    let (server, port) = serve(&[]);
    let addr = format!("127.0.0.1:{port}");
    let mut expected = Vec::new();
    for (w, block) in [
        ("stream-up:128k", 128 * KIB),
        ("stream-down:64k", 64 * KIB),
        ("stream-bidir:128k", 128 * KIB),
    ] {
        let args = [
            "run",
            "--quiet",
            "--iperf3-server",
            &addr,
            "-w",
            w,
            "--users",
            "2",
            "--duration",
            "500ms",
            "--warmup",
            "200ms",
        ];
        let (code, out, err, doc) = run_json(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}\nserver: {}", server.log());
        let r = at(&doc, "/tests/0/runs/0");
        util::assert_measured(r, w);
        expected.push((
            int(r, "/client/totals/tx_bytes"),
            int(r, "/client/totals/rx_bytes"),
            block,
        ));
    }
    std::thread::sleep(Duration::from_millis(200));
    let lines = done_lines(&server.log());
    assert_eq!(lines.len(), 3, "{}", server.log());
    for ((received, sent), (tx, rx, block)) in lines.into_iter().zip(expected) {
        assert_close(
            "linkperf sent, linkperf's iperf3 server received",
            tx,
            received,
            2 * block,
        );
        assert_close(
            "linkperf's iperf3 server sent, linkperf received",
            sent,
            rx,
            2 * block,
        );
    }
}

#[test]
fn what_iperf3_cannot_run_is_refused_before_connecting() {
    let (code, _, err) = run(&[
        "run",
        "--iperf3-server",
        "127.0.0.1:1",
        "--workload",
        "rr1c-1x1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("iperf3 carries streams only"), "{err}");
    let (code, _, err) = run(&[
        "run",
        "--iperf3-server",
        "127.0.0.1:1",
        "--workload",
        "stream-up:1k",
        "--users",
        "129",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("128 streams"), "{err}");
    let (code, _, err) = run(&[
        "run",
        "--iperf3-server",
        "127.0.0.1",
        "--server",
        "127.0.0.1",
        "--workload",
        "stream-up:1k",
    ]);
    assert_eq!(code, 2, "--server and --iperf3-server: {err}");
    // Nobody there: the run fails, exit 1, with the reason.
    let (code, _, err) = run(&[
        "run",
        "--quiet",
        "--iperf3-server",
        "127.0.0.1:1",
        "--workload",
        "stream-up:1k",
        "--duration",
        "200ms",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("connect to the iperf3 server at 127.0.0.1:1"),
        "{err}"
    );
}
