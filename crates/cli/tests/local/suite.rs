//! End-to-end tests of `linkperf suite`: the real binary, a real `linkperf
//! serve` child (or the embedded server) and real sockets on loopback. Suites
//! are small TOML files in a temporary directory with sub-second runs; the
//! assertions are about names, order, counts, statistics and files, never speed.
//!
//! With stdout and stderr piped (as here), `linkperf suite` prints one plain
//! line per finished run on stdout (`NAME run K/N: ... [ok]`), then the table.

// The helpers are shared with e2e.rs; this file does not use all of them.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{at, int, num, poll_until, run, shared, spawn, text, Proc, Server, BIN};
use linkperf_results::ResultsDocument;
use serde_json::Value;

/// Every load: short window, shorter warmup.
/// (One run per test: a busy host may make a run of 300 ms suspect, and these
/// tests count runs; the checks have tests of their own below.)
const TIMING: [&str; 6] = [
    "--duration",
    "300ms",
    "--warmup",
    "100ms",
    "--retry-suspect",
    "0",
];

/// Longest a spawned suite may take before the test gives up on it.
const DEADLINE: Duration = Duration::from_secs(60);

/// Student's t, 0.975 quantile, 1 degree of freedom (two runs): tan(0.475 π).
const T_975_1DF: f64 = 12.706_204_736_174_707;

/// Student's t, 0.975 quantile, 2 degrees of freedom (three runs).
const T_975_2DF: f64 = 4.302_652_729_911_275;

/// The coefficient of variation above which a test is unstable.
const UNSTABLE_CV: f64 = 0.05;

/// Every figure a summary may hold, by its dotted path in a run.
const FIGURES: [&str; 25] = [
    "throughput.bytes_per_s",
    "throughput.tx_bytes_per_s",
    "throughput.rx_bytes_per_s",
    "throughput.transactions_per_s",
    "transaction_time_us.mean",
    "transaction_time_us.p50",
    "transaction_time_us.p90",
    "transaction_time_us.p99",
    "transaction_time_us.p999",
    "transaction_time_us.max",
    "cpu.client.process_s",
    "cpu.client.system_busy_s",
    "cpu.client.softirq_s",
    "cpu.server.process_s",
    "cpu.server.system_busy_s",
    "cpu.server.softirq_s",
    "efficiency.client_bytes_per_cpu_s",
    "efficiency.server_bytes_per_cpu_s",
    "efficiency.client_cpu_us_per_txn",
    "efficiency.server_cpu_us_per_txn",
    "efficiency.client_bytes_per_system_cpu_s",
    "efficiency.server_bytes_per_system_cpu_s",
    "efficiency.client_system_cpu_us_per_txn",
    "efficiency.server_system_cpu_us_per_txn",
    "errors",
];

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

/// A suite file in its own temporary directory, and where its results go.
struct Study {
    dir: tempfile::TempDir,
    file: PathBuf,
    out: PathBuf,
}

impl Study {
    fn new(toml: &str) -> Study {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("study.toml");
        std::fs::write(&file, toml).expect("write the suite file");
        let out = dir.path().join("results.json");
        Study { dir, file, out }
    }

    fn file(&self) -> &str {
        self.file.to_str().expect("utf-8 temp path")
    }

    fn out(&self) -> &str {
        self.out.to_str().expect("utf-8 temp path")
    }

    /// Replaces the suite file's text.
    fn rewrite(&self, toml: &str) {
        std::fs::write(&self.file, toml).expect("rewrite the suite file");
    }

    /// The results document, which must be there and parse.
    fn doc(&self) -> Value {
        read_doc(&self.out).unwrap_or_else(|| panic!("no results file {}", self.out.display()))
    }

    /// Files left in the directory besides the suite file and the results.
    fn strays(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.path())
            .expect("list temp dir")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n != "study.toml" && n != "results.json")
            .collect()
    }
}

