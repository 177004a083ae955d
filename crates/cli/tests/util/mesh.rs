//! Helpers for the mesh tests (local/mesh.rs, lab/mesh_lab.rs, local/deploy.rs): agents (`linkperf serve` with
//! an identity in its environment), optionally inside a network namespace,
//! whose bound address is read from their own log line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::BIN;

/// Longest an agent may take to say it listens.
const READY: Duration = Duration::from_secs(10);

/// A `linkperf serve` child, killed when dropped.
pub struct Agent {
    child: Child,
    addr: String,
    log: Arc<Mutex<String>>,
}

/// How to start an agent.
#[derive(Default)]
pub struct AgentSpec<'a> {
    /// Run inside this network namespace (`ip netns exec NS`).
    pub netns: Option<&'a str>,
    /// `--listen` (default 127.0.0.1).
    pub listen: Option<&'a str>,
    /// `--port` (default 0: any free port).
    pub port: u16,
    /// `--auth-key`.
    pub key: Option<&'a Path>,
    /// LINKPERF_NODE.
    pub node: Option<&'a str>,
    /// LINKPERF_NETWORK.
    pub network: Option<&'a str>,
    /// LINKPERF_ZONE.
    pub zone: Option<&'a str>,
    /// More `serve` arguments.
    pub extra: &'a [&'a str],
    /// The program and arguments that stand for `linkperf` (e.g. a chroot of
    /// another binary), instead of the binary under test.
    pub command: Option<&'a [&'a str]>,
}

impl Agent {
    /// Starts an agent and returns once it has said where it listens.
    pub fn start(spec: &AgentSpec) -> Agent {
        let mut c = match (spec.command, spec.netns) {
            (Some(command), _) => {
                let mut c = Command::new(command[0]);
                c.args(&command[1..]);
                c
            }
            (None, Some(ns)) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, BIN]);
                c
            }
            (None, None) => Command::new(BIN),
        };
        c.args([
            "serve",
            "--listen",
            spec.listen.unwrap_or("127.0.0.1"),
            "--port",
            &spec.port.to_string(),
        ]);
        if let Some(k) = spec.key {
            c.arg("--auth-key").arg(k);
        }
        c.args(spec.extra);
        c.env_remove("LINKPERF_AUTH_KEY_FILE");
        for (var, value) in [
            ("LINKPERF_NODE", spec.node),
            ("LINKPERF_NETWORK", spec.network),
            ("LINKPERF_ZONE", spec.zone),
        ] {
            match value {
                Some(v) => c.env(var, v),
                None => c.env_remove(var),
            };
        }
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn linkperf serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                {
                    let mut l = kept.lock().unwrap_or_else(|e| e.into_inner());
                    l.push_str(&line);
                    l.push('\n');
                }
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        match rx.recv_timeout(READY) {
            Ok(addr) => Agent { child, addr, log },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the agent did not say it listens within {READY:?}: {}",
                    log.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
        }
    }

    /// Its control address, `HOST:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A suite file of one test, `workload` with 1 user, of `duration` after a
/// 200 ms warmup, run once, no suspect run retried.
pub fn one_test_suite(dir: &Path, workload: &str, duration: &str) -> std::path::PathBuf {
    let p = dir.join("one.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"one\"\ndescription = \"one test\"\nrepeat = 1\nretry_suspect = 0\n\
             duration = \"{duration}\"\nwarmup = \"200ms\"\n\n[[test]]\nworkload = \"{workload}\"\nusers = 1\n"
        ),
    )
    .expect("write the suite");
    p
}

/// A key file in `dir` holding `key`.
pub fn key_file(dir: &Path, name: &str, key: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, key).expect("write the key");
    p
}

/// `linkperf ARGS` (inside `netns` when given) with its output lines read as
/// they come: the tests act on what it has printed.
pub struct Controller {
    child: Child,
    lines: mpsc::Receiver<(bool, String)>,
    /// Everything it printed so far: (from stderr, line).
    pub seen: Vec<(bool, String)>,
}

impl Controller {
    /// Spawns `linkperf ARGS`.
    pub fn spawn(netns: Option<&str>, args: &[&str]) -> Controller {
        match netns {
            Some(ns) => Controller::spawn_as(&["ip", "netns", "exec", ns, BIN], args),
            None => Controller::spawn_as(&[BIN], args),
        }
    }

    /// Spawns `COMMAND ARGS`, COMMAND standing for `linkperf`.
    pub fn spawn_as(command: &[&str], args: &[&str]) -> Controller {
        let mut c = Command::new(command[0]);
        c.args(&command[1..]);
        let mut child = c
            .args(args)
            .env_remove("LINKPERF_AUTH_KEY_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn linkperf");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((false, l));
            }
        });
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx2.send((true, l));
            }
        });
        Controller {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until `until` holds for one of stdout's (then true), or the
    /// output ends or `within` passes (then false).
    pub fn wait_for(&mut self, within: Duration, until: impl Fn(&str) -> bool) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((is_err, l)) => {
                    let hit = !is_err && until(&l);
                    self.seen.push((is_err, l));
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Reads to the end and waits for the exit (at most `within`, else it is
    /// killed and the test fails): the exit code, stdout and stderr.
    pub fn finish(mut self, within: Duration) -> (i32, String, String) {
        let deadline = std::time::Instant::now() + within;
        let ended = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break true,
                Err(mpsc::RecvTimeoutError::Timeout) => break false,
            }
        };
        // Its output has ended: it has exited, or is exiting.
        let status = if ended {
            Some(self.child.wait().expect("wait for linkperf"))
        } else {
            None
        };
        let text = |e: bool| {
            self.seen
                .iter()
                .filter(|(is_err, _)| *is_err == e)
                .map(|(_, l)| format!("{l}\n"))
                .collect::<String>()
        };
        let (out, err) = (text(false), text(true));
        match status {
            Some(s) => (s.code().unwrap_or(-1), out, err),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("linkperf did not end within {within:?}; stdout:\n{out}\nstderr:\n{err}");
            }
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With this set to 1, a lab test that cannot run on this host fails instead
/// of skipping.
const REQUIRED: &str = "LINKPERF_LAB_REQUIRED";

/// Whether this process can build namespaces (CAP_NET_ADMIN, CAP_SYS_ADMIN,
/// iproute2's `ip`, `tc` and `bridge`); if not, says so and the test skips, or
/// fails under LINKPERF_LAB_REQUIRED=1.
pub fn lab_ready(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    let mut missing = Vec::new();
    if caps & (1 << 12) == 0 {
        missing.push("CAP_NET_ADMIN (run as root)");
    }
    if caps & (1 << 21) == 0 {
        missing.push("CAP_SYS_ADMIN (run as root)");
    }
    for program in ["ip", "tc", "bridge"] {
        let ok = Command::new(program)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            missing.push(match program {
                "ip" => "iproute2's `ip`",
                "tc" => "iproute2's `tc`",
                _ => "iproute2's `bridge`",
            });
        }
    }
    if missing.is_empty() {
        return true;
    }
    let what = missing.join(", ");
    assert!(
        std::env::var(REQUIRED).as_deref() != Ok("1"),
        "{test}: {REQUIRED}=1, but this host cannot run the lab tests: missing {what}"
    );
    eprintln!("{test}: SKIPPED: missing {what}");
    false
}
