//! One linkperf stream test against a stock `iperf3 -s`.
//!
//! The control protocol is iperf3's; the data is linkperf's engine: every
//! user is a stream, and each data connection sends the test's cookie where
//! linkperf's own connections send their preamble. linkperf asks iperf3 for
//! a test of warmup + duration seconds and omits nothing, so iperf3's counts
//! cover the whole test like linkperf's whole-life totals. `--bidir` runs the
//! users twice, once each way, on separate connections (iperf3 streams carry
//! one direction each): the sending connections first, as iperf3 expects.

use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linkperf_engine::{aggregate, ClientConfig, ClientTest, DataEndpoints, Schedule, WorkerReport};
use linkperf_metrics::{capture_environment, Environment, ProcessMethod, SideReport, Totals};
use linkperf_wire::DataToken;
use linkperf_workload::{Placement, Protocol, StreamDirection, TestSpec, Workload};
use serde_json::Map;

use crate::client::RemoteReport;
use crate::control::{ControlConn, ControlError};
use crate::sys;
use crate::wire::{
    describe_errno, server_error_from_bytes, stream_id, Cookie, State, StreamResults, TestParams,
    TestResults,
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
/// iperf3's limits: streams (each way), block size, test length.
const MAX_STREAMS: u32 = 128;
const MAX_BLOCKSIZE: u64 = 1024 * 1024;
const MAX_TIME_S: u64 = 86_400;
const MAX_MSS: u32 = 9 * 1024;

/// Where the iperf3 server is.
#[derive(Debug, Clone)]
pub struct Iperf3Target {
    /// `host` or `host:port` as the user gave it.
    pub address: String,
    /// Port used when `address` has none (iperf3's is 5201).
    pub default_port: u16,
}

/// One test to run against an iperf3 server.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// The test: a TCP stream workload.
    pub spec: TestSpec,
    /// The client's workers.
    pub placement: Placement,
    /// Set to abort the test; what was measured is kept.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The command line, for the environment record.
    pub command_line: Vec<String>,
}

/// What one test produced.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// When it started.
    pub started: SystemTime,
    /// The client's measurements, as against a linkperf server.
    pub client: SideReport,
    /// The client host.
    pub client_environment: Environment,
    /// What the iperf3 server reported (`None` if the test was aborted first).
    pub server: Option<RemoteReport>,
    /// True if the test was aborted before its end.
    pub aborted: bool,
}

/// Refuses, before anything is sent, what iperf3's protocol cannot say.
pub fn check_spec(spec: &TestSpec) -> Result<(), ClientError> {
    let no = |m: String| Err(ClientError::Unsupported(m));
    let Workload::Stream { message, .. } = &spec.workload else {
        return no(format!(
            "{} against an iperf3 server: iperf3 carries streams only (stream-up:SIZE, stream-down:SIZE, stream-bidir:SIZE)",
            spec.workload.name()
        ));
    };
    if spec.protocol != Protocol::Tcp {
        return no(format!(
            "over {} against an iperf3 server: linkperf drives iperf3 with TCP streams only",
            spec.protocol
        ));
    }
    if spec.users == 0 || spec.users > MAX_STREAMS {
        return no(format!(
            "{} users against an iperf3 server: iperf3 runs 1 to {MAX_STREAMS} streams (each way)",
            spec.users
        ));
    }
    if message.0 > MAX_BLOCKSIZE {
        return no(format!(
            "{}-byte messages against an iperf3 server: iperf3's largest block is 1 MiB",
            message.0
        ));
    }
    if test_seconds(spec) > MAX_TIME_S {
        return no(format!(
            "a {} s test against an iperf3 server: iperf3 runs at most {MAX_TIME_S} s",
            test_seconds(spec)
        ));
    }
    if spec.socket.mss.is_some_and(|m| m == 0 || m > MAX_MSS) {
        return no(format!("an MSS above iperf3's {MAX_MSS}"));
    }
    Ok(())
}

/// iperf3's whole-second test length covering warmup and window.
fn test_seconds(spec: &TestSpec) -> u64 {
    (spec.warmup + spec.duration).as_secs_f64().ceil() as u64
}

fn resolve(t: &Iperf3Target) -> Result<SocketAddr, ClientError> {
    let err = |why: String| ClientError::Resolve {
        addr: t.address.clone(),
        why,
    };
    let text = if let Ok(ip) = t.address.parse::<IpAddr>() {
        SocketAddr::new(ip, t.default_port).to_string()
    } else if t
        .address
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        t.address.clone()
    } else {
        format!("{}:{}", t.address, t.default_port)
    };
    text.to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".into()))
}

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

