//! linkperf's end of a test against a stock `iperf3 -s`, as a state machine
//! with no socket and no clock: the bytes heard on the control connection,
//! the time and what the engine did go in; what to send and what to do
//! with the engine come out ([`ClientControl::poll`]). `run_client` is its
//! blocking shell.
//!
//! The cookie goes out; `PARAM_EXCHANGE` → the parameters; `CREATE_STREAMS`
//! → the engine connects the streams; `TEST_START`, `TEST_RUNNING` → the
//! engine runs. While the window runs the server is quiet: anything it says
//! (`SERVER_TERMINATE`, a close) stops the test, and so does a cancel. At
//! the window's end, once the server has all that was sent (the shell looks
//! every [`DELIVERY_LOOK`], at most [`DELIVERY_TIMEOUT`]) and
//! [`READ_GRACE`] more, `TEST_END`; once the engine is done, the results:
//! `EXCHANGE_RESULTS` → ours, the server's, `DISPLAY_RESULTS` → `IPERF_DONE`.
//! Each answer is awaited until it is late; `ACCESS_DENIED` and
//! `SERVER_ERROR` in place of one are the server's refusals.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Awaited, ControlError};
use crate::codec::{
    describe_errno, encode_json, Cookie, Expect, Inbox, State, TestMode, TestParams, TestResults,
};
use crate::ClientError;

/// How long the server may take to answer during the handshake and the
/// results.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// After `TEST_END`, how long the server may take to ask for the results.
pub(crate) const RESULTS_TIMEOUT: Duration = Duration::from_secs(30);
/// After the window, how long the server may take to take in what was sent.
pub(crate) const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the shell looks whether the server has taken it in: the kernel
/// raises no event when the peer acknowledges a socket's last byte.
pub(crate) const DELIVERY_LOOK: Duration = Duration::from_millis(2);
/// Once all sent is taken in, time for iperf3 to read it before `TEST_END`.
pub(crate) const READ_GRACE: Duration = Duration::from_millis(50);
/// How often a cancel flag is looked at (a flag raises no event), until the
/// engine is done.
pub(crate) const CANCEL_LOOK: Duration = Duration::from_millis(50);
/// Largest results message read from the server.
pub(crate) const MAX_RESULTS: usize = 4 * 1024 * 1024;

/// What the shell is to do, in the order given.
#[derive(Debug)]
pub(crate) enum Do {
    /// Send these bytes on the control connection (a failure goes to
    /// [`ClientControl::send_failed`]).
    Send(Vec<u8>),
    /// Connect the data streams, each greeting the server with the cookie,
    /// then [`ClientControl::connected`].
    ConnectStreams,
    /// Start the engine's flows, then [`ClientControl::started`].
    StartEngine,
    /// Look whether the server has taken in all that was sent:
    /// [`ClientControl::delivered`] if it has.
    LookDelivered,
    /// Stop the engine's flows now; what they measured is kept.
    StopEngine,
    /// `TEST_END` or `CLIENT_TERMINATE` is out: wait until the engine's flows
    /// have ended, then [`ClientControl::engine_done`].
    AwaitEngine,
    /// Build this side's report (`aborted`: cut short on this side), then
    /// [`ClientControl::report`] with this side's results.
    Report { aborted: bool },
    /// The test is over.
    Finish(Ending),
}

