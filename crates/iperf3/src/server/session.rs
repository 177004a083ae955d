//! One iperf3 test on the server, from the cookie to `IPERF_DONE`: the
//! blocking shell of [`ServerControl`], which says what to send and what to
//! do. The shell reads the control connection (as much as the control
//! awaits, by its deadline), admits the test against the server's totals
//! and its congestion control, takes the streams, runs the data phase
//! (data.rs), tops the counts up with the client's results and makes the
//! server's, and logs how the test went.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::codec::{IErrno, TestResults, Transport};
use crate::control::{ControlConn, ControlError};
use crate::proto::server::{DataEnd, Do, Ended, Refused, ServerControl, Settings, SHUTDOWN};
use crate::server::data::{self, DataPhase, DataStream, Finish};
use crate::server::plan::{Limits, Refusal, TestPlan};
use crate::server::registry::{SetupGuard, Shared, TestTicket};
use crate::server::{says, udp};
use linkperf_engine::io::{Conn, Settings as StreamSettings};

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

/// What the shell holds of a test as it goes.
#[derive(Default)]
struct Test<'a> {
    plan: Option<TestPlan>,
    streams: Option<Vec<DataStream>>,
    /// Each stream's id and addresses, for the server's output.
    addrs: Vec<(u32, SocketAddr, SocketAddr)>,
    phase: Option<DataPhase<'a>>,
    theirs: Option<TestResults>,
}

fn serve(
    shared: &Shared,
    ticket: &mut TestTicket,
    ctrl: TcpStream,
    log: &Log,
) -> Result<(), String> {
    let cfg = &shared.cfg;
    let settings = Settings {
        limits: Limits {
            max_duration: cfg.max_duration,
            max_streams: cfg.max_streams,
        },
        max_params: cfg.max_json,
        max_results: MAX_RESULTS,
        handshake: cfg.handshake_timeout,
    };
    // Until the data phase, a shutdown tells the client SERVER_TERMINATE and
    // shuts the connection (the registry holds a second handle on it).
    let mut setup = shared.setting_up(ticket.id, &ctrl);
    let mut c = ControlConn::new(ctrl).map_err(|e| format!("control connection: {e}"))?;
    let mut m = ServerControl::new(settings, Instant::now());
    if setup.is_none() {
        m.terminate(Instant::now());
    }
    let mut t = Test::default();
    loop {
        let Some(d) = m.poll() else {
            listen(&mut c, &mut m)?;
            continue;
        };
        match d {
            Do::Send(bytes) => {
                if let Err(e) = c.send(&bytes) {
                    m.send_failed(e);
                }
            }
            Do::Admit {
                plan,
                client_version,
            } => {
                let r = admit(ticket, &plan, cfg.max_total_streams);
                if r.is_ok() {
                    log.line(&says::describe(&plan, client_version.as_deref()));
                }
                t.plan = Some(*plan);
                m.admitted(r, Instant::now());
            }
            Do::AcceptStreams { announce, until } => {
                let Some(plan) = &t.plan else {
                    return Err("failed: streams asked for before a plan".into());
                };
                match accept_streams(shared, ticket, &mut c, plan, &announce, until) {
                    Err(e) => m.streams_failed(&e, Instant::now()),
                    // A shutdown told the client SERVER_TERMINATE meanwhile.
                    Ok(_) if !setup.take().is_some_and(SetupGuard::data_phase) => {
                        m.terminated(Instant::now())
                    }
                    Ok(streams) => {
                        ticket.streams_connected();
                        t.addrs = addresses(&streams);
                        t.streams = Some(streams);
                        m.connected(Instant::now());
                    }
                }
            }
            Do::RunData { client_end } => {
                let (Some(plan), Some(streams)) = (&t.plan, t.streams.take()) else {
                    return Err("failed: the data phase asked for before the streams".into());
                };
                let phase = data::run(c.stream(), streams, plan, client_end, &shared.terminating)
                    .map_err(|e| format!("failed: data path: {e}"))?;
                let end = data_end(phase.out.end);
                t.phase = Some(phase);
                m.data_ended(end, Instant::now());
            }
            Do::Results(theirs) => {
                let (Some(plan), Some(phase)) = (&t.plan, &mut t.phase) else {
                    return Err("failed: results before the data phase".into());
                };
                phase.top_up(&theirs, plan);
                let output = plan
                    .server_output
                    .then(|| says::server_output(plan, &phase.out, log.peer, &t.addrs));
                let ours = says::results(plan, &phase.out, output);
                t.theirs = Some(*theirs);
                m.answer(&ours, Instant::now());
            }
            Do::Finish(ended) => return finished(ended, setup.as_ref(), &t, log),
        }
    }
}

