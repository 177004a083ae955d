//! The server's side of one workload test once it is admitted and its data
//! endpoints are bound, as a state machine with no socket and no clock:
//! the client's messages, looks at the running test and the time go in;
//! what to send, when to start and stop the engine, and why the test ends
//! come out. The session thread (`Session::run_test`) is its blocking
//! shell.
//!
//! `accepted` sent → the client's `start` within the time its users take
//! to connect → `started` (the engine runs) → the test is watched until the
//! client says `finished` or `abort` → `results`. A profile's session also
//! takes the end of each timed transaction (`txn_end`), each once, in
//! order, one count per user (the server's `Session::profile` is its shell).

use std::time::{Duration, Instant};

use linkperf_measured::{Environment, SideReport};
use linkperf_protocol::{ClientMessage, ErrorCode, ServerMessage};

use super::fail::{fail, Fail};
use super::midtest::{self, Ended, Look, ProfileSaid, TxnEnds, Watch};
use super::request;

/// Drain after the window.
pub(crate) const DRAIN: Duration = Duration::from_secs(3);

/// How long a client has, once its test is accepted, to connect its users
/// and say `start`: what its own connect takes at most (20 s and 5 ms a
/// user, see the client's `run_test`) and 5 s more, within the server's
/// `start_timeout`. A session that never starts holds its charge no longer.
pub(crate) fn start_wait(users: u64, cap: Duration) -> Duration {
    let per_user =
        Duration::from_millis(5).saturating_mul(u32::try_from(users).unwrap_or(u32::MAX));
    (Duration::from_secs(25) + per_user).min(cap)
}

/// After the client's drain, how long it may take to say the test is over.
pub(crate) const FINISH_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
enum Phase {
    /// `accepted` sent: the client's `start` is due by `until`.
    Offered { until: Instant, wait: Duration },
    /// The engine runs, watched.
    Running(Watch),
    /// The client ended the test, or the test failed.
    Over,
}

/// The server's side of one workload test or profile.
#[derive(Debug)]
pub(crate) struct ServerSession {
    phase: Phase,
    /// A profile's timed transactions ended so far.
    ends: Option<TxnEnds>,
    /// Why a running test that outlives its watch ends, if not because the
    /// client did not finish in time.
    overdue: Option<Fail>,
}

impl ServerSession {
    /// The test was offered (its `accepted` sent) at `now`: its `start` is
    /// due within the time its `connections` take to connect, at most
    /// `start_cap` ([`start_wait`]).
    pub(crate) fn offered(connections: u64, start_cap: Duration, now: Instant) -> Self {
        let wait = start_wait(connections, start_cap);
        ServerSession {
            phase: Phase::Offered {
                until: now + wait,
                wait,
            },
            ends: None,
            overdue: None,
        }
    }

    /// The session of a profile of `users` users.
    pub(crate) fn for_profile(mut self, users: u32) -> Self {
        self.ends = Some(TxnEnds::new(users));
        self
    }

    /// When the client's `start` is late (`now` once nothing is awaited).
    pub(crate) fn start_due(&self, now: Instant) -> Instant {
        match self.phase {
            Phase::Offered { until, .. } => until,
            _ => now,
        }
    }

    /// Why the test ends when its `start` did not come in time.
    pub(crate) fn start_late(&self) -> Fail {
        let wait = match self.phase {
            Phase::Offered { wait, .. } => wait,
            _ => Duration::ZERO,
        };
        fail(
            ErrorCode::Refused,
            format!("no start within {wait:?} of the test's acceptance"),
        )
    }

    /// The client's message while its start is awaited: `start`, or why
    /// the test ends here.
    pub(crate) fn start(&mut self, said: ClientMessage) -> Result<(), Fail> {
        let Phase::Offered { .. } = self.phase else {
            return Err(self.out_of_turn("start"));
        };
        self.phase = Phase::Over;
        request::started(said)
    }