/// The results document at `path` if the file exists. Whenever it exists it
/// must be a whole, valid results document: JSON, and loadable as such.
fn read_doc(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    let text =
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{} is not UTF-8: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{} is not JSON ({e}), a save was not atomic:\n{text}",
            path.display()
        )
    });
    if let Err(e) = ResultsDocument::from_json(&text, &path.display().to_string()) {
        panic!("{} is not a results document: {e}", path.display());
    }
    Some(v)
}

/// `linkperf suite ARGS`: exit code, stdout, stderr.
fn suite(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["suite"];
    all.extend(args);
    run(&all)
}

/// `linkperf suite ARGS`, which must exit 0; its stdout.
fn suite_ok(args: &[&str]) -> String {
    let (code, out, err) = suite(args);
    assert_eq!(
        code, 0,
        "linkperf suite {args:?} failed\nstdout: {out}\nstderr: {err}"
    );
    out
}

/// The tests of a results document.
fn tests(doc: &Value) -> &Vec<Value> {
    at(doc, "/tests").as_array().expect("tests is an array")
}

/// The names of the tests of a results document, in order.
fn names(doc: &Value) -> Vec<String> {
    tests(doc)
        .iter()
        .map(|t| text(t, "/name").to_string())
        .collect()
}

/// The test called `name`.
fn test<'a>(doc: &'a Value, name: &str) -> &'a Value {
    tests(doc)
        .iter()
        .find(|t| text(t, "/name") == name)
        .unwrap_or_else(|| panic!("no test {name} in {:?}", names(doc)))
}

/// (run number, status) of every run of a test that is not a retry, a run
/// that completed its window reading `ok` whether it is `ok` or `suspect`:
/// these tests are about suites (names, order, counts, files), and a busy
/// host may make a short run suspect (the checks are tested on their own).
fn runs(test: &Value) -> Vec<(u64, String)> {
    at(test, "/runs")
        .as_array()
        .expect("runs is an array")
        .iter()
        .filter(|r| r.get("retry_of").is_none())
        .map(|r| {
            let status = text(r, "/status");
            let status = if status == "suspect" { "ok" } else { status };
            (int(r, "/run"), status.to_string())
        })
        .collect()
}

/// Completed runs (see [`runs`]) of every test, all together.
fn ok_runs(doc: &Value) -> usize {
    tests(doc)
        .iter()
        .flat_map(runs)
        .filter(|(_, s)| s == "ok")
        .count()
}

/// `(name, run, of, status)` of every plain progress line on stdout:
/// `NAME run K/N: FIGURES [STATUS]` or `NAME run K/N: [STATUS] ERROR`.
fn run_lines(stdout: &str) -> Vec<(String, u32, u32, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(" run ")?;
            let (k, rest) = rest.split_once('/')?;
            let (n, rest) = rest.split_once(':')?;
            let rest = rest.trim();
            let status = match rest.strip_prefix('[') {
                Some(r) => r.split_once(']')?.0,
                None => rest.rsplit_once('[')?.1.strip_suffix(']')?,
            };
            // A suspect run completed (see [`runs`]).
            let status = if status == "SUSPECT" { "ok" } else { status };
            Some((
                name.to_string(),
                k.parse().ok()?,
                n.parse().ok()?,
                status.to_string(),
            ))
        })
        .collect()
}

/// `(name, run)` of the plain progress lines: the order runs happened in.
fn order(stdout: &str) -> Vec<(String, u32)> {
    run_lines(stdout)
        .into_iter()
        .map(|(n, k, _, _)| (n, k))
        .collect()
}

/// The rows of the table printed at the end, split on white space.
fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("test ") && l.contains(" runs ") && l.contains(" cv "))
        .unwrap_or_else(|| panic!("no table in stdout:\n{stdout}"));
    lines[head + 1..]
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// The summary's cv as the table shows it.
fn cv_cell(summary: Option<&Value>) -> String {
    match summary
        .and_then(|s| s.get("throughput_cv"))
        .and_then(Value::as_f64)
    {
        Some(cv) => format!("{:.1}%", cv * 100.0),
        None => "-".into(),
    }
}

