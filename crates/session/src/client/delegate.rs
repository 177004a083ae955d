//! A controller's side of a delegated test: ask one agent to run a test,
//! as its client, against another agent, and take back what both measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_metrics::AgentIdentity;
use linkperf_wire::{ClientMessage, DelegatedOutcome, ServerMessage};
use linkperf_workload::{Placement, TestSpec};

use super::answers::answer;
use super::{open, Opened, Target, ANSWER_TIMEOUT, RESULTS_TIMEOUT, WATCH_INTERVAL};
use crate::channel::Received;
use crate::server::DRAIN;
use crate::SessionError;

/// Largest `delegated` answer taken: it carries both sides' reports, each
/// within a default frame.
pub const DELEGATED_MAX_FRAME: usize = 4 * linkperf_wire::DEFAULT_MAX_FRAME;

/// One test for an agent to run against another.
#[derive(Debug, Clone)]
pub struct DelegateRequest {
    /// The target agent's control address, `HOST:PORT`.
    pub target: String,
    /// The test.
    pub spec: TestSpec,
    /// The source agent's workers (its client side).
    pub client: Placement,
    /// The target's workers.
    pub server: Placement,
    /// Set to give up on the test: the agent is told, and what it measured
    /// is lost.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// What a delegated test gave back.
#[derive(Debug, Clone)]
pub struct Delegated {
    /// The agent's account of the test.
    pub outcome: DelegatedOutcome,
    /// The source agent's identity, from its `welcome`.
    pub source_agent: Option<AgentIdentity>,
}

/// Who the agent at `agent` is: its `welcome`'s identity, after it proved
/// the key (`agent.auth_key`); the session ends there, nothing run.
pub fn identify(agent: &Target) -> Result<Option<AgentIdentity>, SessionError> {
    let Opened {
        mut c, agent: id, ..
    } = open(agent, linkperf_wire::DEFAULT_MAX_FRAME)?;
    let _ = c.send(&ClientMessage::Abort {
        reason: "it only asked who this agent is".into(),
    });
    Ok(id)
}

/// The longest a delegated test of `spec` may take before the agent answers:
/// its warmup, window and drain, the users' connect time, and the time each
/// side has to answer and report.
pub fn delegated_deadline(spec: &TestSpec) -> Duration {
    let connect = Duration::from_secs(20) + Duration::from_millis(5).saturating_mul(spec.users);
    spec.warmup + spec.duration + DRAIN + connect + ANSWER_TIMEOUT * 2 + RESULTS_TIMEOUT
}

/// Asks the agent at `agent` (which must prove the key `agent.auth_key`
/// holds) to run `req` against `req.target`.
pub fn delegate(agent: &Target, req: &DelegateRequest) -> Result<Delegated, SessionError> {
    if agent.auth_key.is_none() {
        return Err(SessionError::Invalid(
            "delegated tests need the agents' key".into(),
        ));
    }
    req.spec
        .validate()
        .map_err(|e| SessionError::Invalid(e.to_string()))?;
    let Opened {
        mut c,
        agent: source_agent,
        ..
    } = open(agent, DELEGATED_MAX_FRAME)?;
    c.send(&ClientMessage::Delegate {
        target: req.target.clone(),
        spec: req.spec.clone(),
        client: req.client.clone(),
        server: req.server.clone(),
    })?;
    let deadline = Instant::now() + delegated_deadline(&req.spec);
    let mut cancelled = false;
    loop {
        if !cancelled
            && req
                .cancel
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Acquire))
        {
            cancelled = true;
            let _ = c.send(&ClientMessage::Abort {
                reason: "interrupted".into(),
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SessionError::Control(format!(
                "no answer from the agent within {:?} of asking it for the test",
                delegated_deadline(&req.spec)
            )));
        }
        match c.ch.recv(left.min(WATCH_INTERVAL)) {
            Ok(Received::Timeout) => continue,
            Ok(Received::Frame(f)) => {
                return match answer(&f)? {
                    ServerMessage::Delegated { outcome } => Ok(Delegated {
                        outcome,
                        source_agent,
                    }),
                    other => Err(SessionError::Control(format!(
                        "expected delegated, got {}",
                        other.kind()
                    ))),
                }
            }
            Ok(Received::Closed) => {
                return Err(SessionError::Control(format!(
                    "the agent {} in the middle of the delegated test",
                    c.ch.how_it_went()
                )))
            }
            Err(e) => {
                return Err(SessionError::Control(format!(
                    "the control connection to the agent failed mid-test: {e}"
                )))
            }
        }
    }
}
