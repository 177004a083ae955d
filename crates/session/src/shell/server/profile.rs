//! The server side of a uperf profile: the client's profile mirrored (each
//! flowop turned into its opposite) and run on the engine's profile workers;
//! timed transactions end where the client says.

use std::time::{Duration, Instant};

use std::sync::Arc;

use linkperf_engine::program::{workers_for, ProgramConfig, ProgramRun, Role};
use linkperf_engine::LiveStats;
use linkperf_engine::Sampler;
use linkperf_protocol::{ErrorCode, LimitKind, ServerMessage};
use linkperf_workload::profile::Profile;
use linkperf_workload::Placement;

use super::Session;
use crate::proto::budget::Cost;
use crate::proto::server::fail::{fail, Fail};
use crate::proto::server::midtest::{Ended, ProfileSaid};
use crate::proto::server::request::ProfileAsk;
use crate::proto::server::session::ServerSession;
use crate::shell::daemon::Setting;

/// How long the server's users may take to stop at the client's count.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the server's users may take, once the client has finished, to
/// reach the end of their script (a last disconnect, a last read) before
/// they are stopped.
const SCRIPT_END_GRACE: Duration = Duration::from_secs(2);

impl Session<'_> {
    /// The client ended timed transaction `txn` after `iterations` of it
    /// (by user), as its session allowed: this side's users stop there, and
    /// the client is told what they wrote.
    fn txn_end(&mut self, run: &ProgramRun, txn: u32, iterations: Vec<u64>) -> Result<(), Fail> {
        let txn = txn as usize;
        run.stop(txn, iterations);
        let written = run
            .wait_ended(txn, Instant::now() + STOP_TIMEOUT)
            .map_err(|e| fail(ErrorCode::Internal, e))?;
        self.send(&ServerMessage::TxnEnded {
            txn: txn as u32,
            written,
        })
    }

    /// Starts this side of the profile, `mirrored`: its users connect to
    /// the client's listeners (`client_ports`, none 0, on the client's control
    /// address only) for the client's accepts, and listen for its connects.
    fn start_mirror(
        &self,
        mirrored: Profile,
        placement: &Placement,
        client_ports: &[u16],
        token: linkperf_protocol::DataToken,
        bind_ip: std::net::IpAddr,
    ) -> Result<(ProgramRun, Arc<LiveStats>), Fail> {
        // The client's accepts are this side's connects: to the client's
        // control address only, never elsewhere.
        let peer = self.control_peer()?;
        let endpoints = client_ports
            .iter()
            .map(|p| std::net::SocketAddr::new(peer, *p))
            .collect();
        // Settled by own_placement: never the server's default here.
        let threads = placement.threads.count().unwrap_or(1);
        let live = Arc::new(LiveStats::new(workers_for(threads, &mirrored)));
        let run = ProgramRun::start(ProgramConfig {
            profile: mirrored,
            role: Role::Server,
            threads,
            affinity: placement.affinity.as_ref().map(|c| c.0.clone()),
            busy_poll: placement.busy_poll,
            token,
            endpoints,
            listeners: Vec::new(),
            bind_ip: Some(bind_ip),
            udp_endpoints: Vec::new(),
            // Datagrams are answered to the client's control address only.
            udp_peer: Some(peer),
            live: Some(live.clone()),
        })
        .map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
        Ok((run, live))
    }

    /// Runs a profile's server side, as the request checked it; returns its
    /// name for the log.
    pub(super) fn profile(&mut self, asked: ProfileAsk) -> Result<String, Fail> {
        let ProfileAsk {
            profile,
            placement,
            users,
            mirrored,
            connections,
            client_ports,
        } = asked;
        // Settled by own_placement: never the server's default here.
        let threads = placement.threads.count().unwrap_or(1);
        let workers = u32::try_from(workers_for(threads, &mirrored)).unwrap_or(u32::MAX);
        let transactions = profile.groups.iter().map(|g| g.transactions.len()).sum();
        let cost = Cost::profile(connections, workers, transactions);
        let _charge = self.admit(users, profile.least_time(), &placement, cost)?;
        let name = format!("profile:{}--{users}", profile.name);
        self.log(&format!("running {name}"));
        let (token, bind_ip) = self.data_token()?;
        let _ = linkperf_metrics::raise_fd_limit(connections + 256);
        let (run, live) = self.start_mirror(mirrored, &placement, &client_ports, token, bind_ip)?;
        let accepted = ServerMessage::Accepted {
            data_ports: run.endpoints().iter().map(|a| a.port()).collect(),
            unix_names: Vec::new(),
            udp_ports: run.udp_endpoints().iter().map(|a| a.port()).collect(),
            token,
            environment: self.environment(),
        };
        let stop = |run: ProgramRun, f: Fail| -> Result<String, Fail> {
            run.abort();
            let _ = run.finish();
            Err(f)
        };
        if let Err(f) = self.send(&accepted) {
            return stop(run, f);
        }
        let mut test =
            ServerSession::offered(connections, self.config.start_timeout, Instant::now())
                .for_profile(users);
        if let Err(f) = self.await_start(&mut test) {
            return stop(run, f);
        }
        let sampler = Sampler::until_finished();
        let max_bytes = self.config.max_bytes_per_session;
        let (longest, now) = (self.config.max_duration, Instant::now());
        let setting = self.config.name(Setting::Limit(LimitKind::DurationS));
        let started = test.profile_started(now, longest, max_bytes, setting);
        if let Err(f) = self.send(&started) {
            return stop(run, f);
        }
        let mut aborted = false;
        let outcome: Result<(), Fail> = loop {
            let said = self.watch(&live, |look| test.look(look));
            let timed = |t| run.compiled().timed(t);
            match said.and_then(|m| m.map(|m| test.profile_said(m, timed)).transpose()) {
                Ok(None) => continue,
                Ok(Some(ProfileSaid::TxnEnd { txn, iterations })) => {
                    if let Err(f) = self.txn_end(&run, txn, iterations) {
                        break Err(f);
                    }
                }
                Ok(Some(ProfileSaid::Ended(Ended::Finished))) => {
                    // The client's users are done; the server's finish the
                    // script's end (its last disconnects, the reads of what
                    // the client sent last) before they are stopped, within
                    // a bound.
                    run.wait_all_finished(Instant::now() + SCRIPT_END_GRACE);
                    break Ok(());
                }
                Ok(Some(ProfileSaid::Ended(Ended::Aborted))) => {
                    aborted = true;
                    break Ok(());
                }
                Err(e) => break Err(e),
            }
        };
        // The client is done (or gone): users still waiting stop here.
        run.abort();
        let out = run.finish();
        let window = sampler.finish();
        outcome?;
        let mut env = self.environment();
        let report = out.side_report(
            window.as_ref(),
            self.config.process_method,
            placement.busy_poll,
            &mut env,
        );
        if aborted {
            self.log("profile aborted by the client");
        }
        self.send(&ServerSession::results(report, env))?;
        Ok(name)
    }
}