/// The table and the results document agree test by test, and each test's
/// `unstable` is exactly its throughput cv above 5%.
fn check_table_against_json(stdout: &str, doc: &Value) {
    let rows = table_rows(stdout);
    assert_eq!(
        rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        names(doc),
        "one table row per test, in the document's order:\n{stdout}"
    );
    for (row, t) in rows.iter().zip(tests(doc)) {
        let name = text(t, "/name");
        let summary = t.get("summary");
        // The table counts the truly ok runs, the ones its figures are over.
        let ok = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .count();
        assert_eq!(row[1], ok.to_string(), "{name}: runs column: {row:?}");
        let unstable = match summary {
            Some(s) => {
                assert_eq!(int(s, "/runs") as usize, ok, "{name}: summary runs");
                let cv = s.get("throughput_cv").and_then(Value::as_f64);
                let metric_cv = s
                    .pointer("/metrics/throughput.bytes_per_s/cv")
                    .and_then(Value::as_f64);
                assert_eq!(cv, metric_cv, "{name}: throughput_cv is the metric's cv");
                let flagged = at(s, "/unstable").as_bool().expect("unstable is a bool");
                assert_eq!(
                    flagged,
                    cv.is_some_and(|c| c > UNSTABLE_CV),
                    "{name}: unstable must be cv > 5%, cv {cv:?}"
                );
                flagged
            }
            None => {
                assert_eq!(ok, 0, "{name}: a test with ok runs has a summary");
                false
            }
        };
        assert_eq!(row[6], cv_cell(summary), "{name}: cv column: {row:?}");
        let ci = summary
            .and_then(|s| s.pointer("/metrics/throughput.bytes_per_s"))
            .and_then(|m| {
                let (lo, hi) = (m.get("ci95_low")?.as_f64()?, m.get("ci95_high")?.as_f64()?);
                let mean = m.get("mean")?.as_f64()?;
                Some(format!("{:.1}%", (hi - lo) / 2.0 / mean * 100.0))
            })
            .unwrap_or_else(|| "-".into());
        assert_eq!(row[7], ci, "{name}: ±95% column: {row:?}");
        let errors: u64 = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| int(r, "/errors"))
            .sum();
        assert_eq!(row[8], errors.to_string(), "{name}: errors column: {row:?}");
        assert_eq!(
            row.iter().any(|c| c.trim_end_matches(',') == "UNSTABLE"),
            unstable,
            "{name}: UNSTABLE in the table iff the summary says so: {row:?}"
        );
    }
}

/// Waits for a spawned suite to end: exit code (-1 if killed by a signal),
/// stdout, stderr.
fn finish(child: Proc) -> (i32, String, String) {
    let (status, out, err) = child.finish(DEADLINE);
    (status.code().unwrap_or(-1), out, err)
}

/// Relative closeness, for figures that went through a computation and JSON.
fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale.abs().max(f64::MIN_POSITIVE)
}

/// The value of dotted figure `key` in a run, if the run has it.
fn figure(run: &Value, key: &str) -> Option<f64> {
    run.pointer(&format!("/{}", key.replace('.', "/")))
        .and_then(Value::as_f64)
}

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

// ---------------------------------------------------------------------------
// 4 and 5. Statistics and unstable flagging.
// ---------------------------------------------------------------------------

