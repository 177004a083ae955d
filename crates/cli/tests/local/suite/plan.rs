//! What a suite will run: `--list`, `--dry-run`, the matrix and its names, and
//! the order of repeats.

use super::*;

// ---------------------------------------------------------------------------
// 1. --list and --dry-run.
// ---------------------------------------------------------------------------

#[test]
fn list_shows_each_builtin_suite_on_one_line() {
    let out = suite_ok(&["--list"]);
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 4, "one line per built-in suite:\n{out}");
    let listed: BTreeSet<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from(["interconnect", "quick", "tunnel", "uperf45"]),
        "{out}"
    );
    for l in lines {
        assert!(
            l.split_whitespace().count() > 3,
            "each suite has a description: {l}"
        );
    }
}

/// The study's 45 names, in the study's order.
fn uperf45_names() -> Vec<String> {
    let mut v = Vec::new();
    for w in [
        "rr1c-1x1",
        "rr1c-200x1000",
        "rr1c-200x30k",
        "str-readx30k",
        "str-writex30k",
    ] {
        for u in [1, 10, 25, 50, 75, 100, 150, 200, 250] {
            v.push(format!("{w}--{u}"));
        }
    }
    v
}

/// The test names of a dry run's listing (the indented lines).
fn planned(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn dry_run_lists_the_tests_and_the_time_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("never.json");
    let out_path = out_file.to_str().unwrap();
    // Port 9 refuses: a dry run that connected would fail.
    let out = suite_ok(&[
        "uperf45",
        "--dry-run",
        "--server",
        "127.0.0.1:9",
        "--out",
        out_path,
    ]);
    let listed = planned(&out);
    assert_eq!(listed, uperf45_names(), "{out}");
    assert_eq!(listed.first().unwrap(), "rr1c-1x1--1");
    assert_eq!(listed.last().unwrap(), "str-writex30k--250");
    assert!(out.contains("45 tests"), "{out}");
    // 45 × (1 s warmup + 50 s + 1.5 s overhead) = 2362.5 s.
    assert!(out.contains("estimated time: 39m 22s"), "{out}");
    assert!(!out_file.exists(), "a dry run wrote {out_path}");
    assert!(run_lines(&out).is_empty(), "a dry run runs nothing: {out}");

    let out = suite_ok(&["uperf45", "--dry-run", "--repeat", "3"]);
    assert!(out.contains("135 runs"), "{out}");
    assert!(out.contains("estimated time: 1h 58m 7s"), "{out}");

    let out = suite_ok(&[
        "uperf45",
        "--dry-run",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
    ]);
    // 45 × (0.5 + 2 + 1.5) s = 180 s.
    assert!(out.contains("estimated time: 3m"), "{out}");

    for (name, expected) in [
        (
            "quick",
            vec![
                "rr1c-1x1--1",
                "rr1c-1x1--10",
                "rr1c-200x1000--1",
                "rr1c-200x1000--10",
                "str-readx30k--1",
                "str-readx30k--10",
                "str-writex30k--1",
                "str-writex30k--10",
            ],
        ),
        (
            "tunnel",
            vec![
                "str-readx64k--5",
                "rr1c-1x1--1",
                "rr1c-1x1--5",
                "rr1c-200x1000--1",
                "rr1c-200x1000--5",
            ],
        ),
        (
            "interconnect",
            vec![
                "mix-200x200*1,200x8k*3--40--udp",
                "mix-200x200*1,200x8k*3--60--udp",
                "mix-200x200*1,200x8k*3--80--udp",
                "mix-200x200*1,200x8k*3--40",
                "mix-200x200*1,200x8k*3--60",
                "mix-200x200*1,200x8k*3--80",
            ],
        ),
    ] {
        let out = suite_ok(&[name, "--dry-run", "--out", out_path]);
        assert_eq!(planned(&out), expected, "{name}:\n{out}");
        assert!(out.contains("estimated time:"), "{name}: {out}");
        assert!(!out_file.exists(), "a dry run of {name} wrote {out_path}");
    }
    // The tunnel runs three times unless told otherwise.
    let out = suite_ok(&["tunnel", "--dry-run"]);
    assert!(out.contains("15 runs"), "{out}");
}

// ---------------------------------------------------------------------------
// 2. Matrix expansion and names.
// ---------------------------------------------------------------------------

