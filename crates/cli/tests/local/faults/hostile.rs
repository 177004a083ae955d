//! Hostile peers and damaged files: a thousand garbage or silent
//! connections, and results files that compare and report refuse.

use super::*;

// ---------------------------------------------------------------------------
// 6. A thousand hostile connections.
// ---------------------------------------------------------------------------

#[test]
fn a_thousand_garbage_or_silent_connections_do_not_stop_a_real_test() {
    let _g = exclusive();
    let server = Server::start(&[]);
    let mut hostile = Vec::with_capacity(1000);
    for i in 0..1000u32 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port()))
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        match i % 4 {
            // Nothing at all.
            0 | 1 => {}
            // Not linkperf.
            2 => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            }
            // Half a frame, then nothing.
            _ => {
                let _ = s.write_all(&[0, 0, 0, 200, b'{']);
            }
        }
        hostile.push(s);
    }
    let (code, _, err, doc) = run_against(
        &server,
        &["--users", "2", "--duration", "1s", "--warmup", "200ms"],
    );
    assert_eq!(code, 0, "{err}\nserver: {}", server.log());
    util::assert_measured(first_run(&doc), "beside a thousand hostile connections");
    drop(hostile);
    let mut server = server;
    assert!(server.is_running());
}

// ---------------------------------------------------------------------------
// 7. Damaged results files: compare and report refuse them, naming the file.
// ---------------------------------------------------------------------------

/// A real results document.
fn good_results(dir: &Path) -> PathBuf {
    let p = dir.join("good.json");
    let (code, _, err) = run(&[
        "run",
        "-q",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--threads",
        "1",
        "--server-threads",
        "1",
        "--json",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    p
}

/// Runs `linkperf ARGS`; fails clearly if the subcommand does not exist.
fn run_subcommand(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = run(args);
    assert!(
        !err.contains("unrecognized subcommand"),
        "`linkperf {}` does not exist in this build: {err}",
        args[0]
    );
    (code, out, err)
}

#[test]
fn damaged_results_files_are_refused_by_compare_and_report() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let good = good_results(dir.path());
    let text_of_good = std::fs::read_to_string(&good).unwrap();
    let mut doc: Value = serde_json::from_str(&text_of_good).unwrap();

    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text_of_good[..text_of_good.len() / 2]).unwrap();

    let wrong_types = dir.path().join("hand-edited.json");
    doc["tests"][0]["runs"][0]["run"] = Value::String("one".into());
    std::fs::write(&wrong_types, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    let newer = dir.path().join("newer.json");
    let mut d: Value = serde_json::from_str(&text_of_good).unwrap();
    d["schema"] = Value::String("linkperf/results/v99".into());
    std::fs::write(&newer, serde_json::to_string_pretty(&d).unwrap()).unwrap();

    let good = good.to_str().unwrap();
    for (bad, problem) in [
        (&truncated, "truncated"),
        (&wrong_types, "shape"),
        (&newer, "newer linkperf"),
    ] {
        let bad = bad.to_str().unwrap();
        let name = Path::new(bad).file_name().unwrap().to_str().unwrap();
        for args in [
            vec!["compare", good, bad],
            vec!["compare", bad, good],
            vec!["report", bad],
        ] {
            let (code, out, err) = run_subcommand(&args);
            assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
            assert!(
                err.contains(name) && err.contains(problem),
                "{args:?}: the message must name {name} and say {problem:?}: {err}"
            );
        }
    }
}
