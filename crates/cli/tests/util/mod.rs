//! Helpers for the end-to-end tests, shared by both test binaries: child
//! processes watched as they run (process.rs), `linkperf serve` children
//! (serve.rs), `linkperf run` children with their live stream and results
//! (client.rs), the control protocol by hand (control.rs), reading results
//! documents, and the locks that keep loads apart.

use std::path::Path;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use serde_json::Value;

pub mod client;
pub mod control;
pub mod iperf3;
pub mod lab;
pub mod mesh;
pub mod process;
pub mod serve;

pub use client::Client;
pub use process::{poll_until, proc_status, signal, Proc};
pub use serve::{free_port, ServeSpec, Server};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_linkperf");

/// Longest a `linkperf run` child may take before the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// Load tests take it shared; a test that needs the machine to itself (1,000
/// users) takes it exclusively.
static MACHINE: RwLock<()> = RwLock::new(());

/// One test building the lab's namespaces at a time: they share the host's
/// namespaces and CPUs.
static LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while a test builds and uses lab namespaces.
pub fn one_lab_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    LAB.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run alongside other load tests.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

/// Run alone.
pub fn exclusive() -> Alone {
    let held = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    mark_alone(true);
    Alone(held)
}

/// The machine held by one test ([`exclusive`]). While it is held, the run
/// log the test command keeps (`LINKPERF_RUN_LOG`, scripts/test.sh) is
/// marked: the runs judged meanwhile had no other load test beside them, so
/// that a `host_noise` verdict among them on an idle host is a false alarm.
pub struct Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>);

impl Drop for Alone {
    fn drop(&mut self) {
        // Before the lock goes (the field drops after this).
        mark_alone(false);
    }
}

/// Appends `{"alone":true}` or `{"alone":false}` to the run log, if one is kept.
fn mark_alone(alone: bool) {
    use std::io::Write as _;
    if let Some(path) = std::env::var_os("LINKPERF_RUN_LOG") {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(format!("{{\"alone\":{alone}}}\n").as_bytes()));
    }
}

/// `linkperf ARGS` as a child with its output watched, not waited for.
pub fn spawn(args: &[&str]) -> Proc {
    Proc::spawn(Command::new(BIN).args(args), format!("linkperf {args:?}"))
}

/// `linkperf ARGS` to the end (at most [`RUN_DEADLINE`]): exit code, stdout, stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    run_command(Command::new(BIN).args(args), &format!("linkperf {args:?}"))
}

/// `cmd` (`what`, for the messages) to the end, at most [`RUN_DEADLINE`]:
/// exit code (-1 if killed by a signal), stdout, stderr.
pub fn run_command(cmd: &mut Command, what: &str) -> (i32, String, String) {
    let (status, out, err) = Proc::spawn(cmd, what).finish(RUN_DEADLINE);
    (status.code().unwrap_or(-1), out, err)
}

/// A short load's times: a half-second window after a shorter warm-up.
pub const TIMING: [&str; 4] = ["--duration", "500ms", "--warmup", "200ms"];

/// `linkperf run --quiet --server ADDR EXTRA --json FILE` against `server`,
/// with the times of [`TIMING`] that `extra` does not set: exit code,
/// stdout, stderr and the results document.
pub fn run_against(server: &Server, extra: &[&str]) -> (i32, String, String, Value) {
    run_against_under(&[], server, extra)
}

/// [`run_against`] run by the program and arguments of `under` (e.g. `env
/// -u VAR`), when not empty.
pub fn run_against_under(
    under: &[&str],
    server: &Server,
    extra: &[&str],
) -> (i32, String, String, Value) {
    let addr = server.addr();
    let mut args = vec!["run", "--quiet", "--server", &addr];
    for option in TIMING.chunks(2) {
        if !extra.contains(&option[0]) {
            args.extend(option);
        }
    }
    args.extend(extra);
    run_json_under(under, &args)
}

/// `linkperf ARGS --json FILE`: exit code, stdout, stderr and the results
/// document (`Value::Null` if none was written).
pub fn run_json(args: &[&str]) -> (i32, String, String, Value) {
    run_json_under(&[], args)
}

/// [`run_json`] run by the program and arguments of `under` (e.g. `ip netns
/// exec NS`), when not empty.
pub fn run_json_under(under: &[&str], args: &[&str]) -> (i32, String, String, Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("results.json");
    let mut all = under.iter().chain(std::iter::once(&BIN));
    let mut cmd = Command::new(all.next().expect("a program"));
    cmd.args(all).args(args).arg("--json").arg(&file);
    let (code, out, err) = run_command(&mut cmd, &format!("linkperf {args:?}"));
    (code, out, err, read_doc_or_null(&file))
}

