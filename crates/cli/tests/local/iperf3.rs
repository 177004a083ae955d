//! iperf3 on the wire, end to end, with Debian's real `iperf3` binary on
//! 127.0.0.1: stock `iperf3 -c` clients against `linkperf serve --iperf3`
//! (every option linkperf serves, both directions, several clients at once,
//! UDP, refusals, bad clients), and `linkperf run --iperf3-server` against a
//! stock `iperf3 -s`.
//!
//! The numbers must agree as far as the protocol lets them, however busy the
//! host. Where linkperf's server receives, it reads all the client sent
//! before it answers: the two counts are equal. Where the receiver may stop
//! counting while data is still on its way (an iperf3 client receiving stops
//! at its own timer; a stock iperf3 server at `TEST_END`), the sender's count
//! is at least the receiver's and at most that plus what the stream's two
//! socket buffers can hold, read from this host's kernel ([`Buffers`]).
//! A test waits for what a process says (a log line, a line of output) or
//! for it to end; only where nothing is said (a stock server listening, a
//! stream connection read) the kernel's table of sockets is polled.
//!
//! The tests take the machine one at a time; all of them take about 45 s.

use crate::util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::util::iperf3::{
    client, done, done_lines, finish, log_when, read_by_server, require_iperf3, serve,
    spawn_client, spawn_watched, Buffers, StockServer,
};
use crate::util::{at, exclusive, int, poll_until, run, run_json, text, Server};
use serde_json::Value;

const KIB: u64 = 1024;

fn bytes(v: &Value, ptr: &str) -> u64 {
    int(v, ptr)
}

/// `-w`'s value in `args`, in bytes (`256K`, `2M`, `65536`).
fn window(args: &[&str]) -> Option<u64> {
    let v = args.iter().position(|a| *a == "-w").map(|i| args[i + 1])?;
    let (n, unit) = match v.strip_suffix(['K', 'k']) {
        Some(n) => (n, KIB),
        None => match v.strip_suffix(['M', 'm']) {
            Some(n) => (n, KIB * KIB),
            None => (v, 1),
        },
    };
    Some(n.parse::<u64>().expect("a -w size") * unit)
}

/// Where linkperf's server receives: it has read all the client sent (TCP
/// loses nothing) before it reports, so its count is the client's.
fn all_received(what: &str, sent: u64, received: u64) {
    assert_eq!(
        sent, received,
        "{what}: the receiver counted {received} bytes of the {sent} sent"
    );
}

/// Where the receiver may stop counting with data still on its way: it never
/// counts more than was sent, and no more can be on the way than `streams`
/// streams' buffers hold (see [`Buffers::tcp_in_flight_max`]).
fn within_buffers(what: &str, sent: u64, received: u64, streams: u64, w: Option<u64>, block: u64) {
    assert!(
        received <= sent,
        "{what}: {received} bytes received, only {sent} sent"
    );
    let max = streams * Buffers::read().tcp_in_flight_max(w, block);
    assert!(
        sent - received <= max,
        "{what}: {sent} bytes sent and {received} received: {} apart, more than the {max} bytes \
         {streams} stream(s) can hold in their socket buffers",
        sent - received
    );
}

