//! Atomic saves, a suite killed or interrupted, and `--resume`.

use super::*;

// ---------------------------------------------------------------------------
// 6. Atomic saves, SIGKILL and --resume.
// ---------------------------------------------------------------------------

const KILL_SUITE: &str = r#"
name = "kill"
duration = "500ms"
warmup = "100ms"
[[matrix]]
workloads = ["rr1c-1x1", "rr1c-200x1000"]
users = [1, 2]
"#;

#[test]
fn sigkill_mid_suite_then_resume_completes_every_run() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(KILL_SUITE);
    let mut args = vec![
        "suite",
        s.file(),
        "--server",
        &addr,
        "--repeat",
        "2",
        "--out",
        s.out(),
    ];

    let mut child = spawn(&args);
    // A run ok, and saved: the server has taken on the test after it.
    child.wait_for("an ok run", DEADLINE, |out, _| {
        run_lines(out).iter().any(|l| l.3 == "ok")
    });
    let printed = run_lines(&child.stdout()).len();
    server.wait_for_log("the run after an ok one", DEADLINE, |l| {
        l.matches(": running ").count() > printed
    });
    let saved = s.doc();
    assert!(ok_runs(&saved) >= 1, "{saved}");
    assert!(
        child.is_running(),
        "the suite must still be running when killed"
    );
    child.kill();
    let (code, _, _) = finish(child);
    assert_eq!(code, -1, "killed by a signal");

    let killed = s.doc();
    let done = ok_runs(&killed);
    assert!((1..8).contains(&done), "{done} runs done at the kill");
    let fingerprint = text(&killed, "/suite/fingerprint").to_string();
    assert_eq!(fingerprint.len(), 64);

    args.push("--resume");
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "resume failed\nstdout: {out}\nstderr: {err}");
    assert!(
        err.contains(&format!("{done} of 8 runs already done")),
        "{err}"
    );
    assert_eq!(
        run_lines(&out).len(),
        8 - done,
        "only the missing runs run again:\n{out}"
    );
    let doc = s.doc();
    let expected = [
        "rr1c-1x1--1",
        "rr1c-1x1--2",
        "rr1c-200x1000--1",
        "rr1c-200x1000--2",
    ];
    assert_eq!(names(&doc), expected);
    for name in expected {
        assert_eq!(
            runs(test(&doc, name)),
            [(1, "ok".into()), (2, "ok".into())],
            "{name}: exactly 2 ok runs"
        );
        assert_eq!(int(test(&doc, name), "/summary/runs"), 2);
    }
    assert_eq!(text(&doc, "/suite/name"), "kill");
    assert_eq!(text(&doc, "/suite/fingerprint"), fingerprint);
    assert_eq!(int(&doc, "/suite/repeat"), 2);
    assert_eq!(
        at(&doc, "/suite/tests").as_array().unwrap().len(),
        expected.len()
    );

    // A finished suite resumes to nothing, also with a reworded description
    // (not part of the definition).
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(run_lines(&out).is_empty(), "{out}");
    s.rewrite(&KILL_SUITE.replace(
        "name = \"kill\"",
        "name = \"kill\"\ndescription = \"reworded\"",
    ));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(run_lines(&out).is_empty(), "{out}");
    s.rewrite(KILL_SUITE);

    // Refusals: exit 2, a message that says why, the file untouched.
    let saved = std::fs::read(&s.out).unwrap();
    let refused = |args: &[&str], says: &str| {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
        assert!(
            err.contains(says),
            "{args:?}: stderr should say {says:?}: {err}"
        );
        assert!(run_lines(&out).is_empty(), "{args:?} ran: {out}");
        assert_eq!(
            std::fs::read(&s.out).unwrap(),
            saved,
            "{args:?} changed the results file"
        );
    };
    // Other users in the definition.
    s.rewrite(&KILL_SUITE.replace("users = [1, 2]", "users = [1, 3]"));
    refused(&args, "suite definition changed");
    // Another duration in the definition.
    s.rewrite(&KILL_SUITE.replace("\"500ms\"", "\"400ms\""));
    refused(&args, "suite definition changed");
    s.rewrite(KILL_SUITE);
    // Another duration on the command line.
    let mut other = args.clone();
    other.extend(["--duration", "400ms"]);
    refused(&other, "suite definition changed");
    // No --resume onto an existing file.
    refused(&args[..args.len() - 1], "exists");

    // Files --resume cannot continue.
    let mut plain: Value = serde_json::from_slice(&saved).unwrap();
    plain.as_object_mut().unwrap().remove("suite");
    std::fs::write(&s.out, serde_json::to_vec(&plain).unwrap()).unwrap();
    let (code, out, err) = run(&args);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("not written by linkperf suite"), "{err}");
    std::fs::write(&s.out, &saved[..saved.len() / 2]).unwrap();
    let (code, out, err) = run(&args);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("cannot resume"), "{err}");

    // Another --repeat is not a change of definition (docs/suites.md): the
    // missing runs are added, one more of every test.
    std::fs::write(&s.out, &saved).unwrap();
    let mut more = args.clone();
    more[5] = "3";
    let (code, out, err) = run(&more);
    assert_eq!(code, 0, "{more:?}\nstdout: {out}\nstderr: {err}");
    assert_eq!(
        order(&out),
        expected.map(|n| (n.to_string(), 3)),
        "only the third runs:\n{out}"
    );
    let doc = s.doc();
    for name in expected {
        assert_eq!(
            runs(test(&doc, name)),
            [(1, "ok".into()), (2, "ok".into()), (3, "ok".into())],
            "{name}"
        );
        assert_eq!(int(test(&doc, name), "/summary/runs"), 3);
    }
    assert_eq!(int(&doc, "/suite/repeat"), 3);
    assert_eq!(text(&doc, "/suite/fingerprint"), fingerprint);
}

