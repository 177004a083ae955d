//! Every run checked before it is believed: a stalled server, interrupts
//! anywhere, quiet checks on clean runs.

use super::*;

// ---------------------------------------------------------------------------
// Every run checked before it is believed.
// ---------------------------------------------------------------------------

/// The check `name` of a run.
fn check<'a>(run: &'a Value, name: &str) -> &'a Value {
    at(run, "/checks")
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {run}"))
}

/// A run that is suspect only because the host was busy (other work took its
/// CPUs) is what a busy host may do; any other reason on a run this test did
/// not disturb is a check firing when it should not.
fn clean_or_busy_host(run: &Value, what: &str) {
    let status = text(run, "/status");
    if status == "ok" {
        return;
    }
    assert_eq!(status, "suspect", "{what}: {run}");
    let failed = crate::util::failed_checks(run);
    assert!(
        failed.contains(&"host_noise"),
        "{what}: suspect on a quiet host ({failed:?}): {}",
        run["status_reasons"]
    );
}

/// How long the server stays stopped in a 3 s window: the fault, longer than
/// the window.
const SERVER_STOPPED_PAST_THE_WINDOW: Duration = Duration::from_secs(4);

/// `SIGSTOP` the server for longer than the window, once its traffic flows:
/// transactions stop mid-window and the ones in flight end after it. The run
/// is suspect (its stall and Little's law say so), it is run again at once,
/// and the retry, undisturbed, is clean.
#[test]
fn a_stopped_server_makes_the_run_suspect_and_its_retry_is_clean() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "stall"
warmup = "0s"
duration = "3s"
retry_suspect = 1
[[test]]
workload = "rr1c-1x1"
users = 4
"#,
    );
    let mut child = spawn_suite(&s.against(&addr, &["--quiet"]));
    // No warm-up: once the server spends CPU on the traffic, the window is
    // open. A suite says nothing while a test runs, and the server nothing
    // once it has taken the test on: its CPU time is what shows traffic.
    let pid = server.pid();
    let before = cpu_ticks(pid);
    poll_until(DEADLINE, || {
        assert!(child.is_running(), "the suite ended early");
        (cpu_ticks(pid) >= before + 5)
            .then_some(())
            .ok_or_else(|| "no traffic reached the server".to_string())
    });
    // Stopped for longer than the window: it stalls and ends with
    // transactions still waiting for their responses.
    server.signal("-STOP");
    std::thread::sleep(SERVER_STOPPED_PAST_THE_WINDOW);
    server.signal("-CONT");
    let (code, out, err) = finish(child);
    assert_eq!(
        code, 0,
        "a suspect run is not a failure\nstdout: {out}\nstderr: {err}"
    );
    assert!(err.contains(" suspect run"), "{err}");
    let doc = s.doc();
    let t = test(&doc, "rr1c-1x1--4");
    let rs = at(t, "/runs").as_array().unwrap();
    assert_eq!(rs.len(), 2, "the suspect run and its retry: {t}");
    let stalled = &rs[0];
    assert_eq!(text(stalled, "/status"), "suspect", "{stalled}");
    assert_eq!(text(check(stalled, "stalled_interval"), "/status"), "fail");
    assert_eq!(text(check(stalled, "littles_law"), "/status"), "fail");
    assert!(num(check(stalled, "littles_law"), "/value") < 0.95);
    let reasons = stalled["status_reasons"].to_string();
    assert!(
        reasons.contains("stalled_interval: ") && reasons.contains("littles_law: "),
        "{reasons}"
    );
    assert!(stalled.get("retry_of").is_none());
    let retry = &rs[1];
    assert_eq!(int(retry, "/retry_of"), 1, "{retry}");
    clean_or_busy_host(retry, "the retry");
    // The suspect run is left out of the statistics, and said so (a test
    // without an ok run, the retry suspect too on a busy host, has none).
    if text(retry, "/status") == "ok" {
        let summary = at(t, "/summary");
        assert_eq!(int(summary, "/suspect_runs"), 1);
        assert_eq!(int(summary, "/runs"), 1);
    } else {
        assert!(t.get("summary").is_none(), "{t}");
    }
    // It is complete: a resume adds nothing.
    let (code, out, err) = suite(&s.against(&addr, &["--resume"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("1 of 1 runs already done"), "{err}");
    assert_eq!(
        at(test(&s.doc(), "rr1c-1x1--4"), "/runs")
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// Ctrl-C at random points of a suite, again and again: an interrupted run
/// is `aborted`, never `ok`, and no `ok` run ever has zero traffic.
#[test]
fn ctrl_c_anywhere_never_leaves_an_ok_run_without_traffic() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "interrupted-anywhere"
warmup = "100ms"
duration = "400ms"
retry_suspect = 0
[[test]]
workload = "rr1c-200x1000"
users = 10
[[test]]
workload = "str-readx30k"
users = 4
[[test]]
workload = "rr1c-1x1"
users = 2
"#,
    );
    // Delays spread over connect, warm-up, window, drain and save, from a
    // fixed seed so that a failure can be replayed.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut interrupted = 0;
    for round in 0..12 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(50 + x % 2500);
        let _ = std::fs::remove_file(&s.out);
        let mut child = spawn_suite(&s.against(&addr, &["--quiet"]));
        // The fault: an interrupt at a moment no event marks.
        std::thread::sleep(delay);
        if child.is_running() {
            child.signal("-INT");
        }
        let (code, out, err) = finish(child);
        if code == 1 {
            interrupted += 1;
        }
        let Some(doc) = read_doc(&s.out) else {
            continue; // interrupted before the first run was saved
        };
        for t in tests(&doc) {
            for r in at(t, "/runs").as_array().unwrap() {
                let status = text(r, "/status");
                let what = format!(
                    "round {round} ({delay:?}), {}: {r}\n{out}\n{err}",
                    text(t, "/name")
                );
                if status == "ok" {
                    assert!(int(r, "/client/transactions") > 0, "{what}");
                    assert!(num(r, "/throughput/bytes_per_s") > 0.0, "{what}");
                    assert!(num(r, "/cpu/client/window_s") > 0.0, "{what}");
                    assert_eq!(text(check(r, "interrupted"), "/status"), "pass", "{what}");
                }
                if status == "aborted" {
                    assert!(
                        !r["status_reasons"].as_array().unwrap().is_empty(),
                        "{what}"
                    );
                }
            }
        }
    }
    assert!(interrupted > 0, "no round was interrupted");
}

