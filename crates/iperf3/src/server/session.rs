//! One iperf3 test on the server, from the cookie to `IPERF_DONE`: the
//! parameters, the streams, the data phase, the results.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::control::{ControlConn, ControlError};
use crate::server::data::{self, DataStream, Finish};
use crate::server::plan::{self, Limits, TestPlan};
use crate::server::registry::{Shared, TestTicket};
use crate::server::{report, udp};
use crate::wire::{server_error_bytes, IErrno, State, TestParams, TestResults, Transport};
use linkperf_engine::io::{Conn, Settings};

/// Largest results message read from a client.
const MAX_RESULTS: usize = 1024 * 1024;

struct Log {
    on: bool,
    id: u64,
    peer: SocketAddr,
}

impl Log {
    fn line(&self, what: &str) {
        if self.on {
            eprintln!(
                "linkperf serve: iperf3 test {} from {}: {what}",
                self.id, self.peer
            );
        }
    }
}

/// Serves the test whose control connection is `ctrl`; logs how it went.
pub(crate) fn run(shared: Arc<Shared>, mut ticket: TestTicket, ctrl: TcpStream, peer: SocketAddr) {
    let log = Log {
        on: shared.cfg.log,
        id: ticket.id,
        peer: crate::sys::canonical(peer),
    };
    if let Err(e) = serve(&shared, &mut ticket, ctrl, &log) {
        log.line(&e);
    }
}

fn refuse(c: &mut ControlConn, i_errno: IErrno, errno: i32) {
    let _ = c.send(&server_error_bytes(i_errno, errno));
}

fn serve(
    shared: &Shared,
    ticket: &mut TestTicket,
    ctrl: TcpStream,
    log: &Log,
) -> Result<(), String> {
    let cfg = &shared.cfg;
    let hs = cfg.handshake_timeout;
    const SHUTDOWN: &str = "aborted in setup: the server is shutting down";
    let Some(setup) = shared.setting_up(ticket.id, &ctrl) else {
        let mut c = ControlConn::new(ctrl).map_err(|e| format!("control connection: {e}"))?;
        let _ = c.send_state(State::ServerTerminate);
        return Err(SHUTDOWN.into());
    };
    let mut c = ControlConn::new(ctrl).map_err(|e| format!("control connection: {e}"))?;
    // A shutdown while this test sets up told its client SERVER_TERMINATE
    // and shut the connection: whatever failed then, that is why.
    let (plan, streams) = match set_up(shared, ticket, &mut c, log) {
        Ok(s) => s,
        Err(_) if setup.terminated() => return Err(SHUTDOWN.into()),
        Err(e) => return Err(e),
    };
    if !setup.data_phase() {
        return Err(SHUTDOWN.into());
    }
    ticket.streams_connected();
    let addrs: Vec<(u32, SocketAddr, SocketAddr)> = streams
        .iter()
        .map(|s| {
            let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
            let (l, p) = s.sock.addresses().unwrap_or((unspecified, unspecified));
            (s.id, crate::sys::canonical(l), crate::sys::canonical(p))
        })
        .collect();
    // The client's clock for -t and -O starts when it reads TEST_START.
    let client_end = plan.time.map(|t| Instant::now() + plan.omit + t);
    c.send_state(State::TestStart).map_err(|e| e.to_string())?;
    c.send_state(State::TestRunning)
        .map_err(|e| e.to_string())?;
    let mut phase = data::run(c.stream(), streams, &plan, client_end, &shared.terminating)
        .map_err(|e| format!("failed: data path: {e}"))?;
    let out = &phase.out;
    match out.end {
        Finish::TestEnd => {}
        Finish::ClientTerminate => {
            return Err(format!(
                "ended by the client (CLIENT_TERMINATE); {}",
                report::summary(out, None)
            ))
        }
        Finish::ControlClosed => {
            return Err(format!(
                "the client went away (control connection closed); {}",
                report::summary(out, None)
            ))
        }
        Finish::Shutdown => {
            // As iperf3's own server does on SIGTERM, data::run told the
            // client SERVER_TERMINATE: it says "the server has terminated".
            // (Terminator::terminate counted the test.)
            return Err(format!(
                "aborted: the server is shutting down; {}",
                report::summary(out, None)
            ));
        }
        Finish::Deadline => {
            let _ = c.send_state(State::ServerTerminate);
            return Err(format!(
                "ended by the server: no TEST_END within {:?}; {}",
                plan.limit,
                report::summary(out, None)
            ));
        }
        Finish::Protocol(b) => {
            refuse(&mut c, IErrno::Message, 0);
            return Err(format!(
                "refused: control byte {b} out of turn; {}",
                report::summary(out, None)
            ));
        }
    }
    c.send_state(State::ExchangeResults)
        .map_err(|e| e.to_string())?;
    let theirs: Option<TestResults> = match c.read_json(MAX_RESULTS, Instant::now() + hs) {
        Ok(r) => Some(r),
        Err(e @ ControlError::Wire(_)) => {
            refuse(&mut c, IErrno::RecvResults, 0);
            return Err(format!(
                "unreadable results from the client: {e}; {}",
                report::summary(out, None)
            ));
        }
        Err(e) => {
            return Err(format!(
                "no results from the client: {e}; {}",
                report::summary(out, None)
            ))
        }
    };
    if let Some(t) = &theirs {
        phase.top_up(t, &plan);
    }
    let out = &phase.out;
    let output = plan
        .server_output
        .then(|| report::server_output(&plan, out, log.peer, &addrs));
    let ours = report::results(&plan, out, output);
    c.send_json(&ours).map_err(|e| e.to_string())?;
    c.send_state(State::DisplayResults)
        .map_err(|e| e.to_string())?;
    // The client prints, then says IPERF_DONE and closes; either will do.
    let _ = c.read_state(Instant::now() + Duration::from_secs(5));
    log.line(&report::summary(out, theirs.as_ref()));
    Ok(())
}