/// How a test ended.
#[derive(Debug)]
pub(crate) enum Ending {
    /// Both sides' results exchanged: the server's.
    Done(TestResults),
    /// Cancelled: this side's measurements only.
    Aborted,
    /// Refused, failed, or ended by the server.
    Failed(ClientError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A state awaited.
    Awaiting(State, Awaited),
    /// `SERVER_ERROR` heard: its two numbers awaited.
    ErrorNumbers(Awaited),
    /// `CREATE_STREAMS` heard: the engine connects the streams.
    Connecting,
    /// `TEST_RUNNING` heard: the engine starts.
    Starting,
    /// The flows run until the window's end; the server is quiet.
    Running { until: Instant },
    /// The window is over: until the server has taken in all that was
    /// sent, each look at `next`, at most until `until`.
    Delivering { next: Instant, until: Instant },
    /// Taken in (or late): a moment for iperf3 to read it.
    Grace { until: Instant },
    /// `TEST_END` or `CLIENT_TERMINATE` is out: the engine winds down.
    Ending,
    /// The engine is done: this side's report is built.
    Reporting,
    /// Ours went out: the server's results awaited.
    Results(Awaited),
    /// Finished.
    Over,
}

/// linkperf's end of one iperf3 test.
#[derive(Debug)]
pub(crate) struct ClientControl {
    phase: Phase,
    inbox: Inbox,
    todo: VecDeque<Do>,
    /// What each queued [`Do::Send`] is, when its failure ends the test.
    sends: VecDeque<Option<&'static str>>,
    /// What the last send handed out was.
    sent: Option<&'static str>,
    params: TestParams,
    /// The client sends (the server must take it all in before `TEST_END`).
    uploads: bool,
    /// A cancel flag is watched: [`wait`](Self::wait) comes back for it.
    watch_cancel: bool,
    /// Cancelled before the engine ran: it is stopped as it starts.
    cancel_asked: bool,
    cancelled: bool,
    /// The engine's flows have ended.
    engine_over: bool,
    /// The server ended the test while it ran, or its connection broke.
    failure: Option<ClientError>,
    /// When `TEST_RUNNING` came (the test's clock for the results).
    started: Option<Instant>,
    ours: Option<TestResults>,
    theirs: Option<TestResults>,
}

fn control_error(e: ControlError, waiting_for: &str) -> ClientError {
    ClientError::Control(format!("waiting for {waiting_for}: {e}"))
}

fn state_name(s: State) -> String {
    format!("{s:?}")
}

impl ClientControl {
    /// A test opening at `now` with `cookie` and `params`; `watch_cancel`:
    /// the shell has a cancel flag to look at.
    pub(crate) fn new(
        cookie: &Cookie,
        params: TestParams,
        watch_cancel: bool,
        now: Instant,
    ) -> Self {
        let uploads = params.mode() != TestMode::Reverse;
        let mut c = ClientControl {
            phase: Phase::Awaiting(State::ParamExchange, Awaited::new(ANSWER_TIMEOUT, now)),
            inbox: Inbox::new(),
            todo: VecDeque::new(),
            sends: VecDeque::new(),
            sent: None,
            params,
            uploads,
            watch_cancel,
            cancel_asked: false,
            cancelled: false,
            engine_over: false,
            failure: None,
            started: None,
            ours: None,
            theirs: None,
        };
        c.send(cookie.as_bytes().to_vec(), Some("the cookie to go out"));
        c
    }

    /// The next thing to do, if any.
    pub(crate) fn poll(&mut self) -> Option<Do> {
        let d = self.todo.pop_front()?;
        if matches!(d, Do::Send(_)) {
            self.sent = self.sends.pop_front().flatten();
        }
        Some(d)
    }

    /// How many bytes the next read may take: what the message awaited
    /// still needs; 0 while nothing is read (the engine connects, the
    /// window is over, ...).
    pub(crate) fn wants(&self) -> usize {
        match self.phase {
            Phase::Awaiting(..) | Phase::Running { .. } => self.inbox.needs(Expect::State),
            Phase::ErrorNumbers(_) => self.inbox.needs(Expect::ErrorNumbers),
            Phase::Results(_) => self.inbox.needs(Expect::Json { max: MAX_RESULTS }),
            _ => 0,
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due: an answer
    /// late, the window's end, the next look, the grace's end.
    pub(crate) fn timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Awaiting(_, a) | Phase::ErrorNumbers(a) | Phase::Results(a) => Some(a.until),
            Phase::Running { until } | Phase::Grace { until } => Some(until),
            Phase::Delivering { next, until } => Some(next.min(until)),
            _ => None,
        }
    }

    /// How long the shell may wait at `now` for the control connection:
    /// until [`timeout`](Self::timeout), at most [`CANCEL_LOOK`] while a
    /// cancel flag is watched; `None`: until an event.
    pub(crate) fn wait(&self, now: Instant) -> Option<Duration> {
        let timeout = self.timeout().map(|t| t.saturating_duration_since(now));
        let look = self.cancellable().then_some(CANCEL_LOOK);
        [timeout, look].into_iter().flatten().min()
    }

    /// Until the engine is done, a cancel counts (a cancel flag is looked at).
    fn cancellable(&self) -> bool {
        self.watch_cancel && !self.cancelled && !self.engine_over && self.phase != Phase::Over
    }