/// Runs `iperf3 -c … -J ARGS` (TCP) against a fresh `linkperf serve
/// --iperf3` and asserts it exited 0 and that the counts agree: iperf3's
/// sender and receiver totals of each direction (see [`all_received`] and
/// [`within_buffers`]), and linkperf's server log (its count over the whole
/// test) with what it reported. With `-O` each end counts from its own omit
/// timer, and what crossed between the two timers is in one count only: how
/// much depends on when each timer fired, not on the protocol, so the totals
/// are not compared. Returns iperf3's JSON.
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
    let (reverse, bidir, omit) = (
        args.contains(&"-R"),
        args.contains(&"--bidir"),
        args.contains(&"-O"),
    );
    let w = window(args);
    // The client's sums: its own sending direction, or with -R the server's.
    let sent = bytes(&j, "/end/sum_sent/bytes");
    let received = bytes(&j, "/end/sum_received/bytes");
    assert!(sent > 0, "nothing was sent: {args:?}");
    let what = format!("iperf3 {args:?} sender vs receiver");
    match (omit, reverse) {
        (true, _) => {}
        (false, false) => all_received(&what, sent, received),
        (false, true) => within_buffers(&what, sent, received, streams, w, block),
    }
    let back = bidir.then(|| {
        (
            bytes(&j, "/end/sum_sent_bidir_reverse/bytes"),
            bytes(&j, "/end/sum_received_bidir_reverse/bytes"),
        )
    });
    if let (Some((s, r)), false) = (back, omit) {
        assert!(s > 0, "the server sent nothing back: {args:?}");
        within_buffers(
            &format!("{what}, server to client"),
            s,
            r,
            streams,
            w,
            block,
        );
    }
    // linkperf's server log: what it counted over the whole test is what it
    // reported (nothing omitted), and what it received is all that was sent.
    let lines = done(&server, 1);
    assert_eq!(lines.len(), 1, "one test in the log: {}", server.log());
    let (srv_received, srv_sent) = lines[0];
    if !omit {
        match (reverse, back) {
            (true, _) => assert_eq!(srv_sent, sent, "linkperf's server sent, {args:?}"),
            (false, Some((s, _))) => {
                assert_eq!(
                    srv_received, received,
                    "linkperf's server received, {args:?}"
                );
                assert_eq!(srv_sent, s, "linkperf's server sent, {args:?}");
            }
            (false, None) => {
                assert_eq!(
                    srv_received, received,
                    "linkperf's server received, {args:?}"
                )
            }
        }
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
    // The server sends them with -R: exactly, to the block, and the client
    // reads until it has them all.
    let j = agreed(&["-n", "10M", "-R", "-P", "2"], 128 * KIB, 2);
    assert_eq!(bytes(&j, "/end/sum_sent/bytes"), 10 * KIB * KIB);
    assert_eq!(bytes(&j, "/end/sum_received/bytes"), 10 * KIB * KIB);
    // -k with -R: the server sends exactly 50 blocks. A 3.12 client counts
    // every read as a block and stops counting when it has done 50 reads of
    // at most a block each, so it counts at most 50 blocks, and less when a
    // block comes in two reads.
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
    assert!((50..=50 * 32 * KIB).contains(&received), "{received}");
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
    // Both ways agree (see `agreed`): the client's sending streams come
    // first, then its receiving ones.
    let j = agreed(&["-t", "1", "--bidir", "-P", "2"], 128 * KIB, 2);
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

/// UDP both ways, each end's receive buffer big enough for the whole test:
/// on this host a datagram then cannot be dropped, so none may be counted
/// lost, and every datagram up to the last one counted has been counted.
/// linkperf's server, receiving, counts all the client sent; an iperf3 client
/// receiving may stop counting with datagrams still in its buffer.
#[test]
fn udp_both_ways() {
    require_iperf3();
    let _m = exclusive();
    // 800 kbit/s for a second in 1400-byte datagrams: about 72 of them. The
    // kernel charges a queued datagram its buffer's whole allocation, at most
    // twice its size and 2 KiB of bookkeeping; -w 1M gives each end a receive
    // buffer of twice min(1 MiB, net.core.rmem_max), at least 416 KiB.
    let len = 1400;
    let buffer = Buffers::read().udp_receive(1024 * KIB);
    for reverse in [false, true] {
        let mut args = vec![
            "-J", "-u", "-b", "800K", "-l", "1400", "-w", "1M", "-t", "1",
        ];
        if reverse {
            args.push("-R");
        }
        let (server, port) = serve(&[]);
        let o = client(port, &args);
        assert_eq!(
            o.code,
            0,
            "{args:?}: {}{}\nserver: {}",
            o.stdout,
            o.stderr,
            server.log()
        );
        let j = o.json();
        assert_eq!(text(&j, "/start/test_start/protocol"), "UDP");
        let (sent, received) = (&j["end"]["sum_sent"], &j["end"]["sum_received"]);
        let n = |v: &Value, k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("{args:?}: no {k} in {v}"))
        };
        let (sent_n, received_n) = (n(sent, "packets"), n(received, "packets"));
        assert!(
            sent_n * (2 * len + 2 * KIB) <= buffer,
            "{args:?}: {sent_n} datagrams may not fit a {buffer}-byte receive buffer"
        );
        // 800 kbit/s for a second: about 100 kB.
        let b = n(sent, "bytes");
        assert!((80_000..130_000).contains(&b), "{args:?}: {b} bytes sent");
        assert_eq!(b, sent_n * len, "{args:?}: whole datagrams sent");
        assert_eq!(n(received, "lost_packets"), 0, "{args:?}: {received}");
        assert_eq!(
            n(received, "bytes"),
            received_n * len,
            "{args:?}: every datagram up to the last counted was counted: {received}"
        );
        if reverse {
            assert!(received_n <= sent_n, "{args:?}: {sent} {received}");
        } else {
            assert_eq!(
                received_n, sent_n,
                "{args:?}: linkperf's server counted all"
            );
        }
        assert!(received["jitter_ms"].as_f64().unwrap() >= 0.0);
        // Its log: the server's own count, as it reported it.
        let (srv_received, srv_sent) = done(&server, 1)[0];
        if reverse {
            assert_eq!(srv_sent, b, "{args:?}");
        } else {
            assert_eq!(srv_received, n(received, "bytes"), "{args:?}");
        }
    }
}

