//! End-to-end tests of uperf profiles (`linkperf run --profile`): the real
//! binary, a real `linkperf serve` child (or the embedded server) and real
//! sockets on loopback, running the profiles of the corpus in
//! tests/profiles/ (each file says what it covers in its leading comment).
//!
//! Covered: bytes and operations on both ends (write/read loops, `count`,
//! `iterations`, `nthreads`/`nprocs`, `size=rand(min,max)`, named
//! connections, `sendfile`, `rsize`, `send`/`recv`); pacing (`rate`); think
//! time (idle and busy); timed transactions ending on time with the streams
//! left aligned (the client writing first, reading first, or only reading);
//! connecting per iteration; `accept` on the client (the server connecting
//! back); UDP connections (alone and beside TCP); `canfail` and `timeout`;
//! the lenient forms of the language; `$variables` from `--var` and the
//! environment; remote hosts (one, two at once, `--server` over
//! `remotehost`, a host without a port); the barrier between transactions
//! across groups; a profile in a suite file; and the refusals (exit 2 before
//! anything runs, naming the file, line and element).
//!
//! Counts and bytes are asserted exactly, times only in generous bands (the
//! machine is shared).

// The helpers are shared with e2e.rs; this file does not use all of them.
use crate::util;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::{at, int, num, run, run_json, shared, text, Server, BIN};
use serde_json::Value;

/// An address where no linkperf server listens: a refused profile must
/// never get as far as trying it.
const NOWHERE: &str = "127.0.0.1:1";

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

/// The corpus file `name`, as an absolute path.
fn corpus(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "profiles", name]
        .iter()
        .collect();
    assert!(p.is_file(), "no corpus file {}", p.display());
    p.to_str().expect("utf-8 path").to_string()
}

/// The 1-based line of the first line of `file` outside comments containing
/// `needle`.
fn line_of(file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(file).expect("read corpus file");
    let mut in_comment = false;
    for (i, l) in text.lines().enumerate() {
        let opens = l.contains("<!--");
        if !in_comment && !opens && l.contains(needle) {
            return i + 1;
        }
        in_comment = (in_comment || opens) && !l.contains("-->");
    }
    panic!("{needle:?} is not in {file} outside comments")
}

/// `linkperf run --quiet --profile FILE EXTRA...`, which must exit 0 with an
/// `ok` run; the results document.
fn profile(file: &str, extra: &[&str]) -> Value {
    profile_warned(file, extra).0
}

/// [`profile`], with what it printed on stderr (its warnings).
fn profile_warned(file: &str, extra: &[&str]) -> (Value, String) {
    let path = corpus(file);
    let mut args = vec!["run", "--quiet", "--profile", &path];
    args.extend(extra);
    let (code, out, err, doc) = run_json(&args);
    assert_eq!(
        code, 0,
        "linkperf {args:?} failed\nstdout: {out}\nstderr: {err}"
    );
    util::assert_measured(at(&doc, "/tests/0/runs/0"), &format!("linkperf {args:?}"));
    (doc, err)
}

/// [`profile`] against `server`.
fn profile_on(server: &Server, file: &str, extra: &[&str]) -> Value {
    let addr = server.addr();
    let mut args = vec!["--server", addr.as_str()];
    args.extend(extra);
    let doc = profile(file, &args);
    assert_eq!(text(&doc, "/tests/0/config/server"), addr);
    doc
}

/// The only run of the only test.
fn the_run(doc: &Value) -> &Value {
    assert_eq!(at(doc, "/tests").as_array().unwrap().len(), 1);
    assert_eq!(at(doc, "/tests/0/runs").as_array().unwrap().len(), 1);
    at(doc, "/tests/0/runs/0")
}

/// Transaction element `i` (in file order over all groups) of `side`.
fn txn<'a>(run: &'a Value, side: &str, i: usize) -> &'a Value {
    at(run, &format!("/{side}/profile/transactions/{i}"))
}

/// The transaction element of group `g`, index `i` of `side`.
fn txn_of<'a>(run: &'a Value, side: &str, g: u64, i: u64) -> &'a Value {
    at(run, &format!("/{side}/profile/transactions"))
        .as_array()
        .unwrap()
        .iter()
        .find(|t| int(t, "/group") == g && int(t, "/index") == i)
        .unwrap_or_else(|| panic!("no transaction g{g} t{i} on the {side}"))
}

/// The flowop type `ty` of `side`, if the side used it.
fn flowop<'a>(run: &'a Value, side: &str, ty: &str) -> Option<&'a Value> {
    at(run, &format!("/{side}/profile/flowops"))
        .as_array()
        .unwrap()
        .iter()
        .find(|f| text(f, "/type") == ty)
}

/// Operations of flowop type `ty` on `side` (0 if unused).
fn ops(run: &Value, side: &str, ty: &str) -> u64 {
    flowop(run, side, ty).map_or(0, |f| int(f, "/operations"))
}

/// What the client wrote the server read and the other way round, to the byte.
fn assert_mirrored(run: &Value) {
    let (c, s) = (at(run, "/client/totals"), at(run, "/server/totals"));
    assert_eq!(
        int(c, "/tx_bytes"),
        int(s, "/rx_bytes"),
        "client tx vs server rx: {run}"
    );
    assert_eq!(
        int(c, "/rx_bytes"),
        int(s, "/tx_bytes"),
        "client rx vs server tx: {run}"
    );
}

/// No errors on either side, and the same connections on both.
fn assert_clean(run: &Value, connections: u64) {
    for side in ["client", "server"] {
        assert_eq!(int(run, &format!("/{side}/errors")), 0, "{side}: {run}");
        assert_eq!(
            at(run, &format!("/{side}/error_samples")),
            &Value::Array(vec![]),
            "{side}"
        );
        assert_eq!(
            int(run, &format!("/{side}/connections")),
            connections,
            "{side} connections"
        );
    }
}

/// Transaction element `i` counted `iterations` on both ends, the client
/// writing `tx` and reading `rx` bytes in it and the server the opposite.
fn assert_txn(run: &Value, i: usize, iterations: u64, tx: u64, rx: u64) {
    let (c, s) = (txn(run, "client", i), txn(run, "server", i));
    assert_eq!(int(c, "/iterations"), iterations, "client t{i}: {c}");
    assert_eq!(int(s, "/iterations"), iterations, "server t{i}: {s}");
    assert_eq!(
        (int(c, "/tx_bytes"), int(c, "/rx_bytes")),
        (tx, rx),
        "client t{i}: {c}"
    );
    assert_eq!(
        (int(s, "/tx_bytes"), int(s, "/rx_bytes")),
        (rx, tx),
        "server t{i}: {s}"
    );
    assert_eq!(int(c, "/errors"), 0, "client t{i}: {c}");
}

