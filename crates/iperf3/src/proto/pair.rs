//! linkperf's iperf3 client control ([`ClientControl`]) and its iperf3
//! server control ([`ServerControl`]) run against each other in memory and
//! in virtual time: every byte one sends is what the other reads (the
//! server taking no more than it awaits, as its shell does), every wait is
//! a step of a clock the test moves to the next deadline, and what a shell
//! would do in between (the acceptor's cookie, admitting the test,
//! connecting the streams, the engine's window, the server's data phase
//! reading the control connection, the two sides' reports) is a line of
//! [`Pair::settle`], with knobs for the faults. They cover, without a socket
//! or a sleep: a test run to its results, byte by byte too; a refused
//! parameter and a busy server; the server terminating during the test and
//! during its setup; a cancelled client; a silent peer on either side
//! hitting its answer timeout; results that do not parse, either way; a
//! client gone in the data phase.

use std::time::{Duration, Instant};

use super::client::{self, ClientControl, Ending, ANSWER_TIMEOUT, READ_GRACE, RESULTS_TIMEOUT};
use super::server::{self, DataEnd, Ended, Refused, ServerControl, Settings};
use super::ControlError;
use crate::codec::{
    decode_json, encode_frame, Cookie, State, StreamResults, TestMode, TestParams, TestResults,
    COOKIE_LEN,
};
use crate::server::plan::Limits;
use crate::ClientError;

/// The client's engine window, from its start.
const WINDOW: Duration = Duration::from_secs(3);
/// The server's handshake timeout.
const HANDSHAKE: Duration = Duration::from_secs(10);

fn cookie() -> Cookie {
    Cookie::from_entropy(&[7; COOKIE_LEN - 1])
}

fn params(mode: TestMode, parallel: i64) -> TestParams {
    TestParams {
        tcp: true,
        time: Some(3),
        parallel: Some(parallel),
        len: Some(131_072),
        reverse: mode == TestMode::Reverse,
        bidirectional: mode == TestMode::Bidirectional,
        client_version: Some("3.12".into()),
        ..TestParams::default()
    }
}

fn settings(max_streams: u32) -> Settings {
    Settings {
        limits: Limits {
            max_duration: Duration::from_secs(3600),
            max_streams,
        },
        max_params: 64 * 1024,
        max_results: 1024 * 1024,
        handshake: HANDSHAKE,
    }
}

fn side_results(bytes: &[u64]) -> TestResults {
    TestResults {
        cpu_util_total: 1.5,
        sender_has_retransmits: 0,
        streams: bytes
            .iter()
            .enumerate()
            .map(|(i, b)| StreamResults {
                id: i64::from(crate::codec::stream_id(i)),
                bytes: *b,
                retransmits: -1,
                start_time: Some(0.0),
                ..StreamResults::default()
            })
            .collect(),
        ..TestResults::default()
    }
}

/// The two controls and the wire between them, with what each shell did.
struct Pair {
    now: Instant,
    client: ClientControl,
    /// Made when the cookie reaches the acceptor.
    server: Option<ServerControl>,
    settings: Settings,
    to_server: Vec<u8>,
    to_client: Vec<u8>,
    /// Each side's shell, in words, in order.
    client_log: Vec<String>,
    server_log: Vec<String>,
    client_end: Option<Ending>,
    server_end: Option<Ended>,
    /// The server's data phase runs: it reads the control connection.
    data_phase: bool,
    /// The client's results, as the server's shell got them.
    theirs: Option<TestResults>,
    // Knobs.
    /// The acceptor routes the cookie to a new test.
    accept: bool,
    /// The server's shell admits the test, or not.
    admission: Result<(), Refused>,
    /// The server's shell goes silent after the data phase.
    server_mute_after_data: bool,
    /// The client goes silent after `TEST_END` (its results never go).
    client_mute_after_end: bool,
    /// Bytes in place of the client's results.
    client_results: Option<Vec<u8>>,
    /// Bytes in place of the server's results.
    server_results: Option<Vec<u8>>,
    /// The server shuts down as its data phase starts.
    shutdown_in_data: bool,
    /// The client's host goes away in the data phase (its control closes).
    client_gone_in_data: bool,
    /// Bytes are read one at a time.
    trickle: bool,
    /// The streams take their time to connect: until [`Pair::connect`].
    hold_streams: bool,
    client_sent_test_end: bool,
}

