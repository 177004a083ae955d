//! Helpers for the iperf3 tests: Debian's `iperf3` binary as a client of
//! `linkperf serve --iperf3`, or as the server `linkperf run --iperf3-server`
//! drives; every child bounded by a deadline.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::process::Proc;
use super::{free_port, poll_until, ServeSpec, Server};

/// Longest an iperf3 child may take.
const DEADLINE: Duration = Duration::from_secs(60);
/// Longest the tests wait for something a process says it has done (a log
/// line, a line of output): far more than it takes on a busy host.
const SAY_DEADLINE: Duration = Duration::from_secs(30);

/// The kernel's socket buffer sizes, from /proc/sys: what bounds the bytes a
/// connection can hold between the sender's count (a write) and the
/// receiver's (a read).
#[derive(Debug, Clone, Copy)]
pub struct Buffers {
    /// net.ipv4.tcp_wmem's maximum: how far the kernel grows a TCP send
    /// buffer by itself.
    pub tcp_wmem_max: u64,
    /// net.ipv4.tcp_rmem's maximum: the same for a TCP receive buffer.
    pub tcp_rmem_max: u64,
    /// net.core.wmem_max: the largest SO_SNDBUF a process may ask for.
    pub wmem_max: u64,
    /// net.core.rmem_max: the largest SO_RCVBUF a process may ask for.
    pub rmem_max: u64,
}

fn sysctl(path: &str, field: usize) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split_whitespace()
        .nth(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no number {field} in {text:?}"))
}

impl Buffers {
    /// This host's.
    pub fn read() -> Buffers {
        Buffers {
            tcp_wmem_max: sysctl("/proc/sys/net/ipv4/tcp_wmem", 2),
            tcp_rmem_max: sysctl("/proc/sys/net/ipv4/tcp_rmem", 2),
            wmem_max: sysctl("/proc/sys/net/core/wmem_max", 0),
            rmem_max: sysctl("/proc/sys/net/core/rmem_max", 0),
        }
    }

    /// The largest send and receive buffers of a TCP socket: with `-w W`
    /// (SO_SNDBUF and SO_RCVBUF, on both ends) what the kernel makes of W
    /// (twice it, W capped at the maximum a process may ask); without, the
    /// most its autotuning grows them to.
    pub fn tcp(&self, window: Option<u64>) -> (u64, u64) {
        match window {
            Some(w) => (2 * w.min(self.wmem_max), 2 * w.min(self.rmem_max)),
            None => (self.tcp_wmem_max, self.tcp_rmem_max),
        }
    }

    /// The most one TCP stream can hold at any moment between its sender's
    /// count and its receiver's: the sender's send buffer full (plus the one
    /// write of `block` bytes the kernel takes while it is not yet full) and
    /// the receiver's receive buffer full. When the receiver stops counting
    /// first, the totals may differ by this much and no more.
    pub fn tcp_in_flight_max(&self, window: Option<u64>, block: u64) -> u64 {
        let (snd, rcv) = self.tcp(window);
        snd + block + rcv
    }

    /// The receive buffer of a UDP socket given SO_RCVBUF `w`.
    pub fn udp_receive(&self, w: u64) -> u64 {
        2 * w.min(self.rmem_max)
    }
}

/// Waits until `what` holds for `server`'s log, at most [`SAY_DEADLINE`];
/// the log then.
pub fn log_when(server: &Server, what: &str, until: impl Fn(&str) -> bool) -> String {
    server.wait_for_log(what, SAY_DEADLINE, until)
}

/// The closing numbers of `n` iperf3 tests (see [`done_lines`]), once `serve`
/// has logged them all: it does once its client has said IPERF_DONE, after
/// the client may have exited.
pub fn done(server: &Server, n: usize) -> Vec<(u64, u64)> {
    let log = log_when(server, &format!("{n} finished iperf3 test(s)"), |l| {
        done_lines(l).len() >= n
    });
    done_lines(&log)
}

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

