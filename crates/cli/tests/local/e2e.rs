//! End-to-end tests: the real `linkperf` binary, a real `linkperf serve` child
//! process and real sockets on loopback. Every load is bounded in time; the
//! assertions are about correctness, counts and structure, never speed.

use crate::util;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::util::{
    assert_measured, at, exclusive, fds_and_threads, int, num, poll_until, run, run_against,
    run_json, shared, text, Server, TIMING,
};
use serde_json::Value;

/// Runs one test against `server`, asserts it exited 0 and returns its results.
fn load(server: &Server, workload: &str, protocol: &str, users: u32, extra: &[&str]) -> Value {
    let users = users.to_string();
    let mut args = vec![
        "--workload",
        workload,
        "--protocol",
        protocol,
        "--users",
        &users,
    ];
    args.extend(extra);
    let (code, out, err, doc) = run_against(server, &args);
    assert_eq!(
        code,
        0,
        "linkperf run {args:?} failed\nstdout: {out}\nstderr: {err}\nserver: {}",
        server.log()
    );
    doc
}

// ---------------------------------------------------------------------------
// 1. Every workload and protocol, end to end.
// ---------------------------------------------------------------------------

/// Payload sizes per direction: (client to server, server to client) per
/// transaction or message; 0 where nothing flows.
fn sizes(doc: &Value) -> (u64, u64) {
    let w = at(doc, "/tests/0/workload");
    match (text(w, "/kind"), text(w, "/direction")) {
        ("rr" | "crr", _) => (int(w, "/request_bytes"), int(w, "/response_bytes")),
        ("stream", "client_to_server") => (int(w, "/message_bytes"), 0),
        ("stream", "server_to_client") => (0, int(w, "/message_bytes")),
        ("stream", "bidirectional") => (int(w, "/message_bytes"), int(w, "/message_bytes")),
        other => panic!("unexpected workload {other:?}"),
    }
}

/// `|a - b| <= slack`, with both numbers in the message.
fn assert_close(what: &str, a: u64, b: u64, slack: u64) {
    assert!(
        a.abs_diff(b) <= slack,
        "{what}: {a} and {b} differ by {} (more than {slack})",
        a.abs_diff(b)
    );
}

/// Everything every successful run must show.
/// The system-wide busy counter this host offers, found here without
/// linkperf's code: the root cgroup's `cpuacct.usage` (v1: a hierarchy root
/// has `cgroup.sane_behavior`), else its `cpu.stat` (v2: a root has
/// `cgroup.controllers` and no `cgroup.type`, which a container's namespace
/// root has), else `/proc/stat`.
fn precise_busy_method() -> &'static str {
    let number =
        |p: &str| std::fs::read_to_string(p).is_ok_and(|t| t.trim().parse::<u64>().is_ok());
    let exists = |p: &str| std::path::Path::new(p).exists();
    for dir in ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"] {
        if exists(&format!("{dir}/cgroup.sane_behavior")) && number(&format!("{dir}/cpuacct.usage"))
        {
            return "cgroup_v1_cpuacct";
        }
    }
    let v2_root =
        exists("/sys/fs/cgroup/cgroup.controllers") && !exists("/sys/fs/cgroup/cgroup.type");
    if v2_root
        && std::fs::read_to_string("/sys/fs/cgroup/cpu.stat")
            .is_ok_and(|t| t.contains("usage_usec"))
    {
        "cgroup_v2_cpu_stat"
    } else {
        "proc_stat"
    }
}

/// Users the workers of `side` in run `r` carried, summed over its workers.
fn flows_carried(r: &Value, side: &str) -> u64 {
    at(r, &format!("/{side}/workers"))
        .as_array()
        .unwrap()
        .iter()
        .map(|w| int(w, "/flows"))
        .sum()
}

fn check_run(doc: &Value, name: &str, protocol: &str, direction: &str, users: u64) {
    assert_eq!(text(doc, "/schema"), "linkperf/results/v2");
    assert_eq!(at(doc, "/tests").as_array().unwrap().len(), 1);
    assert_eq!(text(doc, "/tests/0/name"), name);
    assert_eq!(text(doc, "/tests/0/workload/direction"), direction);
    assert_eq!(text(doc, "/tests/0/workload/protocol"), protocol);
    assert_eq!(int(doc, "/tests/0/workload/users"), users);
    let runs = at(doc, "/tests/0/runs").as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_measured(r, name);
    assert!(r.get("error").is_none(), "a measured run has no error: {r}");
    // Every check made, in order.
    let names: Vec<&str> = at(r, "/checks")
        .as_array()
        .unwrap()
        .iter()
        .map(|c| text(c, "/name"))
        .collect();
    assert_eq!(
        names,
        [
            "littles_law",
            "stalled_interval",
            "cpu_window",
            "flow_progress",
            "host_noise",
            "interrupted",
            "udp_loss"
        ]
    );

    // Throughput: each direction from what its receiver read in the window,
    // the senders' counts beside them.
    assert!(num(r, "/throughput/bytes_per_s") > 0.0);
    assert!(num(r, "/throughput/transactions_per_s") > 0.0);
    assert_eq!(
        text(r, "/throughput/counted_at/client_to_server"),
        "receiver"
    );
    assert_eq!(
        text(r, "/throughput/counted_at/server_to_client"),
        "receiver"
    );
    let window = num(r, "/client/window_s");
    assert!(window > 0.0);
    // Received: client to server by the server, server to client by the client.
    let (tx, rx) = (int(r, "/server/rx_bytes"), int(r, "/client/rx_bytes"));
    assert_eq!(
        int(r, "/payload/client_to_server/sent"),
        int(r, "/client/tx_bytes")
    );
    assert_eq!(int(r, "/payload/client_to_server/received"), tx);
    assert_eq!(
        int(r, "/payload/server_to_client/sent"),
        int(r, "/server/tx_bytes")
    );
    assert_eq!(int(r, "/payload/server_to_client/received"), rx);
    let kind = text(doc, "/tests/0/workload/kind");
    let txn = match (kind, direction) {
        ("stream", "client_to_server") => int(r, "/server/transactions"),
        ("stream", "bidirectional") => {
            (tx + rx) / int(doc, "/tests/0/workload/message_bytes").max(1)
        }
        _ => int(r, "/client/transactions"),
    };
    assert!(txn > 0, "no transactions: {r}");
    // Every user made progress, and the flows say how evenly.
    let flows = at(r, "/flows");
    assert_eq!(int(flows, "/flows"), users, "{flows}");
    assert_eq!(int(flows, "/no_progress"), 0, "{flows}");
    let same = |ptr: &str, want: f64| {
        let got = num(r, ptr);
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{ptr} is {got}, expected {want}"
        );
    };
    same("/throughput/tx_bytes_per_s", tx as f64 / window);
    same("/throughput/rx_bytes_per_s", rx as f64 / window);
    same("/throughput/bytes_per_s", (tx + rx) as f64 / window);
    if !(kind == "stream" && direction == "bidirectional") {
        same("/throughput/transactions_per_s", txn as f64 / window);
    }

    // Transaction time: a sorted distribution.
    let l = at(r, "/transaction_time_us");
    assert!(int(l, "/count") > 0);
    let q: Vec<f64> = ["/min", "/p50", "/p90", "/p99", "/p999", "/max"]
        .iter()
        .map(|p| num(l, p))
        .collect();
    assert!(
        q.windows(2).all(|w| w[0] <= w[1]),
        "unsorted quantiles {q:?}"
    );
    assert!(num(l, "/p50") <= num(l, "/p99") && num(l, "/p99") <= num(l, "/max"));
    assert!(num(l, "/mean") >= q[0] && num(l, "/mean") <= q[5]);

    // CPU of both sides, and efficiency.
    for side in ["client", "server"] {
        let c = at(r, &format!("/cpu/{side}"));
        assert!(c.is_object(), "cpu.{side} missing: {r}");
        for f in ["/process_s", "/system_busy_s", "/softirq_s"] {
            assert!(num(c, f) >= 0.0);
        }
        // Each number says where it came from; system-wide busy time from the
        // precise counter where this host's kernel has one, its /proc/stat
        // breakdown beside it.
        let process = text(c, "/process_method");
        assert!(
            ["rusage_self", "rusage_thread_sum"].contains(&process),
            "cpu.{side}.process_method {process}"
        );
        assert_eq!(
            text(c, "/system_busy_method"),
            precise_busy_method(),
            "cpu.{side}"
        );
        for f in [
            "user_s",
            "system_s",
            "irq_s",
            "softirq_s",
            "steal_s",
            "idle_s",
        ] {
            assert!(
                num(c, &format!("/proc_stat/{f}")) >= 0.0,
                "cpu.{side}.proc_stat.{f}"
            );
        }
        assert_eq!(
            at(r, &format!("/{side}/cpu")),
            c,
            "cpu.{side} is the raw report's"
        );
    }
    let e = at(r, "/efficiency");
    for f in [
        "client_bytes_per_cpu_s",
        "server_bytes_per_cpu_s",
        "client_cpu_us_per_txn",
        "server_cpu_us_per_txn",
        "client_bytes_per_system_cpu_s",
        "server_bytes_per_system_cpu_s",
        "client_system_cpu_us_per_txn",
        "server_system_cpu_us_per_txn",
    ] {
        let v = e
            .get(f)
            .unwrap_or_else(|| panic!("efficiency.{f} missing: {e}"));
        assert!(
            v.is_null() || v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0),
            "efficiency.{f} = {v}"
        );
    }

    // Intervals: non-empty, each direction its receiver's seconds, and they
    // add up to the window.
    let ints = at(r, "/intervals").as_array().unwrap();
    assert!(!ints.is_empty(), "no intervals");
    let raw = at(r, "/client/intervals").as_array().unwrap();
    let server_raw = at(r, "/server/intervals").as_array().unwrap();
    assert_eq!(ints.len(), raw.len());
    let sum = |ptr: &str| ints.iter().map(|i| int(i, ptr)).sum::<u64>();
    assert_eq!(
        sum("/tx_bytes"),
        tx,
        "interval tx_bytes add up to the window"
    );
    assert_eq!(
        sum("/rx_bytes"),
        rx,
        "interval rx_bytes add up to the window"
    );
    if !(kind == "stream" && direction != "server_to_client") {
        assert_eq!(sum("/transactions"), txn, "interval transactions add up");
    }
    for (i, (d, w)) in ints.iter().zip(raw).enumerate() {
        assert_eq!(int(d, "/rx_bytes"), int(w, "/rx_bytes"), "intervals[{i}]");
        assert_eq!(
            int(d, "/tx_bytes"),
            int(&server_raw[i], "/rx_bytes"),
            "intervals[{i}]"
        );
    }

    // Both sides reported; errors add up.
    assert!(at(r, "/server").is_object(), "no server report: {r}");
    assert_eq!(
        int(r, "/errors"),
        int(r, "/client/errors") + int(r, "/server/errors")
    );
    // TCP_INFO is for TCP only. It is read from the flows open when the window
    // closes: always all of them for rr; for crr (between connections) and
    // streams (closing as the window ends) a loaded machine may catch none.
    if protocol != "tcp" {
        assert!(r.get("tcp_info").is_none(), "tcp_info over {protocol}: {r}");
    } else if text(doc, "/tests/0/workload/kind") == "rr" {
        assert!(r.get("tcp_info").is_some(), "no tcp_info: {r}");
    }
    if let Some(t) = r.get("tcp_info") {
        let flows = int(t, "/flows");
        assert!(flows >= 1 && flows <= users, "tcp_info.flows = {flows}");
    }
}

