//! The client's side of one test after the handshake, as a state machine
//! with no socket and no clock: what one receive on the control connection
//! came to and the time go in; what to send, what to do with the engine
//! and the server's side come out. [`run_test`](crate::run_test) is its
//! blocking shell: it sends what the session says, receives for as long as
//! the session allows ([`ClientSession::wait`]) and drives the engine.
//!
//! `test → accepted` (connect the flows to the offer), `start → started`
//! (run the workers), the test runs (the server is quiet; anything it says
//! stops the test), `finished` or `abort → results`. A profile asks with
//! `profile` and, while it runs, ends each timed transaction with
//! `txn_end → txn_ended` ([`run_profile`](crate::run_profile) is its shell).

use std::time::{Duration, Instant};

use linkperf_measured::Environment;
use linkperf_protocol::ClientMessage;
use linkperf_workload::profile::Profile;
use linkperf_workload::{Placement, TestSpec};

use super::answers::{self, Awaited, Endpoints, Offer};
use super::midtest::{self, ServerSide, Stopped};
use crate::proto::heard::{Heard, Received};
use crate::SessionError;

/// How long the server may take to answer the test and its start.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the server may take to send its results after `finished`.
pub(crate) const RESULTS_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server may take to stop its users at a timed
/// transaction's end and answer.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(40);
/// How often the client looks at its control connection (and its cancel
/// flag) while the test runs.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// `test` sent: the offer is awaited.
    Asked(Awaited),
    /// The offer taken: the engine connects the flows.
    Offered,
    /// `start` sent: `started` is awaited.
    Starting(Awaited),
    /// The workers run; the server is quiet until the client ends the test.
    Running,
    /// A profile's timed transaction `txn` ended on this side: the server's
    /// `txn_ended` is awaited.
    TxnEnding { txn: u32, a: Awaited },
    /// The server stopped the test while it ran: nothing more is asked.
    Stopped,
    /// `finished` or `abort` sent: the results are awaited.
    Ending(Awaited),
    /// The session is over.
    Over,
}

/// The session ended before its test ran: why, and the reason of the
/// `abort` that tells the server, when it is owed one (it offered a test
/// this side refuses).
#[derive(Debug)]
pub(crate) struct NoTest {
    pub error: SessionError,
    pub abort: Option<String>,
}

impl From<SessionError> for NoTest {
    fn from(error: SessionError) -> Self {
        NoTest { error, abort: None }
    }
}

/// The client's side of one test.
pub(crate) struct ClientSession {
    phase: Phase,
    /// The server's host as the offer described it.
    server_env: Environment,
    /// The endpoints the offer must hold.
    endpoints: Endpoints,
    /// The server's workers as asked for, and this host's boot id (`None`
    /// when unknown): placement `same` needs the server on this host.
    server: Placement,
    here: Option<String>,
}

impl ClientSession {
    /// Asks at `now` for the test `spec`, the server's workers on `server`,
    /// from this host (its boot id `here`, if known): the session, and the
    /// `test` message to send.
    pub(crate) fn ask(
        spec: TestSpec,
        server: Placement,
        here: Option<String>,
        now: Instant,
    ) -> (Self, ClientMessage) {
        let session = ClientSession {
            phase: Phase::Asked(Awaited::new("acceptance of the test", ANSWER_TIMEOUT, now)),
            server_env: Environment::default(),
            endpoints: Endpoints::of(spec.protocol),
            server: server.clone(),
            here,
        };
        let ask = ClientMessage::Test {
            spec,
            placement: server,
        };
        (session, ask)
    }

