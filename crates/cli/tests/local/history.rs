//! `linkperf history` end to end: real runs of the embedded server recorded
//! and imported (twice: the second adds nothing), a corrupt file refused
//! with nothing written, concurrent writers to one SQLite file losing
//! nothing, SQLite and a real PostgreSQL server (a throwaway cluster made
//! here) giving the same answers, and `serve --metrics` scraped and parsed
//! by the Prometheus client's OpenMetrics parser.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::util::control::key_file;
use crate::util::mesh::{one_test_suite, three_agents};
use crate::util::{self, run, run_command, BIN};

/// `linkperf ARGS` that must succeed: its stdout.
fn ok(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "linkperf {args:?}: {out}{err}");
    out
}

/// A results file of a real 1-user run against the embedded server.
fn real_run(dir: &Path, name: &str, history: Option<&str>) -> PathBuf {
    let file = dir.join(name);
    let f = file.to_str().unwrap();
    let mut args = vec!["run", "-q", "-w", "rr1c-1x1", "-u", "1"];
    args.extend(util::TIMING);
    args.extend(["--json", f]);
    if let Some(db) = history {
        args.extend(["--history", db]);
    }
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}{err}");
    file
}

/// "imported A runs of B ..." → (A, B).
fn imported(out: &str) -> (u64, u64) {
    let words: Vec<&str> = out.split_whitespace().collect();
    let a = words[1].parse().unwrap_or_else(|_| panic!("{out}"));
    let b = words[4].parse().unwrap_or_else(|_| panic!("{out}"));
    (a, b)
}

#[test]
fn real_runs_recorded_and_imported_twice_add_nothing_the_second_time() {
    let _g = util::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    // Recorded as --json saves it.
    let first = real_run(dir.path(), "a.json", Some(db));
    let second = real_run(dir.path(), "b.json", None);
    let (f1, f2) = (first.to_str().unwrap(), second.to_str().unwrap());
    let out = ok(&["history", "import", f1, f2, "--db", db]);
    assert_eq!(imported(&out), (1, 2), "{out}");
    let out = ok(&["history", "import", f1, f2, "--db", db]);
    assert_eq!(imported(&out), (0, 2), "{out}");
    let shown = ok(&["history", "show", "--db", db, "--include-suspect"]);
    assert!(shown.contains("rr1c-1x1--1"), "{shown}");
    assert!(shown.contains("throughput.bytes_per_s"), "{shown}");
    // Both runs are in each series, whichever way they went.
    for line in shown.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let ok_n: u64 = cols[4].parse().unwrap();
        let suspect: u64 = cols[5].parse().unwrap();
        assert_eq!(ok_n + suspect, 2, "{shown}");
    }
}

