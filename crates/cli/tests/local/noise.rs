//! `host_noise` judged by its effect (issue 32, point 2): beside a CPU hog
//! on a CPU the test does not use, a pinned test's runs are `ok`; with a hog
//! on the test's own CPU, they are `suspect`. The hog is a real busy loop
//! pinned to one CPU (taskset), beside the test's CPU held to half of one
//! CPU by a cgroup quota (cgroup v2's `cpu.max`, or v1's `cpu.cfs_quota_us`
//! where the cpu controller is on v1), so that the test's unpinned threads
//! and the host's other work still have room on a 2-CPU machine. Needs
//! cgroups it may write (root), two CPUs, `taskset` and `timeout`; skips,
//! saying why, without them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{exclusive, first_run, num, poll_until, run_against_under, shared, Server};

/// Runs of each condition.
const RUNS: usize = 5;

/// Where a quota can be set: the directory to make a cgroup in and how.
enum Quotas {
    V2(PathBuf),
    V1(PathBuf),
}

impl Quotas {
    /// The cgroup hierarchy with the cpu controller, if this process may
    /// write it.
    fn find() -> Result<Quotas, String> {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let root = Path::new(root);
            let controllers = std::fs::read_to_string(root.join("cgroup.controllers"));
            if controllers.is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu")) {
                // Children get the cpu controller (already on: no change).
                std::fs::write(root.join("cgroup.subtree_control"), "+cpu")
                    .map_err(|e| format!("cannot enable cgroup v2's cpu controller: {e}"))?;
                return Ok(Quotas::V2(root.to_path_buf()));
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            return Ok(Quotas::V1(v1.to_path_buf()));
        }
        Err("no cgroup hierarchy with the cpu controller".into())
    }

    /// A new cgroup held to `percent` % of one CPU.
    fn cgroup(&self, name: &str, percent: u32) -> Result<PathBuf, String> {
        let (root, files) = match self {
            Quotas::V2(r) => (r, vec![("cpu.max", format!("{} 100000", percent * 1000))]),
            Quotas::V1(r) => (
                r,
                vec![
                    ("cpu.cfs_period_us", "100000".to_string()),
                    ("cpu.cfs_quota_us", (percent * 1000).to_string()),
                ],
            ),
        };
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        for (file, value) in files {
            std::fs::write(dir.join(file), &value)
                .map_err(|e| format!("write {value} to {file} of {}: {e}", dir.display()))?;
        }
        Ok(dir)
    }
}

/// A cgroup of the test's, removed when dropped (its hogs gone first).
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let c = &self.0;
        // Empty once its loops have gone.
        poll_until(Duration::from_secs(10), || {
            std::fs::remove_dir(c).map_err(|e| format!("rmdir {}: {e}", c.display()))
        });
    }
}

/// A busy loop on one CPU, in `cgroup` if given; ended when dropped, and by
/// `timeout` after 5 minutes whatever happens to the test.
struct Hog {
    child: Child,
}

impl Hog {
    fn start(cpu: usize, cgroup: Option<&Cgroup>) -> Hog {
        let join = cgroup.map_or(String::new(), |c| {
            format!("echo $$ > {}/cgroup.procs && ", c.0.display())
        });
        let script = format!("{join}exec timeout 300 taskset -c {cpu} sh -c 'while :; do :; done'");
        let child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the hog");
        let hog = Hog { child };
        // Running: the loop (timeout's child) has used CPU time.
        let parent = hog.child.id();
        poll_until(Duration::from_secs(10), || {
            let children =
                std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
                    .map_err(|e| format!("the hog is gone: {e}"))?;
            let spinning = children.split_whitespace().any(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit(')')
                        .next()
                        .and_then(|rest| rest.split_whitespace().nth(11))
                        .and_then(|utime| utime.parse::<u64>().ok())
                        .is_some_and(|t| t > 0)
                })
            });
            spinning
                .then_some(())
                .ok_or("the hog is not spinning yet".to_string())
        });
        hog
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        // timeout passes SIGTERM on to the loop.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Why this host cannot run the test, if it cannot.
fn cannot() -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Some(format!("{cpus} CPU: no CPU the test does not use"));
    }
    for program in ["taskset", "timeout"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("no {program}"));
        }
    }
    None
}

/// One pinned run: client and server workers both on CPU 0. A run beside a
/// hog (`logged` false) is left out of the test command's run log
/// (`LINKPERF_RUN_LOG`, scripts/test.sh): its noise is made on purpose, no
/// false alarm of an idle host's.
fn pinned_run(server: &Server, logged: bool) -> Value {
    let under: &[&str] = if logged {
        &[]
    } else {
        &["env", "-u", "LINKPERF_RUN_LOG"]
    };
    let (code, out, err, doc) = run_against_under(
        under,
        server,
        &[
            "--workload",
            "rr1c-1x1",
            "--threads",
            "1",
            "--server-threads",
            "1",
            "--affinity",
            "0",
            "--server-affinity",
            "0",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
        ],
    );
    assert_eq!(
        code,
        0,
        "stdout: {out}\nstderr: {err}\nserver: {}",
        server.log()
    );
    first_run(&doc).clone()
}