    /// Bytes heard on the control connection at `now`.
    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant) {
        self.inbox.push(bytes);
        self.process(now);
    }

    /// The control connection closed or failed at `now` while reading.
    pub(crate) fn broken(&mut self, e: ControlError, now: Instant) {
        let _ = now;
        match self.phase {
            Phase::Awaiting(want, _) => self.fail(control_error(e, &state_name(want))),
            Phase::ErrorNumbers(_) => self.fail(control_error(e, "the server's error numbers")),
            Phase::Results(_) => self.fail(control_error(e, "the server's results")),
            Phase::Running { .. } => self.stop(Some(control_error(e, "the end of the test"))),
            // Not reading: the next read, if any, will tell.
            _ => {}
        }
    }

    /// A send failed: the test ends if what went out mattered (the cookie,
    /// the parameters, the results; not `TEST_END` or `IPERF_DONE`).
    pub(crate) fn send_failed(&mut self, e: ControlError) {
        if let Some(what) = self.sent.take() {
            if self.phase != Phase::Over {
                self.todo.clear();
                self.sends.clear();
                self.fail(control_error(e, what));
            }
        }
    }

    /// The time is `now`: answers late, the window's end, looks and grace.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Awaiting(want, a) if a.late(now) => {
                self.fail(control_error(a.timed_out(), &state_name(want)))
            }
            Phase::ErrorNumbers(a) if a.late(now) => {
                self.fail(control_error(a.timed_out(), "the server's error numbers"))
            }
            Phase::Results(a) if a.late(now) => {
                self.fail(control_error(a.timed_out(), "the server's results"))
            }
            Phase::Running { until } if now >= until => {
                if self.uploads {
                    self.phase = Phase::Delivering {
                        next: now + DELIVERY_LOOK,
                        until: now + DELIVERY_TIMEOUT,
                    };
                    self.todo.push_back(Do::LookDelivered);
                } else {
                    self.end_test();
                }
            }
            Phase::Delivering { until, .. } if now >= until => {
                self.phase = Phase::Grace {
                    until: now + READ_GRACE,
                }
            }
            Phase::Delivering { next, until } if now >= next => {
                self.phase = Phase::Delivering {
                    next: now + DELIVERY_LOOK,
                    until,
                };
                self.todo.push_back(Do::LookDelivered);
            }
            Phase::Grace { until } if now >= until => self.end_test(),
            _ => {}
        }
    }

    /// The streams are connected at `now`: `TEST_START` is awaited.
    pub(crate) fn connected(&mut self, now: Instant) {
        if self.phase == Phase::Connecting {
            self.phase = Phase::Awaiting(State::TestStart, Awaited::new(ANSWER_TIMEOUT, now));
            self.process(now);
        }
    }

    /// The engine started at `now`; its window ends at `window_end`.
    pub(crate) fn started(&mut self, window_end: Instant, now: Instant) {
        if self.phase != Phase::Starting {
            return;
        }
        self.phase = Phase::Running { until: window_end };
        if self.cancel_asked {
            self.cancel(now);
        }
        self.process(now);
    }

    /// The server has taken in all that was sent.
    pub(crate) fn delivered(&mut self, now: Instant) {
        if let Phase::Delivering { .. } = self.phase {
            self.phase = Phase::Grace {
                until: now + READ_GRACE,
            };
        }
    }

    /// The user cancelled: the engine stops and the server is told
    /// `CLIENT_TERMINATE`; before the engine runs, as it starts.
    pub(crate) fn cancel(&mut self, now: Instant) {
        let _ = now;
        if self.cancelled || self.engine_over {
            return;
        }
        match self.phase {
            Phase::Awaiting(..) | Phase::ErrorNumbers(_) | Phase::Connecting | Phase::Starting => {
                self.cancel_asked = true
            }
            Phase::Running { .. } | Phase::Delivering { .. } | Phase::Grace { .. } => {
                self.cancelled = true;
                self.stop(None);
            }
            Phase::Ending => {
                // TEST_END is out already; the engine stops, and the
                // results are not asked for.
                self.cancelled = true;
                self.todo.push_back(Do::StopEngine);
            }
            _ => {}
        }
    }

    /// The engine's flows have ended at `now`.
    pub(crate) fn engine_done(&mut self, now: Instant) {
        let _ = now;
        if self.phase != Phase::Ending {
            return;
        }
        self.engine_over = true;
        match self.failure.take() {
            Some(e) => self.fail(e),
            None => {
                self.phase = Phase::Reporting;
                self.todo.push_back(Do::Report {
                    aborted: self.cancelled,
                });
            }
        }
    }

    /// This side's results, at `now`: kept for `EXCHANGE_RESULTS`.
    pub(crate) fn report(&mut self, ours: TestResults, now: Instant) {
        if self.phase != Phase::Reporting {
            return;
        }
        if self.cancelled {
            self.finish(Ending::Aborted);
            return;
        }
        self.ours = Some(ours);
        self.phase = Phase::Awaiting(State::ExchangeResults, Awaited::new(RESULTS_TIMEOUT, now));
        self.process(now);
    }

    fn send(&mut self, bytes: Vec<u8>, what: Option<&'static str>) {
        self.todo.push_back(Do::Send(bytes));
        self.sends.push_back(what);
    }

    fn finish(&mut self, e: Ending) {
        self.phase = Phase::Over;
        self.todo.push_back(Do::Finish(e));
    }

    fn fail(&mut self, e: ClientError) {
        self.finish(Ending::Failed(e));
    }

    /// The test stops while it runs: cancelled (`None`) or ended by the
    /// server (`Some`).
    fn stop(&mut self, failure: Option<ClientError>) {
        self.failure = failure;
        self.todo.push_back(Do::StopEngine);
        self.send(vec![State::ClientTerminate.to_byte()], None);
        self.todo.push_back(Do::AwaitEngine);
        self.phase = Phase::Ending;
    }

    /// The window is over and what was sent is in: `TEST_END`.
    fn end_test(&mut self) {
        self.send(vec![State::TestEnd.to_byte()], None);
        self.todo.push_back(Do::AwaitEngine);
        self.phase = Phase::Ending;
    }

    /// Takes what the inbox holds for the phase, as long as it holds some.
    fn process(&mut self, now: Instant) {
        loop {
            match self.phase {
                Phase::Awaiting(want, _) => match self.inbox.take_state() {
                    None => return,
                    Some(Err(e)) => {
                        self.fail(control_error(e.into(), &state_name(want)));
                    }
                    Some(Ok(s)) if s == want => self.heard(want, now),
                    Some(Ok(s)) => self.not_awaited(want, s, now),
                },
                Phase::ErrorNumbers(_) => {
                    let Some((i_errno, errno)) = self.inbox.take_error_numbers() else {
                        return;
                    };
                    self.fail(ClientError::ServerError {
                        i_errno,
                        errno,
                        message: describe_errno(i_errno).to_string(),
                    });
                }
                Phase::Running { .. } => match self.inbox.take_state() {
                    None => return,
                    Some(Ok(s)) => self.stop(Some(ClientError::Control(format!(
                        "the iperf3 server said {s:?} during the test"
                    )))),
                    Some(Err(e)) => self.stop(Some(control_error(e.into(), "the end of the test"))),
                },
                Phase::Results(_) => match self.inbox.take_json::<TestResults>(MAX_RESULTS) {
                    None => return,
                    Some(Ok(theirs)) => {
                        self.theirs = Some(theirs);
                        self.phase = Phase::Awaiting(
                            State::DisplayResults,
                            Awaited::new(ANSWER_TIMEOUT, now),
                        );
                    }
                    Some(Err(e)) => self.fail(control_error(e.into(), "the server's results")),
                },
                _ => return,
            }
        }
    }

    /// The state awaited came at `now`.
    fn heard(&mut self, s: State, now: Instant) {
        match s {
            State::ParamExchange => match encode_json(&self.params) {
                Ok(f) => {
                    self.send(f, Some("the parameters to go out"));
                    self.phase =
                        Phase::Awaiting(State::CreateStreams, Awaited::new(ANSWER_TIMEOUT, now));
                }
                Err(e) => self.fail(control_error(e.into(), "the parameters to go out")),
            },
            State::CreateStreams => {
                self.phase = Phase::Connecting;
                self.todo.push_back(Do::ConnectStreams);
            }
            State::TestStart => {
                self.phase = Phase::Awaiting(State::TestRunning, Awaited::new(ANSWER_TIMEOUT, now))
            }
            State::TestRunning => {
                self.started = Some(now);
                self.phase = Phase::Starting;
                self.todo.push_back(Do::StartEngine);
            }
            State::ExchangeResults => {
                let mut ours = self.ours.take().unwrap_or_default();
                let elapsed = self
                    .started
                    .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
                for s in &mut ours.streams {
                    s.end_time = Some(elapsed);
                }
                match encode_json(&ours) {
                    Ok(f) => {
                        self.send(f, Some("our results to go out"));
                        self.phase = Phase::Results(Awaited::new(ANSWER_TIMEOUT, now));
                    }
                    Err(e) => self.fail(control_error(e.into(), "our results to go out")),
                }
            }
            State::DisplayResults => {
                self.send(vec![State::IperfDone.to_byte()], None);
                let theirs = self.theirs.take().unwrap_or_default();
                self.finish(Ending::Done(theirs));
            }
            other => self.fail(ClientError::Control(format!(
                "{other:?} is never awaited from the server"
            ))),
        }
    }

    /// `got` came where `want` was awaited: a refusal, the server's end, or
    /// a state out of turn.
    fn not_awaited(&mut self, want: State, got: State, now: Instant) {
        match got {
            State::AccessDenied => self.fail(ClientError::Busy),
            State::ServerError => {
                self.phase = Phase::ErrorNumbers(Awaited::new(ANSWER_TIMEOUT, now));
            }
            State::ServerTerminate => self.fail(ClientError::Control(
                "the iperf3 server ended the test (SERVER_TERMINATE)".into(),
            )),
            other => self.fail(ClientError::Control(format!(
                "expected {want:?}, the server said {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_json, encode_frame, server_error_bytes, IErrno, StreamResults};

    const MS: Duration = Duration::from_millis(1);
    const COOKIE: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz2345670123";
    const WINDOW: Duration = Duration::from_secs(3);

    fn params(mode: TestMode) -> TestParams {
        TestParams {
            tcp: true,
            time: Some(3),
            parallel: Some(2),
            reverse: mode == TestMode::Reverse,
            bidirectional: mode == TestMode::Bidirectional,
            ..TestParams::default()
        }
    }

    fn cookie() -> Cookie {
        Cookie::parse(&[&COOKIE[..], &[0]].concat()).unwrap()
    }

    /// Everything the control says now, in order.
    fn said(c: &mut ClientControl) -> Vec<Do> {
        std::iter::from_fn(|| c.poll()).collect()
    }

    /// What the control says now, in words: a state sent by its name.
    fn words(c: &mut ClientControl) -> Vec<String> {
        said(c)
            .into_iter()
            .map(|d| match d {
                Do::Send(b) if b.len() == 1 => {
                    format!("send {:?}", State::from_byte(b[0]).unwrap())
                }
                Do::Send(b) => format!("send {} bytes", b.len()),
                Do::Finish(Ending::Failed(e)) => format!("failed: {e}"),
                Do::Finish(e) => format!("{e:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn states(s: &[State]) -> Vec<u8> {
        s.iter().map(|s| s.to_byte()).collect()
    }

    /// A control whose engine runs from `t0` to the window's end.
    fn running(mode: TestMode, watch_cancel: bool, t0: Instant) -> ClientControl {
        let mut c = ClientControl::new(&cookie(), params(mode), watch_cancel, t0);
        c.receive(&states(&[State::ParamExchange, State::CreateStreams]), t0);
        c.connected(t0);
        c.receive(&states(&[State::TestStart, State::TestRunning]), t0);
        said(&mut c);
        c.started(t0 + WINDOW, t0);
        c
    }

    /// Past the window, `TEST_END` out and the engine done, at `t`.
    fn reported(t0: Instant, t: Instant) -> ClientControl {
        let mut c = running(TestMode::Reverse, false, t0);
        c.handle_timeout(t0 + WINDOW);
        c.engine_done(t);
        said(&mut c);
        c.report(ours(), t);
        c
    }

    fn ours() -> TestResults {
        TestResults {
            sender_has_retransmits: -1,
            streams: vec![StreamResults {
                id: 1,
                bytes: 1000,
                start_time: Some(0.0),
                ..StreamResults::default()
            }],
            ..TestResults::default()
        }
    }

    #[test]
    fn the_cookie_then_the_parameters_then_the_streams_then_the_engine() {
        let t0 = Instant::now();
        let mut c = ClientControl::new(&cookie(), params(TestMode::Normal), false, t0);
        let sent = said(&mut c);
        assert!(matches!(&sent[..], [Do::Send(b)] if b[..36] == COOKIE[..] && b[36] == 0));
        assert_eq!(c.wants(), 1, "a state, and no more");
        c.receive(&[State::ParamExchange.to_byte()], t0);
        let Some(Do::Send(p)) = c.poll() else {
            panic!("the parameters go out");
        };
        let p: TestParams = decode_json(&p[4..]).unwrap();
        assert_eq!(p, params(TestMode::Normal));
        c.receive(&[State::CreateStreams.to_byte()], t0 + MS);
        assert_eq!(words(&mut c), ["ConnectStreams"]);
        assert_eq!(
            (c.wants(), c.timeout()),
            (0, None),
            "nothing read while they connect"
        );
        let t1 = t0 + Duration::from_secs(2);
        c.connected(t1);
        assert_eq!(c.timeout(), Some(t1 + ANSWER_TIMEOUT));
        c.receive(&[State::TestStart.to_byte()], t1);
        assert_eq!(words(&mut c), Vec::<String>::new());
        c.receive(&[State::TestRunning.to_byte()], t1 + MS);
        assert_eq!(words(&mut c), ["StartEngine"]);
        c.started(t1 + WINDOW, t1 + MS);
        assert_eq!(
            c.wants(),
            1,
            "the server is listened to while the test runs"
        );
        assert_eq!(c.timeout(), Some(t1 + WINDOW));
        assert_eq!(
            c.wait(t1 + MS),
            Some(WINDOW - MS),
            "no cancel flag: no looks"
        );
    }

    #[test]
    fn each_answer_is_awaited_until_it_is_late_and_then_named() {
        let t0 = Instant::now();
        let mut c = ClientControl::new(&cookie(), params(TestMode::Normal), false, t0);
        said(&mut c);
        c.handle_timeout(t0 + ANSWER_TIMEOUT - MS);
        assert!(said(&mut c).is_empty());
        assert_eq!(
            c.wait(t0 + Duration::from_secs(5)),
            Some(Duration::from_secs(10))
        );
        c.handle_timeout(t0 + ANSWER_TIMEOUT);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: waiting for ParamExchange: no answer on the control connection within 15s"]
        );
        assert_eq!((c.wants(), c.timeout()), (0, None));
        // After TEST_END the server has 30 s to ask for the results.
        let t = t0 + Duration::from_secs(4);
        let mut c = reported(t0, t);
        assert_eq!(c.timeout(), Some(t + RESULTS_TIMEOUT));
        c.handle_timeout(t + RESULTS_TIMEOUT);
        let w = words(&mut c);
        assert!(
            w[0].ends_with(
                "waiting for ExchangeResults: no answer on the control connection within 30s"
            ),
            "{w:?}"
        );
    }

    #[test]
    fn a_refusal_in_place_of_an_answer_says_the_servers_reason() {
        let t0 = Instant::now();
        let fresh = || {
            let mut c = ClientControl::new(&cookie(), params(TestMode::Normal), false, t0);
            said(&mut c);
            c
        };
        let mut c = fresh();
        c.receive(&[State::AccessDenied.to_byte()], t0);
        assert!(matches!(
            &said(&mut c)[..],
            [Do::Finish(Ending::Failed(ClientError::Busy))]
        ));
        // SERVER_ERROR's numbers in pieces, as a slow link brings them.
        let mut c = fresh();
        c.receive(&[State::ParamExchange.to_byte()], t0);
        said(&mut c);
        let refusal = server_error_bytes(IErrno::NumStreams, 0);
        c.receive(&refusal[..3], t0);
        assert_eq!(c.wants(), 6);
        assert!(said(&mut c).is_empty());
        c.receive(&refusal[3..], t0);
        let Some(Do::Finish(Ending::Failed(e))) = c.poll() else {
            panic!("refused");
        };
        assert!(matches!(
            e,
            ClientError::ServerError {
                i_errno: 6,
                errno: 0,
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "run the test: the iperf3 server said: number of parallel streams too large (iperf3 error 6)"
        );
        let mut c = fresh();
        c.receive(&[State::ServerTerminate.to_byte()], t0);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: the iperf3 server ended the test (SERVER_TERMINATE)"]
        );
        let mut c = fresh();
        c.receive(&[State::DisplayResults.to_byte()], t0);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: expected ParamExchange, the server said DisplayResults"]
        );
        let mut c = fresh();
        c.receive(&[99], t0);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: waiting for ParamExchange: read a control message: 99 is not an iperf3 state"]
        );
        let mut c = fresh();
        c.broken(ControlError::Closed, t0);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: waiting for ParamExchange: the peer closed the control connection"]
        );
    }

    #[test]
    fn after_the_window_an_upload_waits_until_delivered_and_a_grace_before_test_end() {
        let t0 = Instant::now();
        let mut c = running(TestMode::Normal, false, t0);
        let end = t0 + WINDOW;
        c.handle_timeout(end - MS);
        assert!(said(&mut c).is_empty());
        c.handle_timeout(end);
        assert_eq!(words(&mut c), ["LookDelivered"]);
        assert_eq!(c.wants(), 0, "the server is not read meanwhile");
        assert_eq!(c.timeout(), Some(end + DELIVERY_LOOK));
        c.handle_timeout(end + MS);
        assert!(said(&mut c).is_empty(), "not before the next look is due");
        c.handle_timeout(end + DELIVERY_LOOK);
        assert_eq!(words(&mut c), ["LookDelivered"]);
        let t = end + 3 * MS;
        c.delivered(t);
        assert_eq!(c.timeout(), Some(t + READ_GRACE));
        c.handle_timeout(t + READ_GRACE);
        assert_eq!(words(&mut c), ["send TestEnd", "AwaitEngine"]);
        // A server that never takes it all in: TEST_END after 5 s and the grace.
        let mut c = running(TestMode::Bidirectional, false, t0);
        c.handle_timeout(end);
        let mut now = end;
        while now < end + DELIVERY_TIMEOUT {
            now = c.timeout().unwrap();
            c.handle_timeout(now);
            said(&mut c);
        }
        assert_eq!(now, end + DELIVERY_TIMEOUT);
        assert_eq!(c.timeout(), Some(end + DELIVERY_TIMEOUT + READ_GRACE));
        c.handle_timeout(end + DELIVERY_TIMEOUT + READ_GRACE);
        assert_eq!(words(&mut c), ["send TestEnd", "AwaitEngine"]);
        // A download: nothing to wait for.
        let mut c = running(TestMode::Reverse, false, t0);
        c.handle_timeout(end);
        assert_eq!(words(&mut c), ["send TestEnd", "AwaitEngine"]);
    }

    #[test]
    fn the_server_speaking_or_closing_mid_test_stops_the_engine_and_fails_the_test() {
        let t0 = Instant::now();
        let mut c = running(TestMode::Normal, false, t0);
        c.receive(&[State::ServerTerminate.to_byte()], t0 + MS);
        assert_eq!(
            words(&mut c),
            ["StopEngine", "send ClientTerminate", "AwaitEngine"]
        );
        assert_eq!((c.wants(), c.timeout()), (0, None));
        c.engine_done(t0 + 2 * MS);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: the iperf3 server said ServerTerminate during the test"]
        );
        let mut c = running(TestMode::Normal, false, t0);
        c.broken(ControlError::Closed, t0 + MS);
        said(&mut c);
        c.engine_done(t0 + 2 * MS);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: waiting for the end of the test: the peer closed the control connection"]
        );
    }

    #[test]
    fn a_cancel_stops_the_engine_tells_the_server_and_asks_for_no_results() {
        let t0 = Instant::now();
        let mut c = running(TestMode::Normal, true, t0);
        assert_eq!(c.wait(t0), Some(CANCEL_LOOK), "the flag is looked at");
        c.cancel(t0 + MS);
        assert_eq!(
            words(&mut c),
            ["StopEngine", "send ClientTerminate", "AwaitEngine"]
        );
        c.cancel(t0 + 2 * MS);
        assert!(said(&mut c).is_empty(), "once");
        c.engine_done(t0 + 3 * MS);
        assert_eq!(words(&mut c), ["Report { aborted: true }"]);
        c.report(ours(), t0 + 4 * MS);
        assert_eq!(words(&mut c), ["Aborted"]);
        // Cancelled before the engine ran: stopped as it starts.
        let mut c = ClientControl::new(&cookie(), params(TestMode::Normal), true, t0);
        said(&mut c);
        c.cancel(t0);
        assert!(said(&mut c).is_empty());
        c.receive(&states(&[State::ParamExchange, State::CreateStreams]), t0);
        c.connected(t0);
        c.receive(&states(&[State::TestStart, State::TestRunning]), t0);
        said(&mut c);
        c.started(t0 + WINDOW, t0);
        assert_eq!(
            words(&mut c),
            ["StopEngine", "send ClientTerminate", "AwaitEngine"]
        );
        // Once TEST_END is out, a cancel stops the engine and asks for no
        // results; once the engine is done, it no longer counts.
        let mut c = running(TestMode::Reverse, true, t0);
        c.handle_timeout(t0 + WINDOW);
        said(&mut c);
        c.cancel(t0 + WINDOW);
        assert_eq!(words(&mut c), ["StopEngine"]);
        c.engine_done(t0 + WINDOW);
        assert_eq!(words(&mut c), ["Report { aborted: true }"]);
        let t = t0 + WINDOW;
        let mut c = running(TestMode::Reverse, true, t0);
        c.handle_timeout(t);
        c.engine_done(t);
        said(&mut c);
        assert_eq!(c.wait(t), None, "the report is built: no more looks");
        c.cancel(t);
        c.report(ours(), t);
        assert!(said(&mut c).is_empty(), "the results are awaited");
        assert_eq!(c.wait(t), Some(RESULTS_TIMEOUT));
    }

    #[test]
    fn the_results_go_out_with_the_tests_length_and_the_servers_come_back() {
        let t0 = Instant::now();
        let t = t0 + Duration::from_secs(4);
        let mut c = reported(t0, t);
        assert_eq!(c.wants(), 1);
        let asked = t + 250 * MS;
        c.receive(&[State::ExchangeResults.to_byte()], asked);
        let Some(Do::Send(f)) = c.poll() else {
            panic!("ours go out");
        };
        let sent: TestResults = decode_json(&f[4..]).unwrap();
        assert_eq!(sent.streams[0].bytes, 1000);
        assert_eq!(
            sent.streams[0].end_time,
            Some((asked - t0).as_secs_f64()),
            "from TEST_RUNNING to now"
        );
        let theirs = encode_json(&ours()).unwrap();
        assert_eq!(c.wants(), 4, "the length of theirs first");
        c.receive(&theirs[..10], asked);
        assert_eq!(c.wants(), theirs.len() - 10);
        c.receive(&theirs[10..], asked);
        c.receive(&[State::DisplayResults.to_byte()], asked);
        assert_eq!(
            words(&mut c),
            ["send IperfDone", &format!("{:?}", Ending::Done(ours()))]
        );
        // Results that do not parse.
        let mut c = reported(t0, t);
        c.receive(&[State::ExchangeResults.to_byte()], t);
        said(&mut c);
        c.receive(&encode_frame(b"{\"cpu_util_total\":").unwrap(), t);
        let w = words(&mut c);
        assert!(
            w[0].starts_with("failed: talk to the iperf3 server: waiting for the server's results: parse a JSON message:"),
            "{w:?}"
        );
        // Results longer than the client reads.
        let mut c = reported(t0, t);
        c.receive(&[State::ExchangeResults.to_byte()], t);
        said(&mut c);
        c.receive(&[0xfe, 0, 0, 0], t);
        let w = words(&mut c);
        assert!(
            w[0].ends_with("4261412864 bytes announced, at most 4194304 accepted"),
            "{w:?}"
        );
    }

    #[test]
    fn a_send_that_fails_ends_the_test_when_what_went_out_mattered() {
        let t0 = Instant::now();
        let mut c = ClientControl::new(&cookie(), params(TestMode::Normal), false, t0);
        assert!(matches!(c.poll(), Some(Do::Send(_))));
        c.send_failed(ControlError::Closed);
        assert_eq!(
            words(&mut c),
            ["failed: talk to the iperf3 server: waiting for the cookie to go out: the peer closed the control connection"]
        );
        // TEST_END failing to go out is not the test's end: the results
        // will tell.
        let mut c = running(TestMode::Reverse, false, t0);
        c.handle_timeout(t0 + WINDOW);
        assert!(matches!(c.poll(), Some(Do::Send(_))));
        c.send_failed(ControlError::Closed);
        assert_eq!(words(&mut c), ["AwaitEngine"]);
    }
}