impl Pair {
    fn new(mode: TestMode, parallel: i64, max_streams: u32, t0: Instant) -> Pair {
        Pair {
            now: t0,
            client: ClientControl::new(&cookie(), params(mode, parallel), true, t0),
            server: None,
            settings: settings(max_streams),
            to_server: Vec::new(),
            to_client: Vec::new(),
            client_log: Vec::new(),
            server_log: Vec::new(),
            client_end: None,
            server_end: None,
            data_phase: false,
            theirs: None,
            accept: true,
            admission: Ok(()),
            server_mute_after_data: false,
            client_mute_after_end: false,
            client_results: None,
            server_results: None,
            shutdown_in_data: false,
            client_gone_in_data: false,
            trickle: false,
            hold_streams: false,
            client_sent_test_end: false,
        }
    }

    /// Runs both sides until both have ended, moving the clock to the next
    /// deadline whenever nothing else moves; at most `limit` of virtual time.
    fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        loop {
            self.settle();
            let server_waits = self
                .server
                .as_ref()
                .is_some_and(|s| self.server_end.is_none() && s.timeout().is_some());
            if self.client_end.is_some() && !server_waits {
                return;
            }
            let next = [
                self.client.timeout(),
                self.server.as_ref().and_then(|s| s.timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                panic!(
                    "stuck at {:?}: client {:?}, server {:?}",
                    self.now, self.client_log, self.server_log
                );
            };
            assert!(next <= end, "still running after {limit:?}");
            self.now = self.now.max(next);
            self.client.handle_timeout(self.now);
            if let Some(s) = &mut self.server {
                s.handle_timeout(self.now);
            }
        }
    }

    /// Moves bytes and does what the two sides say until nothing moves.
    fn settle(&mut self) {
        loop {
            let moved = self.client_turn() | self.server_turn() | self.wire();
            if !moved {
                return;
            }
        }
    }

    /// Carries bytes: the acceptor's cookie, then each side reads as much
    /// as its control awaits (the server's data phase reads the control
    /// connection itself).
    fn wire(&mut self) -> bool {
        let mut moved = false;
        if self.server.is_none() && self.to_server.len() >= COOKIE_LEN && self.accept {
            let c: Vec<u8> = self.to_server.drain(..COOKIE_LEN).collect();
            assert_eq!(Cookie::parse(&c), Ok(cookie()), "the cookie comes first");
            self.server = Some(ServerControl::new(self.settings.clone(), self.now));
            moved = true;
        }
        if let Some(s) = &mut self.server {
            if self.data_phase && !self.to_server.is_empty() {
                // As data.rs reads the control connection.
                let b = self.to_server.remove(0);
                let end = match State::from_byte(b) {
                    Ok(State::TestEnd) => Some(DataEnd::TestEnd),
                    Ok(State::ClientTerminate) => Some(DataEnd::ClientTerminate),
                    Ok(State::TestStart | State::IperfDone) => None,
                    _ => Some(DataEnd::Protocol(b)),
                };
                if let Some(end) = end {
                    self.data_phase = false;
                    self.server_log.push(format!("data phase: {end:?}"));
                    s.data_ended(end, self.now);
                }
                moved = true;
            }
            let want = s.wants().min(if self.trickle { 1 } else { usize::MAX });
            if !self.data_phase && want > 0 && !self.to_server.is_empty() {
                let n = want.min(self.to_server.len());
                let b: Vec<u8> = self.to_server.drain(..n).collect();
                s.receive(&b, self.now);
                moved = true;
            }
        }
        let want = self
            .client
            .wants()
            .min(if self.trickle { 1 } else { usize::MAX });
        if want > 0 && !self.to_client.is_empty() {
            let n = want.min(self.to_client.len());
            let b: Vec<u8> = self.to_client.drain(..n).collect();
            self.client.receive(&b, self.now);
            moved = true;
        }
        // A side that has ended closes its connection: once its last bytes
        // are read, the other reads the close.
        if want > 0 && self.to_client.is_empty() && self.server_end.is_some() {
            self.client.broken(ControlError::Closed, self.now);
            moved = true;
        }
        if let Some(s) = &mut self.server {
            if self.to_server.is_empty() && self.client_end.is_some() {
                if self.data_phase {
                    self.data_phase = false;
                    self.server_log.push("data phase: ControlClosed".into());
                    s.data_ended(DataEnd::ControlClosed, self.now);
                    moved = true;
                } else if s.wants() > 0 {
                    s.broken(ControlError::Closed, self.now);
                    moved = true;
                }
            }
        }
        moved
    }

