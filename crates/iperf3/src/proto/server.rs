//! One test on linkperf's iperf3 server, from its cookie to `IPERF_DONE`, as
//! a state machine with no socket and no clock: the bytes heard on the
//! control connection, the time and what the shell did go in; what to send
//! and what to do come out ([`ServerControl::poll`]). A test's thread
//! (server/session.rs) is its blocking shell; the data phase is the shell's
//! (server/data.rs), the machine only hears how it ended.
//!
//! `PARAM_EXCHANGE` → the parameters, planned or refused (`SERVER_ERROR`
//! with iperf3's error number); the shell admits the test (its streams
//! against the server's total, its congestion control) or refuses it
//! (`ACCESS_DENIED`, `SERVER_ERROR`); `CREATE_STREAMS` as the shell is ready
//! for the streams; `TEST_START`, `TEST_RUNNING` and the data phase; after
//! `TEST_END`, `EXCHANGE_RESULTS` → the client's results, the shell tops its
//! counts up and the server's go out, `DISPLAY_RESULTS`; then `IPERF_DONE`,
//! a close or [`DONE_WAIT`], whichever comes first. Each message from the
//! client is awaited for the handshake timeout. A data phase ended
//! otherwise (the client's `CLIENT_TERMINATE` or close, the server's limit
//! or shutdown, a byte out of turn) ends the test with what was counted;
//! a shutdown during setup ends it at once with `SERVER_TERMINATE`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Awaited, ControlError};
use crate::codec::{
    encode_json, server_error_bytes, Expect, IErrno, Inbox, State, TestParams, TestResults,
};
use crate::server::plan::{self, Limits, Refusal, TestPlan};

/// After `DISPLAY_RESULTS`, how long the client may take to say
/// `IPERF_DONE` (or close).
pub(crate) const DONE_WAIT: Duration = Duration::from_secs(5);
/// Why a test still setting up ended at a shutdown.
pub(crate) const SHUTDOWN: &str = "aborted in setup: the server is shutting down";

/// What the server allows a test.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The longest test and the most streams.
    pub limits: Limits,
    /// Largest parameters message read.
    pub max_params: usize,
    /// Largest results message read.
    pub max_results: usize,
    /// How long each step of the handshake may take the client: its
    /// parameters, connecting its streams, its results.
    pub handshake: Duration,
}

/// Why the shell does not admit a planned test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The server has no room (`ACCESS_DENIED`); for the log.
    Busy(String),
    /// The server cannot run it (`SERVER_ERROR` and iperf3's numbers).
    Error(Refusal),
}

/// How the data phase ended (what the shell's data phase reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataEnd {
    /// The client sent `TEST_END`.
    TestEnd,
    /// The client sent `CLIENT_TERMINATE`.
    ClientTerminate,
    /// The control connection closed or failed.
    ControlClosed,
    /// The test outlived its limit.
    Deadline,
    /// The server is shutting down (the data phase told the client).
    Shutdown,
    /// The client sent a byte that is no state, or one out of turn.
    Protocol(u8),
}

/// What the shell is to do, in the order given.
#[derive(Debug)]
pub(crate) enum Do {
    /// Send these bytes on the control connection (a failure goes to
    /// [`ServerControl::send_failed`]).
    Send(Vec<u8>),
    /// The client's parameters make `plan`: admit the test, then
    /// [`ServerControl::admitted`].
    Admit {
        plan: Box<TestPlan>,
        client_version: Option<String>,
    },
    /// Get ready for the test's streams, send `announce`
    /// (`CREATE_STREAMS`), take them until `until`, then
    /// [`ServerControl::connected`] or [`ServerControl::streams_failed`].
    AcceptStreams { announce: Vec<u8>, until: Instant },
    /// `TEST_START` and `TEST_RUNNING` are out: run the data phase (the
    /// client stops counting at `client_end`, its `-t` and `-O` from now),
    /// then [`ServerControl::data_ended`].
    RunData { client_end: Option<Instant> },
    /// The client's results: top the counts up with them, then
    /// [`ServerControl::answer`] with the server's.
    Results(Box<TestResults>),
    /// The test is over.
    Finish(Ended),
}

