//! Remote hosts and groups (one, two at once, `--server` over `remotehost`),
//! the barrier between transactions across groups, and a profile in a suite.

use super::*;

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
