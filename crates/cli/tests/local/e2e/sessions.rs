//! Sessions side by side and gone: two clients at once, a client that
//! vanishes, several servers at once, and other work on the CPUs a test
//! measures.

use super::*;

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
    // Its noise is made on purpose: left out of the test command's run log.
    let (code, out, err, doc) = util::run_json_under(
        &["env", "-u", "LINKPERF_RUN_LOG"],
        &[
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
        ],
    );
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
