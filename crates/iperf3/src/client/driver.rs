//! One linkperf stream test against a stock `iperf3 -s`: the blocking shell
//! of [`ClientControl`], which says what to send and what to do.
//!
//! The control protocol is iperf3's; the data is linkperf's engine: every
//! user is a stream, and each data connection sends the test's cookie where
//! linkperf's own connections send their preamble. linkperf asks iperf3 for
//! a test of warmup + duration seconds and omits nothing, so iperf3's counts
//! cover the whole test like linkperf's whole-life totals. `--bidir` runs the
//! users twice, once each way, on separate connections (iperf3 streams carry
//! one direction each): the sending connections first, as iperf3 expects.
//!
//! The shell is blocking, like the linkperf client's session: each turn it
//! gives the control the time, what the connection holds (as much as the
//! message awaited needs) and the cancel flag, then does what the control
//! says: sends, connects and starts the engine, looks whether the server
//! has taken in what was sent, stops the engine, builds the report. Between
//! turns it waits for the control connection's bytes, at most until the
//! control's next deadline. The engine's end is waited for on a thread of
//! its own, looked at every [`ENGINE_LOOK`] while the engine runs. A flag
//! and a peer's acknowledgements raise no event, so the control asks to
//! look at them in its wait: the flag every 50 ms
//! ([`CANCEL_LOOK`](crate::proto::client::CANCEL_LOOK)), the
//! acknowledgements every 2 ms after the window
//! ([`DELIVERY_LOOK`](crate::proto::client::DELIVERY_LOOK)).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linkperf_engine::{
    aggregate, Aborter, ClientConfig, ClientTest, DataEndpoints, EngineError, Sampler, Schedule,
    WindowCpu, WorkerReport,
};
use linkperf_measured::{Environment, ProcessMethod, SideReport, Totals};
use linkperf_metrics::capture_environment;
use linkperf_protocol::DataToken;
use linkperf_workload::{Bytes, StreamDirection, Workload};
use serde_json::Map;

use super::delivery::Delivery;
use super::request::{check_spec, new_cookie, params, resolve};
use super::{ClientOutcome, ClientRequest, Iperf3Target};
use crate::client::RemoteReport;
use crate::codec::{stream_id, Cookie, StreamResults, TestResults};
use crate::control::ControlConn;
use crate::proto::client::{ClientControl, Do, Ending};
use crate::sys;
use crate::ClientError;

/// After the window, how long the engine's flows may take to end.
const DRAIN: Duration = Duration::from_secs(10);
/// Bytes taken off the control connection at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The longest wait when nothing is due: the control connection's bytes
/// end it.
const IDLE_WAIT: Duration = Duration::from_secs(60);
/// While the engine runs, the longest wait on the control connection: how
/// late its end may be seen (as the linkperf client's session watches its
/// workers).
const ENGINE_LOOK: Duration = Duration::from_millis(50);

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
    let addr = resolve(target)?;
    let connect = |source| ClientError::Connect {
        addr: addr.to_string(),
        source,
    };
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(connect)?;
    let local = stream.local_addr().ok();
    let conn = ControlConn::new(stream).map_err(connect)?;
    let looping = |e: std::io::Error| ClientError::Control(format!("the control loop: {e}"));
    let cookie = new_cookie();
    let control = ClientControl::new(
        &cookie,
        params(&req.spec, message.0, direction),
        req.cancel.is_some(),
        Instant::now(),
    );
    let mut shell = Shell {
        conn,
        control,
        req,
        addr,
        local,
        cookie,
        message,
        direction,
        engine: None,
        run: None,
        waiter: None,
        reports: None,
        delivery: None,
        side: None,
        end: None,
    };
    loop {
        match shell.turn(Instant::now()) {
            Turn::Stop => break,
            Turn::Again => {}
            Turn::Wait(d) => {
                let d = if shell.waiter.is_some() {
                    d.min(ENGINE_LOOK)
                } else {
                    d
                };
                shell.conn.wait_readable(d).map_err(looping)?;
            }
        }
    }
    shell.end.unwrap_or_else(|| {
        Err(ClientError::Control(
            "the control exchange stopped before its end".into(),
        ))
    })
}

/// The engine's two directions, connected.
struct Engine {
    up: Option<ClientTest>,
    down: Option<ClientTest>,
    /// The local addresses of the upload's sockets (`--bidir`).
    uploads: Option<Vec<SocketAddr>>,
    aborters: Vec<Aborter>,
}

