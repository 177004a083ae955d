//! The embedded server, the interconnect mix, and a suite's output into a
//! pipe, a file or a terminal.

use super::*;

// ---------------------------------------------------------------------------
// 10. The embedded server.
// ---------------------------------------------------------------------------

#[test]
fn embedded_server_by_default() {
    let _g = shared();
    let s = Study::new(
        r#"
name = "embedded"
duration = "300ms"
warmup = "100ms"
[[test]]
workload = "rr1c-200x1000"
users = 2
"#,
    );
    let out = suite_ok(&[s.file(), "--out", s.out()]);
    let doc = s.doc();
    assert_eq!(names(&doc), ["rr1c-200x1000--2"]);
    let t = test(&doc, "rr1c-200x1000--2");
    assert_eq!(runs(t), [(1, "ok".into())]);
    assert_eq!(text(t, "/config/server"), "embedded");
    assert!(int(t, "/runs/0/client/totals/transactions") > 0);
    assert_eq!(order(&out), [("rr1c-200x1000--2".to_string(), 1)], "{out}");
    check_table_against_json(&out, &doc);
}

/// The verdict a suite's stdout ends with.
fn verdict(out: &str) -> &str {
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("verdict: "),
        "the last line is the verdict: {out}"
    );
    last
}

/// Issue 35: the main job (`suite quick`, here at 2 users and short windows)
/// ends with a verdict against a stated reference, derived from its own
/// runs, and says where its results went: nowhere without `--out` (and how
/// to keep them), or the file; its table shows request/response in
/// transactions per second.
#[test]
fn the_main_job_ends_with_a_verdict_and_says_where_its_results_went() {
    let _g = shared();
    let quick = [
        "quick",
        "-q",
        "-d",
        "500ms",
        "--warmup",
        "100ms",
        "-u",
        "2",
        "--retry-suspect",
        "0",
    ];
    let (code, out, err) = suite(&quick);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("linkperf: results not saved (no --out): to keep them, run with --out FILE: linkperf suite quick")
            && err.contains("--out quick.json"),
        "{err}"
    );
    assert!(!err.contains("status_reasons"), "no file to look in: {err}");
    verdict(&out);

    let s = Study::new("");
    let mut args = quick.to_vec();
    args.extend(["--out", s.out()]);
    let (code, out, err) = suite(&args);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains(&format!("linkperf: results saved to {}", s.out())),
        "{err}"
    );
    let doc = s.doc();
    check_table_against_json(&out, &doc);
    // The verdict from what the runs say: every test clean, or some not.
    let all_clean = tests(&doc).iter().all(|t| {
        t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["status"] == "ok")
    });
    let v = verdict(&out);
    if all_clean {
        // Loopback carries these many times over the reference's floors.
        assert!(
            v.starts_with("verdict: healthy: all 4 tests ran clean (every check passed, no failed transaction) and met the loopback reference"),
            "{v}"
        );
    } else {
        assert!(v.starts_with("verdict: inconclusive: "), "{v}");
        assert!(v.contains("so the path is not judged"), "{v}");
    }
    let rows = table_rows(&out);
    for (row, t) in rows.iter().zip(tests(&doc)) {
        if t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["status"] == "ok")
        {
            let unit = if text(t, "/name").starts_with("rr1c") {
                "txn/s"
            } else {
                "bit/s"
            };
            assert!(row[2].ends_with(unit), "{row:?}");
        }
    }

    // A server that refuses every test: the path carried none of them.
    let server = Server::start(&["--max-users", "1"]);
    let (code, out, err) = suite(&[
        "quick",
        "-q",
        "-d",
        "500ms",
        "-u",
        "2",
        "--server",
        &server.addr(),
    ]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let v = verdict(&out);
    assert!(
        v.starts_with("verdict: degraded by its own checks and counts: rr1c-1x1--2 failed ("),
        "{v}"
    );
}

// ---------------------------------------------------------------------------
// 11. The interconnect mix over UDP and TCP.
// ---------------------------------------------------------------------------