/// A timed transaction's seconds: at least its duration, at most a generous
/// bound over it.
fn assert_lasted(t: &Value, duration_s: f64) {
    let s = num(t, "/seconds");
    assert!(
        s >= duration_s - 0.01 && s <= duration_s + 1.5,
        "lasted {s} s for a {duration_s} s transaction: {t}"
    );
}

/// `linkperf ARGS` with `set` added to and `unset` removed from its
/// environment, to the end: exit code, stdout, stderr.
fn run_env(args: &[&str], set: &[(&str, &str)], unset: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for name in unset {
        cmd.env_remove(name);
    }
    for (k, v) in set {
        cmd.env(k, v);
    }
    util::run_command(&mut cmd, &format!("linkperf {args:?}"))
}

/// Runs `file` with `extra`, expecting it refused before anything runs
/// (`--server` points where nothing listens and `--json` must stay unwritten):
/// exit 2, the message on stderr. `unset` are removed from the environment.
fn refused(file: &str, extra: &[&str], unset: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let mut args = vec![
        "run",
        "--profile",
        file,
        "--server",
        NOWHERE,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
    let started = Instant::now();
    let (code, out, err) = run_env(&args, &[], unset);
    assert_eq!(code, 2, "linkperf {args:?}\nstdout: {out}\nstderr: {err}");
    assert!(
        !err.contains("reach the linkperf server") && !out.contains("[failed]"),
        "the refused profile was run: {out}{err}"
    );
    assert!(!json.exists(), "a refused profile wrote results");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refusing took {:?}",
        started.elapsed()
    );
    err
}

/// The refusal of corpus file `name`: exit 2 and the message naming the
/// file, the line holding `at_text` and the flowop element, then `message`.
fn assert_refused(name: &str, at_text: &str, message: &str, unset: &[&str]) {
    let file = corpus(name);
    let err = refused(&file, &[], unset);
    let line = line_of(&file, at_text);
    let want = format!("{file}: line {line}, <flowop>: {message}");
    assert!(err.contains(&want), "expected {want:?} in: {err}");
}

// ---------------------------------------------------------------------------
// Counts and bytes.
// ---------------------------------------------------------------------------

#[test]
fn a_write_read_loop_moves_the_same_bytes_each_way_and_count_repeats_the_flowop() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(
        &server,
        "rr-count.xml",
        &["--threads", "2", "--server-threads", "2"],
    );
    assert_eq!(text(&doc, "/tests/0/name"), "profile-rr-count--3");
    assert_eq!(int(&doc, "/tests/0/workload/users"), 3);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 3);
    // 3 users: t1 5 iterations of 10 × 90 out and 900 back, t2 7 of 90 each way.
    assert_txn(r, 0, 3, 0, 0);
    assert_txn(r, 1, 15, 15 * 900, 15 * 900);
    assert_txn(r, 2, 21, 21 * 90, 21 * 90);
    assert_txn(r, 3, 3, 0, 0);
    assert_eq!(
        ops(r, "client", "write"),
        15 * 10 + 21,
        "count=10: ten per iteration"
    );
    assert_eq!(ops(r, "client", "read"), 15 + 21);
    assert_eq!(ops(r, "client", "connect"), 3);
    assert_eq!(ops(r, "client", "disconnect"), 3);
    // The server's view is the mirror: its reads are the client's writes.
    assert_eq!(ops(r, "server", "read"), 15 * 10 + 21);
    assert_eq!(ops(r, "server", "write"), 15 + 21);
    assert_eq!(ops(r, "server", "accept"), 3);
    assert_eq!(ops(r, "server", "disconnect"), 3);
    assert!(flowop(r, "server", "connect").is_none());
    let bytes = 15 * 900 + 21 * 90;
    for side in ["client", "server"] {
        assert_eq!(int(r, &format!("/{side}/totals/tx_bytes")), bytes);
        assert_eq!(
            int(r, &format!("/{side}/totals/transactions")),
            3 + 15 + 21 + 3
        );
    }
    let w = flowop(r, "client", "write").unwrap();
    assert_eq!(int(w, "/tx_bytes"), bytes);
    assert_eq!(int(w, "/latency/count"), 15 * 10 + 21);
    // Each transaction element records its place in the file.
    let file = corpus("rr-count.xml");
    let t1 = txn(r, "client", 1);
    assert_eq!(int(t1, "/group"), 0);
    assert_eq!(int(t1, "/index"), 1);
    assert_eq!(
        int(t1, "/line") as usize,
        line_of(&file, "<transaction iterations=\"5\">")
    );
    assert_eq!(text(t1, "/limit"), "iterations=5");
    assert_eq!(int(t1, "/users"), 3);
    assert_eq!(int(t1, "/latency/count"), 15);
    assert!(num(t1, "/latency/min") <= num(t1, "/latency/p50"));
    assert!(num(t1, "/latency/p50") <= num(t1, "/latency/max"));
}

#[test]
fn nprocs_gives_users_and_a_bare_transaction_runs_once_on_the_embedded_server() {
    let _g = shared();
    let doc = profile("nprocs.xml", &[]);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-nprocs--4");
    assert_eq!(text(&doc, "/tests/0/config/server"), "embedded");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 4);
    assert_txn(r, 0, 4, 0, 0);
    assert_txn(r, 1, 24, 24 * 90, 24 * 90);
    // send and recv are reported as themselves, mirrored on the server.
    assert_eq!(ops(r, "client", "send"), 24);
    assert_eq!(ops(r, "client", "recv"), 24);
    assert_eq!(ops(r, "server", "recv"), 24);
    assert_eq!(ops(r, "server", "send"), 24);
    assert_eq!(ops(r, "client", "write"), 0);
}

#[test]
fn random_sizes_are_the_same_draw_on_both_ends_and_within_their_bounds() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "rand.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    // Two users: t1 20 iterations of 3 writes in [100, 5000] and a read in [1, 3072].
    let (writes, reads) = (2 * 20 * 3, 2 * 20);
    for i in [1, 2] {
        let (c, s) = (txn(r, "client", i), txn(r, "server", i));
        assert_eq!(int(c, "/tx_bytes"), int(s, "/rx_bytes"), "t{i}");
        assert_eq!(int(c, "/rx_bytes"), int(s, "/tx_bytes"), "t{i}");
        assert_eq!(int(c, "/iterations"), int(s, "/iterations"), "t{i}");
    }
    let t1 = txn(r, "client", 1);
    assert_eq!(int(t1, "/iterations"), 40);
    let tx = int(t1, "/tx_bytes");
    assert!(
        tx > writes * 100 && tx < writes * 5000,
        "{writes} writes in [100, 5000] gave {tx} bytes"
    );
    let rx = int(t1, "/rx_bytes");
    assert!(
        rx > reads && rx < reads * 3072,
        "{reads} reads in [1, 3072] gave {rx} bytes"
    );
    // t2: 8 writes in [1k, 256k] and 8 reads in [1, 10].
    let t2 = txn(r, "client", 2);
    assert_eq!(int(t2, "/iterations"), 8);
    let tx = int(t2, "/tx_bytes");
    assert!((8 * 1024..=8 * 256 * 1024).contains(&tx), "t2 wrote {tx}");
    let rx = int(t2, "/rx_bytes");
    assert!((8..=80).contains(&rx), "t2 read {rx}");
    // The streams stayed aligned: the fixed-size transaction after them is exact.
    assert_txn(r, 3, 6, 48, 48);
    assert_eq!(ops(r, "client", "write"), writes + 8 + 6);
    assert_eq!(ops(r, "server", "read"), writes + 8 + 6);
}