/// How a test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Results exchanged.
    Done,
    /// Refused, failed or ended before its data phase, or a message did
    /// not go out: why.
    Failed(String),
    /// Ended after its data phase without results: why (what was counted
    /// follows in the log).
    Cut(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `PARAM_EXCHANGE` out: the parameters awaited.
    Params(Awaited),
    /// Planned: the shell admits the test.
    Admitting,
    /// The shell takes the streams.
    Connecting,
    /// The data phase runs (it reads the control connection itself).
    Data,
    /// `EXCHANGE_RESULTS` out: the client's results awaited.
    Results(Awaited),
    /// The shell tops up and makes the server's results.
    Answering,
    /// `DISPLAY_RESULTS` out: `IPERF_DONE` or a close awaited.
    Displayed(Awaited),
    /// Finished.
    Over,
}

/// One test on the server.
#[derive(Debug)]
pub(crate) struct ServerControl {
    phase: Phase,
    settings: Settings,
    inbox: Inbox,
    todo: VecDeque<Do>,
    /// The plan's `-t`, `-O` and limit, once planned.
    time: Option<Duration>,
    omit: Duration,
    limit: Duration,
}

impl ServerControl {
    /// A test whose cookie came at `now`: `PARAM_EXCHANGE` goes out.
    pub(crate) fn new(settings: Settings, now: Instant) -> Self {
        let mut s = ServerControl {
            phase: Phase::Params(Awaited::new(settings.handshake, now)),
            settings,
            inbox: Inbox::new(),
            todo: VecDeque::new(),
            time: None,
            omit: Duration::ZERO,
            limit: Duration::ZERO,
        };
        s.send(&[State::ParamExchange.to_byte()]);
        s
    }

    /// The next thing to do, if any.
    pub(crate) fn poll(&mut self) -> Option<Do> {
        self.todo.pop_front()
    }

    /// How many bytes the next read may take: what the message awaited
    /// still needs, and no more (the data phase reads the connection
    /// after the parameters); 0 while nothing is read.
    pub(crate) fn wants(&self) -> usize {
        match self.phase {
            Phase::Params(_) => self.inbox.needs(Expect::Json {
                max: self.settings.max_params,
            }),
            Phase::Results(_) => self.inbox.needs(Expect::Json {
                max: self.settings.max_results,
            }),
            Phase::Displayed(_) => self.inbox.needs(Expect::State),
            _ => 0,
        }
    }

