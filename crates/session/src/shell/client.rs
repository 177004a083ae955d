//! Driving one test from the client: negotiate with the daemon, connect the
//! users, run, collect both sides' measurements.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linkperf_engine::{aggregate, ClientConfig, ClientTest, DataEndpoints, EngineError, LiveStats};
use linkperf_measured::{AgentIdentity, ProcessMethod};
use linkperf_metrics::capture_environment;
use linkperf_protocol::{encode_client, ClientMessage};
use linkperf_workload::{Placement, Protocol, TestSpec};

use crate::proto::auth::AuthKey;
use crate::proto::client::address::{self, parse_address};
use crate::proto::client::answers::Offer;
use crate::proto::client::midtest::ServerSide;
use crate::proto::client::outcome::Outcome;
use crate::proto::client::session::{ClientSession, NoTest};
use crate::proto::handshake::ClientHandshake;
use crate::proto::heard::Heard;
use crate::proto::server::session::DRAIN;
use crate::shell::channel::Channel;
use crate::shell::key::new_challenge;
use crate::SessionError;
use linkperf_engine::Sampler;

pub(crate) mod delegate;
mod foreign;
mod profile;
pub use delegate::{delegate, identify, DelegateRequest, Delegated, DELEGATED_MAX_FRAME};
pub use profile::{run_profile, ProfileRequest};

/// Where the server is, and how to prove this client may use it.
#[derive(Debug, Clone)]
pub struct Target {
    /// Control address as the user gave it (`host`, `host:port`).
    pub address: String,
    /// Port used when `address` has none.
    pub default_port: u16,
    /// The pre-shared key, to answer the server's challenge and to check
    /// the server's proof of it: a client holding a key uses only a server
    /// that proves it holds the same one (the key never crosses the wire).
    pub auth_key: Option<AuthKey>,
}

/// One test to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The test.
    pub spec: TestSpec,
    /// The client's workers.
    pub client: Placement,
    /// The server's workers.
    pub server: Placement,
    /// How the client's process CPU is taken (`RusageThreadSum` when the server
    /// shares the process).
    pub process_method: ProcessMethod,
    /// Set to abort the test; what was measured is kept.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The command line, for the environment record.
    pub command_line: Vec<String>,
    /// Where the client's workers publish live totals (for progress bars).
    pub live: Option<Arc<LiveStats>>,
}

impl Target {
    /// Whether the server's address is one of this host's (loopback, or an
    /// address a socket here can bind to); `None` when it does not resolve.
    /// Unix sockets reach only such a server.
    pub fn is_this_host(&self) -> Option<bool> {
        let ip = resolve(self).ok()?.ip();
        Some(ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok())
    }
}

fn resolve(target: &Target) -> Result<SocketAddr, SessionError> {
    let (host, port) = parse_address(&target.address, target.default_port)?;
    (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|source| SessionError::Connect {
            addr: target.address.clone(),
            source,
        })?
        .next()
        .ok_or_else(|| {
            SessionError::Invalid(format!("'{}' resolves to no address", target.address))
        })
}

struct Client {
    ch: Channel,
}

impl Client {
    fn send(&mut self, m: &ClientMessage) -> Result<(), SessionError> {
        self.ch
            .send(&encode_client(m))
            .map_err(|e| SessionError::Control(format!("send: {e}")))
    }
}

/// A control session past its handshake.
pub(crate) struct Opened {
    c: Client,
    /// The server's control address.
    addr: SocketAddr,
    /// This end's address of the control connection.
    local_ip: Option<IpAddr>,
    /// The server's identity as an agent, if it stated one.
    agent: Option<AgentIdentity>,
}

