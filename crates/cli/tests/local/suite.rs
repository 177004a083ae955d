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

use crate::util::{
    at, cpu_ticks, int, num, poll_until, run, shared, spawn, text, Proc, Server, BIN,
};
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

    /// `FILE --server ADDR --out OUT` and `extra`: the arguments of
    /// `linkperf suite` running this study against the server at `addr`.
    fn against<'a>(&'a self, addr: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![self.file(), "--server", addr, "--out", self.out()];
        args.extend(extra);
        args
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

/// `linkperf suite ARGS`, started, not waited for.
fn spawn_suite(args: &[&str]) -> Proc {
    let mut all = vec!["suite"];
    all.extend(args);
    spawn(&all)
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
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("verdict: "))
        .map(|l| {
            // A figure and its unit are one cell: `55701 txn/s`, `13.50 Gbit/s`.
            let mut cells: Vec<String> = Vec::new();
            for w in l.split_whitespace() {
                match cells.last_mut() {
                    Some(last) if w == "txn/s" || w.ends_with("bit/s") => {
                        last.push(' ');
                        last.push_str(w);
                    }
                    _ => cells.push(w.to_string()),
                }
            }
            cells
        })
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
        // Request/response in transactions per second, streams in bits.
        let rr = matches!(text(t, "/workload/kind"), "rr" | "crr" | "mix" | "profile");
        match summary.and_then(|s| s.pointer("/metrics/throughput.transactions_per_s/mean")) {
            Some(tps) if rr => assert_eq!(
                row[2],
                format!("{:.0} txn/s", tps.as_f64().unwrap()),
                "{name}: throughput column: {row:?}"
            ),
            Some(_) => assert!(row[2].ends_with("bit/s"), "{name}: {row:?}"),
            None => assert_eq!(row[2], "-", "{name}: {row:?}"),
        }
        assert_eq!(row[5], cv_cell(summary), "{name}: cv column: {row:?}");
        let ci = summary
            .and_then(|s| s.pointer("/metrics/throughput.bytes_per_s"))
            .and_then(|m| {
                let (lo, hi) = (m.get("ci95_low")?.as_f64()?, m.get("ci95_high")?.as_f64()?);
                let mean = m.get("mean")?.as_f64()?;
                Some(format!("{:.1}%", (hi - lo) / 2.0 / mean * 100.0))
            })
            .unwrap_or_else(|| "-".into());
        assert_eq!(row[6], ci, "{name}: ±95% column: {row:?}");
        let errors: u64 = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| int(r, "/errors"))
            .sum();
        assert_eq!(row[7], errors.to_string(), "{name}: errors column: {row:?}");
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

mod checks;
mod disk;
mod errors;
mod output;
mod plan;
mod resume;
mod statistics;