/// The bytes and transactions both sides counted agree (whole-life totals),
/// and the client's window counts match its transactions (direction accounting).
fn check_accounting(doc: &Value) {
    let r = at(doc, "/tests/0/runs/0");
    let users = int(doc, "/tests/0/workload/users");
    let kind = text(doc, "/tests/0/workload/kind");
    let bidir = text(doc, "/tests/0/workload/direction") == "bidirectional";
    let (up, down) = sizes(doc);
    let (c, s) = (at(r, "/client/totals"), at(r, "/server/totals"));
    assert_close(
        "client totals.tx_bytes vs server totals.rx_bytes",
        int(c, "/tx_bytes"),
        int(s, "/rx_bytes"),
        users * up,
    );
    assert_close(
        "server totals.tx_bytes vs client totals.rx_bytes",
        int(s, "/tx_bytes"),
        int(c, "/rx_bytes"),
        users * down,
    );
    let per_txn = if bidir { 2 * users } else { users };
    assert_close(
        "client vs server totals.transactions",
        int(c, "/transactions"),
        int(s, "/transactions"),
        per_txn,
    );
    assert!(int(c, "/transactions") > 0);
    if up == 0 {
        assert_eq!(int(c, "/tx_bytes"), 0, "nothing flows client to server");
        assert_eq!(int(r, "/client/tx_bytes"), 0);
    }
    if down == 0 {
        assert_eq!(int(c, "/rx_bytes"), 0, "nothing flows server to client");
        assert_eq!(int(r, "/client/rx_bytes"), 0);
    }

    // Window figures: each transaction carries its request and its response.
    let (tx, rx, txn) = (
        int(r, "/client/tx_bytes"),
        int(r, "/client/rx_bytes"),
        int(r, "/client/transactions"),
    );
    match (kind, bidir) {
        ("rr" | "crr", _) => {
            assert_close(
                "client tx_bytes vs request × transactions",
                tx,
                up * txn,
                users * up,
            );
            assert_close(
                "client rx_bytes vs response × transactions",
                rx,
                down * txn,
                users * down,
            );
        }
        ("stream", false) => {
            let size = up.max(down);
            assert_close(
                "stream bytes vs message × messages",
                tx + rx,
                size * txn,
                users * size,
            );
        }
        ("stream", true) => {
            assert_close(
                "bidirectional bytes vs message × messages",
                tx + rx,
                up * txn,
                2 * users * up,
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    // A 1x1 transaction is one byte each way, on the server too.
    if (up, down) == (1, 1) {
        let st = int(s, "/transactions");
        assert_close(
            "server totals rx_bytes vs transactions",
            int(s, "/rx_bytes"),
            st,
            users,
        );
        assert_eq!(
            int(s, "/tx_bytes"),
            st,
            "server wrote one byte per transaction"
        );
    }
}

/// Connections: one per user, or one per transaction for crr.
fn check_connections(doc: &Value, protocol: &str) {
    let r = at(doc, "/tests/0/runs/0");
    let users = int(doc, "/tests/0/workload/users");
    let client = int(r, "/client/connections");
    if text(doc, "/tests/0/workload/kind") == "crr" {
        assert!(
            client >= int(r, "/client/totals/transactions"),
            "crr: {client}"
        );
        assert_close(
            "crr client vs server connections",
            client,
            int(r, "/server/connections"),
            users,
        );
    } else {
        assert_eq!(client, users);
        // For UDP the server counts each user's flow when first seen.
        assert_eq!(int(r, "/server/connections"), users, "{protocol}");
    }
    if protocol == "udp" {
        assert_eq!(int(r, "/errors"), 0, "udp at low load loses nothing: {r}");
    }
}

fn workload_end_to_end(workload: &str, protocol: &str, name: &str, direction: &str) {
    let _g = shared();
    let server = Server::start(&[]);
    // A generous UDP timeout: a late answer on a busy machine is not a loss.
    let extra: &[&str] = if protocol == "udp" {
        &["--udp-timeout", "1s"]
    } else {
        &[]
    };
    let doc = load(&server, workload, protocol, 4, extra);
    check_run(&doc, name, protocol, direction, 4);
    check_accounting(&doc);
    check_connections(&doc, protocol);
}

macro_rules! end_to_end {
    ($($test:ident: $workload:literal over $protocol:literal => $name:literal, $direction:literal;)*) => {
        $(
            #[test]
            fn $test() {
                workload_end_to_end($workload, $protocol, $name, $direction);
            }
        )*
    };
}

end_to_end! {
    tcp_rr1c_1x1: "rr1c-1x1" over "tcp" => "rr1c-1x1--4", "round_trip";
    tcp_rr1c_200x1000: "rr1c-200x1000" over "tcp" => "rr1c-200x1000--4", "round_trip";
    tcp_rr1c_200x30k: "rr1c-200x30k" over "tcp" => "rr1c-200x30k--4", "round_trip";
    tcp_str_readx30k: "str-readx30k" over "tcp" => "str-readx30k--4", "client_to_server";
    tcp_str_writex30k: "str-writex30k" over "tcp" => "str-writex30k--4", "server_to_client";
    tcp_rr_generic: "rr:64x2k" over "tcp" => "rr1c-64x2k--4", "round_trip";
    tcp_crr_generic: "crr:64x1k" over "tcp" => "crr-64x1k--4", "round_trip";
    tcp_stream_up: "stream-up:16k" over "tcp" => "str-readx16k--4", "client_to_server";
    tcp_stream_down: "stream-down:16k" over "tcp" => "str-writex16k--4", "server_to_client";
    tcp_stream_bidir: "stream-bidir:16k" over "tcp" => "str-bidirx16k--4", "bidirectional";

    unix_rr1c_1x1: "rr1c-1x1" over "unix" => "rr1c-1x1--4--unix", "round_trip";
    unix_rr1c_200x1000: "rr1c-200x1000" over "unix" => "rr1c-200x1000--4--unix", "round_trip";
    unix_rr1c_200x30k: "rr1c-200x30k" over "unix" => "rr1c-200x30k--4--unix", "round_trip";
    unix_str_readx30k: "str-readx30k" over "unix" => "str-readx30k--4--unix", "client_to_server";
    unix_str_writex30k: "str-writex30k" over "unix" => "str-writex30k--4--unix", "server_to_client";
    unix_rr_generic: "rr:64x2k" over "unix" => "rr1c-64x2k--4--unix", "round_trip";
    unix_crr_generic: "crr:64x1k" over "unix" => "crr-64x1k--4--unix", "round_trip";
    unix_stream_up: "stream-up:16k" over "unix" => "str-readx16k--4--unix", "client_to_server";
    unix_stream_down: "stream-down:16k" over "unix" => "str-writex16k--4--unix", "server_to_client";
    unix_stream_bidir: "stream-bidir:16k" over "unix" => "str-bidirx16k--4--unix", "bidirectional";

    udp_rr1c_1x1: "rr1c-1x1" over "udp" => "rr1c-1x1--4--udp", "round_trip";
    udp_rr1c_200x1000: "rr1c-200x1000" over "udp" => "rr1c-200x1000--4--udp", "round_trip";
    udp_rr1c_200x30k: "rr1c-200x30k" over "udp" => "rr1c-200x30k--4--udp", "round_trip";
    udp_rr_generic: "rr:64x2k" over "udp" => "rr1c-64x2k--4--udp", "round_trip";
}

// ---------------------------------------------------------------------------
// 2. The embedded server.
// ---------------------------------------------------------------------------

#[test]
fn embedded_server_by_default() {
    let _g = shared();
    let mut args = vec!["run", "--quiet", "--workload", "rr1c-1x1", "--users", "1"];
    args.extend(TIMING);
    let (code, out, err, doc) = run_json(&args);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    check_run(&doc, "rr1c-1x1--1", "tcp", "round_trip", 1);
    check_accounting(&doc);
    assert_eq!(text(&doc, "/tests/0/config/server"), "embedded");
    // Both sides share the process: each counts its own threads.
    for side in ["client", "server"] {
        assert_eq!(
            text(&doc, &format!("/tests/0/runs/0/cpu/{side}/process_method")),
            "rusage_thread_sum"
        );
    }
    assert!(
        out.contains("rr1c-1x1--1"),
        "the summary names the test: {out}"
    );
}

// ---------------------------------------------------------------------------
// 3. One user and a thousand.
// ---------------------------------------------------------------------------

#[test]
fn one_user() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "rr1c-1x1", "tcp", 1, &[]);
    check_run(&doc, "rr1c-1x1--1", "tcp", "round_trip", 1);
    check_accounting(&doc);
    assert_eq!(int(&doc, "/tests/0/runs/0/client/connections"), 1);
    assert_eq!(int(&doc, "/tests/0/runs/0/server/connections"), 1);
}

#[test]
fn a_thousand_users_all_connect() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let doc = load(&server, "rr1c-1x1", "tcp", 1000, &["--duration", "1s"]);
    check_run(&doc, "rr1c-1x1--1000", "tcp", "round_trip", 1000);
    check_accounting(&doc);
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(int(r, "/client/connections"), 1000);
    assert_eq!(int(r, "/server/connections"), 1000);
    assert!(int(r, "/client/transactions") > 0);
    for side in ["client", "server"] {
        let flows = flows_carried(r, side);
        assert_eq!(flows, 1000, "{side} workers carry every user");
    }
}