/// `linkperf serve --iperf3 --iperf3-port P` plus `extra`, and P. A port
/// taken between choosing it and binding it (other tests' connections take
/// ports too) makes serve exit saying so: then another.
pub fn serve(extra: &[&str]) -> (Server, u16) {
    let mut why = String::new();
    for _ in 0..5 {
        let port = free_port();
        let p = port.to_string();
        let mut args = vec!["--iperf3", "--iperf3-port", p.as_str()];
        args.extend_from_slice(extra);
        let spec = ServeSpec {
            port: Some(0),
            extra: &args,
            ..ServeSpec::default()
        };
        match Server::try_start_spec(&spec) {
            Ok(s) => {
                assert!(
                    s.log()
                        .contains(&format!("serving iperf3 clients on 127.0.0.1:{port}")),
                    "serve did not announce its iperf3 port: {}",
                    s.log()
                );
                return (s, port);
            }
            Err(log) if log.contains("Address already in use") => why = log,
            Err(log) => panic!("linkperf serve {args:?} ended before it listened: {log}"),
        }
    }
    panic!("linkperf serve --iperf3 found no free port: {why}");
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

fn wait(child: Proc) -> Outcome {
    let (status, stdout, stderr) = child.finish(DEADLINE);
    Outcome {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// `iperf3 -c 127.0.0.1 -p PORT ARGS` started, not waited for.
pub fn spawn_client(port: u16, args: &[&str]) -> Proc {
    Proc::spawn(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        format!("iperf3 -c {args:?}"),
    )
}

/// A running `iperf3 -c` whose standard output is read as it comes, so that
/// a test can wait for what it says (a stream connected, a second measured).
pub struct Watched(Proc);

impl Watched {
    /// Waits until its output has a line containing `text` (at most
    /// [`SAY_DEADLINE`]).
    pub fn wait_for(&self, text: &str) {
        self.0
            .wait_for(&format!("{text:?}"), SAY_DEADLINE, |out, _| {
                out.contains(text)
            });
    }

    /// Kills it and waits for it to go.
    pub fn kill(mut self) {
        self.0.kill();
    }

    /// Waits for it to end.
    pub fn finish(self) -> Outcome {
        wait(self.0)
    }
}

/// `iperf3 -c 127.0.0.1 -p PORT --forceflush ARGS`, its output watched
/// (iperf3 writes its output when its buffer fills, and with `--forceflush`
/// after every interval: what it says comes, at the latest, with its first
/// second measured).
pub fn spawn_watched(port: u16, args: &[&str]) -> Watched {
    let mut all = vec!["--forceflush"];
    all.extend_from_slice(args);
    Watched(spawn_client(port, &all))
}

/// `iperf3 -c 127.0.0.1 -p PORT ARGS` to the end.
pub fn client(port: u16, args: &[&str]) -> Outcome {
    wait(spawn_client(port, args))
}

/// Waits for a spawned client.
pub fn finish(child: Proc) -> Outcome {
    wait(child)
}

/// A stock `iperf3 -s -1 -J` on a free port: serves one test, prints its JSON.
pub struct StockServer {
    child: Proc,
    /// Its port.
    pub port: u16,
}

/// True once process `pid` has a socket listening on TCP port `port` (not
/// another process that took the port first).
fn listening(pid: u32, port: u16) -> bool {
    let hex = format!(":{port:04X}");
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    (cols.len() > 9 && cols[1].ends_with(&hex) && cols[3] == "0A")
                        .then(|| format!("socket:[{}]", cols[9]))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
            })
        })
        .unwrap_or(false)
}

/// The queues of a TCP socket on 127.0.0.1 from /proc/net/tcp, by its two
/// ends: bytes not yet acknowledged by the peer, and bytes received and not
/// yet read by its process.
fn tcp_queues(local: SocketAddr, remote: SocketAddr) -> Option<(u64, u64)> {
    let hex = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(v4.ip().octets()),
            v4.port()
        ),
        SocketAddr::V6(_) => String::new(),
    };
    let (l, r) = (hex(local), hex(remote));
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 5 || cols[1] != l || cols[2] != r {
            return None;
        }
        let (tx, rx) = cols[4].split_once(':')?;
        Some((
            u64::from_str_radix(tx, 16).ok()?,
            u64::from_str_radix(rx, 16).ok()?,
        ))
    })
}

/// True once the server on 127.0.0.1:`port` has read all that the
/// connection from `local` sent: its kernel acknowledged every byte, and its
/// socket's receive queue is empty.
pub fn read_by_server(port: u16, local: SocketAddr) -> bool {
    let server = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    matches!(
        (tcp_queues(local, server), tcp_queues(server, local)),
        (Some((0, _)), Some((_, 0)))
    )
}

impl StockServer {
    /// Starts it and waits until it listens (without connecting: a connection
    /// would be its one test). A port taken between choosing it and binding
    /// it (other programs run on the host too) makes it exit: then another.
    ///
    /// With `-J` iperf3 prints nothing until its test is over, and nothing
    /// says it listens but the kernel's table of sockets: this polls it.
    pub fn start() -> StockServer {
        let mut why = String::new();
        for _ in 0..5 {
            let port = free_port();
            let child = Proc::spawn(
                Command::new("iperf3").args(["-s", "-1", "-J", "-p", &port.to_string()]),
                format!("iperf3 -s -p {port}"),
            );
            let mut child = Some(child);
            let listens = poll_until(SAY_DEADLINE, || {
                let c = child.as_mut().expect("running");
                if listening(c.pid(), port) {
                    Ok(true)
                } else if !c.is_running() {
                    Ok(false)
                } else {
                    Err(format!("iperf3 -s did not listen on {port}"))
                }
            });
            let child = child.take().expect("running");
            if listens {
                return StockServer { child, port };
            }
            let o = wait(child);
            why = format!(
                "iperf3 -s -p {port} exited ({}): {}{}",
                o.code, o.stdout, o.stderr
            );
        }
        panic!("iperf3 -s did not start: {why}");
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its JSON once its one test is over.
    pub fn finish(self) -> Value {
        wait(self.child).json()
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
