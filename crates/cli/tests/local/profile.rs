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

mod connections;
mod hosts;
mod language;
mod udp;