/// The scale the engine is built for: 10,000 users on a 2-core machine, each
/// side in its own process (one process holds one descriptor per user).
#[test]
fn ten_thousand_users_run_on_a_few_workers() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        10_000,
        &[
            "--duration",
            "1s",
            "--threads",
            "2",
            "--server-threads",
            "2",
        ],
    );
    let r = at(&doc, "/tests/0/runs/0");
    assert_measured(r, "10,000 users");
    assert_eq!(int(r, "/client/connections"), 10_000);
    assert_eq!(int(r, "/server/connections"), 10_000);
    assert!(int(r, "/client/transactions") > 0);
    assert_eq!(
        at(r, "/client/workers").as_array().unwrap().len(),
        2,
        "two workers carry them all"
    );
    check_accounting(&doc);
}

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
    let ours = linkperf_wire::PROTOCOL_VERSION;
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
    let mut bytes = hello(linkperf_wire::PROTOCOL_VERSION);
    bytes.extend(frame(br#"{"type":"start"}"#));
    let replies = exchange(&server, &bytes, false);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(text(&replies[0], "/type"), "welcome");
    assert_eq!(
        int(&replies[0], "/protocol_version"),
        u64::from(linkperf_wire::PROTOCOL_VERSION)
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
    let readme = include_str!("../../../../README.md");
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
    use linkperf_wire::{encode_client, ClientMessage, PROTOCOL_VERSION};
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

// ---------------------------------------------------------------------------
// 9. A client that vanishes mid-test.
// ---------------------------------------------------------------------------

/// One daemon serves several sessions at once: two clients run their tests
/// over the same second, each sees only its own users and its own counts.
#[test]
fn one_server_runs_two_clients_tests_at_once() {
    let _g = shared();
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let addr = server.addr();
    let runs: Vec<(util::Proc, std::path::PathBuf, u32)> =
        [(2u32, "rr1c-1x1"), (3, "str-writex30k")]
            .into_iter()
            .enumerate()
            .map(|(i, (users, workload))| {
                let json = dir.path().join(format!("r{i}.json"));
                let child = util::spawn(&[
                    "run",
                    "--quiet",
                    "--server",
                    &addr,
                    "--workload",
                    workload,
                    "--users",
                    &users.to_string(),
                    "--warmup",
                    "200ms",
                    "--duration",
                    "1500ms",
                    "--json",
                    json.to_str().unwrap(),
                ]);
                (child, json, users)
            })
            .collect();
    // Both sessions run at once: the server has begun both tests while both
    // clients are still running theirs.
    let mut runs = runs;
    server.wait_for_log("both tests running", Duration::from_secs(30), |l| {
        l.matches("running").count() >= 2
    });
    for (child, _, _) in &mut runs {
        assert!(child.is_running(), "a test ended before the other began");
    }
    for (child, json, users) in runs {
        let (status, _, err) = child.finish(util::RUN_DEADLINE);
        assert!(status.success(), "{err}");
        let doc = util::read_doc(&json);
        let r = at(&doc, "/tests/0/runs/0");
        // Two tests on one host at once: each is the other's noise.
        assert_measured(r, "one of two tests at once");
        for side in ["client", "server"] {
            let flows = flows_carried(r, side);
            assert_eq!(
                flows,
                u64::from(users),
                "{side}: only its own session's users"
            );
        }
        // The server's counts are this session's: as the client's, within a
        // message per flow.
        assert!(int(r, "/client/totals/tx_bytes") + int(r, "/client/totals/rx_bytes") > 0);
        for (sent, got) in [
            ("/client/totals/tx_bytes", "/server/totals/rx_bytes"),
            ("/server/totals/tx_bytes", "/client/totals/rx_bytes"),
        ] {
            let (a, b) = (int(r, sent), int(r, got));
            assert!(
                a.abs_diff(b) <= 30 * 1024 * u64::from(users),
                "{sent} {a}, {got} {b}"
            );
        }
    }
}

#[test]
fn vanished_client_frees_server_resources() {
    let _g = shared();
    let mut server = Server::start(&[]);
    let pid = server.pid();
    // Listening, it holds what an idle server holds.
    let (fds, threads) = fds_and_threads(pid);
    let addr = server.addr();
    let mut client = util::Client::spawn(&[
        "run",
        "--quiet",
        "--server",
        &addr,
        "--users",
        "50",
        "--duration",
        "20s",
        "--warmup",
        "200ms",
    ]);
    // Killed in the middle of its window, its 50 connections up.
    client.wait_for_window(Duration::from_secs(30));
    assert!(
        fds_and_threads(pid).0 >= fds + 50,
        "the 50 users are connected"
    );
    let during = fds_and_threads(pid);
    client.kill();
    let killed = Instant::now();
    // The session logs its end once its test's workers are joined and its
    // data sockets closed: then only its own thread and control connection
    // are left, on their way out.
    let session = server
        .log()
        .lines()
        .find_map(|l| {
            l.split_once(": running ")
                .map(|(session, _)| format!("{session}: "))
        })
        .expect("the session's running line");
    server.wait_for_log("the session's end", Duration::from_secs(5), |l| {
        l.lines()
            .any(|l| l.starts_with(&session) && !l.contains(": running "))
    });
    let now = fds_and_threads(pid);
    assert!(
        now.0 <= fds + 2 && now.1 <= threads + 2,
        "baseline {:?}, during {during:?}: still {now:?} (fds, threads) once the session \
         ended; server: {}",
        (fds, threads),
        server.log()
    );
    eprintln!(
        "server back to baseline {:?} from {during:?} in {:?}",
        (fds, threads),
        killed.elapsed()
    );
    assert!(server.is_running());
    let doc = load(&server, "rr1c-1x1", "tcp", 2, &[]);
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
}

// ---------------------------------------------------------------------------
// 10. The results document's names.
// ---------------------------------------------------------------------------

fn has_keys(v: &Value, ptr: &str, keys: &[&str]) {
    let o = at(v, ptr);
    assert!(o.is_object(), "{ptr} is not an object: {o}");
    for k in keys {
        assert!(o.get(k).is_some(), "{ptr} has no {k}: {o}");
    }
}

#[test]
fn results_document_uses_the_issue_names() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-200x1000",
        "tcp",
        2,
        &["--label", "e2e-names"],
    );
    has_keys(&doc, "", &["schema", "label", "environment", "tests"]);
    assert_eq!(text(&doc, "/label"), "e2e-names");
    let t = at(&doc, "/tests/0");
    assert_eq!(text(t, "/name"), "rr1c-200x1000--2");
    has_keys(
        t,
        "/workload",
        &[
            "kind",
            "request_bytes",
            "response_bytes",
            "message_bytes",
            "direction",
            "protocol",
            "users",
            "duration_s",
            "warmup_s",
        ],
    );
    assert_eq!(text(t, "/workload/kind"), "rr");
    assert_eq!(int(t, "/workload/request_bytes"), 200);
    assert_eq!(int(t, "/workload/response_bytes"), 1000);
    assert!(at(t, "/workload/message_bytes").is_null());
    assert_eq!(num(t, "/workload/duration_s"), 0.5);
    assert_eq!(num(t, "/workload/warmup_s"), 0.2);
    let r = at(t, "/runs/0");
    has_keys(
        r,
        "/throughput",
        &[
            "bytes_per_s",
            "tx_bytes_per_s",
            "rx_bytes_per_s",
            "transactions_per_s",
        ],
    );
    has_keys(
        r,
        "/transaction_time_us",
        &["mean", "p50", "p90", "p99", "p999", "max"],
    );
    for side in ["client", "server"] {
        has_keys(
            r,
            &format!("/cpu/{side}"),
            &["process_s", "system_busy_s", "softirq_s"],
        );
    }
    has_keys(
        r,
        "/efficiency",
        &[
            "client_bytes_per_cpu_s",
            "server_bytes_per_cpu_s",
            "client_cpu_us_per_txn",
            "server_cpu_us_per_txn",
        ],
    );
    assert!(at(r, "/intervals").is_array());
    assert!(at(r, "/errors").is_u64());
    // The process figures derive from the payload as received.
    let payload = (int(r, "/payload/client_to_server/received")
        + int(r, "/payload/server_to_client/received")) as f64;
    let cpu = num(r, "/cpu/client/process_s");
    let txn = int(r, "/client/transactions") as f64;
    if cpu > 0.0 {
        let rel = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
        assert!(rel(
            num(r, "/efficiency/client_bytes_per_cpu_s"),
            payload / cpu
        ));
        assert!(rel(
            num(r, "/efficiency/client_cpu_us_per_txn"),
            cpu * 1e6 / txn
        ));
    }

    // Both hosts, each as it described itself.
    for side in ["client", "server"] {
        let e = at(&doc, &format!("/environment/{side}"));
        for f in ["/hostname", "/kernel", "/cpu_model"] {
            assert!(!text(e, f).is_empty(), "environment.{side}{f} is empty");
        }
        assert!(int(e, "/cpu_count") >= 1);
        assert_eq!(text(e, "/interface"), "lo");
        assert!(int(e, "/mtu") > 0);
        assert_eq!(text(e, "/linkperf_version"), env!("CARGO_PKG_VERSION"));
    }
    let env = at(&doc, "/environment/client");
    let senv = at(&doc, "/environment/server");
    let cmd: Vec<&str> = at(env, "/command_line")
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        cmd.contains(&"run") && cmd.contains(&"e2e-names"),
        "{cmd:?}"
    );
    for e in [env, senv] {
        assert!(!text(e, "/socket_congestion_control").is_empty());
        assert!(int(e, "/socket_sndbuf") > 0 && int(e, "/socket_rcvbuf") > 0);
        assert_eq!(at(e, "/socket_nodelay"), true, "rr turns TCP_NODELAY on");
    }
    assert!(
        at(&doc, "/environment/server/command_line")
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "serve"),
        "the server describes itself"
    );

    // Placement: every worker described, every user carried, nothing pinned.
    for side in ["client", "server"] {
        let workers = at(r, &format!("/{side}/workers")).as_array().unwrap();
        assert!(!workers.is_empty(), "{side} has no workers");
        let mut flows = 0;
        for (i, w) in workers.iter().enumerate() {
            has_keys(
                w,
                "",
                &["worker", "pinned", "allowed_cpus", "last_cpu", "flows"],
            );
            assert_eq!(int(w, "/worker"), i as u64);
            assert!(at(w, "/pinned").is_null(), "{w}");
            assert!(!at(w, "/allowed_cpus").as_array().unwrap().is_empty());
            flows += int(w, "/flows");
        }
        assert_eq!(flows, 2, "{side} workers carry both users");
        assert_eq!(at(r, &format!("/{side}/busy_poll")), false);
    }
}