#[test]
fn interconnect_mix_runs_over_udp_and_tcp() {
    let _g = shared();
    let server = Server::start(&[]);
    let s = Study::new(
        r#"
name = "rac"
duration = "300ms"
warmup = "100ms"
udp_timeout = "1s"
[[matrix]]
workloads = ["mix:200x200*1,200x8k*3"]
users = [4]
protocols = ["udp", "tcp"]
"#,
    );
    let out = suite_ok(&[s.file(), "--server", &server.addr(), "--out", s.out()]);
    let doc = s.doc();
    let expected = [
        "mix-200x200*1,200x8k*3--4--udp",
        "mix-200x200*1,200x8k*3--4",
    ];
    assert_eq!(names(&doc), expected);
    for (name, protocol) in expected.iter().zip(["udp", "tcp"]) {
        let t = test(&doc, name);
        assert_eq!(runs(t), [(1, "ok".into())], "{name}");
        assert_eq!(text(t, "/workload/kind"), "mix");
        assert_eq!(text(t, "/workload/protocol"), protocol);
        assert_eq!(int(t, "/workload/users"), 4);
        let mix = at(t, "/workload/mix");
        assert_eq!(
            mix,
            &serde_json::json!([
                {"request": 200, "response": 200, "weight": 1},
                {"request": 200, "response": 8192, "weight": 3},
            ]),
            "{name}"
        );
        let c = at(t, "/runs/0/client/totals");
        assert!(int(c, "/transactions") > 0, "{name}");
        assert_eq!(
            int(c, "/tx_bytes"),
            200 * int(c, "/transactions"),
            "{name}: every request is 200 bytes"
        );
    }
    assert_eq!(run_lines(&out).len(), 2, "{out}");
    check_table_against_json(&out, &doc);
}

// ---------------------------------------------------------------------------
// Output into a pipe or file.
// ---------------------------------------------------------------------------

/// Runs `sh -c script` with `$LINKPERF` set; its exit code.
fn sh(script: &str) -> i32 {
    Command::new("sh")
        .args(["-c", script])
        .env("LINKPERF", BIN)
        .status()
        .expect("run sh")
        .code()
        .unwrap_or(-1)
}

#[test]
/// Regression: output into a closed pipe panicked with a backtrace.
fn output_into_a_closed_pipe_exits_quietly() {
    for args in [&["uperf45", "--dry-run"][..], &["--list"]] {
        // The pipe's reader is gone before linkperf writes its first line.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(BIN)
            .arg("suite")
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "suite {args:?}: {err}");
        assert_eq!(
            out.status.code(),
            Some(0),
            "suite {args:?}: a closed pipe is not an error (main.rs): {err}"
        );
    }
}

#[test]
/// Regression: with a progress bar on stderr, the per-run lines did not reach stdout.
fn per_run_lines_reach_stdout_when_it_is_not_a_terminal() {
    let _g = shared();
    if sh("command -v script >/dev/null") != 0 {
        eprintln!("skipped: no `script` to give stderr a terminal");
        return;
    }
    let s = Study::new(
        r#"
name = "tty"
duration = "300ms"
warmup = "100ms"
[[test]]
workload = "rr1c-1x1"
users = 1
"#,
    );
    let stdout_file = s.dir.path().join("stdout.txt");
    // `script` gives the command a terminal; stdout goes to a file, stderr stays on the terminal.
    let code = sh(&format!(
        "TERM=xterm script -qec \"$LINKPERF suite {} >{}\" /dev/null </dev/null >/dev/null",
        s.file(),
        stdout_file.display()
    ));
    assert_eq!(code, 0);
    let out = std::fs::read_to_string(&stdout_file).unwrap();
    assert!(
        !table_rows(&out).is_empty(),
        "the table is on stdout: {out}"
    );
    assert_eq!(
        order(&out),
        [("rr1c-1x1--1".to_string(), 1)],
        "one plain line per finished run on stdout, which is not a terminal:\n{out}"
    );
}

