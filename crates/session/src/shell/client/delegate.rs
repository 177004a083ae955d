//! A controller's side of a delegated test: ask one agent to run a test,
//! as its client, against another agent, and take back what both measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_metrics::AgentIdentity;
use linkperf_wire::{ClientMessage, DelegatedOutcome, ServerMessage};
use linkperf_workload::{Placement, TestSpec};

use super::{open, Opened, Target};
use crate::proto::client::answers::answer;
use crate::proto::client::session::{Heard, ANSWER_TIMEOUT, RESULTS_TIMEOUT, WATCH_INTERVAL};
use crate::shell::channel::Received;
use crate::shell::server::DRAIN;
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
    let (mut d, ask) = Delegation::ask(req, Instant::now());
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
        let got = c.ch.recv(d.wait(Instant::now()));
        let heard = Heard {
            got,
            how: c.ch.how_it_went(),
        };
        if let Some(outcome) = d.heard(heard, Instant::now())? {
            return Ok(Delegated {
                outcome,
                source_agent,
            });
        }
    }
}

/// The controller's side of a delegated test, as a state machine with no
/// socket and no clock: `delegate` is sent, then the agent is quiet while
/// it runs the test (the controller may give up on it with `abort`, once)
/// until it answers `delegated`, within [`delegated_deadline`].
#[derive(Debug)]
pub(crate) struct Delegation {
    /// When the answer is late, and how long it was given.
    until: Instant,
    allowed: Duration,
    cancelled: bool,
    over: bool,
}

impl Delegation {
    /// Asks for `req` at `now`: the session, and the `delegate` message.
    pub(crate) fn ask(req: &DelegateRequest, now: Instant) -> (Self, ClientMessage) {
        let allowed = delegated_deadline(&req.spec);
        let d = Delegation {
            until: now + allowed,
            allowed,
            cancelled: false,
            over: false,
        };
        let ask = ClientMessage::Delegate {
            target: req.target.clone(),
            spec: req.spec.clone(),
            client: req.client.clone(),
            server: req.server.clone(),
        };
        (d, ask)
    }

    /// How long the next receive may wait at `now`: a [`WATCH_INTERVAL`]
    /// (the cancel flag is looked at between receives), less when the
    /// answer is due sooner, not at all once the session is over.
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        if self.over {
            return Duration::ZERO;
        }
        self.until
            .saturating_duration_since(now)
            .min(WATCH_INTERVAL)
    }

    /// The controller gives up: the `abort` to send, once (what the agent
    /// measured is lost; its answer is still awaited).
    pub(crate) fn cancel(&mut self) -> Option<ClientMessage> {
        if self.cancelled || self.over {
            return None;
        }
        self.cancelled = true;
        Some(ClientMessage::Abort {
            reason: "interrupted".into(),
        })
    }

    /// What one receive came to at `now`: the agent's account of the test,
    /// `None` to go on waiting, or why there is none (its refusal, a late
    /// answer, a close, anything but `delegated`).
    pub(crate) fn heard(
        &mut self,
        heard: Heard,
        now: Instant,
    ) -> Result<Option<DelegatedOutcome>, SessionError> {
        if self.over {
            return Err(SessionError::Control(
                "the delegated test's answer was already taken".into(),
            ));
        }
        let answer = match heard.got {
            Ok(Received::Timeout) if now < self.until => return Ok(None),
            Ok(Received::Timeout) => Err(SessionError::Control(format!(
                "no answer from the agent within {:?} of asking it for the test",
                self.allowed
            ))),
            Ok(Received::Frame(f)) => answer(&f).and_then(|m| match m {
                ServerMessage::Delegated { outcome } => Ok(outcome),
                other => Err(SessionError::Control(format!(
                    "expected delegated, got {}",
                    other.kind()
                ))),
            }),
            Ok(Received::Closed) => Err(SessionError::Control(format!(
                "the agent {} in the middle of the delegated test",
                heard.how
            ))),
            Err(e) => Err(SessionError::Control(format!(
                "the control connection to the agent failed mid-test: {e}"
            ))),
        };
        self.over = true;
        answer.map(Some)
    }
}
