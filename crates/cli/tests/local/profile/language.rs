//! The profile language: the lenient forms uperf accepts, `$variables`, and
//! the refusals (exit 2 before anything runs, naming the file, line and
//! element).

use super::*;

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