    /// Does what the client says, as its shell would.
    fn client_turn(&mut self) -> bool {
        let Some(d) = self.client.poll() else {
            return false;
        };
        let now = self.now;
        match d {
            client::Do::Send(mut b) => {
                if b == [State::TestEnd.to_byte()] {
                    self.client_sent_test_end = true;
                } else if b.len() > 1 && self.client_sent_test_end {
                    if self.client_mute_after_end {
                        b.clear();
                    } else if let Some(r) = self.client_results.take() {
                        b = r;
                    }
                }
                self.client_log.push(describe(&b));
                self.to_server.extend(b);
            }
            client::Do::ConnectStreams => {
                self.client_log.push("connect the streams".into());
                if !self.hold_streams {
                    self.connect();
                }
            }
            client::Do::StartEngine => {
                self.client_log.push("start the engine".into());
                self.client.started(now + WINDOW, now);
            }
            client::Do::LookDelivered => {
                self.client_log.push("delivered".into());
                self.client.delivered(now);
            }
            client::Do::StopEngine => self.client_log.push("stop the engine".into()),
            client::Do::AwaitEngine => {
                self.client_log.push("engine done".into());
                self.client.engine_done(now);
            }
            client::Do::Report { aborted } => {
                self.client_log.push(format!("report (aborted: {aborted})"));
                self.client.report(side_results(&[1000, 2000]), now);
            }
            client::Do::Finish(e) => {
                self.client_log.push("over".into());
                self.client_end = Some(e);
            }
        }
        true
    }

    /// The streams are connected: both shells say so.
    fn connect(&mut self) {
        self.client.connected(self.now);
        if let Some(s) = &mut self.server {
            s.connected(self.now);
        }
    }

    /// Does what the server says, as its shell would.
    fn server_turn(&mut self) -> bool {
        let now = self.now;
        let Some(s) = &mut self.server else {
            return false;
        };
        if self.data_phase && self.shutdown_in_data {
            // As data.rs does at a shutdown: the client is told first.
            self.shutdown_in_data = false;
            self.data_phase = false;
            self.to_client.push(State::ServerTerminate.to_byte());
            self.server_log.push("data phase: Shutdown".into());
            s.data_ended(DataEnd::Shutdown, now);
            return true;
        }
        if self.data_phase && self.client_gone_in_data {
            self.client_gone_in_data = false;
            self.data_phase = false;
            self.server_log.push("data phase: ControlClosed".into());
            s.data_ended(DataEnd::ControlClosed, now);
            return true;
        }
        let Some(d) = s.poll() else {
            return false;
        };
        match d {
            server::Do::Send(mut b) => {
                if b.len() > 9 {
                    if let Some(r) = self.server_results.take() {
                        b = r;
                    }
                }
                self.server_log.push(describe(&b));
                self.to_client.extend(b);
            }
            server::Do::Admit { plan, .. } => {
                self.server_log
                    .push(format!("admit {} streams", plan.streams()));
                s.admitted(self.admission.clone(), now);
            }
            server::Do::AcceptStreams { announce, .. } => {
                self.server_log.push(describe(&announce));
                self.to_client.extend(announce);
            }
            server::Do::RunData { client_end } => {
                self.server_log.push(format!(
                    "run the data phase, the client's end in {:?}",
                    client_end.map(|e| e - now)
                ));
                self.data_phase = true;
            }
            server::Do::Results(theirs) => {
                self.server_log.push("top up".into());
                self.theirs = Some(*theirs);
                if !self.server_mute_after_data {
                    s.answer(&side_results(&[3000, 4000]), now);
                }
            }
            server::Do::Finish(e) => {
                self.server_log.push("over".into());
                self.server_end = Some(e);
            }
        }
        true
    }
}

/// Bytes on the wire, in words: a state by its name, a refusal by its
/// numbers, a JSON message by its length.
fn describe(b: &[u8]) -> String {
    match b.len() {
        0 => "nothing".into(),
        1 => format!("{:?}", State::from_byte(b[0]).unwrap()),
        9 if b[0] == State::ServerError.to_byte() => format!(
            "ServerError {} {}",
            i32::from_be_bytes(b[1..5].try_into().unwrap()),
            i32::from_be_bytes(b[5..9].try_into().unwrap())
        ),
        COOKIE_LEN => "cookie".into(),
        n => format!("{n} bytes"),
    }
}

fn failed(e: &Option<Ending>) -> String {
    match e {
        Some(Ending::Failed(e)) => e.to_string(),
        other => panic!("the client did not fail: {other:?}"),
    }
}

/// The client's log without its sends' sizes, which depend on the JSON.
fn without_sizes(log: &[String]) -> Vec<String> {
    log.iter()
        .map(|l| {
            if l.ends_with(" bytes") {
                "JSON".into()
            } else {
                l.clone()
            }
        })
        .collect()
}