    /// Asks for a profile at `now` (`client_ports`: where this side listens
    /// for the server's connects; `server` and `here` as for
    /// [`ask`](Self::ask)): the session, and the `profile` message.
    pub(crate) fn ask_profile(
        profile: Profile,
        server: Placement,
        client_ports: Vec<u16>,
        here: Option<String>,
        now: Instant,
    ) -> (Self, ClientMessage) {
        let session = ClientSession {
            phase: Phase::Asked(Awaited::new(
                "acceptance of the profile",
                ANSWER_TIMEOUT,
                now,
            )),
            server_env: Environment::default(),
            endpoints: Endpoints::Ports,
            server: server.clone(),
            here,
        };
        let ask = ClientMessage::Profile {
            profile,
            placement: server,
            client_ports,
        };
        (session, ask)
    }

    /// How long the next receive may wait at `now`: until the awaited
    /// answer is late, [`WATCH_INTERVAL`] while the test runs, not at all
    /// when nothing is awaited.
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        match self.phase {
            Phase::Asked(a)
            | Phase::Starting(a)
            | Phase::Ending(a)
            | Phase::TxnEnding { a, .. } => a.until.saturating_duration_since(now),
            Phase::Running => WATCH_INTERVAL,
            Phase::Offered | Phase::Stopped | Phase::Over => Duration::ZERO,
        }
    }

    /// While the test is asked: the server's offer (connect the flows to
    /// it, then [`connected`](Self::connected)), `None` to go on waiting,
    /// or why there is no test: its refusal, silence, a close, an offer
    /// without the data endpoints the test connects to, or placement
    /// `same` offered from another host (the server is told, with the
    /// `abort` of [`NoTest`]).
    pub(crate) fn offer(&mut self, heard: Heard, now: Instant) -> Result<Option<Offer>, NoTest> {
        let Phase::Asked(a) = self.phase else {
            return Err(self.out_of_turn("an offer").into());
        };
        let Some(answer) = a.answer(heard, now) else {
            return Ok(None);
        };
        self.phase = Phase::Over;
        let offer = answers::offer(answer?)?;
        if !offer.holds(self.endpoints) {
            return Err(SessionError::Control("the server offered no data endpoint".into()).into());
        }
        let here = self.here.as_deref();
        if let Err(error) = answers::same_needs_one_host(&self.server, &offer.environment, here) {
            self.phase = Phase::Over;
            return Err(NoTest {
                abort: Some(error.to_string()),
                error,
            });
        }
        self.server_env = offer.environment.clone();
        self.phase = Phase::Offered;
        Ok(Some(offer))
    }

    /// The flows are connected at `now`: the `start` message to send.
    pub(crate) fn connected(&mut self, now: Instant) -> Result<ClientMessage, SessionError> {
        let Phase::Offered = self.phase else {
            return Err(self.out_of_turn("connected flows"));
        };
        self.phase = Phase::Starting(Awaited::new("start confirmation", ANSWER_TIMEOUT, now));
        Ok(ClientMessage::Start)
    }

    /// The test cannot go on before it started (the flows did not connect,
    /// a check failed): the `abort` message that tells the server why.
    pub(crate) fn give_up(&mut self, why: &str) -> ClientMessage {
        self.phase = Phase::Over;
        ClientMessage::Abort {
            reason: why.to_string(),
        }
    }

    /// While the start is confirmed: `true` when the server started its
    /// side (run the workers), `false` to go on waiting, or why the test
    /// does not start.
    pub(crate) fn started(&mut self, heard: Heard, now: Instant) -> Result<bool, SessionError> {
        let Phase::Starting(a) = self.phase else {
            return Err(self.out_of_turn("a start confirmation"));
        };
        let Some(answer) = a.answer(heard, now) else {
            return Ok(false);
        };
        self.phase = Phase::Over;
        answers::started(answer?)?;
        self.phase = Phase::Running;
        Ok(true)
    }

    /// While the test runs: why the server stopped it (abort the
    /// workers), or `None` while it is quiet.
    pub(crate) fn running(&mut self, heard: Heard) -> Option<Stopped> {
        let Phase::Running = self.phase else {
            return None;
        };
        let stop = midtest::while_running(heard.got, heard.how)?;
        self.phase = Phase::Stopped;
        Some(stop)
    }

    /// The workers are done at `now` (`cut`: why they were cut short on
    /// this side, if they were): the message that asks for the server's
    /// side, `finished` or `abort`; `None` when the server stopped the test
    /// (it has nothing more to say).
    pub(crate) fn workers_done(
        &mut self,
        cut: Option<String>,
        now: Instant,
    ) -> Option<ClientMessage> {
        let Phase::Running = self.phase else {
            return None;
        };
        self.phase = Phase::Ending(Awaited::new("results", RESULTS_TIMEOUT, now));
        Some(match cut {
            Some(reason) => ClientMessage::Abort { reason },
            None => ClientMessage::Finished,
        })
    }

    /// A profile's timed transaction `txn` ended on this side at `now`,
    /// after `iterations` (by user): the `txn_end` message to send.
    pub(crate) fn txn_end(
        &mut self,
        txn: usize,
        iterations: Vec<u64>,
        now: Instant,
    ) -> Result<ClientMessage, String> {
        let Phase::Running = self.phase else {
            return Err(self.out_of_turn("a transaction's end").to_string());
        };
        let txn = u32::try_from(txn).map_err(|_| "too many transactions".to_string())?;
        let a = Awaited::new("txn_ended", STOP_TIMEOUT, now);
        self.phase = Phase::TxnEnding { txn, a };
        Ok(ClientMessage::TxnEnd { txn, iterations })
    }

    /// While a transaction's end is answered: what the server's users
    /// wrote in it (by user and connection; the profile goes on), `None`
    /// to go on waiting, or why the test stops.
    pub(crate) fn txn_ended(
        &mut self,
        heard: Heard,
        now: Instant,
    ) -> Result<Option<Vec<Vec<u64>>>, String> {
        let Phase::TxnEnding { txn, a } = self.phase else {
            return Err(self.out_of_turn("txn_ended").to_string());
        };
        if matches!(heard.got, Ok(Received::Timeout)) && now < a.until {
            return Ok(None);
        }
        let written = midtest::txn_ended(heard.got, txn, a.timeout, heard.how);
        self.phase = match written {
            Ok(_) => Phase::Running,
            Err(_) => Phase::Stopped,
        };
        written.map(Some)
    }

    /// While the results are awaited: the server's side (its report, or,
    /// with its host from the offer, why it is missing), or `None` to go
    /// on waiting.
    pub(crate) fn results(&mut self, heard: Heard, now: Instant) -> Option<ServerSide> {
        let Phase::Ending(a) = self.phase else {
            return None;
        };
        let answer = a.answer(heard, now)?;
        self.phase = Phase::Over;
        Some(midtest::results(answer, self.server_env.clone()))
    }

    /// The server's side when the results could not even be asked for
    /// (the request failed to go out).
    pub(crate) fn unasked(&mut self, e: SessionError) -> ServerSide {
        self.phase = Phase::Over;
        midtest::results(Err(e), self.server_env.clone())
    }

    fn out_of_turn(&self, what: &str) -> SessionError {
        SessionError::Control(format!("{what} out of turn ({:?})", self.phase))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::pair::{accepted, quiet, to_client};
    use linkperf_protocol::{ErrorCode, ServerMessage};

    fn asked(t0: Instant) -> ClientSession {
        let spec = TestSpec::new(
            "rr:1x1".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            1,
            Duration::from_secs(10),
        );
        ClientSession::ask(spec, Placement::with_threads(1), None, t0).0
    }

    #[test]
    fn each_answer_is_awaited_until_it_is_late_and_then_named() {
        let t0 = Instant::now();
        let mut s = asked(t0);
        assert_eq!(s.wait(t0), ANSWER_TIMEOUT);
        assert!(matches!(
            s.offer(quiet(), t0 + Duration::from_secs(3)),
            Ok(None)
        ));
        assert_eq!(s.wait(t0 + Duration::from_secs(3)), Duration::from_secs(12));
        let late = s
            .offer(quiet(), t0 + ANSWER_TIMEOUT)
            .unwrap_err()
            .error
            .to_string();
        assert!(
            late.contains("no acceptance of the test from the server within 15s"),
            "{late}"
        );
        assert_eq!(s.wait(t0 + ANSWER_TIMEOUT), Duration::ZERO);
    }

    #[test]
    fn the_sequence_offer_start_run_finish_results() {
        let t0 = Instant::now();
        let mut s = asked(t0);
        let offer = s.offer(to_client(&accepted()), t0).unwrap().unwrap();
        assert_eq!(offer.data_ports, [40_000]);
        // The offer is not taken twice, and the start comes after the flows.
        assert!(s.offer(to_client(&accepted()), t0).is_err());
        assert!(s.started(to_client(&ServerMessage::Started), t0).is_err());
        assert_eq!(
            s.wait(t0),
            Duration::ZERO,
            "the engine connects: nothing awaited"
        );
        let t1 = t0 + Duration::from_secs(2);
        assert!(matches!(s.connected(t1), Ok(ClientMessage::Start)));
        assert!(!s.started(quiet(), t1).unwrap());
        assert!(s.started(to_client(&ServerMessage::Started), t1).unwrap());
        assert_eq!(s.wait(t1), WATCH_INTERVAL);
        assert_eq!(s.running(quiet()), None);
        let t2 = t1 + Duration::from_secs(10);
        assert!(matches!(
            s.workers_done(None, t2),
            Some(ClientMessage::Finished)
        ));
        assert_eq!(s.wait(t2), RESULTS_TIMEOUT);
        assert!(s.results(quiet(), t2).is_none());
        let side = s.results(quiet(), t2 + RESULTS_TIMEOUT).unwrap();
        assert!(side.report.is_none());
        assert_eq!(
            side.environment.unwrap().hostname,
            "server",
            "the offer's host is kept"
        );
        assert!(
            side.error
                .unwrap()
                .contains("no results from the server within 30s"),
            "the late results are named"
        );
    }

    #[test]
    fn a_refusal_a_close_and_a_word_mid_test_end_the_session_each_in_its_way() {
        let t0 = Instant::now();
        let mut s = asked(t0);
        let refused = ServerMessage::Error {
            code: ErrorCode::Limit,
            message: "too many users".into(),
            limit: None,
        };
        let e = s.offer(to_client(&refused), t0).unwrap_err().error;
        assert!(matches!(e, SessionError::Refused { .. }), "{e}");
        let mut s = asked(t0);
        let closed = Heard {
            got: Ok(Received::Closed),
            how: "closed the connection",
        };
        let e = s.offer(closed, t0).unwrap_err().error.to_string();
        assert!(
            e.contains("the server closed the connection before acceptance of the test"),
            "{e}"
        );
        // Mid-test, the server's error stops the test and nothing more is asked.
        let mut s = asked(t0);
        s.offer(to_client(&accepted()), t0).unwrap();
        s.connected(t0).unwrap();
        s.started(to_client(&ServerMessage::Started), t0).unwrap();
        let stop = s
            .running(to_client(&ServerMessage::Error {
                code: ErrorCode::Aborted,
                message: "shutting down".into(),
                limit: None,
            }))
            .unwrap();
        assert!(
            stop.aborted && stop.reason.contains("shutting down"),
            "{stop:?}"
        );
        assert!(s.workers_done(None, t0).is_none());
        // Cut short on this side: `abort` asks for the results.
        let mut s = asked(t0);
        s.offer(to_client(&accepted()), t0).unwrap();
        s.connected(t0).unwrap();
        s.started(to_client(&ServerMessage::Started), t0).unwrap();
        assert!(matches!(
            s.workers_done(Some("interrupted".into()), t0),
            Some(ClientMessage::Abort { .. })
        ));
    }
}