#[test]
fn named_connections_give_each_user_several_connections_on_both_ends() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(
        &server,
        "conns.xml",
        &["--threads", "2", "--server-threads", "3"],
    );
    let r = the_run(&doc);
    assert_mirrored(r);
    // Three users, three connections each.
    assert_clean(r, 9);
    assert_eq!(ops(r, "client", "connect"), 9);
    assert_eq!(ops(r, "server", "accept"), 9);
    assert_eq!(ops(r, "client", "disconnect"), 9);
    assert_eq!(ops(r, "server", "disconnect"), 9);
    assert_txn(r, 1, 12, 12 * 60, 12 * 60);
    assert_eq!(ops(r, "client", "write"), 36);
}

#[test]
fn sendfile_and_rsize_move_exact_byte_totals() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "sendfile-rsize.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    // Two users, three iterations: 3 MiB + 5 × 1 byte by sendfile, 200 KiB
    // written, 4 + 2 × 100 KiB read.
    let n = 6;
    let sendfile = n * (3 * 1024 * 1024 + 5);
    let tx = sendfile + n * 200 * 1024;
    let rx = n * (4 + 2 * 100 * 1024);
    assert_txn(r, 1, n, tx, rx);
    assert_txn(r, 2, 4, 20, 20);
    let sf = flowop(r, "client", "sendfile").expect("sendfile used");
    assert_eq!(int(sf, "/operations"), n * 6);
    assert_eq!(int(sf, "/tx_bytes"), sendfile);
    // The server reads what sendfile sent.
    assert_eq!(int(r, "/server/totals/rx_bytes"), tx + 20);
    assert!(flowop(r, "server", "sendfile").is_none());
    assert_eq!(ops(r, "client", "read"), n * 3 + 4);
}

// ---------------------------------------------------------------------------
// Time: rate, think, duration.
// ---------------------------------------------------------------------------

#[test]
fn rate_paces_each_user_to_about_the_given_iterations_per_second() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (doc, err) = profile_warned("rate.xml", &["--server", addr.as_str()]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    let t1 = txn(r, "client", 1);
    assert_eq!(text(t1, "/limit"), "duration=1s rate=100");
    assert_lasted(t1, 1.0);
    let it = int(t1, "/iterations");
    let per_user_second = it as f64 / 2.0 / num(t1, "/seconds");
    assert!(
        (70.0..=130.0).contains(&per_user_second),
        "rate=100 gave {per_user_second:.1} iterations per user-second ({it} in all)"
    );
    assert_txn(r, 1, it, it * 64, it * 64);
    // uperf paces only a timed transaction: on iterations=10 rate=50 is
    // ignored, with a warning naming it.
    let t2 = txn(r, "client", 2);
    assert_eq!(text(t2, "/limit"), "iterations=10");
    let line = line_of(&corpus("rate.xml"), "rate=\"50\"");
    let want = format!(
        "linkperf: warning: {}: line {line}, <transaction>: rate=50 has no effect on a \
         transaction of iterations= (uperf paces only a transaction of duration=): ignored",
        corpus("rate.xml")
    );
    assert!(err.contains(&want), "expected {want:?} in: {err}");
    assert_txn(r, 2, 20, 160, 160);
}

#[test]
fn think_time_idle_or_busy_is_part_of_the_transaction_time() {
    let _g = shared();
    let doc = profile("think.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    let min_us = |i: usize| num(txn(r, "client", i), "/latency/min");
    assert!(
        min_us(1) >= 30_000.0,
        "idle think 30 ms: {}",
        txn(r, "client", 1)
    );
    assert!(
        min_us(2) >= 20_000.0,
        "busy think 20 ms: {}",
        txn(r, "client", 2)
    );
    assert!(min_us(3) >= 20_000.0, "4 × 5 ms: {}", txn(r, "client", 3));
    for (i, least) in [(1, 0.09), (2, 0.06), (3, 0.04)] {
        let s = num(txn(r, "client", i), "/seconds");
        assert!((least..=least + 1.5).contains(&s), "t{i} took {s} s");
    }
    assert_txn(r, 1, 6, 60, 60);
    assert_txn(r, 2, 6, 0, 0);
    assert_txn(r, 3, 4, 0, 0);
    let think = flowop(r, "client", "think").expect("think used");
    assert_eq!(int(think, "/operations"), 2 * (3 + 3 + 4 * 2));
    assert!(num(think, "/latency/min") >= 5_000.0, "{think}");
    // The server does not think: each think is a nop there.
    assert!(flowop(r, "server", "think").is_none());
    assert_eq!(ops(r, "server", "nop"), 2 * (3 + 3 + 4 * 2) + 2 * 3);
}

#[test]
fn a_busy_think_burns_its_duration_for_each_user_sharing_a_worker() {
    let _g = shared();
    let doc = profile("busy-many.xml", &["--threads", "1"]);
    let r = the_run(&doc);
    let t = txn(r, "client", 0);
    assert_eq!(int(t, "/iterations"), 20);
    // One worker's CPU spins for each user in turn: at least the sum.
    let s = num(t, "/seconds");
    assert!((0.4..=0.4 + 5.0).contains(&s), "took {s} s: {t}");
    assert!(num(t, "/latency/min") >= 20_000.0, "{t}");
}

#[test]
fn timed_transactions_end_on_time_and_leave_the_streams_aligned() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "timed.xml", &["--threads", "2"]);
    let r = the_run(&doc);
    // Every byte either side wrote was read (or drained) by the other.
    assert_mirrored(r);
    assert_clean(r, 4);
    // t1: the client writes first; it ends at an iteration boundary on both ends.
    let n1 = int(txn(r, "client", 1), "/iterations");
    assert!(n1 > 0);
    assert_lasted(txn(r, "client", 1), 0.3);
    assert_txn(r, 1, n1, n1 * 90, n1 * 90);
    assert_txn(r, 2, 10, 10 * 28, 10 * 32);
    // t3: the client reads first; the server writes ahead, by less than an
    // iteration, and the client discards that before t4.
    let (c3, s3) = (txn(r, "client", 3), txn(r, "server", 3));
    let n3 = int(c3, "/iterations");
    assert!(n3 > 0);
    assert_lasted(c3, 0.3);
    assert_eq!(int(c3, "/rx_bytes"), n3 * 350);
    assert_eq!(int(c3, "/tx_bytes"), n3 * 10);
    assert_eq!(
        int(s3, "/iterations"),
        n3,
        "the server stops at the client's count"
    );
    assert_eq!(int(s3, "/rx_bytes"), n3 * 10);
    let ahead = int(s3, "/tx_bytes")
        .checked_sub(n3 * 350)
        .unwrap_or_else(|| panic!("the server wrote less than the client read: {s3}"));
    assert!(ahead <= 2 * 350, "the server wrote {ahead} bytes ahead");
    assert_txn(r, 4, 10, 10 * 50, 10 * 46);
    // t5: the client only reads; whole 64 KiB messages.
    let c5 = txn(r, "client", 5);
    let n5 = int(c5, "/iterations");
    assert!(n5 > 0);
    assert_lasted(c5, 0.2);
    assert_eq!(int(c5, "/rx_bytes"), n5 * 65536);
    assert_eq!(int(c5, "/tx_bytes"), 0);
    assert_txn(r, 6, 10, 10 * 68, 10 * 68);
}