/// TCP_NODELAY as each side reads it back from its data sockets: on by
/// default for request/response, off for streams, and as `--nodelay` says.
#[test]
fn nodelay_is_applied_on_both_sides_as_asked() {
    let _g = shared();
    let server = Server::start(&[]);
    for (workload, extra, want) in [
        ("rr1c-1x1", &[][..], true),
        ("rr1c-1x1", &["--nodelay=false"][..], false),
        ("str-readx30k", &[][..], false),
        ("str-readx30k", &["--nodelay"][..], true),
    ] {
        let doc = load(&server, workload, "tcp", 1, extra);
        assert_eq!(
            at(&doc, "/tests/0/config/nodelay"),
            want,
            "{workload} {extra:?}"
        );
        for side in ["client", "server"] {
            assert_eq!(
                at(&doc, &format!("/environment/{side}/socket_nodelay")),
                want,
                "{workload} {extra:?}: the {side}'s sockets"
            );
        }
    }
}

#[test]
fn a_server_elsewhere_runs_one_worker_per_cpu_of_its_own_host() {
    let _g = shared();
    // The server's process may use CPU 0 only; the client, every CPU here.
    let server = Server::start_under(&["taskset", "-c", "0"], &[]);
    let doc = load(&server, "rr1c-1x1", "tcp", 4, &[]);
    check_run(&doc, "rr1c-1x1--4", "tcp", "round_trip", 4);
    let r = at(&doc, "/tests/0/runs/0");
    let workers = |side: &str| at(r, &format!("/{side}/workers")).as_array().unwrap().len();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        workers("server"),
        1,
        "the server counts the CPUs it may use itself"
    );
    assert_eq!(workers("client"), cpus.min(4), "the client counts its own");
    // What was asked for: the server's default.
    assert_eq!(int(&doc, "/tests/0/config/server_placement/threads"), 0);
    assert_eq!(
        int(&doc, "/tests/0/config/client_placement/threads"),
        cpus as u64
    );
}