#[test]
fn a_corrupt_or_foreign_file_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, synthetic(&template(dir.path()), 0, 1.0).to_string()).unwrap();
    let truncated = dir.path().join("truncated.json");
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"name": "not linkperf"}"#).unwrap();
    let g = good.to_str().unwrap();
    for bad in [&truncated, &foreign] {
        let (code, out, err) = run(&["history", "import", g, bad.to_str().unwrap(), "--db", db]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(bad.to_str().unwrap()), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Nothing of the good file went in with the bad ones.
    let out = ok(&["history", "import", g, "--db", db]);
    assert_eq!(imported(&out), (1, 1), "{out}");
    // A file that is not a history as --db.
    let (code, _, err) = run(&["history", "show", "--db", g]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a database") || err.contains("not a linkperf history"),
        "{err}"
    );
}

/// A real run's results document, made once per test directory.
fn template(dir: &Path) -> Value {
    let f = real_run(dir, "template.json", None);
    util::read_doc(&f)
}

/// `template` as run `i` of a series: its own start time, ok, its
/// throughput and transaction rate times `factor` (with a small wobble),
/// its transaction time divided by it.
fn synthetic(template: &Value, i: usize, factor: f64) -> Value {
    let mut doc = template.clone();
    let wobble = 1.0 + [0.004, -0.003, 0.002, -0.004, 0.001][i % 5];
    let run = &mut doc["tests"][0]["runs"][0];
    run["started"] = Value::from(format!(
        "2024-01-01T{:02}:{:02}:{:02}.000Z",
        i / 3600,
        (i / 60) % 60,
        i % 60
    ));
    run["status"] = Value::from("ok");
    run["status_reasons"] = Value::Array(vec![]);
    for k in ["bytes_per_s", "transactions_per_s"] {
        let v = run["throughput"][k].as_f64().unwrap();
        run["throughput"][k] = Value::from(v * factor * wobble);
    }
    for k in ["mean", "p99"] {
        let v = run["transaction_time_us"][k].as_f64().unwrap();
        run["transaction_time_us"][k] = Value::from(v / factor * wobble);
    }
    doc
}

/// `n` synthetic files in `dir` (named PREFIX-i.json), a 20 % drop of
/// throughput from `step` on.
fn series_files(
    dir: &Path,
    t: &Value,
    prefix: &str,
    from: usize,
    n: usize,
    step: usize,
) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            let f = dir.join(format!("{prefix}-{i}.json"));
            let factor = if i >= step { 0.8 } else { 1.0 };
            std::fs::write(&f, synthetic(t, i, factor).to_string()).unwrap();
            f.to_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn concurrent_writers_to_one_sqlite_file_lose_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let t = template(dir.path());
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap().to_string();
    let writers = 4;
    let per = 15;
    let sets: Vec<Vec<String>> = (0..writers)
        .map(|w| series_files(dir.path(), &t, &format!("w{w}"), w * per, per, usize::MAX))
        .collect();
    // Every writer imports its files one at a time, all at once.
    let children: Vec<std::thread::JoinHandle<()>> = sets
        .iter()
        .cloned()
        .map(|files| {
            let db = db.clone();
            std::thread::spawn(move || {
                for f in files {
                    let (code, out, err) = run(&["history", "import", &f, "--db", &db]);
                    assert_eq!(code, 0, "{out}{err}");
                    assert_eq!(imported(&out), (1, 1), "{out}");
                }
            })
        })
        .collect();
    for c in children {
        c.join().expect("a writer failed");
    }
    let all: Vec<&str> = sets.iter().flatten().map(String::as_str).collect();
    let mut args = vec!["history", "import"];
    args.extend(&all);
    args.extend(["--db", &db]);
    let out = ok(&args);
    assert_eq!(imported(&out), (0, (writers * per) as u64), "{out}");
}

/// A throwaway PostgreSQL cluster in a temporary directory, on a unix
/// socket there, run as `nobody` when this is root; stopped when dropped.
struct Postgres {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    data: PathBuf,
    as_nobody: bool,
    url: String,
}

/// The directory of PostgreSQL's server programs: on PATH, or Debian's.
fn pg_bin() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("initdb").exists() && d.join("pg_ctl").exists() {
                return Some(d);
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

impl Postgres {
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        if self.as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn start() -> Result<Postgres, String> {
        let bin = pg_bin().ok_or("no initdb and pg_ctl (apt-get install postgresql)")?;
        let dir = tempfile::Builder::new()
            .prefix("lp-pg")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        let as_nobody = unsafe_free_is_root();
        if as_nobody {
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534))
                .map_err(|e| format!("chown the cluster's directory to nobody: {e}"))?;
        }
        let data = dir.path().join("data");
        let mut pg = Postgres {
            _dir: dir,
            bin,
            data,
            as_nobody,
            url: String::new(),
        };
        let sock = pg._dir.path().to_path_buf();
        let (code, out, err) = run_command(
            pg.command("initdb").arg("-D").arg(&pg.data).args([
                "-U",
                "linkperf",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        );
        if code != 0 {
            return Err(format!("initdb failed: {out}{err}"));
        }
        let log = sock.join("log");
        let (code, out, err) = run_command(
            pg.command("pg_ctl")
                .arg("-D")
                .arg(&pg.data)
                .arg("-l")
                .arg(&log)
                .arg("-o")
                .arg(format!("-k {} -c listen_addresses='' -F", sock.display()))
                // -w: pg_ctl returns when the server accepts connections.
                .args(["-w", "-t", "60", "start"]),
            "pg_ctl start",
        );
        if code != 0 {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("pg_ctl start failed: {out}{err}{log}"));
        }
        let host: String = sock
            .to_str()
            .unwrap()
            .replace('%', "%25")
            .replace('/', "%2F");
        pg.url = format!("postgres://linkperf@{host}/postgres");
        Ok(pg)
    }
}

