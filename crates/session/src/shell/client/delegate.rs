//! A controller's side of a delegated test: ask one agent to run a test,
//! as its client, against another agent, and take back what both measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use linkperf_measured::AgentIdentity;
use linkperf_protocol::{ClientMessage, DelegatedOutcome};
use linkperf_workload::{Placement, TestSpec};

use super::{open, Opened, Target};
use crate::proto::client::delegate::Delegation;
use crate::SessionError;

/// Largest `delegated` answer taken: it carries both sides' reports, each
/// within a default frame.
pub const DELEGATED_MAX_FRAME: usize = 4 * linkperf_protocol::DEFAULT_MAX_FRAME;

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
    } = open(agent, linkperf_protocol::DEFAULT_MAX_FRAME)?;
    let _ = c.send(&ClientMessage::Abort {
        reason: "it only asked who this agent is".into(),
    });
    Ok(id)
}

/// Asks the agent at `agent` (which must prove the key `agent.auth_key`
/// holds) to run `req` against `req.target`: the blocking shell of a
/// `Delegation` (sans-IO, below).
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
    let (mut d, ask) = Delegation::ask(
        req.target.clone(),
        req.spec.clone(),
        req.client.clone(),
        req.server.clone(),
        Instant::now(),
    );
    c.send(&ask)?;
    loop {
        if req
            .cancel
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
        {
            if let Some(abort) = d.cancel() {
                let _ = c.send(&abort);
            }
        }
        let heard = c.ch.hear(d.wait(Instant::now()));
        if let Some(outcome) = d.heard(heard, Instant::now())? {
            return Ok(Delegated {
                outcome,
                source_agent,
            });
        }
    }
}
