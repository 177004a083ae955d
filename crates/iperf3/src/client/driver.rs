//! One linkperf stream test against a stock `iperf3 -s`.
//!
//! The control protocol is iperf3's; the data is linkperf's engine: every
//! user is a stream, and each data connection sends the test's cookie where
//! linkperf's own connections send their preamble. linkperf asks iperf3 for
//! a test of warmup + duration seconds and omits nothing, so iperf3's counts
//! cover the whole test like linkperf's whole-life totals. `--bidir` runs the
//! users twice, once each way, on separate connections (iperf3 streams carry
//! one direction each): the sending connections first, as iperf3 expects.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linkperf_engine::{aggregate, ClientConfig, ClientTest, DataEndpoints, Schedule, WorkerReport};
use linkperf_metrics::{capture_environment, ProcessMethod, SideReport, Totals};
use linkperf_wire::DataToken;
use linkperf_workload::{StreamDirection, Workload};
use serde_json::Map;

use super::request::{check_spec, new_cookie, params, resolve};
use super::{ClientOutcome, ClientRequest, Iperf3Target};
use crate::client::RemoteReport;
use crate::control::{ControlConn, ControlError};
use crate::sys;
use crate::wire::{
    describe_errno, server_error_from_bytes, stream_id, Cookie, State, StreamResults, TestResults,
};
use crate::ClientError;
use linkperf_engine::Sampler;

/// How long the server may take to answer during the handshake.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// After the window, how long the engine's flows may take to end.
const DRAIN: Duration = Duration::from_secs(10);
/// After the window, how long the server may take to take in what was sent.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Once all sent is acknowledged, time for iperf3 to read it before `TEST_END`.
const READ_GRACE: Duration = Duration::from_millis(50);
/// Largest results message read from the server.
const MAX_RESULTS: usize = 4 * 1024 * 1024;

fn control_error(e: ControlError, waiting_for: &str) -> ClientError {
    ClientError::Control(format!("waiting for {waiting_for}: {e}"))
}

/// Reads the next state; the server's refusals become errors.
fn expect(c: &mut ControlConn, want: State, timeout: Duration) -> Result<(), ClientError> {
    let name = format!("{want:?}");
    let s = c
        .read_state(Instant::now() + timeout)
        .map_err(|e| control_error(e, &name))?;
    match s {
        s if s == want => Ok(()),
        State::AccessDenied => Err(ClientError::Busy),
        State::ServerError => {
            let mut b = [0u8; 8];
            c.read_exact_by(&mut b, Instant::now() + ANSWER_TIMEOUT)
                .map_err(|e| control_error(e, "the server's error numbers"))?;
            let (i_errno, errno) = server_error_from_bytes(b);
            Err(ClientError::ServerError {
                i_errno,
                errno,
                message: describe_errno(i_errno).to_string(),
            })
        }
        State::ServerTerminate => Err(ClientError::Control(
            "the iperf3 server ended the test (SERVER_TERMINATE)".into(),
        )),
        other => Err(ClientError::Control(format!(
            "expected {name}, the server said {other:?}"
        ))),
    }
}