/// The engine running: since when, its schedule, its CPU sampler.
struct Run {
    started: SystemTime,
    schedule: Schedule,
    sampler: Option<Sampler>,
    window: Option<WindowCpu>,
}

/// Each direction's workers' reports.
type Reports = (Option<Vec<WorkerReport>>, Option<Vec<WorkerReport>>);

/// This side's report, built once the engine is done.
struct Side {
    client: SideReport,
    env: Environment,
    /// The streams this side sent on (the first ones).
    up_n: usize,
}

/// What a turn of the shell came to.
enum Turn {
    /// The test is over.
    Stop,
    /// More is due at once.
    Again,
    /// Nothing until the control connection's bytes, or this long.
    Wait(Duration),
}

struct Shell<'a> {
    conn: ControlConn,
    control: ClientControl,
    req: &'a ClientRequest,
    addr: SocketAddr,
    local: Option<SocketAddr>,
    cookie: Cookie,
    message: Bytes,
    direction: StreamDirection,
    engine: Option<Engine>,
    run: Option<Run>,
    /// The engine's reports, sent by the thread that waits for them.
    waiter: Option<mpsc::Receiver<Result<Reports, EngineError>>>,
    reports: Option<Reports>,
    delivery: Option<Delivery>,
    side: Option<Side>,
    end: Option<Result<ClientOutcome, ClientError>>,
}

