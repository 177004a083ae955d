//! UDP connections in a profile, and the failures a profile counts or ends
//! with: `canfail`, `timeout`.

use super::*;

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
