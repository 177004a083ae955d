//! Fault and trust tests: real `linkperf serve` and `linkperf run`/`suite`
//! processes on loopback, hostile or broken peers, killed processes, damaged
//! files. Every load is bounded in time and stops by itself.
//!
//! A client SIGKILLed mid-test is covered by `vanished_client_frees_server_resources`
//! in e2e/sessions.rs: the server frees its sessions, sockets and threads within
//! 5 s and serves the next test.
//!
//! Here: the helpers the fault tests share and a path cut mid-test (in the
//! lab's namespaces); by topic, authentication (auth.rs), data connections
//! (data.rs), limits and budgets (limits.rs), signals (signals.rs), hostile
//! peers and damaged files (hostile.rs).
//!
//! The control protocol is spoken by hand here (with linkperf-protocol's encoder and
//! decoder) where a test must see exactly what the server answers, and when.

// The helpers are shared with e2e.rs; this file does not use all of them.
use crate::util;

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::control::{expect_error, key_file, Control};
use crate::util::{
    cpu_ticks, exclusive, fds_and_threads, first_run, poll_until, run, run_against, run_json,
    shared, text, Client, ServeSpec, Server, BIN, TIMING,
};
use linkperf_protocol::{
    encode_client, encode_frame, ClientMessage, ConnectSeq, DataToken, Preamble, ServerMessage,
    UdpHeader, PREAMBLE_LEN, PROTOCOL_VERSION, UDP_HEADER_LEN,
};
use linkperf_session::AuthKey;
use linkperf_workload::{Placement, Protocol, TestSpec};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Helpers: the control protocol by hand, keys, serve processes of our own.
// ---------------------------------------------------------------------------

/// A 1x1 rr test of `users` and `duration` over TCP, one server worker.
fn test_request(users: u32, duration: Duration) -> ClientMessage {
    test_request_over(Protocol::Tcp, users, duration)
}

/// [`test_request`] over `protocol`.
fn test_request_over(protocol: Protocol, users: u32, duration: Duration) -> ClientMessage {
    let mut spec = TestSpec::new("rr1c-1x1".parse().unwrap(), protocol, users, duration);
    spec.warmup = Duration::from_millis(100);
    ClientMessage::Test {
        spec,
        placement: Placement::with_threads(1),
    }
}

/// The run of `doc` failed for want of the server's results, saying `why`,
/// and kept what the client measured before.
fn gave_up_keeping_what_it_measured(doc: &Value, why: &str) {
    let r = first_run(doc);
    assert_eq!(text(r, "/status"), "failed", "{r}");
    let e = text(r, "/error");
    assert!(e.contains(why), "{e}");
    assert!(util::num(r, "/client/totals/transactions") > 0.0, "{r}");
}

/// No session thread died: the server still runs a test, and its log says
/// nothing of a panic.
fn still_serves(server: &Server) {
    let (code, _, err, _) = run_against(server, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// A session past its handshake that asked `server` to run `profile` with
/// one thread: the control connection, the answer not read yet.
fn profile_asked(server: &Server, profile: linkperf_workload::profile::Profile) -> Control {
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&ClientMessage::Profile {
        profile,
        placement: Placement::with_threads(1),
        client_ports: vec![],
    });
    c
}

/// [`profile_asked`], accepted and started: the control connection, the
/// first data port and the data token.
fn profile_started(
    server: &Server,
    profile: linkperf_workload::profile::Profile,
) -> (Control, u16, DataToken) {
    let mut c = profile_asked(server, profile);
    let (port, token) = match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted {
            data_ports, token, ..
        }) => (data_ports[0], token),
        other => panic!("expected accepted, got {other:?}"),
    };
    c.send(&ClientMessage::Start);
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Started) => {}
        other => panic!("expected started, got {other:?}"),
    }
    (c, port, token)
}