/// How a test ended, in its log line; `Ok` when its results were exchanged.
fn finished(
    ended: Ended,
    setup: Option<&SetupGuard<'_>>,
    t: &Test<'_>,
    log: &Log,
) -> Result<(), String> {
    let counted = |theirs| t.phase.as_ref().map(|p| says::summary(&p.out, theirs));
    match ended {
        Ended::Done => {
            if let Some(s) = counted(t.theirs.as_ref()) {
                log.line(&s);
            }
            Ok(())
        }
        // A shutdown while this test set up told its client SERVER_TERMINATE
        // and shut the connection: whatever failed then, that is why.
        Ended::Failed(_) if setup.is_some_and(|s| s.terminated()) => Err(SHUTDOWN.into()),
        Ended::Failed(why) => Err(why),
        Ended::Cut(why) => Err(match counted(None) {
            Some(s) => format!("{why}; {s}"),
            None => why,
        }),
    }
}

/// Reads what the control awaits, by its deadline.
fn listen(c: &mut ControlConn, m: &mut ServerControl) -> Result<(), String> {
    let (want, Some(until)) = (m.wants(), m.timeout()) else {
        return Err("failed: nothing to do and nothing awaited".into());
    };
    if want == 0 {
        m.handle_timeout(Instant::now());
        return Ok(());
    }
    match c.recv_by(want, until) {
        Ok(bytes) => m.receive(&bytes, Instant::now()),
        Err(ControlError::TimedOut(_)) => m.handle_timeout(Instant::now()),
        Err(e) => m.broken(e, Instant::now()),
    }
    Ok(())
}

/// Admits a planned test: its streams within the server's total, its
/// congestion control on this host.
fn admit(ticket: &mut TestTicket, plan: &TestPlan, max_total: usize) -> Result<(), Refused> {
    if !ticket.reserve_streams(plan.streams()) {
        return Err(Refused::Busy(format!(
            "{} more streams would pass the server's limit of {max_total}",
            plan.streams(),
        )));
    }
    if let Some(cc) = &plan.congestion {
        if let Err(e) = probe_congestion(cc) {
            return Err(Refused::Error(Refusal {
                i_errno: IErrno::SetCongestion,
                errno: e.raw_os_error().unwrap_or(libc::ENOENT),
                why: format!("congestion control {cc}: {e}"),
            }));
        }
    }
    Ok(())
}

/// How the data phase ended, in the control's words.
fn data_end(f: Finish) -> DataEnd {
    match f {
        Finish::TestEnd => DataEnd::TestEnd,
        Finish::ClientTerminate => DataEnd::ClientTerminate,
        Finish::ControlClosed => DataEnd::ControlClosed,
        Finish::Deadline => DataEnd::Deadline,
        Finish::Shutdown => DataEnd::Shutdown,
        Finish::Protocol(b) => DataEnd::Protocol(b),
    }
}

/// Each stream's id and its local and peer addresses.
fn addresses(streams: &[DataStream]) -> Vec<(u32, SocketAddr, SocketAddr)> {
    streams
        .iter()
        .map(|s| {
            let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
            let (l, p) = s.sock.addresses().unwrap_or((unspecified, unspecified));
            (s.id, crate::sys::canonical(l), crate::sys::canonical(p))
        })
        .collect()
}

/// The test's streams, TCP or UDP, in the order they came: `announce`
/// (`CREATE_STREAMS`) goes out once the server is ready for them; at most
/// until `until`.
fn accept_streams(
    shared: &Shared,
    ticket: &TestTicket,
    c: &mut ControlConn,
    plan: &TestPlan,
    announce: &[u8],
    until: Instant,
) -> Result<Vec<DataStream>, String> {
    if plan.transport == Transport::Tcp {
        return tcp_streams(ticket, c, plan, announce, until, &shared.terminating);
    }
    let peer_ip = c.stream().peer_addr().map_err(|e| e.to_string())?.ip();
    let socks = udp::accept_streams(
        shared,
        peer_ip,
        plan.streams(),
        plan.window,
        plan.blksize,
        until,
        || c.send(announce).map_err(|e| e.to_string()),
    )?;
    Ok(socks
        .into_iter()
        .enumerate()
        .map(|(i, s)| DataStream {
            id: crate::codec::stream_id(i),
            sends: crate::codec::server_sends(plan.mode, i, plan.parallel),
            sock: s,
        })
        .collect())
}

/// Waits for the test's TCP streams (their cookies have been read by the
/// acceptor), in the order they were accepted, and sets their options.
fn tcp_streams(
    ticket: &TestTicket,
    c: &mut ControlConn,
    plan: &TestPlan,
    announce: &[u8],
    deadline: Instant,
    terminating: &AtomicBool,
) -> Result<Vec<DataStream>, String> {
    let rx = ticket.await_streams();
    c.send(announce).map_err(|e| e.to_string())?;
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
                id: crate::codec::stream_id(i),
                sends: crate::codec::server_sends(plan.mode, i, plan.parallel),
                sock,
            })
        })
        .collect()
}

/// `-N`, `-w`, `-M`, `-C`, `-S` of an accepted stream. Like iperf3's
/// server, a segment size or a type of service the socket refuses is not
/// fatal: the client's own MSS already bounds the segments both ways.
fn stream_settings(plan: &TestPlan) -> StreamSettings {
    StreamSettings {
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