/// The JSON document at `path` (a results document, a mesh's record); the
/// test fails if there is none or it is not JSON.
pub fn read_doc(path: &Path) -> Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("no document at {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// [`read_doc`], or `Value::Null` where nothing was written.
pub fn read_doc_or_null(path: &Path) -> Value {
    if path.exists() {
        read_doc(path)
    } else {
        Value::Null
    }
}

/// The first run of the first test of a results document.
pub fn first_run(doc: &Value) -> &Value {
    at(doc, "/tests/0/runs/0")
}

/// The value at JSON pointer `ptr` (e.g. `/tests/0/name`); panics if absent.
pub fn at<'a>(v: &'a Value, ptr: &str) -> &'a Value {
    v.pointer(ptr)
        .unwrap_or_else(|| panic!("no {ptr} in the results document"))
}

/// The number at `ptr`.
pub fn num(v: &Value, ptr: &str) -> f64 {
    at(v, ptr)
        .as_f64()
        .unwrap_or_else(|| panic!("{ptr} is not a number: {}", at(v, ptr)))
}

/// The unsigned integer at `ptr`.
pub fn int(v: &Value, ptr: &str) -> u64 {
    at(v, ptr)
        .as_u64()
        .unwrap_or_else(|| panic!("{ptr} is not an unsigned integer: {}", at(v, ptr)))
}

/// The string at `ptr`.
pub fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    at(v, ptr)
        .as_str()
        .unwrap_or_else(|| panic!("{ptr} is not a string: {}", at(v, ptr)))
}

/// Open file descriptors and threads of process `pid`.
pub fn fds_and_threads(pid: u32) -> (usize, usize) {
    let count = |d: &str| {
        std::fs::read_dir(format!("/proc/{pid}/{d}"))
            .map(|r| r.count())
            .unwrap_or_else(|e| panic!("/proc/{pid}/{d}: {e}"))
    };
    (count("fd"), count("task"))
}

/// CPU time (user + system, in clock ticks) process `pid` has used so far.
pub fn cpu_ticks(pid: u32) -> u64 {
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

/// True where a process may get a network namespace of its own (`unshare
/// --net`, which needs root). Elsewhere the caller skips, saying so; with
/// LINKPERF_LAB_REQUIRED=1 (set by scripts/test.sh as root) that is a failure.
pub fn can_unshare_net() -> bool {
    let ok = std::process::Command::new("unshare")
        .args(["--net", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let why = "cannot create a network namespace (unshare --net needs root)";
        assert!(
            std::env::var("LINKPERF_LAB_REQUIRED").as_deref() != Ok("1"),
            "LINKPERF_LAB_REQUIRED=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
    }
    ok
}

/// Checks a busy host can fail though nothing is wrong with what a test is
/// about: other work took the CPUs (`host_noise`), a worker or the CPU
/// sampler was descheduled (`cpu_window`, `stalled_interval`, `littles_law`).
pub const BUSY_HOST_CHECKS: [&str; 4] = [
    "host_noise",
    "cpu_window",
    "stalled_interval",
    "littles_law",
];

/// The names of run `r`'s checks that failed.
pub fn failed_checks(r: &Value) -> Vec<&str> {
    r["checks"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter(|c| c["status"] == "fail")
                .filter_map(|c| c["name"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that run `r` measured its window whole: `ok`, or `suspect` for
/// nothing but what a busy host can cause ([`BUSY_HOST_CHECKS`]). Tests that
/// are not about the checks assert what they are about and accept that.
pub fn assert_measured(r: &Value, what: &str) {
    let status = r["status"].as_str().unwrap_or_default();
    if status == "ok" {
        return;
    }
    assert_eq!(status, "suspect", "{what}: the run did not complete: {r}");
    let failed = failed_checks(r);
    assert!(
        !failed.is_empty() && failed.iter().all(|c| BUSY_HOST_CHECKS.contains(c)),
        "{what}: suspect for {failed:?}, which a busy host does not explain: {}",
        r["status_reasons"]
    );
}

/// [`assert_measured`], where a run the host made noisy (its `host_noise`
/// check failed: other work took the CPUs) may also be suspect for `also`,
/// what a starved host does to the test's own traffic (one flow of many over
/// a narrow link sitting out a short window in TCP's retransmission
/// back-off). Returns whether the host made the run noisy.
pub fn assert_measured_on_a_noisy_host(r: &Value, what: &str, also: &[&str]) -> bool {
    let failed = failed_checks(r);
    if !failed.contains(&"host_noise") {
        assert_measured(r, what);
        return false;
    }
    assert_eq!(r["status"], "suspect", "{what}: {r}");
    assert!(
        failed
            .iter()
            .all(|c| BUSY_HOST_CHECKS.contains(c) || also.contains(c)),
        "{what}: suspect for {failed:?}, which a noisy host does not explain: {}",
        r["status_reasons"]
    );
    true
}
