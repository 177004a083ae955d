//! Helpers for the end-to-end tests: a `linkperf serve` child process, running
//! `linkperf run` with a deadline, reading its results document.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_linkperf");

/// Longest a `linkperf run` child may take before the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(90);
/// Longest `linkperf serve` may take to accept connections.
const READY_DEADLINE: Duration = Duration::from_secs(5);

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
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// A `linkperf serve` child on 127.0.0.1, killed when dropped.
pub struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Server {
    /// `linkperf serve --port P` plus `extra`, once its control port accepts.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_under(&[], extra)
    }

    /// [`Server::start`] run by the program and arguments of `under` (e.g.
    /// `taskset -c 0`), when not empty.
    pub fn start_under(under: &[&str], extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("serve.log");
        let mut why = String::new();
        // The free port may be taken between probing and binding: try again.
        for _ in 0..5 {
            let port = free_port();
            let mut command = match under.split_first() {
                Some((program, args)) => {
                    let mut c = Command::new(program);
                    c.args(args).arg(BIN);
                    c
                }
                None => Command::new(BIN),
            };
            let mut child = command
                .args(["serve", "--port", &port.to_string()])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("serve log"))
                .spawn()
                .expect("spawn linkperf serve");
            match wait_ready(&mut child, port, &log) {
                Ok(()) => return Server { child, port, dir },
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    why = format!("{e}; serve said: {}", read(&log));
                }
            }
        }
        panic!("linkperf serve did not start: {why}");
    }

    /// Its control port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, for `--server`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process lives.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What it printed to stderr so far.
    pub fn log(&self) -> String {
        read(&self.dir.path().join("serve.log"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn free_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Waits until the control port accepts and the log proves it is this child's.
fn wait_ready(child: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + READY_DEADLINE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("serve exited with {status}"));
        }
        if read(log).contains("listening on")
            && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "port {port} did not accept within {READY_DEADLINE:?}"
    ))
}

/// `linkperf ARGS` as a child with piped output, not waited for.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linkperf")
}

/// `linkperf ARGS` to the end (at most [`RUN_DEADLINE`]): exit code, stdout, stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let (status, out, err) =
        finish_within(spawn(args), RUN_DEADLINE, &format!("linkperf {args:?}"));
    // Killed by a signal: no code.
    (status.code().unwrap_or(-1), out, err)
}

/// Waits for `child` (`what`, for the message) to end, its stdout and
/// stderr read meanwhile: its status, stdout and stderr. Killed, and the
/// test failed with its stderr, when it runs longer than `within`.
pub fn finish_within(
    mut child: Child,
    within: Duration,
    what: &str,
) -> (std::process::ExitStatus, String, String) {
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for a child process") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} still running after {within:?}; stderr: {}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (
        status,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

/// `linkperf ARGS --json FILE`: exit code, stdout, stderr and the results
/// document (`Value::Null` if none was written).
pub fn run_json(args: &[&str]) -> (i32, String, String, Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("results.json");
    let mut all = args.to_vec();
    all.extend(["--json", file.to_str().expect("utf-8 temp path")]);
    let (code, out, err) = run(&all);
    let doc = match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("results of {args:?} are not JSON: {e}")),
        Err(_) => Value::Null,
    };
    (code, out, err, doc)
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

/// Helpers for the iperf3 tests (tests/iperf3.rs).
pub mod iperf3;

/// Helpers for the mesh tests (local/mesh.rs, lab/mesh_lab.rs, local/deploy.rs).
pub mod mesh;

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

/// Waits until the client writing the live stream `stream` (its
/// `--json-stream`) has measured part of its window: an interval event
/// outside the warm-up. Fails after `within`, or if `child` ended first.
pub fn wait_for_window(stream: &Path, child: &mut Child, within: Duration) {
    wait_for_interval(stream, child, within, false);
}

/// Waits until the client writing `stream` has reported a second of its
/// warm-up (`warmup`) or of its window; fails after `within`, or if `child`
/// ended first.
pub fn wait_for_interval(stream: &Path, child: &mut Child, within: Duration, warmup: bool) {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(stream).unwrap_or_default();
        let seen = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| e["event"] == "interval" && e["data"]["warmup"] == warmup);
        if seen {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the client ended first: {text}"
        );
        assert!(
            Instant::now() < deadline,
            "no interval (warm-up: {warmup}) within {within:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process's descriptors and threads once they stop moving (a readiness
/// probe's session ending, say): read until two readings 100 ms apart agree.
pub fn settled_fds_and_threads(pid: u32) -> (usize, usize) {
    let mut last = fds_and_threads(pid);
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        let now = fds_and_threads(pid);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}