// ---------------------------------------------------------------------------
// Connections: per iteration, accept on the client.
// ---------------------------------------------------------------------------

#[test]
fn connecting_and_disconnecting_in_every_iteration_of_a_timed_transaction_works() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "crr.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    let c0 = txn(r, "client", 0);
    let n = int(c0, "/iterations");
    assert_lasted(c0, 0.3);
    // Paced at 200 per second per user for 0.3 s: at most 61 per user.
    assert!(n > 0 && n <= 2 * 61, "{n} iterations");
    assert_txn(r, 0, n, n * 100, n * 200);
    assert_txn(r, 1, 6, 6 * 9, 6 * 7);
    assert_clean(r, n + 6);
    for (side, open) in [("client", "connect"), ("server", "accept")] {
        assert_eq!(ops(r, side, open), n + 6, "{side}");
        assert_eq!(ops(r, side, "disconnect"), n + 6, "{side}");
    }
}

#[test]
fn an_accept_on_the_client_has_the_server_connect_back() {
    let _g = shared();
    let server = Server::start(&[]);
    let served = profile_on(
        &server,
        "accept.xml",
        &["--threads", "3", "--server-threads", "2"],
    );
    let embedded = profile("accept.xml", &["--threads", "2"]);
    for doc in [&served, &embedded] {
        let r = the_run(doc);
        assert_mirrored(r);
        // Five users: back and out, and x in each of three iterations.
        assert_clean(r, 5 * 5);
        assert_eq!(ops(r, "client", "accept"), 5 + 15);
        assert_eq!(ops(r, "client", "connect"), 5);
        assert_eq!(ops(r, "server", "connect"), 5 + 15);
        assert_eq!(ops(r, "server", "accept"), 5);
        assert_txn(r, 0, 5, 0, 0);
        assert_txn(r, 1, 25, 25 * 130, 25 * 120);
        assert_txn(r, 2, 15, 15 * 12, 15 * 10);
        assert_txn(r, 3, 10, 10 * 3, 10 * 4);
        assert_txn(r, 4, 5, 0, 0);
    }
}

#[test]
fn accepting_in_every_iteration_of_a_timed_transaction_leaves_the_next_one_aligned() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "accept-timed.xml", &[]);
    let r = the_run(&doc);
    let n = int(txn(r, "client", 0), "/iterations");
    assert!(n > 0);
    assert_eq!(
        int(r, "/client/errors"),
        0,
        "{}",
        at(r, "/client/error_samples")
    );
    assert_eq!(
        int(r, "/server/errors"),
        0,
        "{}",
        at(r, "/server/error_samples")
    );
    assert_txn(r, 1, 3, 3 * 12, 3 * 10);
    assert_mirrored(r);
}

#[test]
fn a_connect_in_each_iteration_opens_one_more_connection_as_uperf_does() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "connect-stack.xml", &["--threads", "2"]);
    let r = the_run(&doc);
    assert_mirrored(r);
    // Three users, five connections each, all open at once.
    assert_clean(r, 15);
    for (side, open) in [("client", "connect"), ("server", "accept")] {
        assert_eq!(ops(r, side, open), 15, "{side}");
        assert_eq!(ops(r, side, "disconnect"), 15, "{side}");
    }
    assert_txn(r, 0, 15, 0, 0);
    assert_txn(r, 1, 12, 12 * 10, 12 * 11);
    assert_txn(r, 2, 15, 0, 0);
}

#[test]
fn an_accept_in_each_iteration_takes_one_more_connection_as_uperf_does() {
    let _g = shared();
    let server = Server::start(&[]);
    let started = Instant::now();
    let doc = profile_on(&server, "accept-stack.xml", &[]);
    // It once waited for the stall limit (60 s) on the second accept.
    assert!(started.elapsed() < Duration::from_secs(30));
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 8);
    assert_eq!(ops(r, "client", "accept"), 8);
    assert_eq!(ops(r, "server", "connect"), 8);
    assert_txn(r, 1, 6, 6 * 5, 6 * 7);
    assert_txn(r, 2, 8, 0, 0);
}

#[test]
fn an_unnamed_connect_after_a_named_accept_opens_the_unnamed_connection() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "unnamed-after-named.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 4);
    assert_txn(r, 0, 2, 2 * (64 + 264), 2 * (8 + 9));
    assert_eq!(ops(r, "client", "disconnect"), 4);
}

#[test]
fn a_name_reconnected_with_another_protocol_runs_as_uperf_does() {
    let _g = shared();
    let server = Server::start(&[]);
    let started = Instant::now();
    let doc = profile_on(&server, "multi-proto-connect.xml", &[]);
    // A UDP connect without data once waited for a stall limit.
    assert!(started.elapsed() < Duration::from_secs(30));
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_eq!(ops(r, "client", "connect"), 10 + 10 + 3 + 10);
    assert_eq!(ops(r, "server", "accept"), 10 + 10 + 3 + 10);
    // The last disconnect closes the newest of the ten TCP connections.
    assert_eq!(ops(r, "client", "disconnect"), 10 + 10 + 3 + 1);
    for side in ["client", "server"] {
        assert_eq!(int(r, &format!("/{side}/errors")), 0, "{side}: {r}");
    }
    assert_txn(r, 2, 3, 3 * 100, 3 * 50);
    assert_txn(r, 4, 1, 7, 9);
}

#[test]
fn canfail_connects_in_many_iterations_make_that_many_connections() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "canfail-connects.xml", &[]);
    let r = the_run(&doc);
    // uperf makes every connection; none fails.
    assert_clean(r, 300);
    assert_eq!(ops(r, "client", "connect"), 300);
    assert_eq!(ops(r, "client", "disconnect"), 300);
    assert_eq!(ops(r, "server", "disconnect"), 300);
}