impl Shell<'_> {
    fn turn(&mut self, now: Instant) -> Turn {
        if self.end.is_some() {
            return Turn::Stop;
        }
        let cancel = self.req.cancel.as_ref();
        if cancel.is_some_and(|f| f.load(Ordering::Acquire)) {
            self.control.cancel(now);
        }
        if let Some(rx) = &self.waiter {
            match rx.try_recv() {
                Ok(reports) => self.engine_ended(reports, now),
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => self.engine_ended(
                    Err(EngineError::Worker("a client worker panicked".into())),
                    now,
                ),
            }
            if self.end.is_some() {
                return Turn::Stop;
            }
        }
        if self.control.timeout().is_some_and(|t| now >= t) {
            self.control.handle_timeout(now);
        }
        self.read(now);
        let mut acted = false;
        while let Some(d) = self.control.poll() {
            acted = true;
            self.act(d);
            if self.end.is_some() {
                return Turn::Stop;
            }
        }
        if acted {
            // What was done took time and may have made more due.
            return Turn::Again;
        }
        Turn::Wait(self.control.wait(now).unwrap_or(IDLE_WAIT))
    }

    /// What the control connection holds, as much as the control awaits.
    fn read(&mut self, now: Instant) {
        loop {
            let want = self.control.wants();
            if want == 0 {
                return;
            }
            match self.conn.recv_now(want.min(READ_CHUNK)) {
                Ok(Some(bytes)) => self.control.receive(&bytes, now),
                Ok(None) => return,
                Err(e) => {
                    self.control.broken(e, now);
                    return;
                }
            }
        }
    }

    fn act(&mut self, d: Do) {
        match d {
            Do::Send(bytes) => {
                if let Err(e) = self.conn.send(&bytes) {
                    self.control.send_failed(e);
                }
            }
            Do::ConnectStreams => match self.connect() {
                Ok(engine) => {
                    self.engine = Some(engine);
                    self.control.connected(Instant::now());
                }
                Err(e) => self.end = Some(Err(e)),
            },
            Do::StartEngine => self.start(),
            Do::LookDelivered => {
                let d = self.delivery.get_or_insert_with(|| {
                    let uploads = self.engine.as_ref().and_then(|e| e.uploads.clone());
                    Delivery::new(self.addr, self.local, uploads)
                });
                if d.look() {
                    self.control.delivered(Instant::now());
                }
            }
            Do::StopEngine => {
                for a in self.engine.iter().flat_map(|e| &e.aborters) {
                    a.abort();
                }
            }
            Do::AwaitEngine => self.await_engine(),
            Do::Report { aborted } => self.report(aborted),
            Do::Finish(ending) => self.end = Some(self.finish(ending)),
        }
    }

    fn connect(&self) -> Result<Engine, ClientError> {
        linkperf_metrics::raise_fd_limit(2 * u64::from(self.req.spec.users) + 256)
            .map_err(|e| ClientError::Unsupported(e.to_string()))?;
        let (up, down, uploads) = connect_streams(
            self.req,
            self.addr,
            self.local,
            &self.cookie,
            self.message,
            self.direction,
        )?;
        let aborters = [&up, &down]
            .into_iter()
            .flatten()
            .map(|t| t.aborter())
            .collect();
        Ok(Engine {
            up,
            down,
            uploads,
            aborters,
        })
    }

    fn start(&mut self) {
        let Some(engine) = &self.engine else {
            return;
        };
        let started = SystemTime::now();
        let mut schedule: Option<Schedule> = None;
        for t in [&engine.up, &engine.down].into_iter().flatten() {
            let s = t.start(DRAIN);
            schedule.get_or_insert(s);
        }
        let schedule = schedule.expect("at least one direction runs");
        self.run = Some(Run {
            started,
            schedule,
            sampler: Some(Sampler::spawn(schedule)),
            window: None,
        });
        self.control.started(schedule.measure_until, Instant::now());
    }

    /// Waits for the engine's flows on a thread of its own, which the
    /// shell's turns ask whether they have ended.
    fn await_engine(&mut self) {
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        let (up, down) = (engine.up.take(), engine.down.take());
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::Builder::new()
            .name("lp-iperf3-wait".into())
            .spawn(move || {
                let tx = tx;
                let reports = up
                    .map(|t| t.wait())
                    .transpose()
                    .and_then(|up| Ok((up, down.map(|t| t.wait()).transpose()?)));
                let _ = tx.send(reports);
            });
        match waiter {
            Ok(_) => self.waiter = Some(rx),
            Err(e) => {
                self.end = Some(Err(ClientError::Control(format!(
                    "wait for the engine: {e}"
                ))))
            }
        }
    }

    /// The engine's flows have ended: an engine failure ends the test,
    /// else the control says what comes next.
    fn engine_ended(&mut self, reports: Result<Reports, EngineError>, now: Instant) {
        self.waiter = None;
        match reports {
            Ok(r) => self.reports = Some(r),
            Err(e) => {
                self.end = Some(Err(e.into()));
                return;
            }
        }
        if let Some(run) = &mut self.run {
            run.window = run.sampler.take().and_then(|s| s.finish());
        }
        self.control.engine_done(now);
    }

    /// This side's report, and its results for the control.
    fn report(&mut self, aborted: bool) {
        let (Some(run), Some((up_reports, down_reports))) = (&self.run, self.reports.take()) else {
            return;
        };
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
                .or(self.local.map(|l| l.ip())),
            self.req.command_line.clone(),
        );
        let congestion = agg.socket.as_ref().and_then(|s| s.cc.clone());
        let client = agg.side_report(
            run.window.as_ref(),
            ProcessMethod::RusageSelf,
            run.schedule.measured_s(aborted),
            self.req.placement.busy_poll,
            &mut env,
        );
        let ours = our_results(&client, &up_flows, &down_flows, congestion);
        self.side = Some(Side {
            client,
            env,
            up_n: up_flows.len(),
        });
        self.control.report(ours, Instant::now());
    }

    fn finish(&mut self, ending: Ending) -> Result<ClientOutcome, ClientError> {
        let outcome = |side: Side, started: SystemTime, server, aborted| ClientOutcome {
            started,
            client: side.client,
            client_environment: side.env,
            server,
            aborted,
        };
        let started = self
            .run
            .as_ref()
            .map_or(SystemTime::UNIX_EPOCH, |r| r.started);
        match (ending, self.side.take()) {
            (Ending::Done(theirs), Some(side)) => {
                let up_ids: Vec<i64> = (0..side.up_n).map(|i| i64::from(stream_id(i))).collect();
                let server = RemoteReport::from_results(&theirs, |id| up_ids.contains(&id));
                Ok(outcome(side, started, Some(server), false))
            }
            (Ending::Aborted, Some(side)) => Ok(outcome(side, started, None, true)),
            (Ending::Failed(e), _) => {
                // An engine connected and not waited for yet is stopped.
                if let Some(engine) = self.engine.take() {
                    for a in &engine.aborters {
                        a.abort();
                    }
                    for t in [engine.up, engine.down].into_iter().flatten() {
                        let _ = t.wait();
                    }
                }
                Err(e)
            }
            (_, None) => Err(ClientError::Control(
                "the test ended before this side's report".into(),
            )),
        }
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
    message: Bytes,
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

/// This side's results as iperf3 exchanges them: each stream's bytes (sent
/// for the upload, received for the download) and the CPU. Each stream's
/// `end_time` is the control's to set when they go out.
fn our_results(
    client: &SideReport,
    up_flows: &[(u32, Totals)],
    down_flows: &[(u32, Totals)],
    congestion: Option<String>,
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
        // Set as the results go out (ClientControl).
        end_time: None,
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