/// Opens a control session with the daemon at `target`: hello (with this
/// client's own challenge when it holds a key), welcome (the server's proof
/// checked before anything more is sent), and the answer to the server's
/// challenge if it sends one. `max_frame` bounds the server's messages.
fn open(target: &Target, max_frame: usize) -> Result<Opened, SessionError> {
    let addr = resolve(target)?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|source| {
        SessionError::Connect {
            addr: addr.to_string(),
            source,
        }
    })?;
    let local_ip = stream.local_addr().ok().map(|a| a.ip());
    let mut c = Client {
        ch: Channel::new(stream, max_frame),
    };
    let mine = match &target.auth_key {
        Some(_) => Some(
            new_challenge()
                .map_err(|e| SessionError::Control(format!("make a random challenge: {e}")))?,
        ),
        None => None,
    };
    let (host, port) = parse_address(&target.address, target.default_port)?;
    let shown = address::join(&host, port);
    let key = target.auth_key.as_ref();
    let (mut hs, hello) = ClientHandshake::start(key, mine, shown, Instant::now());
    c.send(&hello)?;
    // Something other than a linkperf server may listen there: tell what.
    let first = foreign::first_answer(c.ch.stream(), hs.wait(Instant::now()));
    let welcomed = hs.first_answer(first, Instant::now()).and_then(|()| loop {
        if let Some(w) = hs.welcome(c.ch.hear(hs.wait(Instant::now())), Instant::now())? {
            break Ok(w);
        }
    });
    let welcomed = match welcomed {
        Ok(w) => w,
        Err(refused) => {
            if let Some(reason) = refused.abort {
                let _ = c.send(&ClientMessage::Abort {
                    reason: reason.into(),
                });
            }
            return Err(refused.error);
        }
    };
    if let Some(auth) = welcomed.auth {
        c.send(&auth)?;
    }
    Ok(Opened {
        c,
        addr,
        local_ip,
        agent: welcomed.agent,
    })
}

impl Client {
    /// Tells the server why the test of session `s` is given up before it
    /// starts, and passes the error on.
    fn abandon<E: Into<SessionError> + std::fmt::Display>(
        &mut self,
        s: &mut ClientSession,
        e: E,
    ) -> SessionError {
        let _ = self.send(&s.give_up(&e.to_string()));
        e.into()
    }

    /// The server's offer to session `s`, awaited as long as the session
    /// allows, or why there is none (the server told when the session
    /// says so).
    fn take_offer(&mut self, s: &mut ClientSession) -> Result<Offer, SessionError> {
        loop {
            match s.offer(self.hear(s), Instant::now()) {
                Ok(Some(offer)) => return Ok(offer),
                Ok(None) => {}
                Err(NoTest { error, abort }) => {
                    if let Some(reason) = abort {
                        let _ = self.send(&ClientMessage::Abort { reason });
                    }
                    return Err(error);
                }
            }
        }
    }

    /// One receive on the control connection, as long as session `s` allows.
    fn hear(&mut self, s: &ClientSession) -> Heard {
        self.ch.hear(s.wait(Instant::now()))
    }

    /// The flows of session `s` are connected: `start → started`.
    fn confirm_start(&mut self, s: &mut ClientSession) -> Result<(), SessionError> {
        let start = s.connected(Instant::now())?;
        self.send(&start)?;
        while !s.started(self.hear(s), Instant::now())? {}
        Ok(())
    }

    /// Asks for the server's side of session `s` with `ask` (`finished` or
    /// `abort`) and waits for it as long as the session allows.
    fn ask_results(&mut self, s: &mut ClientSession, ask: &ClientMessage) -> ServerSide {
        if let Err(e) = self.send(ask) {
            return s.unasked(e);
        }
        loop {
            if let Some(side) = s.results(self.hear(s), Instant::now()) {
                return side;
            }
        }
    }

    /// What the server's users wrote in timed transaction `txn` of session
    /// `s`'s profile, once this side's users ended it after `iterations`.
    fn txn_exchange(
        &mut self,
        s: &mut ClientSession,
        txn: usize,
        iterations: Vec<u64>,
    ) -> Result<Vec<Vec<u64>>, String> {
        let end = s.txn_end(txn, iterations, Instant::now())?;
        self.send(&end).map_err(|e| e.to_string())?;
        loop {
            if let Some(written) = s.txn_ended(self.hear(s), Instant::now())? {
                return Ok(written);
            }
        }
    }
}

