//! One session on the daemon: negotiate, run the server side, report.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use linkperf_engine::{aggregate, DataEndpoints, ServerConfig, ServerTest};
use linkperf_metrics::{capture_environment, side_cpu, Environment, ProcessMethod, SideReport};
use linkperf_wire::{
    decode_client, encode_server, ClientMessage, DataToken, ErrorCode, ServerMessage,
    PROTOCOL_VERSION,
};
use linkperf_workload::{Placement, TestSpec};

use crate::channel::{Channel, Received};
use crate::daemon::DaemonConfig;
use crate::sampler::Sampler;

/// Time after the drain deadline the server waits for the client's `Finished`.
const FINISH_GRACE: Duration = Duration::from_secs(10);
/// How long the client may take to connect its users and say `Start`.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a running session checks its control connection.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// Drain after the window.
pub(crate) const DRAIN: Duration = Duration::from_secs(3);

struct Session<'a> {
    id: u64,
    ch: Channel,
    config: &'a DaemonConfig,
}

/// Why a session ended early, as sent to the client.
struct Fail {
    code: ErrorCode,
    message: String,
}

fn fail(code: ErrorCode, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

/// Serves one control connection to the end. Never panics on input.
pub(crate) fn serve_session(stream: TcpStream, id: u64, config: &DaemonConfig, over_limit: bool) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let mut s = Session {
        id,
        ch: Channel::new(stream, config.max_frame),
        config,
    };
    if over_limit {
        s.send_error(&fail(
            ErrorCode::Limit,
            format!(
                "the server is already serving {} sessions",
                config.max_sessions
            ),
        ));
        return;
    }
    match s.run() {
        Ok(name) => {
            if config.log {
                eprintln!("linkperf serve: session {id} from {peer}: {name} done");
            }
        }
        Err(f) => {
            if config.log {
                eprintln!(
                    "linkperf serve: session {id} from {peer}: {} ({})",
                    f.message, f.code
                );
            }
            s.send_error(&f);
        }
    }
}

