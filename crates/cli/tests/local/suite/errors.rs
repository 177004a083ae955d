//! Failed tests recorded and gone past, and suite files refused before
//! anything runs.

use super::*;

// ---------------------------------------------------------------------------
// 8. Failed tests.
// ---------------------------------------------------------------------------

#[test]
fn failed_runs_are_recorded_and_the_suite_goes_on() {
    let _g = shared();
    let toml = r#"
name = "failing"
duration = "300ms"
warmup = "100ms"
[[matrix]]
workloads = ["rr1c-1x1"]
users = [8, 1]
"#;
    // Nobody listens on port 9: every run fails.
    let s = Study::new(toml);
    let (code, out, err) = suite(&[s.file(), "--server", "127.0.0.1:9", "--out", s.out()]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    assert_eq!(
        run_lines(&out)
            .iter()
            .map(|l| (l.0.as_str(), l.3.as_str()))
            .collect::<Vec<_>>(),
        [("rr1c-1x1--8", "FAILED"), ("rr1c-1x1--1", "FAILED")],
        "the suite goes on after a failure:\n{out}"
    );
    assert!(err.contains("failed"), "{err}");
    let doc = s.doc();
    for t in tests(&doc) {
        assert_eq!(runs(t), [(1, "failed".into())]);
        assert!(!text(t, "/runs/0/error").trim().is_empty());
        assert!(t.get("summary").is_none());
    }
    check_table_against_json(&out, &doc);

    // A server that refuses the first test and runs the second.
    let server = Server::start(&["--max-users", "4"]);
    let s = Study::new(toml);
    let (code, out, err) = suite(&[s.file(), "--server", &server.addr(), "--out", s.out()]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    let doc = s.doc();
    let refused = test(&doc, "rr1c-1x1--8");
    assert_eq!(runs(refused), [(1, "failed".into())]);
    assert!(
        text(refused, "/runs/0/error").contains('4'),
        "the error says why: {refused}"
    );
    assert_eq!(runs(test(&doc, "rr1c-1x1--1")), [(1, "ok".into())]);
    let rows = table_rows(&out);
    assert!(rows[0].join(" ").contains("1 not ok"), "{out}");
    check_table_against_json(&out, &doc);
}

// ---------------------------------------------------------------------------
// 9. Suite-file errors.
// ---------------------------------------------------------------------------

#[test]
fn every_suite_file_error_exits_2_naming_the_file_and_the_line() {
    let valid = "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n";
    // (what, file text, line named, words of the message)
    let cases: [(&str, String, Option<usize>, &str); 14] = [
        (
            "unknown key",
            "name = \"x\"\n[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1]\nthread = 2\n"
                .into(),
            Some(5),
            "unknown field `thread`",
        ),
        (
            "unknown top-level key",
            format!("nmae = \"x\"\n{valid}"),
            Some(1),
            "unknown field `nmae`",
        ),
        (
            "bad buffer size",
            format!("{valid}sndbuf = \"12q\"\n"),
            Some(4),
            "invalid size '12q'",
        ),
        (
            "bad size in a workload",
            "[[test]]\nworkload = \"rr1c-1x30q\"\nusers = 1\n".into(),
            Some(2),
            "invalid size '30q'",
        ),
        (
            "bad workload",
            "[[matrix]]\nworkloads = [\n  \"rr1c-1x1\",\n  \"tcp_rr\",\n]\nusers = [1]\n".into(),
            Some(4),
            "unknown workload 'tcp_rr'",
        ),
        (
            "zero users",
            "\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 0\n".into(),
            Some(4),
            "users must be between 1 and",
        ),
        (
            "zero users in a list",
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1,\n  0]\n".into(),
            Some(4),
            "users must be between 1 and",
        ),
        (
            "empty users",
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = []\n".into(),
            Some(3),
            "users is empty",
        ),
        (
            "a stream over udp whose message is larger than a datagram",
            "name = \"x\"\n\n[[matrix]]\nworkloads = [\"rr1c-1x1\", \"str-readx64k\"]\nusers = [1]\nprotocols = [\"udp\"]\n".into(),
            Some(3),
            "str-readx64k@1m--1--udp cannot run: size 65536 is out of range: UDP message must be between 1 and 65483",
        ),
        (
            "duplicate names",
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n\n[[matrix]]\nworkloads = [\"rr:1x1\"]\nusers = [1]\n".into(),
            None,
            "rr1c-1x1--1 is defined twice, at line 1, column 1 and at line 5, column 1",
        ),
        (
            "bad duration",
            format!("{valid}duration = \"10 parsecs\"\n"),
            Some(4),
            "invalid duration '10 parsecs'",
        ),
        (
            "duration with an unknown unit",
            format!("duration = \"5x\"\n{valid}"),
            Some(1),
            "invalid duration '5x'",
        ),
        (
            "not TOML",
            "name = \"x\"\n\nthis is not toml at all\n".into(),
            Some(3),
            "",
        ),
        (
            "no tests",
            "name = \"x\"\nduration = \"5s\"\n".into(),
            None,
            "the suite has no tests",
        ),
    ];
    for (what, toml, line, says) in cases {
        let s = Study::new(&toml);
        // Port 9 refuses: anything that ran would fail with exit 1.
        let (code, out, err) = suite(&[s.file(), "--server", "127.0.0.1:9", "--out", s.out()]);
        assert_eq!(code, 2, "{what}: stdout {out} stderr {err}");
        assert!(out.is_empty(), "{what}: nothing on stdout: {out}");
        match line {
            Some(l) => assert!(
                err.contains(&format!("{}, line {l},", s.file())),
                "{what}: stderr should name {} line {l}: {err}",
                s.file()
            ),
            None => assert!(
                err.contains(&format!("{}:", s.file())),
                "{what}: stderr should name {}: {err}",
                s.file()
            ),
        }
        assert!(
            err.contains(says),
            "{what}: stderr should say {says:?}: {err}"
        );
        assert!(!s.out.exists(), "{what}: a results file was written");
    }

    // [[profile]] tables: the profile file is read with the suite, and its
    // errors name the suite file's line and the profile's own.
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profiles");
    let profile_cases: [(&str, &str, usize, &str); 5] = [
        (
            "missing profile",
            "[[profile]]\nfile = \"nope.xml\"\n",
            2,
            "nope.xml: No such file",
        ),
        (
            "a setting the profile sets itself",
            "[[profile]]\nfile = \"rr-count.xml\"\nduration = \"5s\"\n",
            3,
            "unknown field `duration`",
        ),
        (
            "a bad profile",
            "\n[[profile]]\nfile = \"err-unknown-type.xml\"\n",
            3,
            "err-unknown-type.xml: line 6, <flowop>: unknown flowop type frobnicate",
        ),
        (
            "a variable that is not a string",
            "[[profile]]\nfile = \"rr-count.xml\"\nvars = { a = 1 }\n",
            3,
            "expected a string",
        ),
        (
            "a profile for two servers",
            "[[profile]]\nfile = \"two-hosts.xml\"\nvars = { h1 = \"127.0.0.1\", h2 = \"127.0.0.2\" }\n",
            2,
            "the profile names 2 remote hosts",
        ),
    ];
    for (what, toml, line, says) in profile_cases {
        let s = Study::new(toml);
        for f in ["rr-count.xml", "err-unknown-type.xml", "two-hosts.xml"] {
            std::fs::copy(profiles.join(f), s.dir.path().join(f)).unwrap();
        }
        let (code, out, err) = suite(&[s.file(), "--server", "127.0.0.1:9", "--out", s.out()]);
        assert_eq!(code, 2, "{what}: stdout {out} stderr {err}");
        assert!(
            err.contains(&format!("{}, line {line},", s.file())) && err.contains(says),
            "{what}: stderr should name line {line} and say {says:?}: {err}"
        );
        assert!(!s.out.exists(), "{what}: a results file was written");
    }

    // A file that is not there.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let out_file = dir.path().join("results.json");
    let (code, out, err) = suite(&[
        missing.to_str().unwrap(),
        "--server",
        "127.0.0.1:9",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "missing file: {out} {err}");
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(out.is_empty() && !out_file.exists());

    // Bad command lines around a good file.
    let s = Study::new(valid);
    let nowhere = s.dir.path().join("no-such-dir").join("r.json");
    for (bad, says) in [
        (vec!["--repeat", "0"], "--repeat"),
        (vec!["--out", nowhere.to_str().unwrap()], "does not exist"),
        (vec!["--duration", "0s"], "duration"),
    ] {
        let mut args = vec![s.file(), "--server", "127.0.0.1:9"];
        args.extend(bad.iter().copied());
        let (code, out, err) = suite(&args);
        assert_eq!(code, 2, "{bad:?}: {out} {err}");
        assert!(
            err.contains(says),
            "{bad:?}: stderr should say {says:?}: {err}"
        );
        assert!(run_lines(&out).is_empty(), "{bad:?} ran: {out}");
    }
    assert!(s.strays().is_empty(), "{:?}", s.strays());

    // A Unix-socket test, and a server that is not an address of this host
    // (nothing is sent to it): refused before anything runs, naming the test.
    let u = Study::new("[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nprotocol = \"unix\"\n");
    let (code, out, err) = suite(&[u.file(), "--server", "198.18.0.1:9", "--out", u.out()]);
    assert_eq!(code, 2, "stdout {out} stderr {err}");
    assert!(
        err.contains("rr1c-1x1--1--unix") && err.contains("needs the server on this host"),
        "{err}"
    );
    assert!(run_lines(&out).is_empty() && !u.out.exists(), "{out}");
}