#[test]
fn several_clients_at_once() {
    require_iperf3();
    let _m = exclusive();
    let (server, port) = serve(&[]);
    let tcp: Vec<_> = ["-N", "-R", "-N"]
        .into_iter()
        .map(|r| (r, spawn_client(port, &["-J", "-t", "2", "-P", "2", r])))
        .collect();
    let udp = spawn_client(port, &["-J", "-u", "-b", "5M", "-t", "2"]);
    for (r, c) in tcp.into_iter().chain([("-u", udp)]) {
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
        let (s, rcv) = (
            bytes(&j, "/end/sum_sent/bytes"),
            bytes(&j, "/end/sum_received/bytes"),
        );
        let what = format!("a concurrent client {r}");
        match r {
            "-N" => all_received(&what, s, rcv),
            "-R" => within_buffers(&what, s, rcv, 2, None, 128 * KIB),
            _ => {
                // UDP with the server's own buffers: a datagram may be
                // dropped if the server is kept from reading long enough,
                // and is then counted lost, unless it was among the last.
                let len = bytes(&j, "/start/test_start/blksize");
                let (sent_n, received_n, lost) = (
                    bytes(&j, "/end/sum_sent/packets"),
                    bytes(&j, "/end/sum_received/packets"),
                    bytes(&j, "/end/sum_received/lost_packets"),
                );
                assert!(received_n <= sent_n, "{what}: {}", j["end"]);
                assert_eq!(rcv, (received_n - lost) * len, "{what}: {}", j["end"]);
            }
        }
    }
    assert_eq!(done(&server, 4).len(), 4, "{}", server.log());
}