impl Postgres {
    /// Stops the server (its clients' connections end), and returns once it
    /// has stopped.
    fn stop(&self) {
        let (code, out, err) = run_command(
            self.command("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "-w", "-t", "60", "stop"]),
            "pg_ctl stop",
        );
        assert_eq!(code, 0, "pg_ctl stop: {out}{err}");
    }

    /// Starts the stopped server again, on the same socket; returns once it
    /// accepts connections.
    fn start_again(&self) {
        let dir = self._dir.path();
        let (code, out, err) = run_command(
            self.command("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(dir.join("log"))
                .arg("-o")
                .arg(format!("-k {} -c listen_addresses='' -F", dir.display()))
                .args(["-w", "-t", "60", "start"]),
            "pg_ctl start",
        );
        assert_eq!(code, 0, "pg_ctl start: {out}{err}");
    }
}

/// A throwaway PostgreSQL server, or None (the test skips, saying why)
/// where none can start and the test command does not require one.
fn postgres_or_skip(test: &str) -> Option<Postgres> {
    match Postgres::start() {
        Ok(pg) => Some(pg),
        Err(why) => {
            if std::env::var("LINKPERF_HISTORY_PG_REQUIRED").as_deref() == Ok("1") {
                panic!("{test}: PostgreSQL is required here and could not start: {why}");
            }
            eprintln!("{test}: skipped: PostgreSQL could not start: {why}");
            None
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn unsafe_free_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn sqlite_and_postgresql_give_the_same_answers() {
    let Some(pg) = postgres_or_skip("sqlite_and_postgresql_give_the_same_answers") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let t = template(dir.path());
    let files = series_files(dir.path(), &t, "s", 0, 60, 30);
    let candidate = dir.path().join("candidate.json");
    std::fs::write(&candidate, synthetic(&t, 100, 0.7).to_string()).unwrap();
    let sqlite = dir.path().join("h.db");
    let sqlite = sqlite.to_str().unwrap();
    let mut answers = Vec::new();
    for db in [sqlite, pg.url.as_str()] {
        let mut args = vec!["history", "import"];
        args.extend(files.iter().map(String::as_str));
        args.extend(["--db", db]);
        let out = ok(&args);
        assert_eq!(imported(&out), (60, 60), "{db}: {out}");
        let again = ok(&args);
        assert_eq!(imported(&again), (0, 60), "{db}: {again}");
        let show = ok(&["history", "show", "--db", db, "--metric", "all"]);
        let detect = ok(&["history", "detect", "--db", db, "--json"]);
        let export = ok(&["history", "export", "--db", db]);
        let (code, gate, err) = run(&[
            "history",
            "gate",
            "--candidate",
            candidate.to_str().unwrap(),
            "--db",
            db,
        ]);
        assert_eq!(code, 1, "{db}: a 30 % drop is a regression: {gate}{err}");
        answers.push((show, detect, export, gate));
    }
    let (s, p) = (&answers[0], &answers[1]);
    assert_eq!(s.0, p.0, "show");
    assert_eq!(s.1, p.1, "detect");
    assert_eq!(s.2, p.2, "export");
    assert_eq!(s.3, p.3, "gate");
    // The step is found where it is, in every headline series.
    let changes: Vec<Value> =
        s.1.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(changes.len(), 4, "{}", s.1);
    for c in &changes {
        assert_eq!(c["index"], 30, "{c}");
    }
    assert!(s.3.contains("REGRESSION"), "{}", s.3);
}

/// One HTTP request, its whole answer.
fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A request the responder refuses part-way may be cut off: what came back counts.
    let _ = s.write_all(request.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn serve_metrics_are_openmetrics_that_prometheus_reads() {
    let dir = tempfile::tempdir().unwrap();
    let t = template(dir.path());
    let files = series_files(dir.path(), &t, "m", 0, 5, usize::MAX);
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let mut args = vec!["history", "import"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--db", db]);
    ok(&args);
    let port = util::free_port().to_string();
    let serve = util::spawn(&[
        "serve",
        "--port",
        &port,
        "--metrics",
        "127.0.0.1:0",
        "--history",
        db,
    ]);
    serve.wait_for("the metrics address", Duration::from_secs(30), |_, err| {
        err.contains("/metrics")
    });
    let err = serve.stderr();
    let addr = err
        .split("http://")
        .nth(1)
        .and_then(|r| r.split("/metrics").next())
        .unwrap()
        .to_string();
    let answer = http(
        &addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(
        body.contains("linkperf_throughput_bytes_per_s{label=\"linkperf\",test=\"rr1c-1x1--1\""),
        "{body}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    // The same as history export.
    assert_eq!(body, ok(&["history", "export", "--db", db]));
    // Prometheus's own client parses it as OpenMetrics.
    let parsed = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys; from prometheus_client.openmetrics.parser import text_string_to_metric_families as p; \
             fams = list(p(sys.stdin.read())); print(sum(len(f.samples) for f in fams))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(body.as_bytes())?;
            c.wait_with_output()
        })
        .expect("python3 (scripts/setup.sh installs it)");
    assert!(
        parsed.status.success(),
        "the OpenMetrics parser refused it: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let samples: usize = String::from_utf8_lossy(&parsed.stdout)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        samples,
        body.lines().filter(|l| !l.starts_with('#')).count()
    );
    // Bad requests get answers, not a dead responder.
    assert!(http(&addr, "GARBAGE\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(http(&addr, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(&addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    // Refused at 8 KiB (the answer may be lost to the reset of the unread rest).
    let answer = http(&addr, &big);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );
    assert!(http(&addr, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    let _ = BIN;
}

#[test]
fn a_history_gone_mid_run_leaves_the_results_file_and_says_how_to_import_it() {
    let test = "a_history_gone_mid_run_leaves_the_results_file_and_says_how_to_import_it";
    let Some(pg) = postgres_or_skip(test) else {
        return;
    };
    let _g = util::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let f = file.to_str().unwrap();
    // The history is opened (and checked) as the command starts.
    let child = util::spawn(&[
        "run",
        "-w",
        "rr1c-1x1",
        "-u",
        "1",
        "-d",
        "3s",
        "--warmup",
        "200ms",
        "--interval",
        "1s",
        "--json",
        f,
        "--history",
        &pg.url,
    ]);
    child.wait_for(
        "the first interval line",
        Duration::from_secs(60),
        |out, err| out.contains("-1.0 s") || err.contains("-1.0 s"),
    );
    // Frozen while its history goes away: the run cannot have been recorded yet.
    child.signal("-STOP");
    pg.stop();
    child.signal("-CONT");
    let (status, out, err) = child.finish(Duration::from_secs(120));
    // The run went on and was saved; the history's failure changes nothing of that.
    assert_eq!(status.code(), Some(0), "{out}{err}");
    let doc = util::read_doc(&file);
    assert_eq!(doc["tests"][0]["runs"].as_array().unwrap().len(), 1);
    assert!(
        err.contains(&format!("could not record into the history {}", pg.url)),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let later = err
        .lines()
        .find_map(|l| l.split_once("import them later with: ").map(|(_, c)| c))
        .unwrap_or_else(|| panic!("no command to import later: {err}"));
    assert_eq!(
        later,
        format!("linkperf history import {f} --db {}", pg.url),
        "{err}"
    );
    // Back up, the command it printed imports the run.
    pg.start_again();
    let args: Vec<&str> = later.split_whitespace().skip(1).collect();
    let out = ok(&args);
    assert_eq!(imported(&out), (1, 1), "{out}");
}

#[test]
fn a_mesh_with_history_records_every_pair_as_mesh_json_is_saved() {
    let _g = util::shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "the history mesh's key, 32 bytes");
    let (_agents, list) = three_agents(&key);
    let suite = one_test_suite(dir.path(), "rr1c-1x1", "1s");
    let out = dir.path().join("out");
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let (code, stdout, err) = run(&[
        "mesh",
        "--agents",
        &list,
        "--auth-key",
        key.to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--history",
        db,
    ]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert!(!err.contains("could not record"), "{err}");
    // Every run of mesh.json is in the history already: importing it adds nothing.
    let mesh = out.join("mesh.json");
    let runs: usize = util::read_doc(&mesh)["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["runs"].as_array().unwrap().len())
        .sum();
    assert_eq!(runs, 6, "one run per pair");
    let imported_again = ok(&["history", "import", mesh.to_str().unwrap(), "--db", db]);
    assert_eq!(imported(&imported_again), (0, 6), "{imported_again}");
    // A series per pair, named by the agents.
    let shown = ok(&[
        "history",
        "show",
        "--db",
        db,
        "--include-suspect",
        "--metric",
        "throughput.bytes_per_s",
    ]);
    let pairs = [
        "n1-host->n1-pod",
        "n1-host->n2",
        "n1-pod->n1-host",
        "n1-pod->n2",
        "n2->n1-host",
        "n2->n1-pod",
    ];
    for pair in pairs {
        let line = shown
            .lines()
            .find(|l| l.contains(&format!("rr1c-1x1--1@{pair} ")))
            .unwrap_or_else(|| panic!("no series of {pair}: {shown}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        let n: u64 = cols[4].parse::<u64>().unwrap() + cols[5].parse::<u64>().unwrap();
        assert_eq!(n, 1, "{line}");
    }
    assert_eq!(shown.lines().count(), 1 + pairs.len(), "{shown}");
    let one = ok(&[
        "history",
        "show",
        "--db",
        db,
        "--include-suspect",
        "--pair",
        "n2->n1-pod",
    ]);
    assert!(
        one.lines().skip(1).all(|l| l.contains("@n2->n1-pod ")) && one.lines().count() > 1,
        "{one}"
    );
}

#[test]
fn history_show_out_charts_every_series_with_its_change_point() {
    let dir = tempfile::tempdir().unwrap();
    let t = template(dir.path());
    // 60 runs, throughput 20 % down from the 31st on.
    let files = series_files(dir.path(), &t, "c", 0, 60, 30);
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let mut args = vec!["history", "import"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--db", db]);
    ok(&args);
    let charts = dir.path().join("charts");
    let (code, out, err) = run(&[
        "history",
        "show",
        "--db",
        db,
        "--out",
        charts.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("4 series charted"), "{err}");
    let html = std::fs::read_to_string(charts.join("index.html")).unwrap();
    // Each headline series: its title, its chart inline, its change point in words.
    for metric in ["Throughput", "Transactions", "p99"] {
        assert!(
            html.to_lowercase().contains(&metric.to_lowercase()),
            "{metric} in {html}"
        );
    }
    assert_eq!(html.matches("<h2>").count(), 4, "{html}");
    assert_eq!(html.matches("<svg").count(), 4, "{html}");
    let changes: Vec<&str> = html
        .lines()
        .filter(|l| l.starts_with("<li class=\"change\">"))
        .collect();
    assert_eq!(changes.len(), 4, "one change point per series: {html}");
    for c in &changes {
        assert!(c.contains("at 2024-01-01T00:00:30.000Z (point 31)"), "{c}");
        assert!(c.contains("30 points before, 30 after"), "{c}");
    }
    // Throughput down 20 %, time up 25 %.
    assert!(
        changes.iter().any(|c| c.contains("(-20.0 %)")),
        "{changes:?}"
    );
    assert!(
        changes.iter().any(|c| c.contains("(+25.0 %)")),
        "{changes:?}"
    );
    // A PNG and an SVG per series; the SVG holds every run and the step of the means.
    let mut pngs = 0;
    let mut svgs = 0;
    for e in std::fs::read_dir(&charts).unwrap() {
        let p = e.unwrap().path();
        match p.extension().and_then(|x| x.to_str()) {
            Some("png") => {
                pngs += 1;
                let decoder =
                    png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&p).unwrap()));
                let info = decoder.read_info().unwrap();
                assert_eq!(
                    (info.info().width, info.info().height),
                    (1100, 420),
                    "{}",
                    p.display()
                );
            }
            Some("svg") => {
                svgs += 1;
                let text = std::fs::read_to_string(&p).unwrap();
                let svg = roxmltree::Document::parse(&text).unwrap();
                let lines: Vec<usize> = svg
                    .descendants()
                    .filter(|n| n.has_tag_name("polyline"))
                    .map(|n| {
                        n.attribute("points")
                            .unwrap_or("")
                            .split_whitespace()
                            .count()
                    })
                    .collect();
                assert!(
                    lines.contains(&60),
                    "every run: {lines:?} in {}",
                    p.display()
                );
                // Two stretches, each mean drawn from its first run to its last.
                assert!(lines.contains(&4), "the step: {lines:?} in {}", p.display());
            }
            _ => {}
        }
    }
    assert_eq!((pngs, svgs), (4, 4));
}
