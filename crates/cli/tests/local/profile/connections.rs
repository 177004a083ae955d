//! A profile's connections: connecting and accepting in every iteration, on
//! the client and the server, as uperf does.

use super::*;

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