struct Watcher {
    done: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    fn start(cancel: Option<Arc<AtomicBool>>, aborters: Vec<linkperf_engine::Aborter>) -> Watcher {
        let done = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::new(AtomicBool::new(false));
        let thread = cancel.map(|flag| {
            let (done, cancelled) = (done.clone(), cancelled.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    if flag.load(Ordering::Acquire) {
                        cancelled.store(true, Ordering::Release);
                        for a in &aborters {
                            a.abort();
                        }
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        });
        Watcher {
            done,
            cancelled,
            thread,
        }
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn stop(mut self) -> bool {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.cancelled()
    }
}

/// The upload's and the download's streams, and the local addresses of the
/// upload's sockets.
type Streams = (
    Option<ClientTest>,
    Option<ClientTest>,
    Option<Vec<SocketAddr>>,
);

/// The test's streams, connected with the cookie as iperf3 expects them:
/// for `--bidir` its sending streams first, then the receiving ones. With
/// them, the local addresses of the upload's sockets, to know when iperf3
/// has received all of it.
fn connect_streams(
    req: &ClientRequest,
    addr: SocketAddr,
    local: Option<SocketAddr>,
    cookie: &Cookie,
    message: linkperf_workload::Bytes,
    direction: StreamDirection,
) -> Result<Streams, ClientError> {
    let greeting: Arc<[u8]> = Arc::from(&cookie.as_bytes()[..]);
    let connect = |d: StreamDirection| {
        let mut spec = req.spec.clone();
        spec.workload = Workload::Stream {
            message,
            direction: d,
        };
        ClientTest::connect(ClientConfig {
            spec,
            threads: req.placement.threads.count().unwrap_or(1),
            affinity: req.placement.affinity.as_ref().map(|c| c.0.clone()),
            busy_poll: req.placement.busy_poll,
            endpoints: DataEndpoints::Tcp(vec![addr]),
            token: DataToken([0; 16]),
            connect_timeout: Duration::from_secs(20)
                + Duration::from_millis(5 * u64::from(req.spec.users)),
            live: None,
            greeting: Some(greeting.clone()),
        })
    };
    let mut uploads: Option<Vec<SocketAddr>> = None;
    let (up, down) = match direction {
        StreamDirection::Up => (Some(connect(StreamDirection::Up)?), None),
        StreamDirection::Down => (None, Some(connect(StreamDirection::Down)?)),
        StreamDirection::Bidir => {
            let up = connect(StreamDirection::Up)?;
            // The sockets that carry the upload, to know when iperf3 has them all.
            let control = local.map(sys::canonical);
            uploads = sys::sockets_to(addr).ok().map(|v| {
                v.into_iter()
                    .map(|(_, l)| l)
                    .filter(|l| Some(*l) != control)
                    .collect()
            });
            let down = connect(StreamDirection::Down);
            match down {
                Ok(d) => (Some(up), Some(d)),
                Err(e) => {
                    up.abort();
                    let _ = up.wait();
                    return Err(e.into());
                }
            }
        }
    };
    Ok((up, down, uploads))
}

/// Watches the control connection until the window closes or the user
/// cancels; what the server said in between, if it ended the test early.
fn watch_window(
    c: &mut ControlConn,
    schedule: &Schedule,
    watcher: &Watcher,
) -> Option<ClientError> {
    let mut failure: Option<ClientError> = None;
    while Instant::now() < schedule.measure_until && !watcher.cancelled() {
        let until = (Instant::now() + Duration::from_millis(50)).min(schedule.measure_until);
        match c.read_state(until) {
            Err(ControlError::TimedOut(_)) => {}
            Ok(s) => {
                failure = Some(ClientError::Control(format!(
                    "the iperf3 server said {s:?} during the test"
                )));
                break;
            }
            Err(e) => {
                failure = Some(control_error(e, "the end of the test"));
                break;
            }
        }
    }
    failure
}

/// This side's results as iperf3 exchanges them: each stream's bytes (sent
/// for the upload, received for the download) and the CPU.
fn our_results(
    client: &SideReport,
    up_flows: &[(u32, Totals)],
    down_flows: &[(u32, Totals)],
    congestion: Option<String>,
    elapsed: f64,
) -> TestResults {
    let stream = |index: usize, bytes: u64| StreamResults {
        id: i64::from(stream_id(index)),
        bytes,
        retransmits: -1,
        jitter: 0.0,
        errors: 0,
        omitted_errors: Some(0),
        packets: 0,
        omitted_packets: Some(0),
        start_time: Some(0.0),
        end_time: Some(elapsed),
        extra: Map::new(),
    };
    let up_n = up_flows.len();
    let mut streams: Vec<StreamResults> = up_flows
        .iter()
        .enumerate()
        .map(|(i, (_, t))| stream(i, t.tx_bytes))
        .collect();
    streams.extend(
        down_flows
            .iter()
            .enumerate()
            .map(|(i, (_, t))| stream(up_n + i, t.rx_bytes)),
    );
    let pct = |s: f64| {
        if client.window_s > 0.0 {
            100.0 * s / client.window_s
        } else {
            0.0
        }
    };
    TestResults {
        cpu_util_total: pct(client.cpu.process_s),
        cpu_util_user: pct(client.cpu.process_user_s),
        cpu_util_system: pct(client.cpu.process_system_s),
        // Per-stream retransmits are not kept; iperf3 then prints none.
        sender_has_retransmits: if up_n > 0 { 0 } else { -1 },
        congestion_used: congestion,
        server_output_text: None,
        server_output_json: None,
        streams,
        extra: Map::new(),
    }
}

/// Runs one test against the iperf3 server at `target`.
pub fn run_client(
    target: &Iperf3Target,
    req: &ClientRequest,
) -> Result<ClientOutcome, ClientError> {
    check_spec(&req.spec)?;
    req.spec
        .validate()
        .map_err(|e| ClientError::Unsupported(e.to_string()))?;
    let Workload::Stream { message, direction } = req.spec.workload.clone() else {
        unreachable!("check_spec refuses other workloads");
    };
    let Control {
        mut c,
        addr,
        local,
        cookie,
    } = open_control(target, req, message.0, direction)?;

    linkperf_metrics::raise_fd_limit(2 * u64::from(req.spec.users) + 256)
        .map_err(|e| ClientError::Unsupported(e.to_string()))?;
    let (up, down, uploads) = connect_streams(req, addr, local, &cookie, message, direction)?;
    let abort_all = |up: &Option<ClientTest>, down: &Option<ClientTest>| {
        for t in [up, down].into_iter().flatten() {
            t.abort();
        }
    };
    if let Err(e) = expect(&mut c, State::TestStart, ANSWER_TIMEOUT)
        .and_then(|()| expect(&mut c, State::TestRunning, ANSWER_TIMEOUT))
    {
        abort_all(&up, &down);
        for t in [up, down].into_iter().flatten() {
            let _ = t.wait();
        }
        return Err(e);
    }
    let started = SystemTime::now();
    let started_at = Instant::now();
    let mut schedule: Option<Schedule> = None;
    for t in [&up, &down].into_iter().flatten() {
        let s = t.start(DRAIN);
        schedule.get_or_insert(s);
    }
    let schedule = schedule.expect("at least one direction runs");
    let sampler = Sampler::spawn(schedule);
    let aborters = [&up, &down]
        .into_iter()
        .flatten()
        .map(|t| t.aborter())
        .collect();
    let watcher = Watcher::start(req.cancel.clone(), aborters);

    // The window runs; the server may end the test early (SERVER_TERMINATE, close).
    let failure = watch_window(&mut c, &schedule, &watcher);
    if failure.is_some() {
        abort_all(&up, &down);
    }
    let aborted_early = watcher.cancelled() || failure.is_some();
    if !aborted_early && up.is_some() {
        wait_delivered(addr, local, uploads.as_deref(), &watcher);
    }
    let msg = if watcher.cancelled() || failure.is_some() {
        State::ClientTerminate
    } else {
        State::TestEnd
    };
    let _ = c.send_state(msg);
    let up_reports = up.map(|t| t.wait()).transpose()?;
    let down_reports = down.map(|t| t.wait()).transpose()?;
    let aborted = watcher.stop();
    let window = sampler.finish();
    if let Some(e) = failure {
        return Err(e);
    }
    let (up_flows, down_flows) = (flows_by_id(&up_reports), flows_by_id(&down_reports));
    let reports: Vec<WorkerReport> = up_reports
        .into_iter()
        .flatten()
        .chain(down_reports.into_iter().flatten())
        .collect();
    let agg = aggregate(reports);
    let mut env = capture_environment(
        agg.socket
            .as_ref()
            .and_then(|s| s.local_ip)
            .or(local.map(|l| l.ip())),
        req.command_line.clone(),
    );
    let congestion = agg.socket.as_ref().and_then(|s| s.cc.clone());
    let client = agg.side_report(
        window.as_ref(),
        ProcessMethod::RusageSelf,
        schedule.measured_s(aborted),
        req.placement.busy_poll,
        &mut env,
    );
    if aborted {
        return Ok(ClientOutcome {
            started,
            client,
            client_environment: env,
            server: None,
            aborted: true,
        });
    }

    // Results: ours first, then the server's.
    expect(&mut c, State::ExchangeResults, Duration::from_secs(30))?;
    let up_n = up_flows.len();
    let ours = our_results(
        &client,
        &up_flows,
        &down_flows,
        congestion,
        started_at.elapsed().as_secs_f64(),
    );
    c.send_json(&ours)
        .map_err(|e| control_error(e, "our results to go out"))?;
    let theirs: TestResults = c
        .read_json(MAX_RESULTS, Instant::now() + ANSWER_TIMEOUT)
        .map_err(|e| control_error(e, "the server's results"))?;
    expect(&mut c, State::DisplayResults, ANSWER_TIMEOUT)?;
    let _ = c.send_state(State::IperfDone);
    let up_ids: Vec<i64> = (0..up_n).map(|i| i64::from(stream_id(i))).collect();
    let server = RemoteReport::from_results(&theirs, |id| up_ids.contains(&id));
    Ok(ClientOutcome {
        started,
        client,
        client_environment: env,
        server: Some(server),
        aborted: false,
    })
}

/// The control connection, its cookie sent and the parameters agreed: the
/// server asks for the streams next.
struct Control {
    c: ControlConn,
    addr: SocketAddr,
    local: Option<SocketAddr>,
    cookie: Cookie,
}

fn open_control(
    target: &Iperf3Target,
    req: &ClientRequest,
    message: u64,
    direction: StreamDirection,
) -> Result<Control, ClientError> {
    let addr = resolve(target)?;
    let connect = |source| ClientError::Connect {
        addr: addr.to_string(),
        source,
    };
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(connect)?;
    let local = stream.local_addr().ok();
    let mut c = ControlConn::new(stream).map_err(connect)?;
    let cookie = new_cookie();
    c.send(cookie.as_bytes())
        .map_err(|e| control_error(e, "the cookie to go out"))?;
    expect(&mut c, State::ParamExchange, ANSWER_TIMEOUT)?;
    c.send_json(&params(&req.spec, message, direction))
        .map_err(|e| control_error(e, "the parameters to go out"))?;
    expect(&mut c, State::CreateStreams, ANSWER_TIMEOUT)?;
    Ok(Control {
        c,
        addr,
        local,
        cookie,
    })
}

/// Each flow's totals over a direction's workers, by flow id.
fn flows_by_id(reports: &Option<Vec<WorkerReport>>) -> Vec<(u32, Totals)> {
    let mut v: Vec<(u32, Totals)> = reports
        .iter()
        .flatten()
        .flat_map(|w| w.flow_totals.iter().copied())
        .collect();
    v.sort_by_key(|(id, _)| *id);
    v
}

/// Waits until every upload connection (`uploads`, or all but the control
/// connection) has had all its bytes and its FIN acknowledged by the server
/// (the engine half-closes a stream after its last message), then gives
/// iperf3 time to read them (on this host: until its receive queues are
/// empty): iperf3 stops counting at `TEST_END`, so `TEST_END` goes only once
/// it has everything.
fn wait_delivered(
    server: SocketAddr,
    control: Option<SocketAddr>,
    uploads: Option<&[SocketAddr]>,
    watcher: &Watcher,
) {
    let control = control.map(sys::canonical);
    let mut locals: Vec<SocketAddr> = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < DELIVERY_TIMEOUT && !watcher.cancelled() {
        let Ok(socks) = sys::sockets_to(server) else {
            break;
        };
        let mine: Vec<_> = socks
            .iter()
            .filter(|(_, local)| Some(*local) != control)
            .filter(|(_, local)| !matches!(uploads, Some(u) if !u.contains(local)))
            .collect();
        for (_, local) in &mine {
            if !locals.contains(local) {
                locals.push(*local);
            }
        }
        let delivered = mine
            .iter()
            .all(|(fd, _)| sys::tcp_state(*fd).map(sys::fin_acked).unwrap_or(true));
        if delivered {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // A server on this host: wait until it has read everything (its receive
    // queues are empty), however busy it is; elsewhere, a moment's grace.
    if !locals.is_empty() {
        while t0.elapsed() < DELIVERY_TIMEOUT && !watcher.cancelled() {
            match sys::local_peer_unread(server, &locals) {
                Some(n) if n > 0 => std::thread::sleep(Duration::from_millis(2)),
                _ => break,
            }
        }
    }
    std::thread::sleep(READ_GRACE);
}