    /// Until when what is awaited may take.
    pub(crate) fn timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Params(a) | Phase::Results(a) | Phase::Displayed(a) => Some(a.until),
            _ => None,
        }
    }

    /// Bytes heard on the control connection at `now`.
    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant) {
        self.inbox.push(bytes);
        self.process(now);
    }

    /// The control connection closed or failed while a message was awaited.
    pub(crate) fn broken(&mut self, e: ControlError, now: Instant) {
        let _ = now;
        self.unanswered(e);
    }

    /// The time is `now`: what is awaited may be late.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Params(a) | Phase::Results(a) | Phase::Displayed(a) if a.late(now) => {
                self.unanswered(a.timed_out())
            }
            _ => {}
        }
    }

    /// A send failed: the test ends, unless it has already.
    pub(crate) fn send_failed(&mut self, e: ControlError) {
        if self.phase != Phase::Over {
            self.todo.clear();
            self.finish(Ended::Failed(e.to_string()));
        }
    }

    /// The shell admitted the test at `now` (`Ok`), or refused it.
    pub(crate) fn admitted(&mut self, r: Result<(), Refused>, now: Instant) {
        if self.phase != Phase::Admitting {
            return;
        }
        match r {
            Ok(()) => {
                self.phase = Phase::Connecting;
                self.todo.push_back(Do::AcceptStreams {
                    announce: vec![State::CreateStreams.to_byte()],
                    until: now + self.settings.handshake,
                });
            }
            Err(Refused::Busy(why)) => {
                self.send(&[State::AccessDenied.to_byte()]);
                self.finish(Ended::Failed(format!("refused: {why}")));
            }
            Err(Refused::Error(r)) => self.refuse(r),
        }
    }

    /// The streams are connected at `now`: the test starts.
    pub(crate) fn connected(&mut self, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        // The client's clock for -t and -O starts when it reads TEST_START.
        let client_end = self.time.map(|t| now + self.omit + t);
        self.send(&[State::TestStart.to_byte()]);
        self.send(&[State::TestRunning.to_byte()]);
        self.todo.push_back(Do::RunData { client_end });
        self.phase = Phase::Data;
    }

    /// The streams did not all connect: why.
    pub(crate) fn streams_failed(&mut self, why: &str, now: Instant) {
        let _ = now;
        if self.phase == Phase::Connecting {
            self.send(&server_error_bytes(IErrno::StreamAccept, 0));
            self.finish(Ended::Failed(format!("failed: {why}")));
        }
    }

    /// The data phase ended at `now`, as `end` says.
    pub(crate) fn data_ended(&mut self, end: DataEnd, now: Instant) {
        if self.phase != Phase::Data {
            return;
        }
        let cut = |why: String| Ended::Cut(why);
        match end {
            DataEnd::TestEnd => {
                self.send(&[State::ExchangeResults.to_byte()]);
                self.phase = Phase::Results(Awaited::new(self.settings.handshake, now));
            }
            DataEnd::ClientTerminate => {
                self.finish(cut("ended by the client (CLIENT_TERMINATE)".into()))
            }
            DataEnd::ControlClosed => self.finish(cut(
                "the client went away (control connection closed)".into(),
            )),
            // As iperf3's own server does on SIGTERM, the data phase told
            // the client SERVER_TERMINATE: it says "the server has
            // terminated".
            DataEnd::Shutdown => self.finish(cut("aborted: the server is shutting down".into())),
            DataEnd::Deadline => {
                self.send(&[State::ServerTerminate.to_byte()]);
                self.finish(cut(format!(
                    "ended by the server: no TEST_END within {:?}",
                    self.limit
                )));
            }
            DataEnd::Protocol(b) => {
                self.send(&server_error_bytes(IErrno::Message, 0));
                self.finish(cut(format!("refused: control byte {b} out of turn")));
            }
        }
    }

    /// The server's results, at `now`: they go out, then `DISPLAY_RESULTS`.
    pub(crate) fn answer(&mut self, ours: &TestResults, now: Instant) {
        if self.phase != Phase::Answering {
            return;
        }
        match encode_json(ours) {
            Ok(f) => {
                self.send(&f);
                self.send(&[State::DisplayResults.to_byte()]);
                self.phase = Phase::Displayed(Awaited::new(DONE_WAIT, now));
            }
            Err(e) => self.finish(Ended::Failed(ControlError::Wire(e).to_string())),
        }
    }

    /// The server shuts down while the test sets up: what has not gone out
    /// is dropped, the client is told `SERVER_TERMINATE`, the test ends.
    pub(crate) fn terminate(&mut self, now: Instant) {
        let _ = now;
        if self.phase == Phase::Over {
            return;
        }
        self.todo.clear();
        self.send(&[State::ServerTerminate.to_byte()]);
        self.finish(Ended::Failed(SHUTDOWN.into()));
    }

    /// The server's shutdown already told the client `SERVER_TERMINATE`
    /// while the test set up: the test ends.
    pub(crate) fn terminated(&mut self, now: Instant) {
        let _ = now;
        if self.phase != Phase::Over {
            self.todo.clear();
            self.finish(Ended::Failed(SHUTDOWN.into()));
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.todo.push_back(Do::Send(bytes.to_vec()));
    }

    fn finish(&mut self, e: Ended) {
        self.phase = Phase::Over;
        self.todo.push_back(Do::Finish(e));
    }

    fn refuse(&mut self, r: Refusal) {
        self.send(&server_error_bytes(r.i_errno, r.errno));
        self.finish(Ended::Failed(format!("refused: {}", r.why)));
    }

    /// What was awaited will not come: `e` says why.
    fn unanswered(&mut self, e: ControlError) {
        match self.phase {
            Phase::Params(_) => self.finish(Ended::Failed(format!("no parameters: {e}"))),
            Phase::Results(_) => {
                self.finish(Ended::Cut(format!("no results from the client: {e}")))
            }
            // The client prints, then says IPERF_DONE and closes; either
            // will do, and so will silence.
            Phase::Displayed(_) => self.finish(Ended::Done),
            _ => {}
        }
    }

    /// Takes what the inbox holds for the phase.
    fn process(&mut self, now: Instant) {
        let _ = now;
        match self.phase {
            Phase::Params(_) => {
                match self.inbox.take_json::<TestParams>(self.settings.max_params) {
                    None => {}
                    Some(Err(e)) => {
                        self.send(&server_error_bytes(IErrno::RecvParams, 0));
                        self.finish(Ended::Failed(format!(
                            "refused: unreadable parameters: {e}"
                        )));
                    }
                    Some(Ok(params)) => match plan::plan(&params, &self.settings.limits) {
                        Err(r) => self.refuse(r),
                        Ok(plan) => {
                            self.time = plan.time;
                            self.omit = plan.omit;
                            self.limit = plan.limit;
                            self.phase = Phase::Admitting;
                            self.todo.push_back(Do::Admit {
                                plan: Box::new(plan),
                                client_version: params.client_version,
                            });
                        }
                    },
                }
            }
            Phase::Results(_) => {
                match self
                    .inbox
                    .take_json::<TestResults>(self.settings.max_results)
                {
                    None => {}
                    Some(Err(e)) => {
                        self.send(&server_error_bytes(IErrno::RecvResults, 0));
                        self.finish(Ended::Cut(format!(
                            "unreadable results from the client: {e}"
                        )));
                    }
                    Some(Ok(theirs)) => {
                        self.phase = Phase::Answering;
                        self.todo.push_back(Do::Results(Box::new(theirs)));
                    }
                }
            }
            Phase::Displayed(_) if self.inbox.take_state().is_some() => self.finish(Ended::Done),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_json, encode_frame, StreamResults};

    const MS: Duration = Duration::from_millis(1);
    const HANDSHAKE: Duration = Duration::from_secs(10);

    fn settings() -> Settings {
        Settings {
            limits: Limits {
                max_duration: Duration::from_secs(3600),
                max_streams: 128,
            },
            max_params: 64 * 1024,
            max_results: 1024 * 1024,
            handshake: HANDSHAKE,
        }
    }

    fn params() -> TestParams {
        TestParams {
            tcp: true,
            time: Some(2),
            omit: 1,
            parallel: Some(2),
            client_version: Some("3.12".into()),
            ..TestParams::default()
        }
    }

    fn said(s: &mut ServerControl) -> Vec<Do> {
        std::iter::from_fn(|| s.poll()).collect()
    }

    /// What the control says now, in words: a state sent by its name, a
    /// refusal by its numbers.
    fn words(s: &mut ServerControl) -> Vec<String> {
        said(s)
            .into_iter()
            .map(|d| match d {
                Do::Send(b) if b.len() == 1 => {
                    format!("send {:?}", State::from_byte(b[0]).unwrap())
                }
                Do::Send(b) if b.len() == 9 && b[0] == State::ServerError.to_byte() => {
                    let n = |i: usize| i32::from_be_bytes(b[i..i + 4].try_into().unwrap());
                    format!("send ServerError {} {}", n(1), n(5))
                }
                Do::Send(b) => format!("send {} bytes", b.len()),
                Do::Admit { plan, .. } => format!("admit {} streams", plan.streams()),
                Do::AcceptStreams { announce, .. } => {
                    format!(
                        "accept streams, announced by {:?}",
                        State::from_byte(announce[0]).unwrap()
                    )
                }
                Do::RunData { .. } => "run the data phase".into(),
                Do::Results(t) => format!("results of {} streams", t.streams.len()),
                Do::Finish(e) => format!("{e:?}"),
            })
            .collect()
    }

    /// A test whose client sent `p` at `t0`.
    fn planned(p: &TestParams, t0: Instant) -> ServerControl {
        let mut s = ServerControl::new(settings(), t0);
        said(&mut s);
        s.receive(&encode_json(p).unwrap(), t0);
        s
    }

    /// A test in its data phase from `t0`.
    fn running(t0: Instant) -> ServerControl {
        let mut s = planned(&params(), t0);
        s.admitted(Ok(()), t0);
        s.connected(t0);
        said(&mut s);
        s
    }

    fn results() -> TestResults {
        TestResults {
            sender_has_retransmits: 0,
            streams: vec![StreamResults {
                id: 1,
                bytes: 5,
                ..StreamResults::default()
            }],
            ..TestResults::default()
        }
    }

    #[test]
    fn the_parameters_are_planned_the_test_admitted_its_streams_taken_and_it_runs() {
        let t0 = Instant::now();
        let mut s = ServerControl::new(settings(), t0);
        assert_eq!(words(&mut s), ["send ParamExchange"]);
        assert_eq!((s.wants(), s.timeout()), (4, Some(t0 + HANDSHAKE)));
        let f = encode_json(&params()).unwrap();
        s.receive(&f[..6], t0);
        assert_eq!(
            s.wants(),
            f.len() - 6,
            "the rest of the parameters, and no more"
        );
        assert!(said(&mut s).is_empty());
        s.receive(&f[6..], t0 + MS);
        let Some(Do::Admit {
            plan,
            client_version,
        }) = s.poll()
        else {
            panic!("admit");
        };
        assert_eq!(
            (plan.streams(), plan.time),
            (2, Some(Duration::from_secs(2)))
        );
        assert_eq!(client_version.as_deref(), Some("3.12"));
        assert_eq!(
            (s.wants(), s.timeout()),
            (0, None),
            "nothing read meanwhile"
        );
        let t1 = t0 + 2 * MS;
        s.admitted(Ok(()), t1);
        let Some(Do::AcceptStreams { announce, until }) = s.poll() else {
            panic!("take the streams");
        };
        assert_eq!(announce, [State::CreateStreams.to_byte()]);
        assert_eq!(until, t1 + HANDSHAKE);
        let t2 = t1 + 300 * MS;
        s.connected(t2);
        let sent = said(&mut s);
        assert!(
            matches!(
                &sent[..],
                [Do::Send(a), Do::Send(b), Do::RunData { client_end: Some(end) }]
                    if a[..] == [State::TestStart.to_byte()]
                        && b[..] == [State::TestRunning.to_byte()]
                        && *end == t2 + Duration::from_secs(3)
            ),
            "TEST_START, TEST_RUNNING, the data phase to the client's -t and -O: {sent:?}"
        );
        assert_eq!(
            (s.wants(), s.timeout()),
            (0, None),
            "the data phase reads the connection"
        );
    }

    #[test]
    fn what_the_server_cannot_run_is_refused_with_iperf3s_numbers() {
        let t0 = Instant::now();
        let mut many = params();
        many.parallel = Some(200);
        let mut s = planned(&many, t0);
        assert_eq!(
            words(&mut s),
            [
                "send ServerError 6 0",
                "Failed(\"refused: 200 streams asked, 1 to 128 served\")"
            ]
        );
        let mut s = ServerControl::new(settings(), t0);
        said(&mut s);
        s.receive(&encode_frame(b"{\"time\":").unwrap(), t0);
        let w = words(&mut s);
        assert_eq!(w[0], "send ServerError 114 0");
        assert!(
            w[1].starts_with("Failed(\"refused: unreadable parameters: parse a JSON message"),
            "{w:?}"
        );
        let mut s = ServerControl::new(settings(), t0);
        said(&mut s);
        s.receive(&[0, 1, 0, 1], t0);
        assert_eq!(
            words(&mut s),
            [
                "send ServerError 114 0",
                "Failed(\"refused: unreadable parameters: read a JSON message: 65537 bytes announced, at most 65536 accepted\")"
            ]
        );
        // The shell's refusals: no room, no such congestion control.
        let mut s = planned(&params(), t0);
        said(&mut s);
        s.admitted(
            Err(Refused::Busy(
                "4 more streams would pass the server's limit of 5".into(),
            )),
            t0,
        );
        assert_eq!(
            words(&mut s),
            [
                "send AccessDenied",
                "Failed(\"refused: 4 more streams would pass the server's limit of 5\")"
            ]
        );
        let mut s = planned(&params(), t0);
        said(&mut s);
        let no_cc = Refusal {
            i_errno: IErrno::SetCongestion,
            errno: libc::ENOENT,
            why: "congestion control nope: No such file or directory".into(),
        };
        s.admitted(Err(Refused::Error(no_cc)), t0);
        assert_eq!(words(&mut s)[0], "send ServerError 134 2");
        // Streams that do not all connect.
        let mut s = planned(&params(), t0);
        s.admitted(Ok(()), t0);
        said(&mut s);
        s.streams_failed("1 of 2 streams connected in time", t0 + HANDSHAKE);
        assert_eq!(
            words(&mut s),
            [
                "send ServerError 204 0",
                "Failed(\"failed: 1 of 2 streams connected in time\")"
            ]
        );
    }

    #[test]
    fn each_message_of_the_client_is_awaited_for_the_handshake_timeout() {
        let t0 = Instant::now();
        let mut s = ServerControl::new(settings(), t0);
        said(&mut s);
        s.handle_timeout(t0 + HANDSHAKE - MS);
        assert!(said(&mut s).is_empty());
        s.handle_timeout(t0 + HANDSHAKE);
        assert_eq!(
            words(&mut s),
            ["Failed(\"no parameters: no answer on the control connection within 10s\")"]
        );
        let mut s = ServerControl::new(settings(), t0);
        said(&mut s);
        s.broken(ControlError::Closed, t0);
        assert_eq!(
            words(&mut s),
            ["Failed(\"no parameters: the peer closed the control connection\")"]
        );
        let mut s = running(t0);
        let t1 = t0 + Duration::from_secs(3);
        s.data_ended(DataEnd::TestEnd, t1);
        assert_eq!(words(&mut s), ["send ExchangeResults"]);
        assert_eq!((s.wants(), s.timeout()), (4, Some(t1 + HANDSHAKE)));
        s.handle_timeout(t1 + HANDSHAKE);
        assert_eq!(
            words(&mut s),
            ["Cut(\"no results from the client: no answer on the control connection within 10s\")"]
        );
    }

    #[test]
    fn after_test_end_the_results_are_exchanged_and_the_client_says_done() {
        let t0 = Instant::now();
        let mut s = running(t0);
        let t1 = t0 + Duration::from_secs(3);
        s.data_ended(DataEnd::TestEnd, t1);
        said(&mut s);
        s.receive(&encode_json(&results()).unwrap(), t1);
        assert_eq!(words(&mut s), ["results of 1 streams"]);
        assert_eq!((s.wants(), s.timeout()), (0, None), "the shell tops up");
        s.answer(&results(), t1 + MS);
        let sent = said(&mut s);
        let [Do::Send(f), Do::Send(d)] = &sent[..] else {
            panic!("{sent:?}");
        };
        assert_eq!(decode_json::<TestResults>(&f[4..]).unwrap(), results());
        assert_eq!(d[..], [State::DisplayResults.to_byte()]);
        assert_eq!((s.wants(), s.timeout()), (1, Some(t1 + MS + DONE_WAIT)));
        s.receive(&[State::IperfDone.to_byte()], t1 + 2 * MS);
        assert_eq!(words(&mut s), ["Done"]);
        // A client that closes, or says nothing, is done too.
        for silent in [false, true] {
            let mut s = running(t0);
            s.data_ended(DataEnd::TestEnd, t1);
            s.receive(&encode_json(&results()).unwrap(), t1);
            s.answer(&results(), t1);
            said(&mut s);
            if silent {
                s.handle_timeout(t1 + DONE_WAIT);
            } else {
                s.broken(ControlError::Closed, t1);
            }
            assert_eq!(words(&mut s), ["Done"]);
        }
        // Results that do not parse.
        let mut s = running(t0);
        s.data_ended(DataEnd::TestEnd, t1);
        said(&mut s);
        s.receive(&encode_frame(b"[1,2]").unwrap(), t1);
        let w = words(&mut s);
        assert_eq!(w[0], "send ServerError 117 0");
        assert!(
            w[1].starts_with("Cut(\"unreadable results from the client: parse a JSON message"),
            "{w:?}"
        );
    }

    #[test]
    fn a_data_phase_ended_otherwise_says_why_and_what_the_client_is_told() {
        let t0 = Instant::now();
        let cases = [
            (
                DataEnd::ClientTerminate,
                vec!["Cut(\"ended by the client (CLIENT_TERMINATE)\")"],
            ),
            (
                DataEnd::ControlClosed,
                vec!["Cut(\"the client went away (control connection closed)\")"],
            ),
            (
                DataEnd::Shutdown,
                vec!["Cut(\"aborted: the server is shutting down\")"],
            ),
            (
                DataEnd::Deadline,
                vec![
                    "send ServerTerminate",
                    "Cut(\"ended by the server: no TEST_END within 13s\")",
                ],
            ),
            (
                DataEnd::Protocol(77),
                vec![
                    "send ServerError 110 0",
                    "Cut(\"refused: control byte 77 out of turn\")",
                ],
            ),
        ];
        for (end, want) in cases {
            let mut s = running(t0);
            s.data_ended(end, t0 + Duration::from_secs(1));
            assert_eq!(words(&mut s), want, "{end:?}");
        }
    }

    #[test]
    fn a_shutdown_in_setup_tells_the_client_unless_the_server_already_has() {
        let t0 = Instant::now();
        let mut s = ServerControl::new(settings(), t0);
        s.terminate(t0);
        assert_eq!(
            words(&mut s),
            ["send ServerTerminate", &format!("Failed({SHUTDOWN:?})")],
            "PARAM_EXCHANGE never goes"
        );
        let mut s = planned(&params(), t0);
        s.admitted(Ok(()), t0);
        said(&mut s);
        s.terminated(t0);
        assert_eq!(words(&mut s), [format!("Failed({SHUTDOWN:?})")]);
        s.terminate(t0);
        assert!(said(&mut s).is_empty(), "over: nothing more");
    }

    #[test]
    fn a_send_that_fails_ends_the_test_unless_it_is_over() {
        let t0 = Instant::now();
        let mut s = ServerControl::new(settings(), t0);
        assert!(matches!(s.poll(), Some(Do::Send(_))));
        s.send_failed(ControlError::Closed);
        assert_eq!(
            words(&mut s),
            ["Failed(\"the peer closed the control connection\")"]
        );
        // TEST_START failing to go out: no data phase.
        let mut s = planned(&params(), t0);
        s.admitted(Ok(()), t0);
        said(&mut s);
        s.connected(t0);
        assert!(matches!(s.poll(), Some(Do::Send(_))));
        s.send_failed(ControlError::Closed);
        assert_eq!(
            words(&mut s),
            ["Failed(\"the peer closed the control connection\")"]
        );
        // A refusal that does not reach the client changes nothing.
        let mut many = params();
        many.parallel = Some(0);
        let mut s = planned(&many, t0);
        assert!(matches!(s.poll(), Some(Do::Send(_))));
        s.send_failed(ControlError::Closed);
        assert_eq!(
            words(&mut s),
            ["Failed(\"refused: 0 streams asked, 1 to 128 served\")"]
        );
    }
}