#[test]
fn affinity_pins_every_worker_on_both_sides() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        3,
        &[
            "--threads",
            "2",
            "--server-threads",
            "2",
            "--affinity",
            "0",
            "--server-affinity",
            "0",
        ],
    );
    check_run(&doc, "rr1c-1x1--3", "tcp", "round_trip", 3);
    let r = at(&doc, "/tests/0/runs/0");
    for side in ["client", "server"] {
        let workers = at(r, &format!("/{side}/workers")).as_array().unwrap();
        assert_eq!(workers.len(), 2, "{side}: {workers:?}");
        for w in workers {
            assert_eq!(at(w, "/pinned"), &serde_json::json!([0]), "{side}: {w}");
            assert_eq!(
                at(w, "/allowed_cpus"),
                &serde_json::json!([0]),
                "{side}: {w}"
            );
        }
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/affinity")),
            &serde_json::json!([0])
        );
    }
}

/// `--placement split`: the client's workers on the first half of the
/// host's CPUs, the server's on the second half, each side settling it on
/// its own host (here a separate server process on the same one); `same`:
/// both sides' worker i on the i-th CPU.
#[test]
fn placement_split_halves_the_host_and_same_shares_it() {
    let _g = shared();
    let allowed = linkperf_metrics::current_thread_allowed_cpus();
    let half = (allowed.len() / 2).max(1);
    let (first, second) = (&allowed[..half], &allowed[allowed.len() - half..]);
    let server = Server::start(&[]);
    let pinned = |doc: &Value, side: &str| -> Vec<u64> {
        at(doc, &format!("/tests/0/runs/0/{side}/workers"))
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| at(w, "/pinned").as_array().unwrap().clone())
            .map(|c| c.as_u64().unwrap())
            .collect()
    };
    let as_u64 = |cpus: &[usize]| cpus.iter().map(|&c| c as u64).collect::<Vec<_>>();
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        2,
        &[
            "--placement",
            "split",
            "--threads",
            "2",
            "--server-threads",
            "2",
        ],
    );
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
    // Worker i on the i-th CPU of its side's half, round-robin.
    let expect = |cpus: &[usize]| vec![cpus[0] as u64, cpus[1 % cpus.len()] as u64];
    assert_eq!(pinned(&doc, "client"), expect(first));
    assert_eq!(pinned(&doc, "server"), expect(second));
    // The client settled its own; the server, elsewhere, its own.
    assert_eq!(
        at(&doc, "/tests/0/config/client_placement/affinity"),
        &serde_json::json!(as_u64(first))
    );
    assert_eq!(
        at(&doc, "/tests/0/config/server_placement/affinity"),
        &Value::Null
    );
    for side in ["client", "server"] {
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/policy")),
            "split"
        );
    }
    // Each side's CPU time is read from the CPUs it was pinned to.
    let cpus_of = |side: &str| -> Vec<u64> {
        at(&doc, &format!("/tests/0/runs/0/{side}/pinned_cpus"))
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["cpu"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(cpus_of("client"), {
        let mut v = expect(first);
        v.dedup();
        v
    });
    assert_eq!(cpus_of("server"), {
        let mut v = expect(second);
        v.dedup();
        v
    });
    // Pinned apart, each side is given its CPUs' time, softirq included.
    if allowed.len() > 1 {
        let pinned = at(&doc, "/tests/0/runs/0/pinned");
        assert_eq!(pinned["client"]["cpus"][0], first[0] as u64, "{pinned}");
        assert_eq!(pinned["server"]["cpus"][0], second[0] as u64, "{pinned}");
        for side in ["client", "server"] {
            let busy = pinned[side]["busy_s"].as_f64().unwrap();
            assert!(busy > 0.0 && busy >= pinned[side]["softirq_s"].as_f64().unwrap());
            let per_txn = num(
                &doc,
                &format!("/tests/0/runs/0/efficiency/{side}_pinned_cpu_us_per_txn"),
            );
            assert!(per_txn > 0.0, "{side}: {per_txn}");
        }
    }
    // An explicit list wins over the policy.
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        1,
        &[
            "--placement",
            "split",
            "--threads",
            "1",
            "--server-threads",
            "1",
            "--server-affinity",
            &allowed[0].to_string(),
        ],
    );
    assert_eq!(pinned(&doc, "server"), vec![allowed[0] as u64]);
    assert_eq!(pinned(&doc, "client"), vec![first[0] as u64]);
    // `same`: worker i of both sides on the i-th CPU of the host.
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        1,
        &[
            "--placement",
            "same",
            "--threads",
            "1",
            "--server-threads",
            "1",
        ],
    );
    assert_eq!(pinned(&doc, "client"), vec![allowed[0] as u64]);
    assert_eq!(pinned(&doc, "server"), vec![allowed[0] as u64]);
}

#[test]
fn busy_poll_is_recorded_on_both_sides() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-1x1",
        "tcp",
        2,
        &["--busy-poll", "--threads", "1", "--server-threads", "1"],
    );
    check_run(&doc, "rr1c-1x1--2", "tcp", "round_trip", 2);
    for side in ["client", "server"] {
        assert_eq!(at(&doc, &format!("/tests/0/runs/0/{side}/busy_poll")), true);
        assert_eq!(
            at(&doc, &format!("/tests/0/config/{side}_placement/busy_poll")),
            true
        );
    }
}

// ---------------------------------------------------------------------------
// 11. Socket options.
// ---------------------------------------------------------------------------

#[test]
fn socket_buffers_are_applied() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "rr1c-200x1000",
        "tcp",
        2,
        &["--sndbuf", "256k", "--rcvbuf", "256k"],
    );
    check_run(&doc, "rr1c-200x1000--2", "tcp", "round_trip", 2);
    assert_eq!(int(&doc, "/tests/0/config/sndbuf"), 256 * 1024);
    assert_eq!(int(&doc, "/tests/0/config/rcvbuf"), 256 * 1024);
    // The kernel doubles what is asked for.
    for side in ["client", "server"] {
        for f in ["socket_sndbuf", "socket_rcvbuf"] {
            let got = int(&doc, &format!("/environment/{side}/{f}"));
            assert!(got >= 256 * 1024, "environment.{side}.{f} = {got}");
        }
    }
}

#[test]
fn congestion_control_is_applied() {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "reno") {
        eprintln!("skipped: reno is not available ({available:?})");
        return;
    }
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "stream-up:16k", "tcp", 2, &["--cc", "reno"]);
    check_run(&doc, "str-readx16k--2", "tcp", "client_to_server", 2);
    assert_eq!(text(&doc, "/tests/0/config/cc"), "reno");
    for side in ["client", "server"] {
        assert_eq!(
            text(
                &doc,
                &format!("/environment/{side}/socket_congestion_control")
            ),
            "reno"
        );
    }
}

#[test]
fn mss_is_applied() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "stream-up:16k", "tcp", 2, &["--mss", "1000"]);
    check_run(&doc, "str-readx16k--2", "tcp", "client_to_server", 2);
    check_accounting(&doc);
    assert_eq!(int(&doc, "/tests/0/config/mss"), 1000);
    let mss = num(&doc, "/tests/0/runs/0/tcp_info/snd_mss_mean");
    assert!(mss > 0.0 && mss <= 1000.0, "send MSS {mss} with --mss 1000");
}

// ---------------------------------------------------------------------------
// 12. UDP.
// ---------------------------------------------------------------------------

