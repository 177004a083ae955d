//! Signals: SIGTERM and SIGINT on serve, Ctrl-C on run, and a server killed
//! mid-suite then resumed against a restarted one.

use super::*;

// ---------------------------------------------------------------------------
// 4. SIGTERM / SIGINT on serve.
// ---------------------------------------------------------------------------

fn serve_signal_aborts_running_tests(sig: &str) {
    let _g = shared();
    let mut serve = Server::start(&[]);
    let addr = serve.addr();
    let client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--users",
        "4",
        "--duration",
        "20s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(20));
    serve.signal(sig);
    let signalled = Instant::now();
    let status = serve
        .exit_within(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("serve still running 5 s after {sig}: {}", serve.log()));
    let took = signalled.elapsed();
    assert!(status.success(), "{status}: {}", serve.log());
    eprintln!("serve exited {took:?} after {sig}");
    assert!(
        serve.log().contains("1 running test aborted"),
        "{}",
        serve.log()
    );
    let (status, _, err, doc) = client.finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{err}");
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    assert!(text(r, "/error").contains("shutting down"), "{r}");
    // Issue 35: said cleanly, once, on both ends.
    assert!(!serve.log().contains("(aborted)"), "{}", serve.log());
    assert!(!text(r, "/error").contains("(aborted)"), "{r}");
    let reasons = r["status_reasons"].as_array().unwrap();
    assert!(
        reasons[0].as_str().unwrap().starts_with("interrupted: "),
        "{reasons:?}"
    );
    let said = reasons
        .iter()
        .filter(|w| w.as_str().unwrap().contains("interrupted"))
        .count();
    assert_eq!(said, 1, "{reasons:?}");
    // The client's seconds end where its window did, as its table says: not
    // padded with empty seconds up to the 20 it was to run.
    let iv = r["client"]["intervals"].as_array().unwrap();
    let last = iv.last().unwrap();
    let end = util::num(last, "/start_s") + util::num(last, "/length_s");
    let window = util::num(r, "/client/window_s");
    assert!(
        (end - window).abs() < 1e-6,
        "intervals end at {end} s, the window at {window} s"
    );
    assert!(window < 19.0, "{window}");
    // The client keeps what it measured.
    assert!(util::num(r, "/client/totals/transactions") > 0.0, "{r}");
    assert!(r.get("throughput").is_some(), "{r}");
}

#[test]
fn ctrl_c_on_run_while_its_users_connect_stops_at_once_and_keeps_the_record() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let addr = server.addr();
    let mut client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--users",
        "2000",
        "--duration",
        "10s",
    ]);
    // The server has taken the test on: its 2,000 users connect now, and
    // take longer than the interrupt takes to come; wherever it lands, the
    // run stops, says so and writes what it has.
    server.wait_for_line("running rr1c-1x1--2000", Duration::from_secs(30));
    client.signal("-INT");
    let signalled = Instant::now();
    let status = client
        .exit_within(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("run still going 5 s after SIGINT"));
    eprintln!("run exited {:?} after SIGINT", signalled.elapsed());
    assert_eq!(status.code(), Some(1), "{status}");
    let doc = client.doc();
    let r = first_run(&doc);
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    assert!(text(r, "/error").contains("interrupted"), "{r}");
    still_serves(&server);
}

#[test]
fn sigterm_on_serve_aborts_the_running_test_and_exits_within_5s() {
    serve_signal_aborts_running_tests("-TERM");
}

#[test]
fn sigint_on_serve_aborts_the_running_test_and_exits_within_5s() {
    serve_signal_aborts_running_tests("-INT");
}

// ---------------------------------------------------------------------------
// 5. A server killed mid-suite, then resumed against a restarted one.
// ---------------------------------------------------------------------------

#[test]
fn server_killed_mid_suite_keeps_completed_runs_and_resume_completes() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("three.toml");
    std::fs::write(
        &suite,
        r#"name = "three"
duration = "1s"
warmup = "100ms"

[[test]]
workload = "rr1c-1x1"
users = 1

[[test]]
workload = "rr1c-1x1"
users = 2

[[test]]
workload = "rr1c-1x1"
users = 3
"#,
    )
    .unwrap();
    let out = dir.path().join("out.json");
    let mut serve = Server::start(&[]);
    let port = serve.port();
    let addr = serve.addr();
    let suite_args = |resume: bool| {
        let mut a = vec![
            "suite".to_string(),
            suite.to_str().unwrap().into(),
            "-q".into(),
            "--server".into(),
            addr.clone(),
            "--threads".into(),
            "1".into(),
            "--server-threads".into(),
            "1".into(),
            "--out".into(),
            out.to_str().unwrap().into(),
            // One run per test, whatever a busy host makes of its checks.
            "--retry-suspect".into(),
            "0".into(),
        ];
        if resume {
            a.push("--resume".into());
        }
        a
    };
    // A run that completed: ok, or suspect on a busy host.
    let completed = |statuses: Vec<String>| {
        statuses.len() == 1 && (statuses[0] == "ok" || statuses[0] == "suspect")
    };
    let args = suite_args(false);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut client = util::spawn(&args);
    // Kill the server while the second test runs: it has taken the test on,
    // and its users' traffic flows (killed as it sets the test up, the
    // client could fail another way). A suite says nothing while a test
    // runs, and the server nothing once it has taken the test on: its CPU
    // time is what shows traffic.
    serve.wait_for_line("running rr1c-1x1--2", Duration::from_secs(30));
    let pid = serve.pid();
    let before = cpu_ticks(pid);
    poll_until(Duration::from_secs(30), || {
        assert!(client.is_running(), "the suite ended early");
        (cpu_ticks(pid) >= before + 5)
            .then_some(())
            .ok_or_else(|| "no traffic of the second test reached the server".to_string())
    });
    serve.kill();
    let (status, stdout, stderr) = client.finish(util::RUN_DEADLINE);
    let code = status.code().unwrap_or(-1);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    // Which test failed and why.
    let failed_line = stdout
        .lines()
        .find(|l| l.starts_with("rr1c-1x1--2 run 1/1") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("no failed line for rr1c-1x1--2: {stdout}"));
    assert!(
        failed_line.contains("the server closed the control connection"),
        "{failed_line}"
    );
    let doc = util::read_doc(&out);
    let status = |doc: &Value, name: &str| -> Vec<String> {
        doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == name)
            .flat_map(|t| t["runs"].as_array().unwrap().iter())
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        completed(status(&doc, "rr1c-1x1--1")),
        "the completed test is kept: {:?}",
        status(&doc, "rr1c-1x1--1")
    );
    assert_eq!(status(&doc, "rr1c-1x1--2"), ["failed"]);
    assert_eq!(
        status(&doc, "rr1c-1x1--3"),
        ["failed"],
        "unreachable server"
    );

    // A new server on the same port; --resume runs only what did not complete.
    let _serve = Server::start_on(port, &[]);
    let args = suite_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("rr1c-1x1--1 run"),
        "test 1 ran again: {stdout}"
    );
    let doc = util::read_doc(&out);
    for name in ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"] {
        assert!(
            completed(status(&doc, name)),
            "{name}: {:?}",
            status(&doc, name)
        );
    }
}