/// The parameters and the streams: the test up to its data phase.
fn set_up(
    shared: &Shared,
    ticket: &mut TestTicket,
    c: &mut ControlConn,
    log: &Log,
) -> Result<(TestPlan, Vec<DataStream>), String> {
    let cfg = &shared.cfg;
    let hs = cfg.handshake_timeout;
    c.send_state(State::ParamExchange)
        .map_err(|e| e.to_string())?;
    let params: TestParams = match c.read_json(cfg.max_json, Instant::now() + hs) {
        Ok(p) => p,
        Err(e @ ControlError::Wire(_)) => {
            refuse(c, IErrno::RecvParams, 0);
            return Err(format!("refused: unreadable parameters: {e}"));
        }
        Err(e) => return Err(format!("no parameters: {e}")),
    };
    let limits = Limits {
        max_duration: cfg.max_duration,
        max_streams: cfg.max_streams,
    };
    let plan = match plan::plan(&params, &limits) {
        Ok(p) => p,
        Err(r) => {
            refuse(c, r.i_errno, r.errno);
            return Err(format!("refused: {}", r.why));
        }
    };
    if !ticket.reserve_streams(plan.streams()) {
        let _ = c.send_state(State::AccessDenied);
        return Err(format!(
            "refused: {} more streams would pass the server's limit of {}",
            plan.streams(),
            cfg.max_total_streams
        ));
    }
    if let Some(cc) = &plan.congestion {
        if let Err(e) = probe_congestion(cc) {
            refuse(
                c,
                IErrno::SetCongestion,
                e.raw_os_error().unwrap_or(libc::ENOENT),
            );
            return Err(format!("refused: congestion control {cc}: {e}"));
        }
    }
    log.line(&report::describe(&plan, params.client_version.as_deref()));
    let peer_ip = c.stream().peer_addr().map_err(|e| e.to_string())?.ip();
    let deadline = Instant::now() + hs;
    let streams = match plan.transport {
        Transport::Tcp => tcp_streams(ticket, c, &plan, deadline, &shared.terminating),
        _ => {
            let socks = udp::accept_streams(
                shared,
                peer_ip,
                plan.streams(),
                plan.window,
                plan.blksize,
                deadline,
                || {
                    c.send_state(State::CreateStreams)
                        .map_err(|e| e.to_string())
                },
            );
            socks.map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, s)| DataStream {
                        id: crate::wire::stream_id(i),
                        sends: crate::wire::server_sends(plan.mode, i, plan.parallel),
                        sock: s,
                    })
                    .collect()
            })
        }
    };
    let streams = match streams {
        Ok(s) => s,
        Err(e) => {
            refuse(c, IErrno::StreamAccept, 0);
            return Err(format!("failed: {e}"));
        }
    };
    Ok((plan, streams))
}

/// Waits for the test's TCP streams (their cookies have been read by the
/// acceptor), in the order they were accepted, and sets their options.
fn tcp_streams(
    ticket: &TestTicket,
    c: &mut ControlConn,
    plan: &TestPlan,
    deadline: Instant,
    terminating: &AtomicBool,
) -> Result<Vec<DataStream>, String> {
    let rx = ticket.await_streams();
    c.send_state(State::CreateStreams)
        .map_err(|e| e.to_string())?;
    let n = plan.streams();
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        if terminating.load(Ordering::Acquire) {
            return Err("the server is shutting down".into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{} of {n} streams connected in time", conns.len()));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(dc) => conns.push(dc),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("{} of {n} streams connected in time", conns.len()))
            }
        }
    }
    conns.sort_by_key(|d| d.seq);
    conns
        .into_iter()
        .enumerate()
        .map(|(i, dc)| {
            let sock = Conn::Tcp(dc.stream);
            sock.apply(&stream_settings(plan))
                .map_err(|e| format!("stream options: {e}"))?;
            Ok(DataStream {
                id: crate::wire::stream_id(i),
                sends: crate::wire::server_sends(plan.mode, i, plan.parallel),
                sock,
            })
        })
        .collect()
}

/// `-N`, `-w`, `-M`, `-C`, `-S` of an accepted stream. Like iperf3's
/// server, a segment size or a type of service the socket refuses is not
/// fatal: the client's own MSS already bounds the segments both ways.
fn stream_settings(plan: &TestPlan) -> Settings {
    Settings {
        nodelay: plan.nodelay,
        sndbuf: plan.window,
        rcvbuf: plan.window,
        cc: plan.congestion.clone(),
        mss: plan.mss,
        tos: plan.tos,
        lenient: true,
    }
}

/// Fails if this host cannot give a socket congestion control `name`.
fn probe_congestion(name: &str) -> std::io::Result<()> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_tcp_congestion(name.as_bytes())
}
