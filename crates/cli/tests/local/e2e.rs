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

mod control;
mod document;
mod live;
mod sessions;
mod udp;
