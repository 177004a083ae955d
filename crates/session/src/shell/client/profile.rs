//! Driving a uperf profile from the client: ship it to the daemon, run the
//! client's flowops on the engine's profile workers, agree on the end of
//! each timed transaction over the control connection, collect both sides.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use linkperf_engine::program::{
    accepts, bind_listeners, compile, workers_for, ProgramConfig, ProgramRun, Role,
};
use linkperf_engine::{LiveStats, Sampler};
use linkperf_measured::ProcessMethod;
use linkperf_metrics::capture_environment;
use linkperf_workload::profile::Profile;
use linkperf_workload::Placement;

use super::{open, Opened, Target};
use crate::proto::client::midtest::ServerSide;
use crate::proto::client::outcome::Outcome;
use crate::proto::client::session::ClientSession;
use crate::SessionError;

/// One profile to run against one server.
#[derive(Debug, Clone)]
pub struct ProfileRequest {
    /// The profile as the client runs it (variables substituted; for this
    /// server's groups only when a profile names several hosts).
    pub profile: Profile,
    /// The client's workers.
    pub client: Placement,
    /// The server's workers.
    pub server: Placement,
    /// How the client's process CPU is taken.
    pub process_method: ProcessMethod,
    /// Set to abort; what was measured is kept.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The command line, for the environment record.
    pub command_line: Vec<String>,
    /// Where the client's workers publish live totals, if anyone watches
    /// (one slot per client worker).
    pub live: Option<Arc<LiveStats>>,
}

/// Runs a profile against the daemon at `target`. The client's report
/// carries the per-transaction and per-flowop results.
pub fn run_profile(target: &Target, req: &ProfileRequest) -> Result<Outcome, SessionError> {
    // Refuse what cannot run before anything is sent.
    linkperf_workload::profile::check_runnable(&req.profile)
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let compiled = compile(&req.profile).map_err(|e| SessionError::Invalid(e.to_string()))?;
    let Opened {
        mut c,
        addr,
        local_ip,
        agent: server_agent,
    } = open(target, linkperf_protocol::DEFAULT_MAX_FRAME)?;
    let threads = req.client.threads.count().unwrap_or(1);
    // The server connects back for the profile's accepts: listen first, on
    // the address the server sees this client at.
    let listeners = match (accepts(&req.profile), local_ip) {
        (true, Some(ip)) => bind_listeners(ip, workers_for(threads, &req.profile))?,
        (true, None) => {
            return Err(SessionError::Invalid(
                "the profile accepts connections and this host's address is unknown".into(),
            ))
        }
        (false, _) => Vec::new(),
    };
    let client_ports = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let (mut s, ask) = ClientSession::ask_profile(
        req.profile.clone(),
        req.server.clone(),
        client_ports,
        linkperf_metrics::boot_id(),
        Instant::now(),
    );
    c.send(&ask)?;
    let offer = c.take_offer(&mut s)?;
    let (ports, udp_ports, token, server_env) = (
        offer.data_ports,
        offer.udp_ports,
        offer.token,
        offer.environment,
    );
    let conns = compiled.connections();
    linkperf_metrics::raise_fd_limit(conns + 256)
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let run = ProgramRun::start(ProgramConfig {
        profile: req.profile.clone(),
        role: Role::Client,
        threads,
        affinity: req.client.affinity.as_ref().map(|c| c.0.clone()),
        busy_poll: req.client.busy_poll,
        token,
        endpoints: ports
            .iter()
            .map(|p| SocketAddr::new(addr.ip(), *p))
            .collect(),
        listeners,
        bind_ip: None,
        udp_endpoints: udp_ports
            .iter()
            .map(|p| SocketAddr::new(addr.ip(), *p))
            .collect(),
        udp_peer: None,
        live: req.live.clone(),
    });
    let run = run.map_err(|e| c.abandon(&mut s, e))?;
    if let Err(e) = c.confirm_start(&mut s) {
        run.abort();
        let _ = run.finish();
        return Err(e);
    }
    let started = SystemTime::now();
    let sampler = Sampler::until_finished();
    let cancel = req.cancel.clone();
    let cancelled = move || cancel.as_ref().is_some_and(|f| f.load(Ordering::Acquire));
    let mut server_stop: Option<String> = None;
    let driven = run.drive(
        |txn, iterations| match c.txn_exchange(&mut s, txn, iterations) {
            Ok(w) => Ok(w),
            Err(e) => {
                server_stop = Some(e.clone());
                Err(e)
            }
        },
        &cancelled,
    );
    let was_cancelled = cancelled();
    if driven.is_err() {
        run.abort();
    }
    let out = run.finish();
    let window = sampler.finish();
    let mut env = capture_environment(
        out.socket.as_ref().and_then(|s| s.local_ip).or(local_ip),
        req.command_line.clone(),
    );
    let mut client = out.side_report(
        window.as_ref(),
        req.process_method,
        req.client.busy_poll,
        &mut env,
    );
    if let Err(e) = &driven {
        if !was_cancelled && server_stop.is_none() && !client.error_samples.contains(e) {
            client.error_samples.insert(0, e.clone());
        }
    }
    let failed = driven.as_ref().err().filter(|_| !was_cancelled).cloned();
    if let Some(stop) = server_stop {
        return Ok(Outcome {
            started,
            client,
            server: None,
            client_environment: env,
            server_environment: Some(server_env),
            aborted: was_cancelled,
            server_error: Some(stop),
            failure: None,
            server_agent,
        });
    }
    let cut = failed
        .clone()
        .or_else(|| was_cancelled.then(|| "interrupted".to_string()));
    let side = match s.workers_done(cut, Instant::now()) {
        Some(ask) => c.ask_results(&mut s, &ask),
        None => ServerSide {
            report: None,
            environment: Some(server_env),
            error: Some("the test stopped before the server's results were asked".into()),
        },
    };
    Ok(Outcome {
        started,
        client,
        server: side.report,
        client_environment: env,
        server_environment: side.environment,
        aborted: was_cancelled,
        server_error: side.error,
        failure: failed,
        server_agent,
    })
}
