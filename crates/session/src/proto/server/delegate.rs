//! The agent's side of a delegated test while its client runs, as a state
//! machine with no socket and no clock (the session thread's `delegate`,
//! shell/server/delegate.rs, is its blocking shell).

use std::time::SystemTime;

use linkperf_protocol::{ClientMessage, DelegatedOutcome, ErrorCode, ServerMessage};

use super::fail::{fail, out_of_order, shutting_down as shutting_down_fail, Fail};
use super::midtest::received;
use crate::proto::client::outcome::Outcome;
use crate::proto::heard::{Heard, Received};
use crate::SessionError;

/// The agent's side of a delegated test while its client runs, as a state
/// machine with no socket and no clock: the controller is quiet until the
/// agent answers `delegated`; its `abort`, anything else it says, its going
/// away and the daemon shutting down end the test, and what it measured is
/// dropped. The session thread's `delegate` is its blocking shell.
#[derive(Debug, Default)]
pub(crate) struct Delegating {
    stopped: bool,
}

impl Delegating {
    /// One look while the test runs: `Ok` while it goes on, else why it
    /// ends (the daemon shutting down).
    pub(crate) fn look(&mut self, shutting_down: bool) -> Result<(), Fail> {
        self.on()?;
        if shutting_down {
            self.stopped = true;
            return Err(shutting_down_fail());
        }
        Ok(())
    }

    /// What one receive from the controller came to: `Ok` while it is
    /// quiet, else why the test ends: its `abort`, anything else it says,
    /// its going away, or what is not a message (`frame_setting` names the
    /// daemon's largest control message, for a frame past it).
    pub(crate) fn heard(&mut self, heard: Heard, frame_setting: &str) -> Result<(), Fail> {
        self.on()?;
        let why = match heard {
            Heard {
                got: Ok(Received::Closed),
                how,
            } => fail(
                ErrorCode::Aborted,
                format!("the controller vanished mid-test: it {how}"),
            ),
            heard => match received(heard, frame_setting) {
                Ok(None) => return Ok(()),
                Ok(Some(ClientMessage::Abort { reason })) => fail(
                    ErrorCode::Aborted,
                    format!("the controller gave up on the delegated test: {reason}"),
                ),
                Ok(Some(other)) => out_of_order("nothing while a delegated test runs", &other),
                Err(f) => f,
            },
        };
        self.stopped = true;
        Err(why)
    }

    fn on(&self) -> Result<(), Fail> {
        if self.stopped {
            return Err(fail(
                ErrorCode::OutOfOrder,
                "the delegated test was already stopped",
            ));
        }
        Ok(())
    }

    /// The `delegated` answer: the test's outcome as this agent's client
    /// ran it, or why it failed (the test asked for at `started`).
    pub(crate) fn answer(
        result: Result<Outcome, SessionError>,
        started: SystemTime,
    ) -> ServerMessage {
        let outcome = match result {
            Ok(o) => DelegatedOutcome {
                started: humantime::format_rfc3339_millis(o.started).to_string(),
                error: None,
                client: Some(o.client),
                server: o.server,
                client_environment: Some(o.client_environment),
                server_environment: o.server_environment,
                target_agent: o.server_agent,
                aborted: o.aborted,
                server_error: o.server_error,
                failure: o.failure,
            },
            Err(e) => DelegatedOutcome {
                started: humantime::format_rfc3339_millis(started).to_string(),
                error: Some(e.to_string()),
                ..DelegatedOutcome::default()
            },
        };
        ServerMessage::Delegated { outcome }
    }
}