#[test]
fn matrix_expands_workloads_users_and_protocols() {
    let _g = shared();
    let server = Server::start(&[]);
    let s = Study::new(
        r#"
name = "matrix"
description = "2 workloads x 2 protocols x 2 user counts"
duration = "300ms"
warmup = "100ms"

[[matrix]]
workloads = ["rr1c-1x1", "rr:64x1k"]
users = [1, 3]
protocols = ["tcp", "udp"]
"#,
    );
    let expected = [
        "rr1c-1x1--1",
        "rr1c-1x1--3",
        "rr1c-1x1--1--udp",
        "rr1c-1x1--3--udp",
        "rr1c-64x1k--1",
        "rr1c-64x1k--3",
        "rr1c-64x1k--1--udp",
        "rr1c-64x1k--3--udp",
    ];
    let out = suite_ok(&[s.file(), "--dry-run", "--out", s.out()]);
    assert_eq!(planned(&out), expected, "{out}");
    assert!(!s.out.exists());

    let addr = server.addr();
    let out = suite_ok(&[s.file(), "--server", &addr, "--out", s.out()]);
    let doc = s.doc();
    assert_eq!(names(&doc), expected, "exactly the matrix's tests");
    assert_eq!(
        at(&doc, "/suite/tests").as_array().unwrap().len(),
        expected.len()
    );
    for (i, name) in expected.iter().enumerate() {
        assert_eq!(text(&doc, &format!("/suite/tests/{i}")), *name);
        let t = test(&doc, name);
        let udp = name.ends_with("--udp");
        assert_eq!(
            text(t, "/workload/protocol"),
            if udp { "udp" } else { "tcp" }
        );
        let users: u64 = name.split("--").nth(1).unwrap().parse().unwrap();
        assert_eq!(int(t, "/workload/users"), users, "{name}");
        assert_eq!(text(t, "/config/server"), addr);
        assert_eq!(runs(t), [(1, "ok".to_string())], "{name}");
    }
    assert_eq!(
        text(&doc, "/label"),
        "matrix",
        "the label defaults to the suite's name"
    );
    assert_eq!(text(&doc, "/suite/name"), "matrix");
    assert_eq!(int(&doc, "/suite/repeat"), 1);
    let fp = text(&doc, "/suite/fingerprint");
    assert!(
        fp.len() == 64 && fp.bytes().all(|b| b.is_ascii_hexdigit()),
        "{fp}"
    );
    assert_eq!(
        order(&out),
        expected
            .iter()
            .map(|n| (n.to_string(), 1))
            .collect::<Vec<_>>(),
        "{out}"
    );
    assert!(run_lines(&out).iter().all(|l| l.3 == "ok"), "{out}");
    check_table_against_json(&out, &doc);
    assert!(
        s.strays().is_empty(),
        "temporary files left: {:?}",
        s.strays()
    );
}

// ---------------------------------------------------------------------------
// 3. Repeat and interleave order.
// ---------------------------------------------------------------------------

#[test]
fn repeats_interleave_by_default_and_run_back_to_back_on_request() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let toml = r#"
name = "order"
[[test]]
workload = "rr1c-1x1"
users = 1
[[test]]
workload = "rr1c-1x1"
users = 2
"#;
    let (a, b) = ("rr1c-1x1--1".to_string(), "rr1c-1x1--2".to_string());

    let s = Study::new(toml);
    let mut args = vec![
        s.file(),
        "--server",
        &addr,
        "--repeat",
        "2",
        "--out",
        s.out(),
    ];
    args.extend(TIMING);
    let out = suite_ok(&args);
    assert_eq!(
        order(&out),
        [
            (a.clone(), 1),
            (b.clone(), 1),
            (a.clone(), 2),
            (b.clone(), 2)
        ],
        "interleaved: A1 B1 A2 B2\n{out}"
    );
    assert!(run_lines(&out).iter().all(|l| l.2 == 2 && l.3 == "ok"));
    let doc = s.doc();
    assert_eq!(at(&doc, "/suite/interleave"), &Value::Bool(true));
    assert_eq!(int(&doc, "/suite/repeat"), 2);
    for n in [&a, &b] {
        assert_eq!(
            runs(test(&doc, n)),
            [(1, "ok".into()), (2, "ok".into())],
            "{n}"
        );
    }

    let s = Study::new(toml);
    args[6] = s.out();
    args[0] = s.file();
    args.push("--no-interleave");
    let out = suite_ok(&args);
    assert_eq!(
        order(&out),
        [
            (a.clone(), 1),
            (a.clone(), 2),
            (b.clone(), 1),
            (b.clone(), 2)
        ],
        "back to back: A1 A2 B1 B2\n{out}"
    );
    let doc = s.doc();
    assert_eq!(at(&doc, "/suite/interleave"), &Value::Bool(false));
    for n in [&a, &b] {
        assert_eq!(
            runs(test(&doc, n)),
            [(1, "ok".into()), (2, "ok".into())],
            "{n}"
        );
    }
}
