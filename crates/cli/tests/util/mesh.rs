//! Helpers for the mesh tests (tests/mesh.rs): agents (`linkperf serve` with
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
}

impl Agent {
    /// Starts an agent and returns once it has said where it listens.
    pub fn start(spec: &AgentSpec) -> Agent {
        let mut c = match spec.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, BIN]);
                c
            }
            None => Command::new(BIN),
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