#[test]
fn udp_with_several_users_loses_nothing_on_loopback() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(&server, "rr1c-1x1", "udp", 8, &["--udp-timeout", "1s"]);
    check_run(&doc, "rr1c-1x1--8--udp", "udp", "round_trip", 8);
    check_accounting(&doc);
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(int(r, "/errors"), 0, "{r}");
    for side in ["client", "server"] {
        assert_eq!(int(r, &format!("/{side}/errors")), 0);
        assert!(at(r, &format!("/{side}/error_samples"))
            .as_array()
            .unwrap()
            .is_empty());
    }
    assert_eq!(num(&doc, "/tests/0/config/udp_timeout_s"), 1.0);
}

// ---------------------------------------------------------------------------
// UDP streams.
// ---------------------------------------------------------------------------

/// One UDP stream's direction in a run's `udp` block, with what its senders
/// and receivers counted, checked against each other.
fn udp_direction<'a>(r: &'a Value, dir: &str) -> &'a Value {
    let d = at(r, &format!("/udp/{dir}"));
    let (received, expected, lost) = (int(d, "/received"), int(d, "/expected"), int(d, "/lost"));
    assert_eq!(lost, expected.saturating_sub(received), "{d}");
    assert!(received > 0, "nothing arrived {dir}: {d}");
    // Over the whole test nothing arrives that was not sent.
    let (sender, receiver) = match dir {
        "client_to_server" => ("client", "server"),
        _ => ("server", "client"),
    };
    assert!(
        int(r, &format!("/{receiver}/totals/rx_bytes"))
            <= int(r, &format!("/{sender}/totals/tx_bytes")),
        "more bytes received than sent over the whole test {dir}: {r}"
    );
    // In the window, the two sides' windows open apart by the start
    // exchange: a few datagrams on an idle host; a starved one (a suspect
    // run) may open them further apart.
    if text(r, "/status") == "ok" {
        assert!(
            received <= int(d, "/sent") + 64,
            "more received than sent, beyond the windows' offset: {d}"
        );
    }
    d
}

/// A stream at a pace the path carries loses nothing, whichever way it runs:
/// every datagram the receivers expected arrived, in order, once, and the
/// throughput is the pace asked.
#[test]
fn a_udp_stream_at_a_pace_the_path_carries_loses_nothing() {
    let _g = shared();
    let server = Server::start(&[]);
    for (workload, name, direction, dirs) in [
        (
            "stream-up:1400",
            "str-readx1400@5m--2--udp",
            "client_to_server",
            &["client_to_server"][..],
        ),
        (
            "stream-down:1k",
            "str-writex1k@5m--2--udp",
            "server_to_client",
            &["server_to_client"][..],
        ),
        (
            "stream-bidir:200",
            "str-bidirx200@5m--2--udp",
            "bidirectional",
            &["client_to_server", "server_to_client"][..],
        ),
    ] {
        let doc = load(
            &server,
            workload,
            "udp",
            2,
            &["--rate", "5m", "--duration", "2s"],
        );
        check_run(&doc, name, "udp", direction, 2);
        assert_eq!(num(&doc, "/tests/0/config/rate_bits_per_s"), 5e6);
        assert_eq!(int(&doc, "/tests/0/spec/rate"), 5_000_000);
        assert_eq!(
            text(&doc, "/tests/0/workload/name"),
            name.split("--").next().unwrap()
        );
        let r = at(&doc, "/tests/0/runs/0");
        assert_eq!(num(r, "/udp/rate_bits_per_s"), 5e6);
        assert_eq!(num(r, "/udp/loss_rate"), 0.0, "{name}: {}", r["udp"]);
        for dir in dirs {
            let d = udp_direction(r, dir);
            assert_eq!(int(d, "/lost"), 0, "{name} {dir}: {d}");
            assert_eq!(int(d, "/duplicates"), 0);
            assert_eq!(int(d, "/out_of_order"), 0, "loopback keeps the order");
            let jitter = num(d, "/jitter_us");
            assert!(
                (0.0..1e5).contains(&jitter),
                "{name} {dir}: jitter {jitter} µs"
            );
            // Never faster than asked; a busy host may hold a sender back,
            // and then the run says so.
            let sent = num(d, "/sent_bits_per_s");
            assert!(
                sent <= 5e6 * 1.02,
                "{name} {dir}: sent {sent} bit/s per user"
            );
            if sent < 5e6 * 0.98 {
                assert_eq!(at(d, "/kept_pace"), false, "{name} {dir}: {d}");
            }
            // What arrived is the throughput: nothing lost, about 2 × 5 Mbit/s
            // each way (what the senders sent).
            let key = if *dir == "client_to_server" {
                "tx"
            } else {
                "rx"
            };
            let received = num(r, &format!("/throughput/{key}_bytes_per_s")) * 8.0;
            assert!(
                (received - 2.0 * sent).abs() <= 0.02 * 2.0 * sent,
                "{name} {dir}: received {received} bit/s, sent 2 × {sent}"
            );
        }
        // Every second's loss and jitter, from the receivers' seconds.
        for i in at(r, "/intervals").as_array().unwrap() {
            assert_eq!(num(i, "/loss_rate"), 0.0, "{i}");
            assert!(i.get("jitter_us").is_some(), "{i}");
        }
        // Each datagram is a message.
        assert!(num(r, "/throughput/transactions_per_s") > 0.0);
        assert_eq!(text(r, "/flows/measure"), "received_bytes");
        assert_eq!(int(r, "/flows/no_progress"), 0);
    }
}

/// Many users at once: every flow registers, sends at its pace and is
/// counted by the server, each in its own slot.
#[test]
fn many_udp_stream_users_at_once() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = load(
        &server,
        "stream-up:200",
        "udp",
        200,
        &[
            "--rate",
            "100k",
            "--duration",
            "2s",
            "--server-threads",
            "2",
        ],
    );
    check_run(
        &doc,
        "str-readx200@100k--200--udp",
        "udp",
        "client_to_server",
        200,
    );
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(int(r, "/server/connections"), 200, "one per flow");
    assert_eq!(int(r, "/flows/flows"), 200);
    assert_eq!(int(r, "/flows/no_progress"), 0, "{}", r["flows"]);
    let d = udp_direction(r, "client_to_server");
    // 200 × 100 kbit/s = 20 Mbit/s in all, over one loopback host.
    let lost = num(d, "/loss_rate");
    assert!(lost < 0.01, "{lost} of the datagrams lost: {d}");
    let total = num(r, "/throughput/tx_bytes_per_s") * 8.0;
    let sent = num(d, "/sent_bits_per_s") * 200.0;
    assert!(
        total <= sent * 1.02 && total >= sent * 0.98 * (1.0 - lost),
        "{total} bit/s arrived of {sent} sent"
    );
}