#[test]
fn a_timed_transaction_connecting_without_bound_is_refused() {
    let file = corpus("err-timed-connect.xml");
    let err = refused(&file, &[], &[]);
    let line = line_of(&file, "duration=\"1s\"");
    let want = format!(
        "{file}: line {line}, <transaction>: each iteration of this timed transaction opens \
         a connection it does not close"
    );
    assert!(err.contains(&want), "expected {want:?} in: {err}");
}

#[test]
fn what_uperf_accepts_runs_and_what_linkperf_ignores_is_a_warning_naming_it() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (doc, err) = profile_warned("uperf-accepts.xml", &["--server", addr.as_str()]);
    let file = corpus("uperf-accepts.xml");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 4);
    // iterations="0": no times.
    assert_txn(r, 1, 0, 0, 0);
    assert_txn(r, 2, 6, 6 * 150, 6 * 150);
    // sendfile from dir= without size=: 64 KiB; sendfilev as sendfile.
    assert_txn(r, 3, 4, 2 * 2 * (64 * 1024 + 4096), 0);
    assert_eq!(ops(r, "client", "sendfile"), 2 * 2 * 2);
    for (needle, message) in [
        ("stack=fastack", "stack=fastack selects a FreeBSD TCP stack"),
        ("cc=cubic", "tcp_nodelay has no effect on a UDP connection"),
        (
            "cc=cubic",
            "cc=cubic is TCP congestion control and has no effect on a UDP connection",
        ),
        ("duration=10s", "duration= has no effect on a write flowop"),
        (
            "type=\"sendfile\"",
            "dir=. and nfiles=10: linkperf sends from an in-memory file",
        ),
        (
            "type=\"sendfilev\"",
            "sendfilev is Solaris's sendfilev(3EXT)",
        ),
        (
            "remotehost=127",
            "remotehost and protocol on a disconnect have no effect",
        ),
    ] {
        let line = line_of(&file, needle);
        let want = format!("linkperf: warning: {file}: line {line}, <flowop>: {message}");
        assert!(err.contains(&want), "expected {want:?} in: {err}");
    }
    assert!(!err.contains("non_blocking"), "{err}");
}

#[test]
fn a_flowop_without_conn_uses_the_users_first_connection() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "default-conn.xml", &[]);
    let r = the_run(&doc);
    assert_eq!(
        int(r, "/client/errors"),
        0,
        "{}",
        at(r, "/client/error_samples")
    );
    assert_clean(r, 2);
    assert_txn(r, 1, 3, 3 * 11, 3 * 11);
    assert_mirrored(r);
}

// ---------------------------------------------------------------------------
// UDP.
// ---------------------------------------------------------------------------

#[test]
fn udp_connections_carry_one_datagram_per_operation() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "udp.xml", &["--server-threads", "2"]);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-udp--2--udp");
    assert_eq!(text(&doc, "/tests/0/workload/protocol"), "udp");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    assert_txn(r, 1, 20, 20 * 200, 20 * 1024);
    let c2 = txn(r, "client", 2);
    let n = int(c2, "/iterations");
    assert_lasted(c2, 0.3);
    // Paced at 500 per second per user for 0.3 s: at most 151 per user.
    assert!(n > 0 && n <= 2 * 151, "{n} iterations");
    assert_txn(r, 2, n, n * 64, n * 64);
    // Random sizes up to 60000, two per iteration; the largest payload back.
    let (c3, s3) = (txn(r, "client", 3), txn(r, "server", 3));
    assert_eq!(int(c3, "/iterations"), 8);
    let tx = int(c3, "/tx_bytes");
    assert!((16..=16 * 60000).contains(&tx), "t3 wrote {tx}");
    assert_eq!(int(s3, "/rx_bytes"), tx);
    assert_eq!(int(c3, "/rx_bytes"), 8 * 65483);
    assert_eq!(ops(r, "client", "write"), 20 + n + 16);
    assert_eq!(ops(r, "server", "read"), 20 + n + 16);
}

