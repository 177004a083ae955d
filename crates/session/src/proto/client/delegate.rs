//! The controller's side of a delegated test, as a state machine with no
//! socket and no clock (`delegate`, shell/client/delegate.rs, is its
//! blocking shell).

use std::time::{Duration, Instant};

use linkperf_protocol::{ClientMessage, DelegatedOutcome, ServerMessage};
use linkperf_workload::{Placement, TestSpec};

use super::answers::answer;
use super::session::{ANSWER_TIMEOUT, RESULTS_TIMEOUT, WATCH_INTERVAL};
use crate::proto::heard::{Heard, Received};
use crate::proto::server::session::DRAIN;
use crate::SessionError;

/// The longest a delegated test of `spec` may take before the agent answers:
/// its warmup, window and drain, the users' connect time, and the time each
/// side has to answer and report.
pub fn delegated_deadline(spec: &TestSpec) -> Duration {
    let connect = Duration::from_secs(20) + Duration::from_millis(5).saturating_mul(spec.users);
    spec.warmup + spec.duration + DRAIN + connect + ANSWER_TIMEOUT * 2 + RESULTS_TIMEOUT
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
    /// Asks at `now` for `spec` to be run toward `target`, the agent's
    /// workers (its client side) on `client`, the target's on `server`:
    /// the session, and the `delegate` message.
    pub(crate) fn ask(
        target: String,
        spec: TestSpec,
        client: Placement,
        server: Placement,
        now: Instant,
    ) -> (Self, ClientMessage) {
        let allowed = delegated_deadline(&spec);
        let d = Delegation {
            until: now + allowed,
            allowed,
            cancelled: false,
            over: false,
        };
        let ask = ClientMessage::Delegate {
            target,
            spec,
            client,
            server,
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