/// A session past its handshake whose 1-user test (of `duration`) the server
/// accepted: the control connection, the data ports and the data token.
fn accepted_test(server: &Server, duration: Duration) -> (Control, Vec<u16>, DataToken) {
    accepted_test_over(server, Protocol::Tcp, duration)
}

/// [`accepted_test`] over `protocol`.
fn accepted_test_over(
    server: &Server,
    protocol: Protocol,
    duration: Duration,
) -> (Control, Vec<u16>, DataToken) {
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&test_request_over(protocol, 1, duration));
    match c.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted {
            data_ports, token, ..
        }) => (c, data_ports, token),
        other => panic!("expected accepted, got {other:?}"),
    }
}

/// A data connection to `data` that presents `token` in its preamble.
fn with_preamble(data: SocketAddr, token: DataToken) -> TcpStream {
    let mut s = TcpStream::connect(data).expect("connect to the data port");
    let p = Preamble {
        token,
        flow: 0,
        seq: 0,
    };
    s.write_all(&p.encode()).unwrap();
    s
}

/// Whether the server closes `s` within `within` (a blocking read until
/// its end, or the time).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within.max(Duration::from_millis(1))))
        .unwrap();
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            false
        }
        other => panic!("unexpected {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// 8. The path cut mid-test (the lab: network namespaces joined by a veth pair).
// ---------------------------------------------------------------------------

/// A lab configuration brought up for one test, and the server in it; both
/// taken down when dropped.
struct Lab {
    name: String,
    serve: Option<Server>,
}

impl Lab {
    /// `linkperf lab up veth,name=NAME`; `None` (with the reason printed) where
    /// this host cannot run the lab (no root, no iproute2), or a failure saying
    /// what is missing with LINKPERF_LAB_REQUIRED=1 (scripts/test.sh as root).
    fn up(name: &str) -> Option<Lab> {
        let (code, out, err) = run(&["lab", "up", &format!("veth,name={name}")]);
        assert!(
            !err.contains("unrecognized subcommand"),
            "`linkperf lab` does not exist in this build: {err}"
        );
        if code == 2 && err.contains("cannot run on this host") {
            assert!(
                std::env::var("LINKPERF_LAB_REQUIRED").as_deref() != Ok("1"),
                "LINKPERF_LAB_REQUIRED=1, but the lab cannot run here: {err}"
            );
            eprintln!("skipped: the lab cannot run here: {err}");
            return None;
        }
        assert_eq!(code, 0, "lab up: {out}\n{err}");
        Some(Lab {
            name: name.to_string(),
            serve: None,
        })
    }

    fn server_ns(&self) -> String {
        format!("lp-{}-s1", self.name)
    }

    /// Starts `linkperf serve` on the server's address (198.18.1.1, the lab's
    /// address plan) in the server's namespace; returns it once it listens.
    fn serve(&mut self) -> &Server {
        let ns = self.server_ns();
        self.serve.insert(Server::start_in(&ns, "198.18.1.1"))
    }

    fn client_ns(&self) -> String {
        format!("lp-{}-c1", self.name)
    }

    /// `linkperf run ARGS` in the client's namespace (see [`Client`]).
    fn client(&self, args: &[&str]) -> Client {
        Client::spawn_under(&["ip", "netns", "exec", &self.client_ns()], args)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        drop(self.serve.take());
        let _ = Command::new(BIN)
            .args(["lab", "down", &self.name])
            .stdin(std::process::Stdio::null())
            .output();
    }
}

#[test]
fn a_path_cut_mid_test_ends_the_client_with_a_clear_error_in_bounded_time() {
    let _g = exclusive();
    let Some(mut lab) = Lab::up(&format!("faults-cut-{}", std::process::id())) else {
        return;
    };
    // The lab's address plan: server 198.18.1.1 on lp-s1, client 198.18.1.2.
    lab.serve();
    let started = Instant::now();
    let mut client = lab.client(&[
        "run",
        "-q",
        "--server",
        "198.18.1.1",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    // Cut the path: the server's end of the veth pair goes down.
    let down = Command::new("ip")
        .args(["-n", &lab.server_ns(), "link", "set", "lp-s1", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let cut = Instant::now();
    // The client gives up by itself: the window (2 s), the drain (3 s), then the
    // control timeout for the server's results (30 s); never a hang.
    let status = client
        .exit_within(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the client still runs 60 s after the path was cut"));
    let took = cut.elapsed();
    let (_, _, err, doc) = client.finish(Duration::from_secs(5));
    eprintln!(
        "the client gave up {took:?} after the cut, {:?} after starting",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(60));
    gave_up_keeping_what_it_measured(&doc, "no results from the server within 30s");
}

/// A client whose host goes silent mid-test: its end of the link goes down,
/// then the client is killed, so that not even its kernel's FIN or RST reach
/// the server. Nothing moves on the data connections any more, and the
/// server's keepalive probes on the silent control connection go unanswered:
/// 3 s of both, and the server ends the session and frees its sockets and
/// threads (the test's window had 60 s to go).
#[test]
fn a_client_whose_host_goes_silent_is_let_go_by_the_server_within_5_s() {
    let _g = exclusive();
    let Some(mut lab) = Lab::up(&format!("faults-gone-{}", std::process::id())) else {
        return;
    };
    // Listening, its threads and descriptors are those of an idle server.
    let pid = lab.serve().pid();
    let idle = util::fds_and_threads(pid);
    let mut client = lab.client(&[
        "run",
        "-q",
        "--server",
        "198.18.1.1",
        "--users",
        "4",
        "--duration",
        "60s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    let busy = util::fds_and_threads(pid);
    assert!(
        busy.0 > idle.0,
        "the test holds no descriptors: {busy:?} vs {idle:?}"
    );
    let down = Command::new("ip")
        .args(["-n", &lab.client_ns(), "link", "set", "lp-c1", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    client.kill();
    let gone = Instant::now();
    let serve = lab.serve.as_ref().expect("serving");
    // Threads and descriptors: nothing announces their end.
    let freed = poll_until(Duration::from_secs(20), || {
        let now = util::fds_and_threads(pid);
        if now.0 <= idle.0 + 2 && now.1 <= idle.1 {
            Ok(gone.elapsed())
        } else {
            Err(format!(
                "the server still holds the session after its client went silent: \
                 {now:?} descriptors and threads, {idle:?} idle; log: {}",
                serve.log()
            ))
        }
    });
    eprintln!("the server let the silent client go after {freed:?}");
    assert!(
        freed < Duration::from_secs(8),
        "freed only after {freed:?}: {}",
        serve.log()
    );
    assert!(serve.log().contains("vanished"), "{}", serve.log());
}

/// Regression: a worker carrying one request/response flow waits in its
/// socket's blocking read without a timeout. When the server stops answering
/// (here: stopped by SIGSTOP, so its sockets stay open and nothing closes),
/// the client still releases that worker after the drain and gives up with
/// a clear error instead of hanging.
#[test]
fn a_server_that_stops_answering_does_not_hang_a_one_user_client() {
    let _g = shared();
    let serve = Server::start(&[]);
    let addr = serve.addr();
    let mut client = Client::spawn(&[
        "run",
        "-q",
        "--server",
        &addr,
        "--workload",
        "rr1c-1x1",
        "--users",
        "1",
        "--threads",
        "1",
        "--server-threads",
        "1",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ]);
    client.wait_for_window(Duration::from_secs(30));
    serve.signal("-STOP");
    let outcome = client.exit_within(Duration::from_secs(60));
    serve.signal("-CONT");
    drop(serve);
    let Some(status) = outcome else {
        panic!("the client still runs 60 s after its server stopped answering")
    };
    let (_, _, err, doc) = client.finish(Duration::from_secs(5));
    assert_eq!(status.code(), Some(1), "{err}");
    gave_up_keeping_what_it_measured(&doc, "no results from the server within 30s");
}

mod auth;
mod data;
mod hostile;
mod limits;
mod signals;