/// Checks one metric's statistics against the values computed here.
/// Three runs, or fewer when a busy host made some suspect: statistics are
/// over the ok runs only.
fn check_stats(name: &str, key: &str, stats: &Value, values: &[f64]) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() < 2 {
        0.0
    } else {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let scale = mean.abs().max(max.abs());
    let what = format!("{name} {key} over {values:?}: {stats}");
    assert_eq!(int(stats, "/n"), values.len() as u64, "{what}");
    assert!(close(num(stats, "/mean"), mean, scale), "mean: {what}");
    assert!(close(num(stats, "/stddev"), sd, scale), "stddev: {what}");
    assert_eq!(num(stats, "/min"), min, "min: {what}");
    assert_eq!(num(stats, "/max"), max, "max: {what}");
    match stats.get("cv").and_then(Value::as_f64) {
        Some(cv) => {
            assert!(mean != 0.0, "cv without a mean: {what}");
            assert!(close(cv, sd / mean.abs(), 1.0), "cv: {what}");
        }
        None => assert!(mean == 0.0 || values.len() < 2, "cv missing: {what}"),
    }
    // The interval is mean ± t(0.975, n − 1) × sd / √n; none for one run.
    let t = match values.len() {
        1 => {
            assert!(stats["ci95_low"].is_null(), "{what}");
            assert!(stats["ci95_high"].is_null(), "{what}");
            return;
        }
        2 => T_975_1DF,
        3 => T_975_2DF,
        more => panic!("{more} runs of 3: {what}"),
    };
    let half = t * sd / n.sqrt();
    assert!(
        close(num(stats, "/ci95_low"), mean - half, scale),
        "ci95_low {}: {what}",
        mean - half
    );
    assert!(
        close(num(stats, "/ci95_high"), mean + half, scale),
        "ci95_high {}: {what}",
        mean + half
    );
}

#[test]
fn statistics_match_values_computed_by_hand() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "stats"
[[matrix]]
workloads = ["rr1c-1x1", "rr1c-200x1000"]
users = [2]
"#,
    );
    let mut args = vec![
        s.file(),
        "--server",
        &addr,
        "--repeat",
        "3",
        "--out",
        s.out(),
    ];
    args.extend(TIMING);
    let out = suite_ok(&args);
    let doc = s.doc();
    assert_eq!(names(&doc), ["rr1c-1x1--2", "rr1c-200x1000--2"]);
    for t in tests(&doc) {
        let name = text(t, "/name");
        // The statistics are over the ok runs (a busy host may make one suspect).
        let raw: Vec<&Value> = at(t, "/runs")
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .collect();
        assert_eq!(runs(t).len(), 3, "{name}");
        assert!(runs(t).iter().all(|(_, s)| s == "ok"), "{name}");
        let Some(summary) = t.get("summary") else {
            assert!(raw.is_empty(), "{name}: ok runs and no summary");
            continue;
        };
        assert_eq!(int(summary, "/runs"), raw.len() as u64, "{name}");
        assert_eq!(
            int(summary, "/suspect_runs"),
            3 - raw.len() as u64,
            "{name}"
        );
        let metrics = at(summary, "/metrics").as_object().unwrap();
        for key in [
            "throughput.bytes_per_s",
            "throughput.tx_bytes_per_s",
            "throughput.rx_bytes_per_s",
            "throughput.transactions_per_s",
            "transaction_time_us.mean",
            "transaction_time_us.p99",
            "cpu.client.process_s",
            "cpu.server.process_s",
            "errors",
        ] {
            assert!(metrics.contains_key(key), "{name}: no {key} in the summary");
        }
        // Every figure all three runs carry is summarised, and only those.
        for key in FIGURES {
            let values: Option<Vec<f64>> = raw.iter().map(|r| figure(r, key)).collect();
            match (values, metrics.get(key)) {
                (Some(v), Some(stats)) => check_stats(name, key, stats, &v),
                (None, None) => {}
                (v, m) => panic!("{name} {key}: runs {v:?}, summary {m:?}"),
            }
        }
        assert!(
            metrics.keys().all(|k| FIGURES.contains(&k.as_str())),
            "{name}: unexpected figures {:?}",
            metrics.keys()
        );
        if raw.len() < 2 {
            continue;
        }
        let cv = num(summary, "/metrics/throughput.bytes_per_s/cv");
        assert_eq!(num(summary, "/throughput_cv"), cv, "{name}");
        assert_eq!(
            at(summary, "/unstable").as_bool().unwrap(),
            cv > UNSTABLE_CV,
            "{name}: cv {cv}"
        );
    }
    check_table_against_json(&out, &doc);
}