    /// The engine started at `now`, the client's drain ending at
    /// `drain_until`: the `started` message. The test is watched from now
    /// until [`FINISH_GRACE`] after the drain, against the session's byte
    /// limit `max_bytes`.
    pub(crate) fn started(
        &mut self,
        now: Instant,
        drain_until: Instant,
        max_bytes: Option<u64>,
    ) -> ServerMessage {
        let watch = Watch::new(now, drain_until + FINISH_GRACE, max_bytes);
        self.phase = Phase::Running(watch);
        ServerMessage::Started
    }

    /// A profile's users started at `now`: the `started` message. The
    /// profile is watched for at most the server's longest test
    /// `max_duration` (and [`FINISH_GRACE`]), after which it is stopped
    /// past that limit (`duration_setting` names it), against the
    /// session's byte limit `max_bytes`.
    pub(crate) fn profile_started(
        &mut self,
        now: Instant,
        max_duration: Duration,
        max_bytes: Option<u64>,
        duration_setting: &str,
    ) -> ServerMessage {
        self.overdue = Some(fail(
            ErrorCode::Limit,
            format!(
                "the profile ran past this server's {duration_setting} of {max_duration:?}; \
                 the server stopped it"
            ),
        ));
        let watch = Watch::new(now, now + max_duration + FINISH_GRACE, max_bytes);
        self.phase = Phase::Running(watch);
        ServerMessage::Started
    }

    /// One look at the running test: `Ok` while it goes on, else why it
    /// ends on this side (the daemon shutting down, the byte limit, the
    /// client gone, the client not done in time).
    pub(crate) fn look(&mut self, look: &Look) -> Result<(), Fail> {
        let Phase::Running(watch) = &mut self.phase else {
            return Err(self.out_of_turn("a look at a running test"));
        };
        let custom = &mut self.overdue;
        let overdue = || {
            custom.take().unwrap_or_else(|| {
                fail(
                    ErrorCode::Aborted,
                    "the client did not finish in time; test abandoned",
                )
            })
        };
        let on = watch.still_on(look, overdue);
        if on.is_err() {
            self.phase = Phase::Over;
        }
        on
    }

    /// The client's message while the test runs: how it ended the test
    /// (stop the engine; its results are due), or why the test ends.
    pub(crate) fn said(&mut self, said: ClientMessage) -> Result<Ended, Fail> {
        let Phase::Running(_) = self.phase else {
            return Err(self.out_of_turn(said.kind()));
        };
        self.phase = Phase::Over;
        midtest::ended(said)
    }

    /// The client's message while its profile runs: how it ended the
    /// profile, or the end of one of its timed transactions (`timed` says
    /// which of the profile's are), each once, in order, with one count per
    /// user: stop this side's users there and answer `txn_ended`. Anything
    /// else ends the test.
    pub(crate) fn profile_said(
        &mut self,
        said: ClientMessage,
        timed: impl Fn(usize) -> bool,
    ) -> Result<ProfileSaid, Fail> {
        let (Phase::Running(_), Some(ends)) = (&self.phase, &mut self.ends) else {
            return Err(self.out_of_turn(said.kind()));
        };
        let said = midtest::profile_said(said).and_then(|said| match said {
            ProfileSaid::TxnEnd { txn, iterations } => {
                ends.end(txn, &iterations, timed)?;
                Ok(ProfileSaid::TxnEnd { txn, iterations })
            }
            ended => Ok(ended),
        });
        if !matches!(said, Ok(ProfileSaid::TxnEnd { .. })) {
            self.phase = Phase::Over;
        }
        said
    }

    /// The test's results, once the client ended it.
    pub(crate) fn results(report: SideReport, environment: Environment) -> ServerMessage {
        ServerMessage::Results {
            report,
            environment,
        }
    }

    fn out_of_turn(&self, what: &str) -> Fail {
        fail(
            ErrorCode::OutOfOrder,
            format!("{what} out of turn ({:?})", self.phase),
        )
    }
}
