//! Helpers for the iperf3 tests: Debian's `iperf3` binary as a client of
//! `linkperf serve --iperf3`, or as the server `linkperf run --iperf3-server`
//! drives; every child bounded by a deadline.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Server;

/// Longest an iperf3 child may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// Fails the test, with what to do, when Debian's `iperf3` is missing.
pub fn require_iperf3() {
    let ok = Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("iperf 3."))
        .unwrap_or(false);
    assert!(
        ok,
        "the iperf3 tests need Debian's iperf3 binary and it is not installed: run scripts/setup.sh (CI installs it)"
    );
}

/// A port free for both TCP and UDP on 127.0.0.1 (iperf3 uses one for both).
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let t = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
        let port = t.local_addr().expect("local addr").port();
        if UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both TCP and UDP");
}

/// `linkperf serve --iperf3 --iperf3-port P` plus `extra`, and P.
pub fn serve(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--iperf3", "--iperf3-port", p.as_str()];
    args.extend_from_slice(extra);
    let s = Server::start(&args);
    assert!(
        s.log()
            .contains(&format!("serving iperf3 clients on 127.0.0.1:{port}")),
        "serve did not announce its iperf3 port: {}",
        s.log()
    );
    (s, port)
}

/// What an iperf3 child did.
#[derive(Debug)]
pub struct Outcome {
    /// Its exit code (-1 if killed).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Outcome {
    /// Standard output as JSON (`-J`).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "iperf3 printed no JSON ({e}); exit {}, stdout: {}, stderr: {}",
                self.code, self.stdout, self.stderr
            )
        })
    }
}

fn wait(mut child: Child, what: &str) -> Outcome {
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
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for iperf3") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Outcome {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// `iperf3 -c 127.0.0.1 -p PORT ARGS` started, not waited for.
pub fn spawn_client(port: u16, args: &[&str]) -> Child {
    Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iperf3 -c")
}

/// `iperf3 -c 127.0.0.1 -p PORT ARGS` to the end.
pub fn client(port: u16, args: &[&str]) -> Outcome {
    wait(spawn_client(port, args), &format!("iperf3 -c {args:?}"))
}

/// Waits for a spawned client.
pub fn finish(child: Child) -> Outcome {
    wait(child, "iperf3 -c")
}

/// A stock `iperf3 -s -1 -J` on a free port: serves one test, prints its JSON.
pub struct StockServer {
    child: Option<Child>,
    /// Its port.
    pub port: u16,
}

fn listening(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).contains(&hex) && cols[3] == "0A"
            })
    })
}

impl StockServer {
    /// Starts it and waits until it listens (without connecting: a connection
    /// would be its one test).
    pub fn start() -> StockServer {
        let port = free_port();
        let child = Command::new("iperf3")
            .args(["-s", "-1", "-J", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iperf3 -s");
        let t0 = Instant::now();
        while !listening(port) {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "iperf3 -s did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        StockServer {
            child: Some(child),
            port,
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its JSON once its one test is over.
    pub fn finish(mut self) -> Value {
        let out = wait(self.child.take().expect("running"), "iperf3 -s -1");
        out.json()
    }
}

impl Drop for StockServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The numbers of `linkperf serve`'s closing lines for iperf3 tests:
/// (received, sent) bytes over each test's whole life.
pub fn done_lines(log: &str) -> Vec<(u64, u64)> {
    log.lines()
        .filter(|l| l.contains(": iperf3 test ") && l.contains(": done in "))
        .map(|l| {
            let num = |after: &str| -> u64 {
                let i = l
                    .find(after)
                    .unwrap_or_else(|| panic!("no {after:?} in {l}"))
                    + after.len();
                l[i..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no number after {after:?} in {l}"))
            };
            (num("received "), num("sent "))
        })
        .collect()
}
