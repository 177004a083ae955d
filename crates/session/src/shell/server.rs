//! One session on the daemon: negotiate, run the server side, report.

use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_engine::{aggregate, DataEndpoints, LiveStats, ServerConfig, ServerTest};
use linkperf_measured::{Environment, SideReport};
use linkperf_metrics::capture_environment;
use linkperf_protocol::{
    encode_server, ClientMessage, DataToken, ErrorCode, FrameDecoder, ServerMessage,
};
use linkperf_workload::{Placement, Side, TestSpec, Threads};

use crate::proto::budget::{Charge, Cost};
use crate::proto::server::fail::{fail, limit_fail, shutting_down, Fail};
use crate::proto::server::midtest::{self, Ended, Look};
use crate::proto::server::request::{self, Asked, MAX_TEST_THREADS};
use crate::proto::server::session::{ServerSession, DRAIN};
use crate::shell::channel::Channel;
use crate::shell::daemon::{DaemonConfig, DaemonState, Setting};
use linkperf_engine::Sampler;

pub(crate) mod delegate;
mod profile;

/// How often a running session checks its control connection.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);
struct Session<'a> {
    id: u64,
    ch: Channel,
    config: &'a DaemonConfig,
    state: &'a DaemonState,
    peer: String,
}

/// How long a session that ends in an error reads what the client still
/// sends (on its thread, or in the lobby for a failed handshake).
pub(crate) const LINGER: Duration = Duration::from_secs(1);
/// Most bytes read and dropped while lingering.
pub(crate) const LINGER_BYTES: usize = 1 << 20;

/// Gives back one unit of a counter when dropped.
struct Held<'a>(&'a AtomicUsize);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A control connection through its handshake, handed from the daemon's
/// lobby to its session's thread with a session slot taken for it.
pub(crate) struct Shaken {
    /// The connection, blocking.
    pub stream: TcpStream,
    /// What came past the handshake, not yet read as frames.
    pub rest: FrameDecoder,
    /// The session's number (the one its welcome gave).
    pub id: u64,
}

/// Serves one control connection past its handshake to the end, and gives
/// its session slot back once the connection is closed (after its linger,
/// if it ended in an error): a session's thread and its connection are
/// counted in `--max-sessions` for as long as they last. Never panics on
/// input.
pub(crate) fn serve_session(conn: Shaken, config: &DaemonConfig, state: &DaemonState) {
    let _session = Held(&state.sessions);
    let Shaken { stream, rest, id } = conn;
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let mut ch = Channel::resume(stream, rest);
    ch.set_max_frame(config.max_frame);
    let mut s = Session {
        id,
        ch,
        config,
        state,
        peer,
    };
    let outcome = s.run();
    // What the test held is freed: given back to the system now, not kept
    // resident by the allocator for the next one.
    linkperf_metrics::return_freed_memory();
    match outcome {
        Ok(name) => s.log(&format!("{name} done")),
        Err(f) => {
            s.log(&told(&f, config));
            s.send_error(&f);
            s.linger();
        }
    }
}

/// A failure as the daemon's log says it: what the client was told, more
/// than that where there is more (or the setting of the limit it met), and
/// its code.
pub(crate) fn told(f: &Fail, config: &DaemonConfig) -> String {
    let detail = f
        .detail
        .as_ref()
        .map(|d| format!(": {d}"))
        .or_else(|| {
            let (limit, name) = (f.limit?, config.setting_name?);
            Some(format!(" (its {})", name(Setting::Limit(limit.kind))))
        })
        .unwrap_or_default();
    f.code.tagged(&format!("{}{detail}", f.message))
}