/// `--rate` says what it paces: refused for anything but a UDP stream, and
/// a rate that is no rate is a usage error.
#[test]
fn a_rate_is_for_udp_streams_and_says_how_to_write_it() {
    for (args, says) in [
        (
            &["--protocol", "tcp", "-w", "stream-up:1k", "--rate", "10m"][..],
            "--rate paces UDP streams",
        ),
        (
            &["--protocol", "udp", "-w", "rr1c-1x1", "--rate", "10m"][..],
            "--rate paces UDP streams",
        ),
        (
            &["--protocol", "udp", "-w", "stream-up:1k", "--rate", "fast"][..],
            "100m is 100,000,000 bit/s",
        ),
        (
            &["--protocol", "udp", "-w", "stream-up:64k", "--rate", "1m"][..],
            "UDP message must be between 1 and 65483",
        ),
    ] {
        let mut all = vec!["run", "--duration", "1"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&all);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------------------
// Mixed request/response sizes (the interconnect workload).
// ---------------------------------------------------------------------------

fn mix_end_to_end(protocol: &str) {
    let _g = shared();
    let server = Server::start(&[]);
    let extra: &[&str] = if protocol == "udp" {
        &["--udp-timeout", "1s"]
    } else {
        &[]
    };
    let doc = load(&server, "mix:200x200*1,200x8k*3", protocol, 8, extra);
    assert_eq!(text(&doc, "/tests/0/workload/kind"), "mix");
    let r = at(&doc, "/tests/0/runs/0");
    assert_measured(r, "mix");
    let (c, s) = (at(r, "/client/totals"), at(r, "/server/totals"));
    // Both ends draw the same sizes for every transaction: what one sent, the other received.
    assert_close(
        "mix request bytes",
        int(c, "/tx_bytes"),
        int(s, "/rx_bytes"),
        8 * 200,
    );
    assert_close(
        "mix response bytes",
        int(s, "/tx_bytes"),
        int(c, "/rx_bytes"),
        8 * 8192,
    );
    // One lock message (200 B) for three block transfers (8 KiB): 6,194 B per response on average.
    let txn = int(c, "/transactions") as f64;
    let mean_response = int(c, "/rx_bytes") as f64 / txn;
    assert!(
        (mean_response - 6194.0).abs() / 6194.0 < 0.05,
        "mean response {mean_response} bytes over {txn} transactions"
    );
    assert_eq!(int(c, "/tx_bytes"), 200 * int(c, "/transactions"));
}

#[test]
fn mix_over_tcp() {
    mix_end_to_end("tcp");
}

#[test]
fn mix_over_udp() {
    mix_end_to_end("udp");
}

// ---------------------------------------------------------------------------
// Several servers at once: `--server h1,h2`.
// ---------------------------------------------------------------------------

#[test]
fn several_servers_run_at_once_and_aggregate() {
    let _g = shared();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("multi.json");
    let servers = format!("{},{}", a.addr(), b.addr());
    let (code, stdout, err) = run(&[
        "run",
        "--server",
        &servers,
        "--workload",
        "rr1c-1x1",
        "--users",
        "2",
        "--duration",
        "500ms",
        "--warmup",
        "200ms",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(stdout.contains("all 2 servers together"), "{stdout}");
    let agg = util::read_doc(&out);
    let each: Vec<serde_json::Value> = (1..=2)
        .map(|k| util::read_doc(&dir.path().join(format!("multi-server{k}.json"))))
        .collect();
    let tps = |d: &serde_json::Value| num(d, "/tests/0/runs/0/throughput/transactions_per_s");
    let sum = tps(&each[0]) + tps(&each[1]);
    assert!(
        (tps(&agg) - sum).abs() <= 1e-6 * sum,
        "aggregate {} vs sum {sum}",
        tps(&agg)
    );
    for d in &each {
        assert_eq!(text(d, "/tests/0/runs/0/status"), "ok");
        // Each group counts its own workers' CPU: they share one client process.
        assert_eq!(
            text(d, "/tests/0/runs/0/cpu/client/process_method"),
            "rusage_thread_sum"
        );
    }
    // Each server saw only its own group.
    assert_eq!(int(&each[0], "/tests/0/runs/0/server/connections"), 2);
    assert_eq!(int(&each[1], "/tests/0/runs/0/server/connections"), 2);
}

// ---------------------------------------------------------------------------
// Host noise: other work on the CPUs a test measures.
// ---------------------------------------------------------------------------

/// A busy loop pinned to CPU 0 beside a test pinned to CPU 0 takes about
/// half that CPU from the test: the run is suspect for host noise, and says
/// how much of the host went to other work.
#[test]
fn a_cpu_hog_beside_a_pinned_test_is_host_noise() {
    let _g = exclusive();
    let mut hog = util::Proc::spawn(
        std::process::Command::new("taskset").args([
            "-c",
            "0",
            "sh",
            "-c",
            "echo looping; while :; do :; done",
        ]),
        "taskset (util-linux) running a busy loop",
    );
    // It runs its loop once it has said so.
    hog.wait_for_stdout_line("that it loops", Duration::from_secs(30), |l| l == "looping");
    let (code, out, err, doc) = run_json(&[
        "run",
        "--quiet",
        "--workload",
        "rr1c-1x1",
        "--users",
        "1",
        "--threads",
        "1",
        "--server-threads",
        "1",
        "--affinity",
        "0",
        "--server-affinity",
        "0",
        "--duration",
        "2s",
        "--warmup",
        "300ms",
    ]);
    hog.kill();
    assert_eq!(code, 0, "a suspect run still ran: {out}\n{err}");
    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(text(r, "/status"), "suspect", "{r}");
    let noise = at(r, "/checks")
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "host_noise")
        .unwrap();
    assert_eq!(text(noise, "/status"), "fail", "{noise}");
    assert!(num(noise, "/value") > num(noise, "/bound"), "{noise}");
    assert!(text(noise, "/detail").contains("this host"), "{noise}");
    assert!(
        out.contains("SUSPECT        host_noise: "),
        "the table says why: {out}"
    );
}

// ---------------------------------------------------------------------------
// Live intervals: `--interval` and `--json-stream`.
// ---------------------------------------------------------------------------

/// The interval lines of some output: `(warmup, start, end)` of each.
fn interval_lines(output: &str) -> Vec<(bool, f64, f64)> {
    output
        .lines()
        .filter(|l| l.contains(" s  sent "))
        .map(|l| {
            let warmup = l.starts_with("warmup");
            let range = l
                .trim_start_matches("warmup")
                .split_whitespace()
                .next()
                .unwrap_or_else(|| panic!("no time in {l:?}"));
            let (a, b) = range.split_once('-').unwrap_or_else(|| panic!("{l:?}"));
            (warmup, a.parse().expect(l), b.parse().expect(l))
        })
        .collect()
}

/// Each line of a JSON stream: `(event, data)`.
fn stream_events(lines: &str) -> Vec<(String, Value)> {
    lines
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
            let obj = v.as_object().expect("an object per line");
            assert_eq!(obj.len(), 2, "event and data only: {l}");
            (text(&v, "/event").to_string(), v["data"].clone())
        })
        .collect()
}

/// What a stream must be: a start, its intervals (the warm-up's first,
/// marked), then the end, which is the results document's run; the
/// window's intervals are the client's intervals of the run, count for
/// count. The window's interval events.
fn check_stream(events: &[(String, Value)], doc: &Value) -> Vec<Value> {
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    let start = &events[0].1;
    assert_eq!(text(start, "/schema"), "linkperf/stream/v1");
    assert_eq!(text(start, "/test"), text(doc, "/tests/0/name"));
    assert_eq!(start["workload"], doc["tests"][0]["workload"]);
    assert_eq!(start["config"], doc["tests"][0]["config"]);
    assert_eq!(start["spec"], doc["tests"][0]["spec"]);
    let run = at(doc, "/tests/0/runs/0");
    assert_eq!(&events[events.len() - 1].1, run, "the end is the saved run");
    let intervals: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "interval")
        .map(|(_, d)| d)
        .collect();
    let warm = intervals.iter().take_while(|d| d["warmup"] == true).count();
    let window: Vec<Value> = intervals[warm..].iter().map(|d| (*d).clone()).collect();
    assert!(
        window.iter().all(|d| d["warmup"] == false),
        "the warm-up's seconds come first: {intervals:?}"
    );
    for d in &intervals[..warm] {
        assert!(
            num(d, "/start_s") < 0.0,
            "a warm-up second before the window: {d}"
        );
    }
    let client = at(run, "/client/intervals").as_array().unwrap();
    assert_eq!(window.len(), client.len(), "{window:?}\n{client:?}");
    for (k, (d, c)) in window.iter().zip(client).enumerate() {
        for f in [
            "/start_s",
            "/length_s",
            "/tx_bytes",
            "/rx_bytes",
            "/transactions",
        ] {
            assert_eq!(d.pointer(f), c.pointer(f), "second {k}{f}: {d} vs {c}");
        }
    }
    window
}

