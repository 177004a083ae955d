//! `linkperf serve` children: started, known ready by the line the daemon
//! prints once its control port listens (which also says the port, so the
//! kernel picks it: no port is probed and raced for), and their log watched.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::process::{Proc, Stopped};
use super::BIN;

/// Longest `linkperf serve` may take to listen: far more than it takes on
/// a busy host.
const READY: Duration = Duration::from_secs(30);

/// The line `linkperf serve` prints once its control port listens, before
/// the address.
const LISTENING: &str = "linkperf serve: listening on ";

/// How to start a `linkperf serve`: by default the binary under test, on
/// 127.0.0.1, on its default port.
#[derive(Default, Clone, Copy)]
pub struct ServeSpec<'a> {
    /// The program and arguments it runs under (`taskset -c 0`, `prlimit
    /// --nofile=N`, `unshare --net`, `ip netns exec NS`).
    pub under: &'a [&'a str],
    /// The program and arguments that stand for `linkperf` (a chroot of
    /// another binary), instead of the binary under test.
    pub command: Option<&'a [&'a str]>,
    /// `--listen` (default 127.0.0.1).
    pub listen: Option<&'a str>,
    /// `--port` (0: the kernel picks one; none: the daemon's default).
    pub port: Option<u16>,
    /// More `serve` arguments.
    pub extra: &'a [&'a str],
    /// Environment variables set (`Some`) or removed (`None`).
    pub env: &'a [(&'a str, Option<&'a str>)],
}

/// A `linkperf serve` child, killed when dropped.
pub struct Server {
    proc: Proc,
    addr: String,
    port: u16,
}

impl Server {
    /// `linkperf serve` on 127.0.0.1, on a port the kernel picks, plus
    /// `extra`, once it listens.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_spec(&ServeSpec {
            port: Some(0),
            extra,
            ..ServeSpec::default()
        })
    }

    /// [`Server::start`] run by the program and arguments of `under` (e.g.
    /// `taskset -c 0`), when not empty.
    pub fn start_under(under: &[&str], extra: &[&str]) -> Server {
        Server::start_spec(&ServeSpec {
            under,
            port: Some(0),
            extra,
            ..ServeSpec::default()
        })
    }

    /// [`Server::start`] on control port `port` (a server started again
    /// where its clients look for it).
    pub fn start_on(port: u16, extra: &[&str]) -> Server {
        Server::start_spec(&ServeSpec {
            port: Some(port),
            extra,
            ..ServeSpec::default()
        })
    }

    /// `linkperf serve --listen ADDR` inside network namespace `ns`, on the
    /// daemon's default port (where clients look when given no port).
    pub fn start_in(ns: &str, listen: &str) -> Server {
        Server::start_spec(&ServeSpec {
            under: &["ip", "netns", "exec", ns],
            listen: Some(listen),
            ..ServeSpec::default()
        })
    }

    /// Starts a server as `spec` says and returns once it has said where it
    /// listens; fails the test, with its log, if it ends or stays silent
    /// instead.
    pub fn start_spec(spec: &ServeSpec) -> Server {
        Server::try_start_spec(spec).unwrap_or_else(|log| {
            panic!(
                "linkperf serve {:?} ended before it listened: {log}",
                spec.extra
            )
        })
    }

    /// [`Server::start_spec`], or what it logged if it ended before it
    /// listened (a port it was given taken meanwhile, say); the test fails
    /// if it stays silent.
    pub fn try_start_spec(spec: &ServeSpec) -> Result<Server, String> {
        let linkperf = spec.command.unwrap_or(&[BIN]);
        let mut all = spec.under.iter().chain(linkperf);
        let mut c = Command::new(all.next().expect("a program"));
        c.args(all)
            .args(["serve", "--listen", spec.listen.unwrap_or("127.0.0.1")]);
        if let Some(port) = spec.port {
            c.args(["--port", &port.to_string()]);
        }
        c.args(spec.extra);
        for (var, value) in spec.env {
            match value {
                Some(v) => c.env(var, v),
                None => c.env_remove(var),
            };
        }
        let proc = Proc::spawn_synced(&mut c, format!("linkperf serve {:?}", spec.extra));
        let listens = |_: &str, err: &str| err.lines().any(|l| l.starts_with(LISTENING));
        match proc.wait_until(READY, listens) {
            Ok(()) => {}
            Err(Stopped::Ended) => return Err(proc.stderr()),
            Err(Stopped::Late) => panic!(
                "linkperf serve {:?} did not listen within {READY:?}: {}",
                spec.extra,
                proc.stderr()
            ),
        }
        let log = proc.stderr();
        let addr = log
            .lines()
            .find_map(|l| l.strip_prefix(LISTENING))
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the address it listens on")
            .to_string();
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {addr:?}: {log}"));
        Ok(Server { proc, addr, port })
    }

    /// Its control port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `HOST:PORT` where it listens, for `--server`.
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    /// [`Server::addr`], borrowed.
    pub fn address(&self) -> &str {
        &self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// True while the process lives (a look, not a wait).
    pub fn is_running(&mut self) -> bool {
        self.proc.is_running()
    }

    /// Everything it logged (on stderr) until now.
    pub fn log(&self) -> String {
        self.proc.stderr_now()
    }

    /// Waits until `until` holds for its log (`what`, for the failure), at
    /// most `within`: woken by every line it logs. The log then.
    pub fn wait_for_log(
        &self,
        what: &str,
        within: Duration,
        until: impl Fn(&str) -> bool,
    ) -> String {
        self.proc.wait_for(what, within, |_, err| until(err));
        self.proc.stderr()
    }

    /// Waits until its log holds `text`; the log then.
    pub fn wait_for_line(&self, text: &str, within: Duration) -> String {
        self.wait_for_log(&format!("{text:?}"), within, |l| l.contains(text))
    }

    /// Sends it signal `sig` (`-TERM`, `-STOP`, ...).
    pub fn signal(&self, sig: &str) {
        self.proc.signal(sig);
    }

    /// Waits for it to exit, at most `within`; `None` while it still runs.
    pub fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        self.proc.exit_within(within)
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        self.proc.kill();
    }
}

/// A port free for both TCP and UDP on 127.0.0.1 (iperf3 uses one for both),
/// when a test must name the port itself.
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