impl Session<'_> {
    fn send_error(&mut self, f: &Fail) {
        let _ = self.ch.send(&encode_server(&ServerMessage::Error {
            code: f.code,
            message: f.message.clone(),
        }));
    }

    fn send(&mut self, m: &ServerMessage) -> Result<(), Fail> {
        self.ch
            .send(&encode_server(m))
            .map_err(|e| fail(ErrorCode::Internal, format!("control connection: {e}")))
    }

    fn recv(&mut self, timeout: Duration, waiting_for: &str) -> Result<ClientMessage, Fail> {
        match self.ch.recv(timeout) {
            Ok(Received::Frame(f)) => decode_client(&f).map_err(|e| {
                let code = match e {
                    linkperf_wire::WireError::VersionMismatch { .. } => ErrorCode::VersionMismatch,
                    _ => ErrorCode::Malformed,
                };
                fail(code, e.to_string())
            }),
            Ok(Received::Timeout) => Err(fail(
                ErrorCode::Refused,
                format!("no {waiting_for} within {timeout:?}"),
            )),
            Ok(Received::Closed) => Err(fail(
                ErrorCode::Aborted,
                format!("client closed the control connection before {waiting_for}"),
            )),
            Err(crate::channel::RecvError::Wire(e)) => {
                let code = match e {
                    linkperf_wire::WireError::FrameTooLarge { .. } => ErrorCode::TooLarge,
                    _ => ErrorCode::Malformed,
                };
                Err(fail(code, e.to_string()))
            }
            Err(e) => Err(fail(ErrorCode::Internal, e.to_string())),
        }
    }

    fn run(&mut self) -> Result<String, Fail> {
        let timeout = self.config.control_timeout;
        match self.recv(timeout, "hello")? {
            ClientMessage::Hello { protocol_version, .. } if protocol_version == PROTOCOL_VERSION => {}
            ClientMessage::Hello { protocol_version, .. } => {
                return Err(fail(
                    ErrorCode::VersionMismatch,
                    format!("client speaks control protocol {protocol_version}, this server speaks {PROTOCOL_VERSION}"),
                ))
            }
            other => return Err(out_of_order("hello", &other)),
        }
        let welcome = ServerMessage::Welcome {
            protocol_version: PROTOCOL_VERSION,
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            session: self.id,
            challenge: None,
        };
        self.send(&welcome)?;
        let (spec, placement) = match self.recv(timeout, "test request")? {
            ClientMessage::Test { spec, placement } => (spec, placement),
            other => return Err(out_of_order("test", &other)),
        };
        self.check(&spec, &placement)?;
        let name = spec.name();
        self.run_test(spec, placement)?;
        Ok(name)
    }

    fn check(&self, spec: &TestSpec, placement: &Placement) -> Result<(), Fail> {
        spec.validate()
            .map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
        let total = spec.warmup + spec.duration;
        if total > self.config.max_duration {
            return Err(fail(
                ErrorCode::Limit,
                format!(
                    "test of {:?} (warmup + duration) exceeds this server's --max-duration of {:?}",
                    total, self.config.max_duration
                ),
            ));
        }
        if spec.users > self.config.max_users {
            return Err(fail(
                ErrorCode::Limit,
                format!(
                    "{} users exceed this server's limit of {}",
                    spec.users, self.config.max_users
                ),
            ));
        }
        if placement.threads == 0 || placement.threads > 1024 {
            return Err(fail(
                ErrorCode::Refused,
                format!(
                    "server threads must be between 1 and 1024, got {}",
                    placement.threads
                ),
            ));
        }
        Ok(())
    }

    fn environment(&self) -> Environment {
        let ip = self.ch.stream().local_addr().ok().map(|a| a.ip());
        capture_environment(ip, self.config.command_line.clone())
    }

    fn run_test(&mut self, spec: TestSpec, placement: Placement) -> Result<(), Fail> {
        let mut token = [0u8; 16];
        getrandom::getrandom(&mut token)
            .map_err(|e| fail(ErrorCode::Internal, format!("random token: {e}")))?;
        let token = DataToken(token);
        let bind_ip = self
            .ch
            .stream()
            .local_addr()
            .map(|a| a.ip())
            .map_err(|e| fail(ErrorCode::Internal, e.to_string()))?;
        let _ = linkperf_metrics::raise_fd_limit(u64::from(spec.users) + 256);
        let server = ServerTest::bind(ServerConfig {
            spec: spec.clone(),
            threads: placement.threads,
            affinity: placement.affinity.as_ref().map(|c| c.0.clone()),
            busy_poll: placement.busy_poll,
            bind_ip,
            token,
            preamble_timeout: Duration::from_secs(5),
        })
        .map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
        let (data_ports, unix_names) = match server.endpoints() {
            DataEndpoints::Tcp(a) | DataEndpoints::Udp(a) => {
                (a.iter().map(|a| a.port()).collect(), vec![])
            }
            DataEndpoints::Unix(n) => (vec![], n.clone()),
        };
        let accepted = ServerMessage::Accepted {
            data_ports,
            unix_names,
            token,
            environment: self.environment(),
        };
        if let Err(f) = self.send(&accepted) {
            server.abort();
            let _ = server.finish();
            return Err(f);
        }
        match self.recv(START_TIMEOUT, "start") {
            Ok(ClientMessage::Start) => {}
            Ok(other) => {
                server.abort();
                let _ = server.finish();
                return Err(out_of_order("start", &other));
            }
            Err(f) => {
                server.abort();
                let _ = server.finish();
                return Err(f);
            }
        }
        let schedule = server.start(DRAIN);
        let sampler = Sampler::spawn(schedule);
        if let Err(f) = self.send(&ServerMessage::Started) {
            server.abort();
            let _ = server.finish();
            let _ = sampler.finish();
            return Err(f);
        }
        // Watch the control connection until the client is done.
        let deadline = schedule.drain_until + FINISH_GRACE;
        let mut aborted = false;
        let outcome: Result<(), Fail> = loop {
            if Instant::now() > deadline {
                break Err(fail(
                    ErrorCode::Aborted,
                    "the client did not finish in time; test abandoned",
                ));
            }
            match self.ch.recv(WATCH_INTERVAL) {
                Ok(Received::Timeout) => continue,
                Ok(Received::Frame(f)) => match decode_client(&f) {
                    Ok(ClientMessage::Finished) => break Ok(()),
                    Ok(ClientMessage::Abort { .. }) => {
                        aborted = true;
                        server.abort();
                        break Ok(());
                    }
                    Ok(other) => break Err(out_of_order("finished", &other)),
                    Err(e) => break Err(fail(ErrorCode::Malformed, e.to_string())),
                },
                Ok(Received::Closed) => {
                    break Err(fail(ErrorCode::Aborted, "client vanished mid-test"))
                }
                Err(e) => break Err(fail(ErrorCode::Malformed, e.to_string())),
            }
        };
        if outcome.is_err() {
            server.abort();
        }
        let window = sampler.finish();
        let reports = server
            .finish()
            .map_err(|e| fail(ErrorCode::Internal, e.to_string()))?;
        outcome?;
        let agg = aggregate(reports);
        let (process, method) = match (self.config.process_method, &window) {
            (ProcessMethod::RusageSelf, Some(w)) => (w.process, ProcessMethod::RusageSelf),
            _ => (agg.worker_cpu, ProcessMethod::RusageThreadSum),
        };
        let window_s = window.as_ref().map(|w| w.window_s).unwrap_or(0.0);
        let system = window.map(|w| w.system).unwrap_or_else(|| {
            let s = linkperf_metrics::system_cpu_now();
            linkperf_metrics::system_cpu_between(&s, &s)
        });
        let cpu = side_cpu(process, method, &system, window_s);
        let mut env = self.environment();
        if let Some(s) = &agg.socket {
            env.socket_congestion_control = s.cc.clone();
            env.socket_sndbuf = s.sndbuf;
            env.socket_rcvbuf = s.rcvbuf;
        }
        let report: SideReport =
            agg.into_report(schedule.window().as_secs_f64(), cpu, placement.busy_poll);
        let _ = aborted;
        self.send(&ServerMessage::Results {
            report,
            environment: env,
        })
    }
}

fn out_of_order(expected: &str, got: &ClientMessage) -> Fail {
    let name = match got {
        ClientMessage::Hello { .. } => "hello",
        ClientMessage::Auth { .. } => "auth",
        ClientMessage::Test { .. } => "test",
        ClientMessage::Start => "start",
        ClientMessage::Finished => "finished",
        ClientMessage::Abort { .. } => "abort",
    };
    fail(
        ErrorCode::OutOfOrder,
        format!("expected {expected}, got {name}"),
    )
}
