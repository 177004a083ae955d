//! An agent's side of a delegated test: a controller that proved the key
//! asks this daemon to run a test, as its client, against another agent, and
//! gets back both sides' measurements.
//!
//! The rules (docs/security.md): only a daemon with a key takes delegated
//! tests, so only a client that proved the key can ask; the test runs through
//! [`run_test`] with the same key, which sends nothing past its `hello` to a
//! target that does not prove it holds that key, so an agent never sends test
//! traffic to anything but an agent of the same mesh. The test is charged
//! against this daemon's budget like any other (its client workers hold what
//! a server side of the same test would), and it ends when the controller goes
//! away or the daemon shuts down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use linkperf_measured::ProcessMethod;
use linkperf_protocol::ErrorCode;
use linkperf_workload::{Placement, TestSpec};

use super::{Session, WATCH_INTERVAL};
use crate::proto::auth::AuthKey;
use crate::proto::budget::Cost;
use crate::proto::server::delegate::Delegating;
use crate::proto::server::fail::{fail, Fail};
use crate::shell::client::{run_test, RunRequest, Target};
use crate::shell::daemon::Setting;

impl Session<'_> {
    /// Runs a delegated test toward `target` (as the request checked it,
    /// proving itself there with this daemon's `key`) and answers
    /// `delegated`; returns its name for the log.
    pub(super) fn delegate(
        &mut self,
        target: String,
        spec: TestSpec,
        client: Placement,
        server: Placement,
        key: AuthKey,
    ) -> Result<String, Fail> {
        if let Some(cc) = &spec.socket.cc {
            linkperf_metrics::check_congestion_control(cc)
                .map_err(|e| fail(ErrorCode::Refused, format!("on the agent's host, {e}")))?;
        }
        // Its client workers hold what a server side of the same test would,
        // and a client's threads and control connection more.
        // Settled by own_placement_as: a count.
        let cost = Cost::delegated(&spec, client.threads.count().unwrap_or(1));
        let _charge = self.admit(spec.users, spec.warmup + spec.duration, &client, cost)?;
        let name = format!("{} delegated toward {target}", spec.name());
        self.log(&format!("running {name}"));
        let cancel = Arc::new(AtomicBool::new(false));
        let request = RunRequest {
            spec,
            client,
            server,
            // The daemon serves other sessions at once: its workers' own CPU.
            process_method: ProcessMethod::RusageThreadSum,
            cancel: Some(cancel.clone()),
            command_line: self.config.command_line.clone(),
            live: None,
        };
        let to = Target {
            address: target,
            default_port: self.config.listen.port(),
            auth_key: Some(key),
        };
        let started = SystemTime::now();
        let worker = std::thread::Builder::new()
            .name(format!("lp-delegate-{}", self.id))
            .spawn(move || run_test(&to, &request))
            .map_err(|e| {
                fail(
                    ErrorCode::Internal,
                    format!("start the delegated test: {e}"),
                )
            })?;
        // Watch the controller while the test runs: its going away, or the
        // daemon shutting down, ends the test (what it measured is dropped).
        let mut watch = Delegating::default();
        let mut stop: Option<Fail> = None;
        while !worker.is_finished() {
            let shutting_down = self.state.shutting_down();
            if let Err(f) = watch.look(shutting_down) {
                self.state.aborted.fetch_add(1, Ordering::AcqRel);
                stop = Some(f);
                break;
            }
            let heard = self.ch.hear(WATCH_INTERVAL);
            if let Err(f) = watch.heard(heard, self.config.name(Setting::MaxFrame)) {
                stop = Some(f);
                break;
            }
        }
        if stop.is_some() {
            cancel.store(true, Ordering::Release);
        }
        // The test ends by itself within its own timeouts, sooner once cancelled.
        let result = worker.join().unwrap_or_else(|_| {
            Err(crate::SessionError::Invalid(
                "the delegated test's thread panicked".into(),
            ))
        });
        if let Some(f) = stop {
            return Err(f);
        }
        let answer = Delegating::answer(result, started);
        self.send(&answer)?;
        Ok(name)
    }
}