fn host_noise(r: &Value) -> &Value {
    r["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "host_noise"))
        .unwrap_or_else(|| panic!("no host_noise check: {r}"))
}

fn ok(r: &Value) -> bool {
    r["status"] == "ok"
}

#[test]
fn host_noise_is_judged_on_the_tests_own_cpus() {
    if let Some(why) = cannot() {
        eprintln!("skipped: {why}");
        return;
    }
    let half = match Quotas::find()
        .and_then(|q| q.cgroup(&format!("linkperf-test-hog-{}", std::process::id()), 50))
    {
        Ok(dir) => Cgroup(dir),
        Err(why) => {
            eprintln!("skipped: cgroups cannot be written here ({why})");
            return;
        }
    };
    let _g = exclusive();
    let server = Server::start(&[]);
    let (mut quiet, mut beside, mut on) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so that the host's own load falls on every condition alike.
    for _ in 0..RUNS {
        quiet.push(pinned_run(&server, true));
        {
            let _hog = Hog::start(1, Some(&half));
            beside.push(pinned_run(&server, false));
        }
        {
            let _hog = Hog::start(0, None);
            on.push(pinned_run(&server, false));
        }
    }
    let count = |runs: &[Value]| runs.iter().filter(|r| ok(r)).count();
    let (q, b) = (count(&quiet), count(&beside));
    let words = |runs: &[Value]| {
        runs.iter()
            .map(|r| format!("{}: {}", r["status"], host_noise(r)["detail"]))
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    eprintln!(
        "ok runs: {q} of {RUNS} on the host as it is, {b} of {RUNS} beside a hog on CPU 1, {} of {RUNS} with one on CPU 0",
        count(&on)
    );
    // Beside the hog: at least 80 % ok. Where the host's own other work
    // already kept it busy (other builds on a shared runner: the quiet runs
    // found the host as a whole more than 10 % busy with others' work), a
    // hog on CPU 1 pushes that work onto CPU 0, and the runs are rightly
    // suspect: the share is then reported, not asserted.
    let busy_host = quiet.iter().any(|r| {
        host_noise(r)["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("as a whole")
    });
    let floor = (RUNS * 4).div_ceil(5);
    if busy_host {
        eprintln!(
            "the host is busy with other work (runs without a hog:\n  {}\n): {b} of {RUNS} ok beside the hog is reported, not held to {floor}",
            words(&quiet)
        );
    } else {
        assert!(
            b >= floor,
            "{b} of {RUNS} runs ok beside a hog on another CPU ({q} of {RUNS} without it):\n  {}",
            words(&beside)
        );
    }
    for r in &beside {
        // The hog's CPU is not the test's: the check looked at CPU 0 only.
        let d = host_noise(r)["detail"].as_str().unwrap_or_default();
        assert!(d.contains("the test's CPU 0"), "{d}");
    }
    // On the test's own CPU: every run suspect, for host_noise, its figure
    // above its bound.
    for r in &on {
        let c = host_noise(r);
        assert_eq!(r["status"], "suspect", "with a hog on CPU 0: {c}");
        assert_eq!(c["status"], "fail", "{c}");
        assert!(num(c, "/value") > num(c, "/bound"), "{c}");
    }
}

/// `LINKPERF_RUN_LOG`: every run a linkperf process judges is appended as one
/// JSON line (its test, run, status and failed checks with their figures),
/// which is how the test command counts its `host_noise` verdicts; a log
/// that cannot be written is a warning, never a failed run.
#[test]
fn every_judged_run_is_appended_to_the_run_log() {
    let _g = shared();
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let set = format!("LINKPERF_RUN_LOG={}", log.display());
    for users in ["1", "2"] {
        let (code, out, err, doc) = run_against_under(
            &["env", &set],
            &server,
            &["--workload", "rr1c-1x1", "--users", users],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!doc.is_null(), "{err}");
    }
    let text = std::fs::read_to_string(&log).expect("the run log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, users) in lines.iter().zip(["1", "2"]) {
        assert_eq!(line["test"], format!("rr1c-1x1--{users}"), "{line}");
        assert_eq!(line["run"], 1, "{line}");
        let checks = line["checks"].as_array().expect("checks");
        assert!(checks.iter().all(|c| c["status"] == "fail"), "{line}");
        match line["status"].as_str() {
            Some("ok") => assert!(checks.is_empty(), "{line}"),
            Some("suspect") => assert!(!checks.is_empty(), "{line}"),
            other => panic!("status {other:?}: {line}"),
        }
    }
    // A log that cannot be written: the run goes on, said once.
    let nowhere = format!(
        "LINKPERF_RUN_LOG={}",
        dir.path().join("no/such/dir").display()
    );
    let (code, _, err, doc) =
        run_against_under(&["env", &nowhere], &server, &["--workload", "rr1c-1x1"]);
    assert_eq!(code, 0, "{err}");
    assert!(!doc.is_null(), "{err}");
    assert_eq!(
        err.matches("cannot append to LINKPERF_RUN_LOG").count(),
        1,
        "{err}"
    );
}