/// On a quiet host the checks do not fire: a short built-in suite's runs
/// are all `ok`, unless other work took the host's CPUs (which `host_noise`
/// then says).
#[test]
fn the_checks_stay_quiet_on_clean_runs() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("quick.json");
    let (code, stdout, err) = suite(&[
        "quick",
        "--out",
        out.to_str().unwrap(),
        "--retry-suspect",
        "0",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let doc = read_doc(&out).unwrap();
    for t in tests(&doc) {
        for r in at(t, "/runs").as_array().unwrap() {
            clean_or_busy_host(r, text(t, "/name"));
            assert_eq!(r["checks"].as_array().unwrap().len(), 7, "{r}");
        }
    }
}

/// A congestion control this host lacks is refused before anything runs,
/// naming the test, as `run --cc` is.
#[test]
fn a_congestion_control_this_host_lacks_stops_the_suite_before_it_runs() {
    let s = Study::new(
        "name = \"cc\"\nduration = \"300ms\"\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\ncc = \"nosuchcc\"\n",
    );
    let (code, out, err) = suite(&[s.file(), "--out", s.out()]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("test rr1c-1x1--1") && err.contains("nosuchcc"),
        "{err}"
    );
    assert!(err.contains("available"), "lists what the host has: {err}");
    assert!(!s.out.exists(), "nothing ran, nothing was written");
}