/// Runs one test against the daemon at `target`: the blocking shell of a
/// `ClientSession` (client/session.rs), which says what to send and how long to wait, and
/// what the server's answers come to.
pub fn run_test(target: &Target, req: &RunRequest) -> Result<Outcome, SessionError> {
    req.spec
        .validate()
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let Opened {
        mut c,
        addr,
        local_ip,
        agent: server_agent,
    } = open(target, linkperf_protocol::DEFAULT_MAX_FRAME)?;
    let here = linkperf_metrics::boot_id();
    let (mut s, ask) =
        ClientSession::ask(req.spec.clone(), req.server.clone(), here, Instant::now());
    c.send(&ask)?;
    let protocol = req.spec.protocol;
    let offer = c.take_offer(&mut s)?;
    let at = |ports: &[u16]| {
        ports
            .iter()
            .map(|p| SocketAddr::new(addr.ip(), *p))
            .collect()
    };
    let endpoints = match protocol {
        Protocol::Tcp => DataEndpoints::Tcp(at(&offer.data_ports)),
        Protocol::Udp => DataEndpoints::Udp(at(&offer.data_ports)),
        Protocol::Unix => DataEndpoints::Unix(offer.unix_names.clone()),
    };
    let (token, server_env) = (offer.token, offer.environment);
    linkperf_metrics::raise_fd_limit(u64::from(req.spec.users) + 256)
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let connect_timeout =
        Duration::from_secs(20) + Duration::from_millis(5 * u64::from(req.spec.users));
    let client = ClientTest::connect(ClientConfig {
        spec: req.spec.clone(),
        threads: req.client.threads.count().unwrap_or(1),
        affinity: req.client.affinity.as_ref().map(|c| c.0.clone()),
        busy_poll: req.client.busy_poll,
        endpoints,
        token,
        connect_timeout,
        live: req.live.clone(),
        greeting: None,
    });
    let client = client.map_err(|e| c.abandon(&mut s, e))?;
    if let Err(e) = c.confirm_start(&mut s) {
        client.abort();
        let _ = client.wait();
        return Err(e);
    }
    let started = SystemTime::now();
    let schedule = client.start(DRAIN);
    let sampler = Sampler::spawn(schedule);
    // While the workers run, watch for cancellation and for the server stopping
    // the test (a limit, a shutdown) or going away.
    let aborter = client.aborter();
    let waiter = std::thread::spawn(move || client.wait());
    let mut cancelled = false;
    let mut server_stop: Option<String> = None;
    let mut server_aborted = false;
    while !waiter.is_finished() {
        if !cancelled
            && req
                .cancel
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Acquire))
        {
            cancelled = true;
            aborter.abort();
        }
        let Some(stop) = s.running(c.hear(&s)) else {
            continue;
        };
        // The workers wind down; the join below waits for them.
        aborter.abort();
        server_aborted = stop.aborted;
        server_stop = Some(stop.reason);
        break;
    }
    let reports = waiter
        .join()
        .unwrap_or_else(|_| Err(EngineError::Worker("the client's workers panicked".into())));
    let aborted = cancelled || server_aborted;
    let window = sampler.finish();
    let reports = reports?;
    let agg = aggregate(reports);
    let mut env = capture_environment(
        agg.socket.as_ref().and_then(|s| s.local_ip).or(local_ip),
        req.command_line.clone(),
    );
    let client_report = agg.side_report(
        window.as_ref(),
        req.process_method,
        schedule.measured_s(aborted || server_stop.is_some()),
        req.client.busy_poll,
        &mut env,
    );
    let outcome = |side: ServerSide, server_error| Outcome {
        started,
        client: client_report,
        server: side.report,
        client_environment: env,
        server_environment: side.environment,
        aborted,
        server_error,
        failure: None,
        server_agent,
    };
    // Ask for the server's side; keep ours whatever happens.
    let cut = aborted.then(|| "interrupted".to_string());
    let Some(ask) = s.workers_done(cut, Instant::now()) else {
        let side = ServerSide {
            report: None,
            environment: Some(server_env),
            error: None,
        };
        return Ok(outcome(side, server_stop));
    };
    let side = c.ask_results(&mut s, &ask);
    let error = side.error.clone();
    Ok(outcome(side, error))
}