/// On a terminal (a pseudo-terminal from `script`), the bar shows the running
/// test's live throughput all through its window, then "finishing".
/// Regression: after the window (the drain, the server's results) the bar
/// read 0 Gbit/s with an ETA of 0 for seconds, as if the test had stalled.
#[test]
fn the_progress_bar_shows_live_throughput_on_a_terminal() {
    let _g = shared();
    let s = Study::new(
        r#"
name = "bar"
[[test]]
workload = "str-readx30k"
users = 1
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let typescript = dir.path().join("typescript");
    let out = dir.path().join("bar.json");
    let command = format!(
        "'{BIN}' suite '{}' --duration 2500ms --warmup 300ms --retry-suspect 0 --out '{}'",
        s.file(),
        out.display()
    );
    let status = Command::new("script")
        .args(["-qfec", &command, typescript.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run script (util-linux)");
    assert!(status.success(), "{status}");
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    // Every refresh of the bar's message, in order.
    let mut states = Vec::new();
    for part in screen.split("str-readx30k--1 run 1/1  ").skip(1) {
        if part.starts_with("finishing") {
            states.push(None);
        } else if part.starts_with("connecting") || part.starts_with("warming up") {
            // No rate yet (the line under the bar may show a warm-up second).
        } else if let Some((gbit, _)) = part.split_once(" Gbit/s") {
            states.push(Some(gbit.trim().parse::<f64>().expect(gbit)));
        }
    }
    let rates: Vec<f64> = states.iter().flatten().copied().collect();
    assert!(rates.len() >= 3, "{states:?}\n{screen}");
    // A refresh shows what the last second moved: on a host that left the
    // run ok, always something; one that starved the client for a second
    // (the run then suspect) may show that second's nothing.
    let doc = crate::util::read_doc(&out);
    if text(&doc, "/tests/0/runs/0/status") == "ok" {
        assert!(
            rates.iter().all(|g| *g > 0.1),
            "live throughput all through the window: {states:?}"
        );
    } else {
        assert!(
            rates.iter().filter(|g| **g > 0.1).count() * 2 > rates.len(),
            "live throughput through most of the window: {states:?}"
        );
    }
    // Once finishing, no rate comes back.
    if let Some(first) = states.iter().position(Option::is_none) {
        assert!(states[first..].iter().all(Option::is_none), "{states:?}");
    }
}

/// On a terminal, the line under the bar shows the running test's last
/// second, as `run --interval` does (one space between its figures), the
/// warm-up's marked, and the bar's own line stays as it was.
#[test]
fn the_progress_bar_shows_the_running_tests_seconds_under_it() {
    let _g = shared();
    let s = Study::new(
        r#"
name = "seconds"
[[test]]
workload = "rr1c-1x1"
users = 1
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let typescript = dir.path().join("typescript");
    // A terminal wide enough for a whole line.
    let command = format!(
        "stty rows 40 cols 200; '{BIN}' suite '{}' --duration 3s --warmup 2s --retry-suspect 0",
        s.file()
    );
    let status = Command::new("script")
        .args(["-qfec", &command, typescript.to_str().unwrap()])
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run script (util-linux)");
    assert!(status.success(), "{status}");
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    let head = "rr1c-1x1--1 run 1/1  ";
    // Each frame: the bar's line, then the second's.
    let mut seconds: Vec<(bool, String)> = Vec::new();
    for frame in screen.split(head).skip(1) {
        let mut rows = frame.split('\n');
        let bar = rows.next().unwrap_or_default();
        assert!(
            bar.contains("ETA") && !bar.contains(" s sent "),
            "the bar's line is its own: {bar:?}"
        );
        let Some(under) = rows.next() else { continue };
        // The line's text, before the escapes that redraw the next frame.
        let shown = under.split('\x1b').next().unwrap_or("").trim();
        if shown.contains(" s sent ") {
            let warmup = shown.starts_with("warmup ");
            let range = shown.trim_start_matches("warmup ").to_string();
            if seconds.last() != Some(&(warmup, range.clone())) {
                seconds.push((warmup, range));
            }
        }
    }
    assert!(!seconds.is_empty(), "no second under the bar:\n{screen}");
    for (warmup, line) in &seconds {
        for figure in [" received ", " txn/s mean ", " p99 ", " retr "] {
            assert!(line.contains(figure), "{figure:?} in {line:?}");
        }
        let range = line.split(" s sent ").next().unwrap();
        let (a, b) = range.split_once('-').expect(line);
        let (a, b): (f64, f64) = (a.parse().expect(line), b.parse().expect(line));
        assert!(b - a > 0.0 && b - a <= 1.0 + 1e-9, "{line}");
        // The warm-up's seconds count from the traffic's start, the window's from its opening.
        assert!(b <= if *warmup { 2.0 } else { 3.0 }, "{line}");
    }
    assert!(
        seconds.iter().any(|(w, _)| *w),
        "a warm-up second, marked: {seconds:?}"
    );
    assert!(
        seconds.iter().any(|(w, _)| !*w),
        "a second of the window: {seconds:?}"
    );
    // The warm-up's come first.
    let first_window = seconds.iter().position(|(w, _)| !*w).unwrap();
    assert!(
        seconds[first_window..].iter().all(|(w, _)| !*w),
        "{seconds:?}"
    );
}