#[test]
fn refusals_reach_the_client() {
    require_iperf3();
    let _m = exclusive();
    let (server, port) = serve(&["--max-duration", "60s", "--max-sessions", "1"]);
    // Longer than --max-duration.
    let o = client(port, &["-t", "61"]);
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
    // Busy: one test at a time here (--max-sessions 1). The first holds it
    // from its cookie to its end: once its stream is connected, and for as
    // long as the second client takes however busy the host, it runs.
    let first = spawn_watched(port, &["-t", "50"]);
    first.wait_for("connected to");
    let o = client(port, &["-t", "1"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("the server is busy running a test"),
        "{}",
        o.stderr
    );
    first.kill();
    let log = log_when(&server, "the first test's end", |l| {
        l.contains("the client went away")
    });
    assert!(log.contains("refused: 61 s asked"), "{log}");
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
    let first = spawn_watched(port, &["-t", "20"]);
    // A second measured: the test is in its data phase.
    first.wait_for(" sec ");
    let signalled = sigterm(&server);
    exits_within_5s_of(&mut server, signalled);
    let o = first.finish();
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
    assert!(log.contains("shut down; 1 running test aborted"), "{log}");
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
    let one = poke(port, &cookie(b'b'));
    // The acceptor has read its cookie (and so routed it to its test): not
    // a new test, that the shutdown would count too.
    until_read(port, &one);
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
    assert!(log.contains("shut down; 2 running tests aborted"), "{log}");
}

/// Sends SIGTERM to `serve`; when it was sent.
fn sigterm(server: &Server) -> Instant {
    let signalled = Instant::now();
    server.signal("-TERM");
    signalled
}

/// Waits for `serve` to exit, at most 5 s after `signalled`.
fn exits_within_5s_of(server: &mut Server, signalled: Instant) {
    let left = Duration::from_secs(5).saturating_sub(signalled.elapsed());
    assert!(
        server.exit_within(left).is_some(),
        "serve still runs 5 s after SIGTERM: {}",
        server.log()
    );
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

/// Waits until the server's process has read all `s` sent it (its kernel
/// has acknowledged it and nothing is left in the server socket's receive
/// queue). A stream connection is answered nothing: only the kernel's table
/// of sockets shows it read.
fn until_read(port: u16, s: &TcpStream) {
    let local = s.local_addr().expect("local address");
    poll_until(Duration::from_secs(30), || {
        read_by_server(port, local)
            .then_some(())
            .ok_or_else(|| format!("the server did not read what {local} sent"))
    });
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
    // A client killed in the middle of its test (a second measured).
    let victim = spawn_watched(port, &["-t", "5", "-R"]);
    victim.wait_for(" sec ");
    victim.kill();
    // Still serving, and serving right.
    assert!(server.is_running());
    serves_right(&server, port, "after the bad clients");
    let log = log_when(&server, "the last test's end", |l| {
        l.contains("the client went away") && !done_lines(l).is_empty()
    });
    assert!(log.contains("refused: unreadable parameters"), "{log}");
    assert!(log.contains("the client went away"), "{log}");
    assert!(log.contains("refused: SCTP is not supported"), "{log}");
}

/// A stock client's one-second test against `server` ends well, and the
/// server received all it sent.
fn serves_right(server: &Server, port: u16, when: &str) {
    let o = client(port, &["-J", "-t", "1"]);
    assert_eq!(
        o.code,
        0,
        "{when}: {}{}\nserver: {}",
        o.stdout,
        o.stderr,
        server.log()
    );
    let j = o.json();
    all_received(
        when,
        bytes(&j, "/end/sum_sent/bytes"),
        bytes(&j, "/end/sum_received/bytes"),
    );
}

/// More connections waiting for their cookie than the port lets wait (256)
/// do not keep a client out: the one waiting longest is closed to make room,
/// as on linkperf's own data ports, and a real client's cookie comes with
/// its connection.
#[test]
fn a_flood_of_silent_connections_does_not_keep_a_client_out() {
    require_iperf3();
    let _m = exclusive();
    let (server, port) = serve(&["--handshake-timeout", "120s"]);
    let silent: Vec<TcpStream> = (0..300).map(|_| poke(port, b"")).collect();
    let mut oldest = &silent[0];
    oldest
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut b = [0u8; 1];
    assert_eq!(
        oldest.read(&mut b).ok(),
        Some(0),
        "the connection waiting longest was closed to make room"
    );
    serves_right(&server, port, "past the flood");
    // The newest still wait for their cookie.
    let newest = &silent[299];
    newest.set_nonblocking(true).unwrap();
    let still = (&*newest).read(&mut b);
    assert!(
        matches!(&still, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "{still:?}"
    );
}

/// `linkperf run --iperf3-server` against a stock `iperf3 -s`: each counted
/// all the other sent. iperf3 stops counting at `TEST_END`, which linkperf
/// sends once iperf3 has read all it sent; iperf3 closes its streams then,
/// and linkperf reads each to its end.
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
    assert!(r["client"]["cpu"]["process_s"].as_f64().unwrap() > 0.0);
    let note = text(r, "/client/error_samples/0");
    assert!(note.starts_with("iperf3 server reported: "), "{note}");
    assert_eq!(int(r, "/errors"), 0, "{r}");
    assert!(text(&doc, "/tests/0/config/server").starts_with("iperf3 127.0.0.1:"));
    let (tx, rx) = (
        int(r, "/client/totals/tx_bytes"),
        int(r, "/client/totals/rx_bytes"),
    );
    // The window's bytes are among the test's (how many fell in the window
    // depends on who had the CPU then).
    assert!(
        int(r, "/client/tx_bytes") <= tx && int(r, "/client/rx_bytes") <= rx,
        "{r}"
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
    all_received(
        &format!("{workload} x{users}: linkperf sent, iperf3 received"),
        tx,
        srv_rx,
    );
    all_received(
        &format!("{workload} x{users}: iperf3 sent, linkperf received"),
        srv_tx,
        rx,
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
    for w in ["stream-up:128k", "stream-down:64k", "stream-bidir:128k"] {
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
        ));
    }
    let lines = done(&server, 3);
    assert_eq!(lines.len(), 3, "{}", server.log());
    for ((received, sent), (tx, rx)) in lines.into_iter().zip(expected) {
        all_received(
            "linkperf sent, linkperf's iperf3 server received",
            tx,
            received,
        );
        // It closes its streams once the client has them all; linkperf's
        // client reads each to its end.
        all_received("linkperf's iperf3 server sent, linkperf received", sent, rx);
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