// ---------------------------------------------------------------------------
// 7. Ctrl-C.
// ---------------------------------------------------------------------------

/// Regression: `--resume` took runs under other threads, placement or server
/// into the same test (the summary then mixed them), and its clean-up of
/// temporary files removed other saves' in the same directory.
#[test]
fn resume_refuses_runs_that_would_run_otherwise_and_spares_other_saves() {
    let _g = shared();
    let s = Study::new(
        r#"
name = "settings"
[[test]]
workload = "rr1c-1x1"
users = 1
"#,
    );
    let out = s.out().to_string();
    let timing = ["--duration", "300ms", "--warmup", "100ms"];
    let mut first = vec![s.file(), "--threads", "1", "--out", &out, "-q"];
    first.extend(timing);
    suite_ok(&first);
    // Another process's save in progress (its pid runs: this test's) and
    // another file's are left alone; a dead process's is removed.
    let dir = s.dir.path().to_path_buf();
    let own = format!(".results.json.{}.x.linkperf-tmp", std::process::id());
    let dead = ".results.json.4194305.x.linkperf-tmp".to_string();
    let other = ".other.json.4194305.x.linkperf-tmp".to_string();
    // Two minutes old: a dead process's temporary file is removed only then.
    let old = std::time::SystemTime::now() - Duration::from_secs(120);
    for f in [&own, &dead, &other] {
        std::fs::write(dir.join(f), b"{").unwrap();
        std::fs::File::options()
            .write(true)
            .open(dir.join(f))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    for (args, says) in [
        (vec!["--threads", "2"], "client_placement"),
        (vec!["--threads", "1", "--busy-poll"], "busy_poll"),
        (
            vec!["--threads", "1", "--server", "127.0.0.1:9"],
            "server \"embedded\" (now \"127.0.0.1:9\")",
        ),
    ] {
        let mut all = vec![s.file(), "--out", &out, "--resume", "--repeat", "2"];
        all.extend(timing);
        all.extend(&args);
        let (code, stdout, err) = suite(&all);
        assert_eq!(code, 2, "{args:?}: {stdout}{err}");
        assert!(
            err.contains("cannot resume: test rr1c-1x1--1") && err.contains(says),
            "{args:?}: {err}"
        );
        assert_eq!(
            ok_runs(&read_doc(Path::new(&out)).unwrap()),
            1,
            "nothing added"
        );
    }
    // A dry run of the resume says what is left, and changes nothing.
    let mut dry = vec![
        s.file(),
        "--threads",
        "1",
        "--out",
        &out,
        "--resume",
        "--repeat",
        "2",
    ];
    dry.extend(timing);
    dry.push("--dry-run");
    let plan = suite_ok(&dry);
    assert!(
        plan.contains(&format!("resuming {out}: 1 of 2 runs done, 1 to run")),
        "{plan}"
    );
    assert_eq!(ok_runs(&read_doc(Path::new(&out)).unwrap()), 1);
    assert!(dir.join(&dead).exists(), "a dry run removes nothing");
    // The same options resume, and the run added is the test's second.
    let mut again = vec![
        s.file(),
        "--threads",
        "1",
        "--out",
        &out,
        "--resume",
        "--repeat",
        "2",
        "-q",
    ];
    again.extend(timing);
    suite_ok(&again);
    assert_eq!(ok_runs(&read_doc(Path::new(&out)).unwrap()), 2);
    let left = |f: &str| dir.join(f).exists();
    assert!(left(&own) && left(&other) && !left(&dead));
}

/// A test whose runs all failed has nothing to keep: resuming it under other
/// settings is fine, and the file then records how it ran the second time.
/// Regression: its old `config` stayed on the new run.
#[test]
fn resume_records_how_a_test_without_ok_runs_runs_now() {
    let _g = shared();
    let s = Study::new("[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n");
    let timing = ["--duration", "300ms", "--warmup", "100ms"];
    let mut first = vec![s.file(), "--server", "127.0.0.1:9", "--out", s.out(), "-q"];
    first.extend(timing);
    let (code, _, _) = suite(&first);
    assert_eq!(code, 1, "the unreachable server fails the run");
    let doc = s.doc();
    assert_eq!(
        text(test(&doc, "rr1c-1x1--1"), "/config/server"),
        "127.0.0.1:9"
    );
    let mut again = vec![s.file(), "--out", s.out(), "--resume", "-q"];
    again.extend(timing);
    suite_ok(&again);
    let doc = s.doc();
    let t = test(&doc, "rr1c-1x1--1");
    assert_eq!(runs(t), [(1, "ok".into())]);
    assert_eq!(text(t, "/config/server"), "embedded");
}

#[test]
fn ctrl_c_aborts_the_running_test_and_resume_completes() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    // The second test is long, so that the interrupt lands in its window.
    let s = Study::new(
        r#"
name = "interrupted"
warmup = "100ms"
[[test]]
workload = "rr1c-1x1"
users = 1
duration = "300ms"
[[test]]
workload = "rr1c-1x1"
users = 2
duration = "3s"
[[test]]
workload = "rr1c-1x1"
users = 3
duration = "300ms"
"#,
    );
    let mut args = s.against(&addr, &[]);
    let mut child = spawn_suite(&args);
    // The server runs the second test (3 s long): the interrupt lands in it.
    server.wait_for_line("running rr1c-1x1--2", DEADLINE);
    assert!(child.is_running(), "still running");
    child.signal("-INT");
    let (code, out, err) = finish(child);
    assert_eq!(code, 1, "interrupted\nstdout: {out}\nstderr: {err}");
    assert!(err.contains("--resume"), "says how to resume: {err}");
    assert!(err.contains(s.out()), "names the results file: {err}");
    assert_eq!(
        run_lines(&out)
            .iter()
            .map(|l| (l.0.as_str(), l.3.as_str()))
            .collect::<Vec<_>>(),
        [("rr1c-1x1--1", "ok"), ("rr1c-1x1--2", "aborted")],
        "{out}"
    );

    let doc = s.doc();
    assert_eq!(runs(test(&doc, "rr1c-1x1--1")), [(1, "ok".into())]);
    let b = test(&doc, "rr1c-1x1--2");
    assert_eq!(
        runs(b),
        [(1, "aborted".into())],
        "the interrupted run is marked"
    );
    assert!(!text(b, "/runs/0/error").is_empty());
    assert!(b.get("summary").is_none(), "no ok run, no summary: {b}");
    assert!(
        doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "rr1c-1x1--3"),
        "the test after the interrupt did not run"
    );
    assert!(at(&doc, "/suite/fingerprint").is_string());

    args.push("--resume");
    let (code, out, err) = suite(&args);
    assert_eq!(code, 0, "resume\nstdout: {out}\nstderr: {err}");
    assert!(err.contains("1 of 3 runs already done"), "{err}");
    assert_eq!(
        order(&out),
        [
            ("rr1c-1x1--2".to_string(), 1),
            ("rr1c-1x1--3".to_string(), 1)
        ],
        "{out}"
    );
    let doc = s.doc();
    assert_eq!(names(&doc), ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"]);
    for t in tests(&doc) {
        assert_eq!(runs(t), [(1, "ok".into())], "{}", text(t, "/name"));
    }
}