impl Session<'_> {
    fn log(&self, what: &str) {
        if self.config.log {
            eprintln!(
                "linkperf serve: session {} from {}: {what}",
                self.id, self.peer
            );
        }
    }

    fn send_error(&mut self, f: &Fail) {
        let _ = self.ch.send(&encode_server(&f.message()));
    }

    /// Closes gracefully after an error: no more writes, and what the client
    /// still sends is read and dropped for a moment, so that closing with unread
    /// bytes does not reset the connection before the client reads the error.
    fn linger(&mut self) {
        let stream = self.ch.stream();
        let _ = stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        let mut buf = [0u8; 4096];
        let mut left = LINGER_BYTES;
        while left > 0 {
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() || stream.set_read_timeout(Some(wait)).is_err() {
                return;
            }
            match (&*stream).read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    }

    fn send(&mut self, m: &ServerMessage) -> Result<(), Fail> {
        self.ch
            .send(&encode_server(m))
            .map_err(|e| fail(ErrorCode::Internal, format!("control connection: {e}")))
    }

    /// The next message, waiting until `deadline`; `late` says what to answer
    /// if none came. Gives up at once when the daemon shuts down.
    fn recv_until(
        &mut self,
        deadline: Instant,
        waiting_for: &str,
        late: impl FnOnce() -> Fail,
    ) -> Result<ClientMessage, Fail> {
        loop {
            if self.state.shutting_down() {
                return Err(shutting_down());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(late());
            }
            let heard = self.ch.hear(left.min(WATCH_INTERVAL));
            let frame_setting = self.config.name(Setting::MaxFrame);
            if let Some(said) = request::awaited(heard, waiting_for, frame_setting)? {
                return Ok(said);
            }
        }
    }

    /// The next message within the negotiation timeout.
    fn recv(&mut self, timeout: Duration, waiting_for: &str) -> Result<ClientMessage, Fail> {
        let setting = self.config.name(Setting::ControlTimeout);
        let late = || request::silent(waiting_for, timeout, setting);
        self.recv_until(Instant::now() + timeout, waiting_for, late)
    }

    /// The session past its handshake (the lobby's: shell/lobby.rs), its
    /// slot taken there and given back here.
    fn run(&mut self) -> Result<String, Fail> {
        let said = self.recv(self.config.control_timeout, "test request")?;
        let key = self.config.auth_key.as_ref();
        let (spec, placement) = match request::asked(said, key, self.config.name(Setting::AuthKey))?
        {
            Asked::Test { spec, placement } => (spec, own_placement(placement)),
            Asked::Profile(mut p) => {
                p.placement = own_placement(p.placement);
                return self.profile(*p);
            }
            Asked::Delegate {
                target,
                spec,
                client,
                server,
                key,
            } => {
                let client = own_placement_as(client, Side::Client);
                return self.delegate(target, spec, client, server, key);
            }
            // A controller asking who this agent is, and nothing more.
            Asked::Nothing { reason } => return Ok(format!("no test ({reason})")),
        };
        if let Some(cc) = &spec.socket.cc {
            linkperf_metrics::check_congestion_control(cc)
                .map_err(|e| fail(ErrorCode::Refused, format!("on the server's host, {e}")))?;
        }
        // Settled by own_placement: never the server's default here.
        let cost = Cost::workload(&spec, placement.threads.count().unwrap_or(1));
        let _charge = self.admit(spec.users, spec.warmup + spec.duration, &placement, cost)?;
        let name = spec.name();
        self.log(&format!("running {name}"));
        self.run_test(spec, placement)?;
        Ok(name)
    }

    /// The client's `start`, within the time its users take to connect
    /// ([`start_wait`](crate::proto::server::session::start_wait)) after the
    /// test's acceptance, as `test` says.
    fn await_start(&mut self, test: &mut ServerSession) -> Result<(), Fail> {
        let due = test.start_due(Instant::now());
        let said = self.recv_until(due, "start", || test.start_late())?;
        test.start(said)
    }

    /// While a test runs: the client's next message, `None` when none came
    /// in a [`WATCH_INTERVAL`]; an error when the test must end on this
    /// side (what `still_on` makes of a look at it), or the control
    /// connection closed or sent what is not a message.
    fn watch(
        &mut self,
        live: &LiveStats,
        still_on: impl FnOnce(&Look) -> Result<(), Fail>,
    ) -> Result<Option<ClientMessage>, Fail> {
        let t = live.totals();
        let look = Look {
            now: Instant::now(),
            shutting_down: self.state.shutting_down(),
            bytes: t.tx_bytes.saturating_add(t.rx_bytes),
            control_silent: self.ch.since_last_ack(),
        };
        if look.shutting_down {
            self.state.aborted.fetch_add(1, Ordering::AcqRel);
        }
        still_on(&look)?;
        let heard = self.ch.hear(WATCH_INTERVAL);
        midtest::received(heard, self.config.name(Setting::MaxFrame))
    }

    fn environment(&self) -> Environment {
        let ip = self.ch.stream().local_addr().ok().map(|a| a.ip());
        capture_environment(ip, self.config.command_line.clone())
    }

    /// A fresh data token for a test, and the address the data endpoints
    /// bind to (the one the client reached this server at).
    fn data_token(&self) -> Result<(DataToken, std::net::IpAddr), Fail> {
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
        Ok((token, bind_ip))
    }

    /// The address the client's control connection comes from: UDP data is
    /// answered to it only.
    fn control_peer(&self) -> Result<std::net::IpAddr, Fail> {
        self.ch
            .stream()
            .peer_addr()
            .map(|a| a.ip())
            .map_err(|e| fail(ErrorCode::Internal, e.to_string()))
    }

    fn run_test(&mut self, spec: TestSpec, placement: Placement) -> Result<(), Fail> {
        let (token, bind_ip) = self.data_token()?;
        let _ = linkperf_metrics::raise_fd_limit(u64::from(spec.users) + 256);
        // Settled by own_placement: never the server's default here.
        let threads = placement.threads.count().unwrap_or(1);
        let live = Arc::new(LiveStats::new(threads as usize));
        let server = ServerTest::bind(ServerConfig {
            spec: spec.clone(),
            threads,
            affinity: placement.affinity.as_ref().map(|c| c.0.clone()),
            busy_poll: placement.busy_poll,
            bind_ip,
            token,
            preamble_timeout: Duration::from_secs(5),
            live: Some(live.clone()),
            udp_peer: Some(self.control_peer()?),
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
            udp_ports: Vec::new(),
            token,
            environment: self.environment(),
        };
        if let Err(f) = self.send(&accepted) {
            server.abort();
            let _ = server.finish();
            return Err(f);
        }
        let mut test = ServerSession::offered(
            u64::from(spec.users),
            self.config.start_timeout,
            Instant::now(),
        );
        if let Err(f) = self.await_start(&mut test) {
            server.abort();
            let _ = server.finish();
            return Err(f);
        }
        let schedule = server.start(DRAIN);
        let sampler = Sampler::spawn(schedule);
        let max_bytes = self.config.max_bytes_per_session;
        let started = test.started(Instant::now(), schedule.drain_until, max_bytes);
        if let Err(f) = self.send(&started) {
            server.abort();
            let _ = server.finish();
            let _ = sampler.finish();
            return Err(f);
        }
        // Watch the control connection until the client is done.
        let mut aborted = false;
        let outcome: Result<(), Fail> = loop {
            let said = self.watch(&live, |look| test.look(look));
            match said.and_then(|m| m.map(|m| test.said(m)).transpose()) {
                Ok(None) => continue,
                Ok(Some(Ended::Finished)) => break Ok(()),
                Ok(Some(Ended::Aborted)) => {
                    aborted = true;
                    server.abort();
                    break Ok(());
                }
                Err(e) => break Err(e),
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
        let mut env = self.environment();
        let report: SideReport = aggregate(reports).side_report(
            window.as_ref(),
            self.config.process_method,
            schedule.measured_s(false),
            placement.busy_poll,
            &mut env,
        );
        if aborted {
            self.log("test aborted by the client");
        }
        self.send(&ServerSession::results(report, env))
    }
}

impl<'a> Session<'a> {
    /// Every limit a request (a workload test or a profile) must keep, in one
    /// place: its users, its time, its threads, and what it will hold,
    /// charged against what the running tests leave of the budget (given
    /// back when the returned charge is dropped).
    fn admit(
        &self,
        users: u32,
        time: Duration,
        placement: &Placement,
        cost: Cost,
    ) -> Result<Charge<'a>, Fail> {
        let bounds = request::Bounds {
            max_users: self.config.max_users,
            max_duration: self.config.max_duration,
        };
        request::within_limits(bounds, users, time, placement.threads)?;
        self.state
            .ledger
            .charge(cost, &self.config.budget)
            .map_err(limit_fail)
    }
}

/// A placement that leaves the threads to the server ([`Threads::ServerDefault`])
/// gets this host's default, one worker per CPU this process may use: a client
/// that was not told how many server workers to ask for leaves it to the
/// server, whose CPUs it does not know.
///
/// A placement policy (`--placement split|same`) without a CPU list is
/// settled against this host's CPUs, as the client settles its own.
fn own_placement(placement: Placement) -> Placement {
    own_placement_as(placement, Side::Server)
}

/// [`own_placement`] for `side`: a delegated test's client side is this
/// daemon's too.
fn own_placement_as(mut placement: Placement, side: Side) -> Placement {
    if placement.threads == Threads::ServerDefault {
        placement.threads = Threads::Count(std::thread::available_parallelism().map_or(1, |n| {
            u32::try_from(n.get())
                .unwrap_or(MAX_TEST_THREADS)
                .min(MAX_TEST_THREADS)
        }));
    }
    placement.settle(side, &linkperf_metrics::current_thread_allowed_cpus());
    placement
}