#[test]
fn unstable_is_flagged_exactly_above_five_percent() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        r#"
name = "unstable"
[[matrix]]
workloads = ["rr1c-1x1"]
users = [1, 2, 3]
"#,
    );
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
    check_table_against_json(&out, &s.doc());

    // The machine decides nothing: give two tests' runs throughputs on either
    // side of the threshold, take a run of the third away, and resume. The
    // resumed run makes the suite recompute every summary and print the table.
    let (above, below) = ([1.0e9, 1.075e9], [1.0e9, 1.07e9]);
    let cv = |v: [f64; 2]| ((v[1] - v[0]) / 2f64.sqrt()) / ((v[0] + v[1]) / 2.0);
    assert!(cv(above) > UNSTABLE_CV && cv(above) < 0.052);
    assert!(cv(below) < UNSTABLE_CV && cv(below) > 0.047);
    let mut doc = s.doc();
    for (name, values) in [("rr1c-1x1--1", above), ("rr1c-1x1--2", below)] {
        let t = doc["tests"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|t| t["name"] == name)
            .unwrap();
        for (r, v) in t["runs"].as_array_mut().unwrap().iter_mut().zip(values) {
            r["throughput"]["bytes_per_s"] = v.into();
            // Made up, and counted: as an ok run.
            r["status"] = "ok".into();
        }
    }
    let t3 = doc["tests"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["name"] == "rr1c-1x1--3")
        .unwrap();
    t3["runs"].as_array_mut().unwrap().pop();
    std::fs::write(&s.out, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    args.push("--resume");
    let out = suite_ok(&args);
    assert_eq!(order(&out), [("rr1c-1x1--3".to_string(), 2)], "{out}");
    let doc = s.doc();
    let summary = |n: &str| at(test(&doc, n), "/summary").clone();
    let a = summary("rr1c-1x1--1");
    assert_eq!(a["unstable"], true, "cv {} > 5%: {a}", cv(above));
    assert!(close(num(&a, "/throughput_cv"), cv(above), 1.0), "{a}");
    let b = summary("rr1c-1x1--2");
    assert_eq!(b["unstable"], false, "cv {} ≤ 5%: {b}", cv(below));
    assert!(close(num(&b, "/throughput_cv"), cv(below), 1.0), "{b}");
    let c = summary("rr1c-1x1--3");
    assert_eq!(int(&c, "/runs") + int(&c, "/suspect_runs"), 2, "{c}");

    let rows = table_rows(&out);
    assert_eq!(rows[0][6], "5.1%", "{out}");
    assert!(rows[0].contains(&"UNSTABLE".to_string()), "{out}");
    assert_eq!(rows[1][6], "4.8%", "{out}");
    assert!(!rows[1].contains(&"UNSTABLE".to_string()), "{out}");
    check_table_against_json(&out, &doc);
}

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
    let mut args = vec!["suite", s.file(), "--server", &addr, "--out", s.out()];
    let mut child = spawn(&args);
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
    let (code, out, err) = run(&args);
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

// ---------------------------------------------------------------------------
// Every run checked before it is believed.
// ---------------------------------------------------------------------------

/// CPU time (user + system, in clock ticks) process `pid` has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command may hold spaces: the fields count from after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let at = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name.
    at(11) + at(12)
}

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
    let mut child = spawn(&[
        "suite",
        s.file(),
        "--server",
        &addr,
        "--out",
        s.out(),
        "--quiet",
    ]);
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
    let (code, out, err) = run(&[
        "suite",
        s.file(),
        "--server",
        &addr,
        "--out",
        s.out(),
        "--resume",
    ]);
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
        let mut child = spawn(&[
            "suite",
            s.file(),
            "--server",
            &addr,
            "--out",
            s.out(),
            "--quiet",
        ]);
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