/// Output into a pipe shows no lines unless asked; asked, one per second
/// of the warm-up and of the window, then the table.
#[test]
fn run_prints_a_line_per_second_when_asked() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let base = [
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "1500ms",
    ];
    let (code, out, err, doc) = run_json(&[&base[..], &["--interval", "1s"]].concat());
    assert_eq!(code, 0, "{out}\n{err}");
    let lines = interval_lines(&out);
    assert_eq!(
        lines,
        [
            (true, 0.0, 1.0),
            (true, 1.0, 1.5),
            (false, 0.0, 1.0),
            (false, 1.0, 2.0),
            (false, 2.0, 3.0)
        ],
        "{out}"
    );
    for l in out.lines().filter(|l| l.contains(" s  sent ")) {
        for figure in ["received ", " txn/s", "mean ", "p99 ", "retr "] {
            assert!(l.contains(figure), "{figure:?} in {l:?}");
        }
    }
    // Then the table, as always.
    let table = out.find("rr1c-1x1--2  (tcp").expect("the table");
    assert!(out.rfind(" s  sent ").unwrap() < table, "{out}");
    assert_eq!(
        at(&doc, "/tests/0/runs/0/client/intervals")
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Two seconds a line; standard output is not a terminal: none by default.
    let short = [
        "run",
        "--server",
        &addr,
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ];
    let (code, out, err) = run(&[&short[..], &["--interval", "2"]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        interval_lines(&out),
        [(true, 0.0, 0.2), (false, 0.0, 2.0)],
        "{out}"
    );
    let (code, out, err) = run(&short);
    assert_eq!(code, 0, "{err}");
    assert!(interval_lines(&out).is_empty(), "{out}");
}

/// `--json-stream -`: standard output is JSON lines only, the end is the
/// results document's run, and the lines and the table go to standard
/// error.
#[test]
fn json_stream_to_stdout_is_the_run_as_it_runs() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (code, out, err, doc) = run_json(&[
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--interval",
        "1s",
        "--json-stream",
        "-",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = stream_events(&out);
    let window = check_stream(&events, &doc);
    assert_eq!(window.len(), 2);
    let warm: Vec<&Value> = events
        .iter()
        .filter(|(e, d)| e == "interval" && d["warmup"] == true)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(warm.len(), 1, "{warm:?}");
    assert_eq!(
        (num(warm[0], "/start_s"), num(warm[0], "/length_s")),
        (-0.5, 0.5)
    );
    for d in &window {
        // Request/response over TCP: each second's own transaction times, no loss.
        assert_eq!(
            int(d, "/transaction_time_us/count"),
            int(d, "/transactions"),
            "{d}"
        );
        assert!(d.get("loss").is_none(), "{d}");
    }
    // Retransmits are read once a second (a worker held up past a second
    // reads them for the later one only).
    assert!(
        window.iter().any(|d| d["retransmits"].is_u64()),
        "{window:?}"
    );
    // The people's text is on standard error.
    assert_eq!(interval_lines(&err).len(), 3, "{err}");
    assert!(err.contains("rr1c-1x1--2  (tcp"), "the table: {err}");
}

/// `--json-stream FILE`: the stream in the file, the table on standard
/// output. UDP: each second says what it lost.
#[test]
fn json_stream_to_a_file() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("stream.jsonl");
    let (code, out, err, doc) = run_json(&[
        "run",
        "--quiet",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--json-stream",
        stream.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("rr1c-1x1--2--udp  (udp"), "{out}");
    assert!(!out.contains("\"event\""), "{out}");
    let events = stream_events(&std::fs::read_to_string(&stream).unwrap());
    let window = check_stream(&events, &doc);
    let lost: u64 = window.iter().map(|d| int(d, "/loss/lost")).sum();
    assert_eq!(lost, int(&doc, "/tests/0/runs/0/client/errors"));
    for d in &window {
        assert_eq!(int(d, "/loss/answered"), int(d, "/transactions"), "{d}");
        assert!(d["retransmits"].is_null(), "no TCP: {d}");
    }
}

/// A UDP stream the client receives: each second's line says what was lost
/// on the way to it and the jitter, each interval event carries its
/// datagrams (the warm-up's too), the window's are the client's intervals of
/// the run, count for count, and add up to the run's count of that
/// direction; the end carries the run's UDP figures. An upload's lines say
/// nothing of loss: the server counts it.
#[test]
fn a_udp_stream_shows_each_seconds_loss_live() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (code, out, err, doc) = run_json(&[
        "run",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "stream-bidir:1400",
        "--rate",
        "5m",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--interval",
        "1s",
        "--json-stream",
        "-",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = stream_events(&out);
    let window = check_stream(&events, &doc);
    assert_eq!(window.len(), 2);
    let r = at(&doc, "/tests/0/runs/0");
    let client = at(r, "/client/intervals").as_array().unwrap();
    for (k, (d, c)) in window.iter().zip(client).enumerate() {
        for f in ["/datagrams", "/expected", "/jitter_us"] {
            assert_eq!(d.pointer(f), c.pointer(f), "second {k}{f}: {d} vs {c}");
        }
        let (got, expected) = (int(d, "/datagrams"), int(d, "/expected"));
        assert!(got > 0, "second {k} received datagrams: {d}");
        let lost = expected.saturating_sub(got) as f64 / expected as f64;
        assert_eq!(num(d, "/loss_rate"), lost, "{d}");
        assert!(d.get("loss").is_none(), "no transactions: {d}");
    }
    // The window's seconds add up to the run's count of the server's
    // datagrams at the client.
    let down = udp_direction(r, "server_to_client");
    for (f, total) in [("/datagrams", "/received"), ("/expected", "/expected")] {
        let sum: u64 = window.iter().map(|d| int(d, f)).sum();
        assert_eq!(sum, int(down, total), "{f}: {window:?}\n{down}");
    }
    // The warm-up's second is shown with its datagrams too.
    let warm: Vec<&Value> = events
        .iter()
        .filter(|(e, d)| e == "interval" && d["warmup"] == true)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(warm.len(), 1, "{warm:?}");
    assert!(int(warm[0], "/expected") > 0, "{}", warm[0]);
    // The end is the run, its UDP figures with it.
    let end = &events.last().unwrap().1;
    assert!(end["udp"]["client_to_server"].is_object(), "{end}");
    assert!(end["udp"]["server_to_client"].is_object(), "{end}");
    assert!(
        end["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["loss_rate"].is_number()),
        "{end}"
    );
    // The lines for people, on standard error: loss and jitter each second.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" s  sent ")).collect();
    assert_eq!(lines.len(), 3, "{err}");
    for l in &lines {
        assert!(l.contains("  lost ") && l.contains("  jitter "), "{l:?}");
    }

    // An upload: the client receives nothing, its lines say nothing of loss.
    let (code, out, err) = run(&[
        "run",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "stream-up:1400",
        "--rate",
        "5m",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--interval",
        "1s",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" s  sent ")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert!(!l.contains("lost"), "{l:?}");
    }
}

/// Ctrl-C in the window: the run is aborted and keeps the seconds that ran,
/// the last one cut to its real length; nothing after it, on either side,
/// in the stream or in the file.
#[test]
fn ctrl_c_keeps_the_seconds_that_ran_without_padding() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let client = util::Client::spawn(&[
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "60s",
        "--warmup",
        "200ms",
    ]);
    // Two seconds of the window are over.
    let seen = 2;
    let window_seconds = |out: &str| {
        out.lines()
            .filter(|l| l.contains("\"warmup\":false"))
            .count()
    };
    client.wait_until_stdout("a second interval event", Duration::from_secs(60), |out| {
        window_seconds(out) >= seen
    });
    client.signal("-INT");
    let (status, out, err, doc) = client.finish(Duration::from_secs(60));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(status.code(), Some(1), "interrupted: {err}");

    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    let client = at(r, "/client/intervals").as_array().unwrap();
    // The interrupt lands a moment after the second second's event: one
    // more second, and part of another, may have run (a busy host delays).
    assert!(
        (seen..=seen + 4).contains(&client.len()),
        "the seconds that ran, not the 60 of the window: {client:?}"
    );
    let (last, whole) = client.split_last().unwrap();
    for (k, i) in whole.iter().enumerate() {
        assert_eq!(num(i, "/start_s"), k as f64);
        assert_eq!(num(i, "/length_s"), 1.0, "{i}");
    }
    let cut = num(last, "/length_s");
    assert!(
        cut > 0.0 && cut <= 1.0,
        "the last second as long as it ran: {last}"
    );
    let sum: u64 = client.iter().map(|i| int(i, "/transactions")).sum();
    assert_eq!(sum, int(r, "/client/transactions"));
    assert_eq!(at(r, "/intervals").as_array().unwrap().len(), client.len());
    // The server, told a moment later (once the client has collected its
    // side), stopped counting too.
    let server_iv = at(r, "/server/intervals").as_array().unwrap();
    assert!(
        (client.len()..=client.len() + 3).contains(&server_iv.len()),
        "{server_iv:?}"
    );

    let events = stream_events(&lines.join("\n"));
    check_stream(&events, &doc);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(&names[names.len() - 2..], ["error", "end"], "{names:?}");
    let error = &events[events.len() - 2].1;
    assert_eq!(text(error, "/status"), "aborted");
}