/// uperf's VoIPRx.xml: the client only reads its UDP connection, so the
/// server sends first. It learns where from the connection's registration;
/// the client reads every iteration, none times out, and what the server
/// wrote past the client's end is dropped at the client without an error.
#[test]
fn a_udp_connection_the_server_sends_on_first_runs_as_under_uperf() {
    let _g = shared();
    let server = Server::start(&[]);
    let started = Instant::now();
    let doc = profile_on(&server, "udp-server-first.xml", &[]);
    assert_eq!(
        text(&doc, "/tests/0/workload/direction"),
        "server_to_client"
    );
    let r = the_run(&doc);
    assert_eq!(
        int(r, "/client/errors"),
        0,
        "{}",
        at(r, "/client/error_samples")
    );
    let (c1, s1) = (txn(r, "client", 1), txn(r, "server", 1));
    let n = int(c1, "/iterations");
    assert!(n > 100, "{n} datagrams read in a second");
    assert_eq!(int(c1, "/rx_bytes"), 64 * n, "each read took one datagram");
    assert_lasted(c1, 1.0);
    assert!(
        int(s1, "/tx_bytes") >= 64 * n,
        "the server wrote what was read"
    );
    assert_eq!(ops(r, "client", "connect"), 2);
    assert_eq!(int(r, "/client/profile/flowops/0/errors"), 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

/// uperf's VoIPTx.xml and iperf.xml over UDP: timed write loops, unpaced and
/// paced, faster than the server's mirror reads, so datagrams are lost. The
/// run ends on time (it used to wait 30 s for the server's users to reach the
/// client's count, then fail): each server user reads what arrived and, once
/// nothing more comes, gives up the rest as lost, one error saying so.
#[test]
fn a_udp_write_loop_that_loses_datagrams_ends_on_time() {
    let _g = shared();
    let server = Server::start(&[]);
    let started = Instant::now();
    let doc = profile_on(&server, "udp-write-loop.xml", &[]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let r = the_run(&doc);
    assert_eq!(
        int(r, "/client/errors"),
        0,
        "{}",
        at(r, "/client/error_samples")
    );
    for t in [1, 2] {
        let (c, s) = (txn(r, "client", t), txn(r, "server", t));
        assert_lasted(c, 1.0);
        let (wrote, read) = (int(c, "/tx_bytes"), int(s, "/rx_bytes"));
        assert!(
            wrote > 0 && read > 0 && read <= wrote,
            "t{t}: wrote {wrote}, read {read}"
        );
        // A server user that read less than was written gave the rest up
        // as lost, once (or nothing was lost).
        let errors = int(s, "/errors");
        assert!(errors <= 2, "t{t}: {errors} errors");
        if read < wrote {
            assert!(errors > 0, "t{t}: {} B lost without a word", wrote - read);
        }
    }
    for m in at(r, "/server/error_samples").as_array().unwrap() {
        assert!(m.as_str().unwrap().contains("never arrived (lost)"), "{m}");
    }
    // The paced loop: at most 50,000 iterations a second per user.
    assert!(int(txn(r, "client", 2), "/iterations") <= 2 * 50_001);
}

#[test]
fn a_profile_mixing_tcp_and_udp_is_recorded_as_tcp() {
    let _g = shared();
    let doc = profile("udp-mixed.xml", &[]);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-udp-mixed--1");
    assert_eq!(text(&doc, "/tests/0/workload/protocol"), "tcp");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    assert_txn(r, 1, 6, 6 * 1020, 6 * 2100);
}

// ---------------------------------------------------------------------------
// Failures: canfail, timeout.
// ---------------------------------------------------------------------------

#[test]
fn canfail_counts_a_failed_operation_on_both_ends_and_the_user_goes_on() {
    let _g = shared();
    let doc = profile("canfail.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    // Two users, five iterations: one failed write (client) and read (server) each.
    for (side, ty) in [("client", "write"), ("server", "read")] {
        assert_eq!(int(r, &format!("/{side}/errors")), 10, "{side}");
        let t = txn(r, side, 1);
        assert_eq!(int(t, "/errors"), 10, "{side}: {t}");
        assert_eq!(int(t, "/iterations"), 10, "{side}: every iteration went on");
        let f = flowop(r, side, ty).unwrap();
        assert_eq!(int(f, "/errors"), 10, "{side} {ty}: {f}");
        // The failed operations are not counted as done.
        assert_eq!(int(f, "/operations"), 10 + 4, "{side} {ty}: {f}");
        let samples = at(r, &format!("/{side}/error_samples")).to_string();
        assert!(
            samples.contains(&format!("{ty} failed: the connection is not open")),
            "{side}: {samples}"
        );
        assert_eq!(int(r, &format!("/{side}/connections")), 2);
    }
    assert_eq!(int(r, "/errors"), 20, "the run adds both sides' errors");
    // The rest of each iteration, and the next transaction, are exact.
    for i in [1, 2] {
        let (c, s) = (txn(r, "client", i), txn(r, "server", i));
        assert_eq!(int(c, "/tx_bytes"), int(s, "/rx_bytes"));
        assert_eq!(int(c, "/rx_bytes"), int(s, "/tx_bytes"));
    }
    assert_eq!(int(txn(r, "client", 1), "/tx_bytes"), 10 * 20);
    assert_eq!(int(txn(r, "client", 1), "/rx_bytes"), 10 * 20);
    assert_txn(r, 2, 4, 12, 12);
}

#[test]
fn a_read_past_its_timeout_with_canfail_is_counted_and_the_user_goes_on() {
    let _g = shared();
    let server = Server::start(&[]);
    // The read has 1 µs; the answer comes only after the server has read
    // 8 MiB. Should the client be descheduled long enough to find the
    // answer there, the run is repeated.
    let mut last = Value::Null;
    for _ in 0..3 {
        let doc = profile_on(&server, "timeout.xml", &[]);
        let r = the_run(&doc).clone();
        let t = txn(&r, "client", 1);
        assert_eq!(int(t, "/iterations"), 1, "the user went on: {t}");
        assert_eq!(int(&r, "/client/totals/tx_bytes"), 8 << 20);
        assert_eq!(int(&r, "/server/totals/rx_bytes"), 8 << 20);
        assert_eq!(int(&r, "/server/totals/tx_bytes"), 10);
        assert_eq!(int(&r, "/server/errors"), 0);
        if int(&r, "/client/errors") == 0 {
            assert_eq!(int(&r, "/client/totals/rx_bytes"), 10);
            last = r;
            continue;
        }
        assert_eq!(int(&r, "/client/errors"), 1);
        assert_eq!(int(t, "/errors"), 1);
        let read = flowop(&r, "client", "read").expect("read reported");
        assert_eq!(int(read, "/errors"), 1);
        assert_eq!(int(read, "/operations"), 0);
        let samples = at(&r, "/client/error_samples").to_string();
        assert!(
            samples.contains("read failed: no progress before its timeout"),
            "{samples}"
        );
        // The answer was never read.
        assert_eq!(int(&r, "/client/totals/rx_bytes"), 0);
        return;
    }
    panic!("the read never timed out in three runs: {last}");
}

#[test]
fn a_failing_flowop_without_canfail_fails_the_run() {
    let _g = shared();
    let server = Server::start(&[]);
    let file = corpus("no-canfail.xml");
    let addr = server.addr();
    let (code, out, err, doc) =
        run_json(&["run", "--quiet", "--profile", &file, "--server", &addr]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let r = the_run(&doc);
    assert_eq!(text(r, "/status"), "failed", "{r}");
    let why = r.get("error").map(Value::to_string).unwrap_or_default();
    assert!(
        why.contains("read failed"),
        "the error names the flowop: {r}"
    );
}

// ---------------------------------------------------------------------------
// The language: lenient forms, variables.
// ---------------------------------------------------------------------------

#[test]
fn the_lenient_forms_uperf_accepts_run_end_to_end() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "lenient.xml", &[]);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-lenient--2");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 2);
    assert_eq!(
        at(r, "/client/profile/transactions")
            .as_array()
            .unwrap()
            .len(),
        3,
        "the missing and the extra </transaction> change nothing"
    );
    assert_txn(r, 0, 2, 0, 0);
    assert_txn(r, 1, 8, 8 * 128, 8 * 128);
    assert_txn(r, 2, 4, 4 * 1024, 4 * 1024);
    let file = corpus("lenient.xml");
    assert_eq!(
        int(txn(r, "client", 1), "/line") as usize,
        line_of(&file, "<transaction iterations=4>")
    );
}

#[test]
fn variables_come_from_var_before_the_environment() {
    let _g = shared();
    let file = corpus("vars.xml");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let args = [
        "run",
        "--quiet",
        "--profile",
        &file,
        "--var",
        "nthr=2",
        "--var",
        "size=7",
        "--var",
        "size=9",
        "--json",
        json.to_str().unwrap(),
    ];
    let env = [
        ("tag", "env"),
        ("nthr", "3"),
        ("iters", "2"),
        ("size", "10"),
        ("connopts", "tcp_nodelay wndsz=64k"),
    ];
    let (code, out, err) = run_env(&args, &env, &[]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let doc = util::read_doc(&json);
    // --var wins (the last one given); the rest comes from the environment.
    assert_eq!(text(&doc, "/tests/0/name"), "profile-vars-env--2");
    let r = the_run(&doc);
    util::assert_measured(r, "profile");
    assert_mirrored(r);
    assert_clean(r, 2);
    assert_txn(r, 1, 4, 4 * 9, 4 * 9);
}

#[test]
fn variables_may_all_come_from_var() {
    let _g = shared();
    let server = Server::start(&[]);
    let file = corpus("vars.xml");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let addr = server.addr();
    let args = [
        "run",
        "--quiet",
        "--profile",
        &file,
        "--server",
        &addr,
        "--var",
        "tag=cli",
        "--var",
        "nthr=3",
        "--var",
        "iters=4",
        "--var",
        "size=1k",
        "--var",
        "connopts=tcp_nodelay",
        "--json",
        json.to_str().unwrap(),
    ];
    let unset = ["tag", "nthr", "iters", "size", "connopts"];
    let (code, out, err) = run_env(&args, &[], &unset);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let doc = util::read_doc(&json);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-vars-cli--3");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 3);
    assert_txn(r, 1, 12, 12 * 1024, 12 * 1024);
}

// ---------------------------------------------------------------------------
// Hosts and groups.
// ---------------------------------------------------------------------------

#[test]
fn a_profile_naming_two_hosts_runs_on_both_at_once_and_aggregates_them() {
    let _g = shared();
    let (one, two) = (Server::start(&[]), Server::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let file = corpus("two-hosts.xml");
    let h1 = format!("h1={}", one.addr());
    let args = [
        "run",
        "--quiet",
        "--profile",
        &file,
        "--var",
        &h1,
        "--json",
        json.to_str().unwrap(),
    ];
    // $h1 from --var, ${h2} from the environment.
    let (code, out, err) = run_env(&args, &[("h2", &two.addr())], &["h1"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let all = util::read_doc(&json);
    let each = [
        util::read_doc(&dir.path().join("out-server1.json")),
        util::read_doc(&dir.path().join("out-server2.json")),
    ];
    assert_eq!(text(&all, "/tests/0/name"), "profile-two-hosts--5");
    util::assert_measured(at(&all, "/tests/0/runs/0"), "all hosts together");
    // The first group ran on the first host, the second on the second.
    for (doc, (server, users, iterations, tx, rx)) in each
        .iter()
        .zip([(&one, 2, 20, 100, 50), (&two, 3, 60, 30, 70)])
    {
        assert_eq!(text(doc, "/tests/0/config/server"), server.addr());
        assert_eq!(
            text(doc, "/tests/0/name"),
            format!("profile-two-hosts--{users}")
        );
        let r = the_run(doc);
        util::assert_measured(r, "profile");
        assert_mirrored(r);
        assert_clean(r, users);
        assert_txn(r, 1, iterations, iterations * tx, iterations * rx);
    }
    // The aggregate's totals are the sum of each host's.
    for side in ["client", "server"] {
        for field in ["tx_bytes", "rx_bytes", "transactions"] {
            let ptr = format!("/tests/0/runs/0/{side}/totals/{field}");
            let sum: u64 = each.iter().map(|d| int(d, &ptr)).sum();
            assert_eq!(int(&all, &ptr), sum, "{ptr}");
        }
    }
    assert_eq!(
        int(&all, "/tests/0/runs/0/client/totals/tx_bytes"),
        2000 + 1800
    );
}

#[test]
fn each_hosts_document_numbers_groups_in_file_order() {
    let _g = shared();
    let (one, two) = (Server::start(&[]), Server::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let file = corpus("two-hosts.xml");
    let (h1, h2) = (format!("h1={}", one.addr()), format!("h2={}", two.addr()));
    let (code, out, err) = run(&[
        "run",
        "--quiet",
        "--profile",
        &file,
        "--var",
        &h1,
        "--var",
        &h2,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let second = util::read_doc(&dir.path().join("out-server2.json"));
    let t = txn(the_run(&second), "client", 0);
    assert_eq!(
        int(t, "/line") as usize,
        line_of(&file, "remotehost=${h2}") - 1
    );
    assert_eq!(int(t, "/group"), 1, "the file's second group: {t}");
}

#[test]
fn two_hosts_and_a_server_on_the_command_line_are_refused() {
    let file = corpus("two-hosts.xml");
    let err = refused(
        &file,
        &["--var", "h1=127.0.0.1:2", "--var", "h2=127.0.0.1:3"],
        &[],
    );
    assert!(
        err.contains("the profile names 2 remote hosts (127.0.0.1:2, 127.0.0.1:3)"),
        "{err}"
    );
    assert!(err.contains("drop --server"), "{err}");
}

#[test]
fn the_refusal_of_two_hosts_with_a_server_reads_well() {
    let file = corpus("two-hosts.xml");
    let err = refused(
        &file,
        &["--var", "h1=127.0.0.1:2", "--var", "h2=127.0.0.1:3"],
        &[],
    );
    assert!(err.contains("so --server cannot say which"), "{err}");
}

#[test]
fn one_remotehost_names_the_server_to_run_against() {
    let _g = shared();
    let server = Server::start(&[]);
    let h = format!("h={}", server.addr());
    let doc = profile("remotehost.xml", &["--var", &h]);
    assert_eq!(text(&doc, "/tests/0/config/server"), server.addr());
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 1);
    assert_txn(r, 1, 4, 360, 360);
}

#[test]
fn a_remotehost_without_a_port_takes_the_port_from_the_command_line() {
    let _g = shared();
    let server = Server::start(&[]);
    let port = server.port().to_string();
    let doc = profile("remotehost.xml", &["--var", "h=127.0.0.1", "--port", &port]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 1);
    assert_txn(r, 1, 4, 360, 360);
}

#[test]
fn a_server_on_the_command_line_wins_over_remotehost() {
    let _g = shared();
    let server = Server::start(&[]);
    // Nothing listens at the profile's host.
    let doc = profile_on(
        &server,
        "remotehost.xml",
        &["--var", &format!("h={NOWHERE}")],
    );
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 1);
    assert_txn(r, 1, 4, 360, 360);
}

#[test]
fn transaction_i_of_every_group_starts_together() {
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(
        &server,
        "barrier.xml",
        &["--threads", "2", "--server-threads", "3"],
    );
    assert_eq!(text(&doc, "/tests/0/name"), "profile-barrier--5");
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_clean(r, 5);
    assert_eq!(
        at(r, "/client/profile/transactions")
            .as_array()
            .unwrap()
            .len(),
        2 + 5
    );
    // Group 0 thinks 200 ms in its transaction 1.
    let think = txn_of(r, "client", 0, 1);
    assert!(num(think, "/latency/min") >= 200_000.0, "{think}");
    // Group 1's transaction 2 started only after it: the server, which goes
    // straight on from its nop, waited that long for the first write.
    let s2 = txn_of(r, "server", 1, 2);
    assert!(
        num(s2, "/latency/max") >= 150_000.0,
        "group 1's transaction 2 started before group 0's transaction 1 ended: {s2}"
    );
    let c2 = txn_of(r, "client", 1, 2);
    assert_eq!(int(c2, "/iterations"), 9);
    assert_eq!(
        (int(c2, "/tx_bytes"), int(c2, "/rx_bytes")),
        (9 * 33, 9 * 44)
    );
    // Group 1's timed transaction 3 has no counterpart in group 0.
    let c3 = txn_of(r, "client", 1, 3);
    assert_lasted(c3, 0.1);
    let n = int(c3, "/iterations");
    assert_eq!(int(c3, "/rx_bytes"), n * 10);
    assert_eq!(int(txn_of(r, "server", 1, 3), "/iterations"), n);
    let c4 = txn_of(r, "client", 1, 4);
    assert_eq!(int(c4, "/iterations"), 6);
    assert_eq!((int(c4, "/tx_bytes"), int(c4, "/rx_bytes")), (36, 30));
    let s4 = txn_of(r, "server", 1, 4);
    assert_eq!((int(s4, "/tx_bytes"), int(s4, "/rx_bytes")), (30, 36));
}

#[test]
fn the_server_counts_what_it_did_ahead_of_a_timed_transactions_end() {
    // The server writes first: it may finish iterations past the client's
    // count before the end reaches it. Its own figures count them (what it
    // did); the client drains their bytes, so the totals agree to the byte.
    let _g = shared();
    let server = Server::start(&[]);
    let doc = profile_on(&server, "stream-down.xml", &[]);
    let r = the_run(&doc);
    assert_mirrored(r);
    assert_txn(r, 2, 3, 27, 27);
    let (c, s) = (txn(r, "client", 1), txn(r, "server", 1));
    assert!(int(s, "/iterations") >= int(c, "/iterations"), "server {s}");
    assert!(int(s, "/tx_bytes") >= int(c, "/rx_bytes"), "server {s}");
    assert_eq!(
        int(r, "/server/totals/tx_bytes"),
        int(r, "/client/totals/rx_bytes")
    );
}

// ---------------------------------------------------------------------------
// Suites.
// ---------------------------------------------------------------------------

#[test]
fn a_suite_runs_a_profile_with_its_vars() {
    let _g = shared();
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("study.toml");
    let out = dir.path().join("results.json");
    std::fs::write(
        &suite,
        format!(
            "name = \"profiles\"\n\n[[profile]]\nfile = {:?}\nthreads = 2\n\
             vars = {{ tag = \"suite\", nthr = \"2\", iters = \"3\", size = \"100\", connopts = \"tcp_nodelay\" }}\n",
            corpus("vars.xml")
        ),
    )
    .unwrap();
    let addr = server.addr();
    let args = [
        "suite",
        suite.to_str().unwrap(),
        "--server",
        &addr,
        "--out",
        out.to_str().unwrap(),
    ];
    let unset = ["tag", "nthr", "iters", "size", "connopts"];
    let (code, stdout, err) = run_env(&args, &[], &unset);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {err}");
    let doc = util::read_doc(&out);
    assert_eq!(text(&doc, "/tests/0/name"), "profile-vars-suite--2");
    // One run, and its retries where a busy host made it suspect (the
    // suite runs a suspect run again at once): the last is the one to read.
    assert_eq!(at(&doc, "/tests").as_array().unwrap().len(), 1);
    let runs = at(&doc, "/tests/0/runs").as_array().unwrap();
    for (i, earlier) in runs.iter().enumerate().take(runs.len() - 1) {
        assert_eq!(text(earlier, "/status"), "suspect", "{earlier}");
        assert!(runs[i + 1].get("retry_of").is_some(), "{}", runs[i + 1]);
    }
    let r = runs.last().unwrap();
    util::assert_measured(r, "profile");
    assert_mirrored(r);
    assert_clean(r, 2);
    assert_txn(r, 1, 6, 600, 600);
}

#[test]
fn a_suites_profile_with_a_variable_unset_is_refused_saying_where_to_set_it() {
    // In a suite file, a profile's variables are set in its [[profile]]
    // table (or the environment), not with run's --var.
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("study.toml");
    std::fs::write(
        &suite,
        format!(
            "name = \"profiles\"\n\n[[profile]]\nfile = {:?}\n\
             vars = {{ tag = \"suite\", nthr = \"2\", iters = \"3\", connopts = \"tcp_nodelay\" }}\n",
            corpus("vars.xml")
        ),
    )
    .unwrap();
    let out = dir.path().join("results.json");
    let args = [
        "suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let unset = ["tag", "nthr", "iters", "size", "connopts"];
    let (code, stdout, err) = run_env(&args, &[], &unset);
    assert_eq!(code, 2, "stdout: {stdout}\nstderr: {err}");
    assert!(
        err.contains(
            "variable $size is not set: set it in the environment or in this [[profile]]'s vars (size = \"...\")"
        ),
        "{err}"
    );
    assert!(!err.contains("--var"), "{err}");
    assert!(!out.exists(), "nothing ran");
}

// ---------------------------------------------------------------------------
// Refusals: exit 2 before anything runs.
// ---------------------------------------------------------------------------

#[test]
fn an_unset_variable_is_refused_naming_it() {
    assert_refused(
        "err-unset-var.xml",
        "remotehost=$linkperf_profile_test_unset",
        "variable $linkperf_profile_test_unset is not set: set it in the environment or with --var linkperf_profile_test_unset=value",
        &["linkperf_profile_test_unset"],
    );
}

#[test]
fn protocol_sctp_is_refused() {
    assert_refused(
        "err-sctp.xml",
        "protocol=sctp",
        "protocol=sctp is not supported: linkperf carries tcp and udp",
        &[],
    );
}

#[test]
fn an_unknown_flowop_type_is_refused() {
    assert_refused(
        "err-unknown-type.xml",
        "frobnicate",
        "unknown flowop type frobnicate: use connect, accept, disconnect, read, write",
        &[],
    );
}

#[test]
fn an_unknown_option_is_refused_with_the_options_the_type_takes() {
    assert_refused(
        "err-unknown-option.xml",
        "nodelay=1",
        "unknown option nodelay: a write flowop takes size, rsize, count, conn, timeout, canfail",
        &[],
    );
}

#[test]
fn an_accept_over_udp_is_refused_as_not_supported_yet() {
    assert_refused(
        "err-udp-accept.xml",
        "protocol=udp",
        "type=accept with protocol=udp (the server opening the connection) is not supported yet",
        &[],
    );
}

#[test]
fn sendfile_on_a_udp_connection_is_refused() {
    assert_refused(
        "err-udp-sendfile.xml",
        "type=\"sendfile\"",
        "sendfile needs a TCP connection",
        &[],
    );
}

#[test]
fn a_size_over_what_one_datagram_carries_is_refused() {
    assert_refused(
        "err-udp-size.xml",
        "size=65484",
        "size 65484 does not fit in one UDP datagram (at most 65483 bytes",
        &[],
    );
}

#[test]
fn a_group_naming_two_hosts_is_refused() {
    assert_refused(
        "err-group-two-hosts.xml",
        "remotehost=127.0.0.1:2",
        "remotehost=127.0.0.1:2 differs from remotehost=127.0.0.1:1 (line ",
        &[],
    );
}

#[test]
fn a_missing_profile_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-profile.xml");
    let missing = missing.to_str().unwrap();
    let err = refused(missing, &[], &[]);
    assert!(
        err.contains(&format!("{missing}: No such file or directory")),
        "{err}"
    );
}