#[test]
fn a_test_runs_to_its_results() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 2, 128, t0);
    p.run(Duration::from_secs(60));
    let Some(Ending::Done(theirs)) = &p.client_end else {
        panic!("{:?} {:?}", p.client_end, p.client_log);
    };
    assert_eq!(theirs, &side_results(&[3000, 4000]), "the server's results");
    assert_eq!(p.server_end, Some(Ended::Done));
    assert_eq!(
        without_sizes(&p.client_log),
        [
            "cookie",
            "JSON",
            "connect the streams",
            "start the engine",
            "delivered",
            "TestEnd",
            "engine done",
            "report (aborted: false)",
            "JSON",
            "IperfDone",
            "over"
        ]
    );
    assert_eq!(
        without_sizes(&p.server_log),
        [
            "ParamExchange",
            "admit 2 streams",
            "CreateStreams",
            "TestStart",
            "TestRunning",
            "run the data phase, the client's end in Some(3s)",
            "data phase: TestEnd",
            "ExchangeResults",
            "top up",
            "JSON",
            "DisplayResults",
            "over"
        ]
    );
    // The client's results as the server got them: its streams, over the
    // test's time from TEST_RUNNING to EXCHANGE_RESULTS (the window, the
    // first look delivered, the grace).
    let ours = p.theirs.unwrap();
    assert_eq!(ours.streams.len(), 2);
    assert_eq!(ours.streams[1].bytes, 2000);
    let took = (WINDOW + READ_GRACE).as_secs_f64();
    assert!(
        ours.streams.iter().all(|s| s.end_time == Some(took)),
        "{ours:?}"
    );
    assert_eq!(p.now, t0 + WINDOW + READ_GRACE, "no time lost in between");
}

#[test]
fn a_test_runs_to_its_results_with_the_bytes_coming_one_at_a_time() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Bidirectional, 3, 128, t0);
    p.trickle = true;
    p.run(Duration::from_secs(60));
    assert!(
        matches!(p.client_end, Some(Ending::Done(_))),
        "{:?}",
        p.client_log
    );
    assert_eq!(p.server_end, Some(Ended::Done));
    assert!(
        p.server_log.contains(&"admit 6 streams".to_string()),
        "{:?}",
        p.server_log
    );
}

#[test]
fn a_download_ends_at_the_windows_end_without_waiting_for_delivery() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Reverse, 1, 128, t0);
    p.run(Duration::from_secs(60));
    assert!(matches!(p.client_end, Some(Ending::Done(_))));
    assert!(!p.client_log.contains(&"delivered".to_string()));
    let ours = p.theirs.unwrap();
    assert_eq!(ours.streams[0].end_time, Some(WINDOW.as_secs_f64()));
}

#[test]
fn a_refused_parameter_reaches_the_client_as_iperf3s_error() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 8, 4, t0);
    p.run(Duration::from_secs(60));
    let e = failed(&p.client_end);
    assert_eq!(
        e,
        "run the test: the iperf3 server said: number of parallel streams too large (iperf3 error 6)"
    );
    assert_eq!(
        p.server_end,
        Some(Ended::Failed(
            "refused: 8 streams asked, 1 to 4 served".into()
        ))
    );
    assert!(!p.client_log.contains(&"connect the streams".to_string()));
    // A server with no room for the streams says it is busy.
    let mut p = Pair::new(TestMode::Normal, 2, 128, t0);
    p.admission = Err(Refused::Busy(
        "2 more streams would pass the server's limit of 1".into(),
    ));
    p.run(Duration::from_secs(60));
    assert!(matches!(
        p.client_end,
        Some(Ending::Failed(ClientError::Busy))
    ));
    assert_eq!(
        p.server_end,
        Some(Ended::Failed(
            "refused: 2 more streams would pass the server's limit of 1".into()
        ))
    );
}

#[test]
fn the_server_terminating_during_the_test_ends_it_on_both_sides() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 2, 128, t0);
    p.shutdown_in_data = true;
    p.run(Duration::from_secs(60));
    assert_eq!(
        failed(&p.client_end),
        "talk to the iperf3 server: the iperf3 server said ServerTerminate during the test"
    );
    assert_eq!(
        p.client_log[p.client_log.len() - 5..],
        [
            "start the engine",
            "stop the engine",
            "ClientTerminate",
            "engine done",
            "over"
        ]
    );
    assert_eq!(
        p.server_end,
        Some(Ended::Cut("aborted: the server is shutting down".into()))
    );
    assert!(p.now < t0 + WINDOW, "at once, not at the window's end");
}