// ---------------------------------------------------------------------------
// Nothing measured is lost on a full disk.
// ---------------------------------------------------------------------------

/// A small tmpfs of the test's own, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// A tmpfs of `size` (e.g. `600k`), or `None` where this process may not
    /// mount one (then the test says so, and fails where root is required).
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("LINKPERF_LAB_REQUIRED").is_none(),
                "cannot mount a tmpfs (root is needed)"
            );
            eprintln!("skipped: cannot mount a tmpfs (root is needed)");
            return None;
        }
        Some(SmallFs { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a filler file until the file system is full.
    fn fill(&self, name: &str) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.path(name)).unwrap();
        let chunk = vec![1u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }

    fn remount(&self, how: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{how}")])
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount {how}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

const THREE: &str = r#"
name = "three"
duration = "300ms"
warmup = "100ms"
retry_suspect = 0
[[test]]
workload = "rr1c-1x1"
users = 1
[[test]]
workload = "rr1c-1x1"
users = 2
[[test]]
workload = "rr1c-1x1"
users = 3
"#;

#[test]
fn a_full_file_system_loses_no_run() {
    let _g = shared();
    let Some(fs) = SmallFs::mount("2m") else {
        return;
    };
    let suite_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(suite_file.path(), THREE).unwrap();
    let file = suite_file.path().to_str().unwrap();
    // A server of its own, whose log says when the suite takes on its second
    // test: the first run is saved, and the room the save gave up is held
    // again (a save does both before the next run).
    let server = Server::start(&[]);
    let addr = server.addr();
    let second_test = |n: usize| {
        server.wait_for_log("the suite's second test", DEADLINE, |l| {
            l.matches("running rr1c-1x1--2").count() >= n
        });
    };

    // 1. Too little room for what the suite will write: refused before anything runs.
    fs.fill("filler");
    let out = fs.path("a.json");
    let (code, stdout, err) = suite(&[file, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}\n{err}");
    assert!(err.contains("keep room for the results"), "{err}");
    assert!(!stdout.contains(" run 1/1"), "nothing ran: {stdout}");
    std::fs::remove_file(fs.path("filler")).unwrap();

    // 2. Room kept, then the file system fills up mid-suite: every run is saved.
    // (The fill comes once the room the first save gave up is held again:
    // another writer in that moment would take it, and the later saves would
    // go to the fallback of part 3.)
    let out_arg = out.to_str().unwrap();
    let child = spawn(&[
        "suite", file, "--server", &addr, "--out", out_arg, "--quiet",
    ]);
    second_test(1);
    fs.fill("filler");
    let (code, stdout, err) = finish(child);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let doc = read_doc(&out).unwrap();
    assert_eq!(names(&doc), ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"]);
    std::fs::remove_file(fs.path("filler")).unwrap();

    // 3. A save that fails anyway (the file system read-only mid-suite): the
    // run is printed, the document goes to a fallback file whose path is
    // printed, every later run is saved there, and a resume continues from it.
    let out = fs.path("b.json");
    let out_arg = out.to_str().unwrap();
    let child = spawn(&[
        "suite", file, "--server", &addr, "--out", out_arg, "--quiet",
    ]);
    second_test(2);
    fs.remount("ro");
    let (code, stdout, err) = finish(child);
    fs.remount("rw");
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert_eq!(order(&stdout).len(), 3, "every run printed: {stdout}");
    let fallback = err
        .split("they are in ")
        .nth(1)
        .and_then(|r| r.split(" instead").next())
        .unwrap_or_else(|| panic!("no fallback said: {err}"));
    let doc = read_doc(Path::new(fallback)).unwrap();
    assert_eq!(names(&doc), ["rr1c-1x1--1", "rr1c-1x1--2", "rr1c-1x1--3"]);
    assert!(
        err.contains(&format!("--out {fallback} --resume")),
        "the exact command to continue: {err}"
    );
    let (code, stdout, err) = suite(&[file, "--server", &addr, "--out", fallback, "--resume"]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert!(err.contains("3 of 3 runs already done"), "{err}");
    let _ = std::fs::remove_file(fallback);
}

/// `--target-ci`: each test repeated until the 95% interval of its mean
/// throughput is within ± the target, between --min-repeat and --max-repeat
/// runs; a target no run can meet takes the most runs; bad values are
/// refused before anything runs.
#[test]
fn target_ci_repeats_a_test_until_its_interval_is_narrow_enough() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let s = Study::new(
        "name = \"ci\"\nduration = \"300ms\"\nwarmup = \"100ms\"\nretry_suspect = 0\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
    );
    // A target no throughput meets: every test takes the most runs.
    let (code, out, err) = suite(&[
        s.file(),
        "--server",
        &addr,
        "--out",
        s.out(),
        "--target-ci",
        "0.0001",
        "--min-repeat",
        "2",
        "--max-repeat",
        "4",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc = s.doc();
    assert_eq!(runs(test(&doc, "rr1c-1x1--1")).len(), 4, "{out}");
    assert_eq!(doc["suite"]["target_ci"], 0.000001);
    assert_eq!(doc["suite"]["min_repeat"], 2);
    assert_eq!(doc["suite"]["repeat"], 4);
    // A target any two runs meet: the fewest runs.
    let s2 = Study::new(&std::fs::read_to_string(&s.file).unwrap());
    let (code, out, err) = suite(&[
        s2.file(),
        "--server",
        &addr,
        "--out",
        s2.out(),
        "--target-ci",
        "99",
        "--min-repeat",
        "2",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    // Two steady runs meet it; on a busy host the first two may differ by
    // more than that (with 1 degree of freedom t is 12.7), so the count is
    // checked against the rule applied to the runs' own figures.
    let doc2 = s2.doc();
    let t = test(&doc2, "rr1c-1x1--1");
    let all = at(t, "/runs").as_array().unwrap();
    let ok: Vec<f64> = all
        .iter()
        .filter(|r| r["status"] == "ok")
        .map(|r| num(r, "/throughput/bytes_per_s"))
        .collect();
    let half = |xs: &[f64]| {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        linkperf_metrics::student_t_quantile(0.975, n - 1.0) * (var / n).sqrt() / mean
    };
    // Every run past the second was needed: the ok runs before it were too wide.
    for k in 2..all.len() {
        let before: Vec<f64> = all[..k]
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| num(r, "/throughput/bytes_per_s"))
            .collect();
        assert!(
            before.len() < 2 || half(&before) > 0.99,
            "run {} was not needed: {before:?}",
            k + 1
        );
    }
    // And the last one either met the target or was the tenth.
    assert!(
        all.len() == 10 || (ok.len() >= 2 && half(&ok) <= 0.99),
        "{} runs: {ok:?}",
        all.len()
    );
    // The plan says so.
    let (code, plan, _) = suite(&[s.file(), "--dry-run", "--target-ci", "5"]);
    assert_eq!(code, 0);
    assert!(
        plan.contains("3 to 10 runs (each until the 95% interval of its mean throughput is within ±5.0 %) = 10 runs at most"),
        "{plan}"
    );
    // Bad values: exit 2, nothing run.
    for bad in [
        vec!["--target-ci", "0"],
        vec!["--target-ci", "100"],
        vec!["--target-ci", "5", "--repeat", "3"],
        vec!["--target-ci", "5", "--min-repeat", "1"],
        vec!["--target-ci", "5", "--min-repeat", "6", "--max-repeat", "4"],
    ] {
        let mut args = vec![s.file(), "--dry-run"];
        args.extend(bad.iter().copied());
        let (code, _, err) = suite(&args);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
}