fn new_cookie() -> Cookie {
    let mut r = [0u8; 36];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut r));
    if filled.is_err() {
        // Unique enough for a cookie: it only tells tests apart.
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        for (i, b) in r.iter_mut().enumerate() {
            *b = (seed >> ((i * 7) % 120)) as u8 ^ (i as u8).wrapping_mul(31);
        }
    }
    Cookie::from_entropy(&r)
}

/// The parameters linkperf sends for `spec`.
fn params(spec: &TestSpec, message: u64, direction: StreamDirection) -> TestParams {
    let s = &spec.socket;
    TestParams {
        tcp: true,
        omit: 0,
        time: Some(test_seconds(spec) as i64),
        num: Some(0),
        blockcount: Some(0),
        mss: s.mss.map(i64::from),
        nodelay: s.nodelay_for(&spec.workload),
        parallel: Some(i64::from(spec.users)),
        reverse: direction == StreamDirection::Down,
        bidirectional: direction == StreamDirection::Bidir,
        window: s.sndbuf.max(s.rcvbuf).map(i64::from),
        len: Some(message as i64),
        pacing_timer: Some(1000),
        congestion: s.cc.clone(),
        // The protocol version linkperf speaks.
        client_version: Some("3.12".into()),
        ..TestParams::default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_workload::Bytes;

    fn spec(w: &str, users: u32) -> TestSpec {
        TestSpec::new(
            w.parse().unwrap(),
            Protocol::Tcp,
            users,
            Duration::from_secs(2),
        )
    }

    #[test]
    fn what_iperf3_cannot_say_is_refused_up_front() {
        assert!(check_spec(&spec("stream-up:128k", 4)).is_ok());
        assert!(check_spec(&spec("stream-down:1m", 128)).is_ok());
        assert!(check_spec(&spec("stream-bidir:64k", 2)).is_ok());
        for bad in [spec("rr1c-1x1", 1), spec("crr:1x1", 1), spec("mix:1x1", 1)] {
            let e = check_spec(&bad).unwrap_err().to_string();
            assert!(e.contains("iperf3 carries streams only"), "{e}");
        }
        assert!(check_spec(&spec("stream-up:2m", 1)).is_err());
        assert!(check_spec(&spec("stream-up:128k", 129)).is_err());
        let mut udp = spec("stream-up:1k", 1);
        udp.protocol = Protocol::Udp;
        assert!(check_spec(&udp).is_err());
        let mut long = spec("stream-up:1k", 1);
        long.duration = Duration::from_secs(86_400);
        assert!(
            check_spec(&long).is_err(),
            "warmup + duration over iperf3's day"
        );
    }

    #[test]
    fn parameters_say_the_spec_in_iperf3s_words() {
        let mut s = spec("stream-down:64k", 4);
        s.warmup = Duration::from_millis(500);
        s.duration = Duration::from_secs(2);
        s.socket.sndbuf = Some(262_144);
        s.socket.cc = Some("reno".into());
        s.socket.mss = Some(1000);
        let p = params(&s, 65_536, StreamDirection::Down);
        assert_eq!(p.time, Some(3), "warmup + duration, rounded up");
        assert_eq!((p.omit, p.parallel, p.len), (0, Some(4), Some(65_536)));
        assert!(p.reverse && !p.bidirectional && !p.nodelay);
        assert_eq!((p.window, p.mss), (Some(262_144), Some(1000)));
        assert_eq!(p.congestion.as_deref(), Some("reno"));
        let p = params(&spec("stream-bidir:1k", 1), 1024, StreamDirection::Bidir);
        assert!(p.bidirectional && !p.reverse);
        let _ = Bytes(1);
    }

    #[test]
    fn targets_take_iperf3s_port_unless_given() {
        let t = |a: &str| {
            resolve(&Iperf3Target {
                address: a.into(),
                default_port: 5201,
            })
            .unwrap()
        };
        assert_eq!(t("127.0.0.1"), "127.0.0.1:5201".parse().unwrap());
        assert_eq!(t("127.0.0.1:7000"), "127.0.0.1:7000".parse().unwrap());
        assert_eq!(t("localhost:7001").port(), 7001);
        assert_eq!(t("::1"), "[::1]:5201".parse().unwrap());
    }
}