#[test]
fn a_shutdown_while_the_test_sets_up_tells_the_client_server_terminate() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 2, 128, t0);
    p.hold_streams = true;
    p.settle();
    // The streams are connecting when the server shuts down.
    assert_eq!(p.client_log.last().unwrap(), "connect the streams");
    p.server.as_mut().unwrap().terminate(p.now);
    p.connect();
    p.run(Duration::from_secs(60));
    assert_eq!(
        failed(&p.client_end),
        "talk to the iperf3 server: the iperf3 server ended the test (SERVER_TERMINATE)"
    );
    assert_eq!(p.server_end, Some(Ended::Failed(server::SHUTDOWN.into())));
    assert!(!p.client_log.contains(&"start the engine".to_string()));
}

#[test]
fn a_cancelled_client_tells_the_server_and_keeps_what_it_measured() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 2, 128, t0);
    p.settle();
    assert!(p.client_log.contains(&"start the engine".to_string()));
    p.now += Duration::from_secs(1);
    p.client.cancel(p.now);
    p.run(Duration::from_secs(60));
    assert!(
        matches!(p.client_end, Some(Ending::Aborted)),
        "{:?}",
        p.client_end
    );
    assert!(p.client_log.contains(&"report (aborted: true)".to_string()));
    assert_eq!(
        p.server_end,
        Some(Ended::Cut("ended by the client (CLIENT_TERMINATE)".into()))
    );
    assert_eq!(p.now, t0 + Duration::from_secs(1), "at once");
}

#[test]
fn a_client_gone_in_the_data_phase_ends_the_test_with_what_was_counted() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.client_gone_in_data = true;
    p.settle();
    assert_eq!(
        p.server_end,
        Some(Ended::Cut(
            "the client went away (control connection closed)".into()
        ))
    );
}

#[test]
fn a_silent_server_is_given_up_when_its_answer_is_late() {
    let t0 = Instant::now();
    // Nobody routes the cookie: no PARAM_EXCHANGE.
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.accept = false;
    p.run(Duration::from_secs(60));
    assert_eq!(
        failed(&p.client_end),
        "talk to the iperf3 server: waiting for ParamExchange: no answer on the control connection within 15s"
    );
    assert_eq!(p.now, t0 + ANSWER_TIMEOUT);
    // A server that never asks for the results after TEST_END.
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.server_mute_after_data = true;
    p.run(Duration::from_secs(120));
    let e = failed(&p.client_end);
    assert!(
        e.ends_with(
            "waiting for the server's results: no answer on the control connection within 15s"
        ),
        "{e}"
    );
}

#[test]
fn a_silent_client_is_given_up_when_its_message_is_late() {
    let t0 = Instant::now();
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.client_mute_after_end = true;
    p.run(Duration::from_secs(120));
    let end = t0 + WINDOW + READ_GRACE;
    assert_eq!(
        p.server_end,
        Some(Ended::Cut(
            "no results from the client: no answer on the control connection within 10s".into()
        ))
    );
    assert_eq!(p.now, end + HANDSHAKE);
    // The server closes then; the client, waiting for its results, reads
    // the close.
    assert_eq!(
        failed(&p.client_end),
        "talk to the iperf3 server: waiting for the server's results: the peer closed the control connection"
    );
    assert!(HANDSHAKE < ANSWER_TIMEOUT && ANSWER_TIMEOUT < RESULTS_TIMEOUT);
}

#[test]
fn results_that_do_not_parse_are_refused_by_the_server_and_named_by_the_client() {
    let t0 = Instant::now();
    // The client's results are not JSON: the server refuses them with 117,
    // which the client reads where it awaits the server's results.
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.client_results = Some(encode_frame(b"{\"streams\":").unwrap());
    p.run(Duration::from_secs(120));
    let Some(Ended::Cut(why)) = &p.server_end else {
        panic!("{:?}", p.server_end);
    };
    assert!(
        why.starts_with("unreadable results from the client: parse a JSON message"),
        "{why}"
    );
    assert!(p.server_log.contains(&"ServerError 117 0".to_string()));
    let e = failed(&p.client_end);
    assert!(
        e.ends_with("waiting for the server's results: read a JSON message: 4261412864 bytes announced, at most 4194304 accepted"),
        "{e}"
    );
    // The server's results are not the results iperf3 sends.
    let mut p = Pair::new(TestMode::Normal, 1, 128, t0);
    p.server_results = Some(encode_frame(b"{\"streams\":[]}").unwrap());
    p.run(Duration::from_secs(120));
    let e = failed(&p.client_end);
    assert!(
        e.starts_with(
            "talk to the iperf3 server: waiting for the server's results: parse a JSON message"
        ),
        "{e}"
    );
    assert!(decode_json::<TestResults>(b"{\"streams\":[]}").is_err());
}
