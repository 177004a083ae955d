//! The client's and the server's sessions of one workload test run against
//! each other in memory and in virtual time: every message goes through the
//! wire's encoding, every wait is a step of a clock the test moves, and
//! what a shell would do in between (admit the test, bind and connect the
//! flows, run the engine) is a line of the test. Only the machines of
//! `proto` take part. They cover, without a socket or a sleep, what the
//! fault tests cover over real processes: a test run to its results, a
//! byte limit, a start that does not come, a client gone silent, a
//! shutdown, an interrupted client, a client not done in time, a message
//! out of turn; an offer without the endpoints the test connects to, and
//! placement `same` offered from another host; a request out of turn,
//! invalid, or none at all, and a profile out of bounds or not runnable;
//! a profile's transaction ends, agreed, refused to a confused client,
//! late, and a profile past the server's longest test; a delegated test
//! between a controller and its agent, answered, given up by the
//! controller, stopped by the agent (a close, a word, garbage, the daemon
//! stopping), late, and refused by an agent without a key or for a
//! profile.

use std::time::{Duration, Instant, SystemTime};

use linkperf_engine::aggregate;
use linkperf_engine::program::{compile, Compiled};
use linkperf_measured::{Environment, ProcessMethod};
use linkperf_protocol::{
    decode_client, encode_client, encode_server, ClientMessage, DataToken, ErrorCode,
    ServerMessage, WireError,
};
use linkperf_workload::profile::{mirror, parse_profile};
use linkperf_workload::{Placement, Protocol, TestSpec, Workload};

use crate::proto::auth::AuthKey;
use crate::proto::client::delegate::{delegated_deadline, Delegation};
use crate::proto::client::session::{ClientSession, STOP_TIMEOUT, WATCH_INTERVAL};
use crate::proto::heard::{Heard, Received, RecvError};
use crate::proto::server::delegate::Delegating;
use crate::proto::server::fail::Fail;
use crate::proto::server::midtest::{Ended, Look, ProfileSaid, PEER_SILENCE};
use crate::proto::server::request::{self, Asked};
use crate::proto::server::session::{start_wait, ServerSession, FINISH_GRACE};
use crate::SessionError;

const MS: Duration = Duration::from_millis(1);
/// The server's byte limit in these tests.
const MAX_BYTES: u64 = 1 << 30;
/// The server's longest wait for a start.
const START_CAP: Duration = Duration::from_secs(60);
/// The client's test: its window and warm-up end here after the start.
const DRAIN_AFTER: Duration = Duration::from_secs(12);

/// What the client sent, as the server reads it off the wire.
fn to_server(m: &ClientMessage) -> ClientMessage {
    decode_client(&encode_client(m)[4..]).expect("the client's message decodes")
}

/// What the server sent, as the client hears it.
pub(crate) fn to_client(m: &ServerMessage) -> Heard {
    Heard {
        got: Ok(Received::Frame(encode_server(m)[4..].to_vec())),
        how: "closed the connection",
    }
}

/// What the client sent, as the server hears it.
fn from_client(m: &ClientMessage) -> Heard {
    Heard {
        got: Ok(Received::Frame(encode_client(m)[4..].to_vec())),
        how: "closed the connection",
    }
}

/// The name of the daemon's largest control message, in these tests.
const FRAME_SETTING: &str = "largest control message";

/// Nothing within the wait.
pub(crate) fn quiet() -> Heard {
    Heard {
        got: Ok(Received::Timeout),
        how: "closed the connection",
    }
}

fn look(now: Instant, bytes: u64) -> Look {
    Look {
        now,
        shutting_down: false,
        bytes,
        control_silent: Some(Duration::ZERO),
    }
}

fn host(name: &str) -> Environment {
    Environment {
        hostname: name.into(),
        ..Environment::default()
    }
}

/// The server's offer, as its shell makes it once the endpoints are bound.
pub(crate) fn accepted() -> ServerMessage {
    ServerMessage::Accepted {
        data_ports: vec![40_000],
        unix_names: vec![],
        udp_ports: vec![],
        token: DataToken([3; 16]),
        environment: host("server"),
    }
}

/// The two sessions, offered at `t0`: the client asked, the server admitted
/// the test and bound its endpoints, the offer reached the client.
fn offered(t0: Instant) -> (ClientSession, ServerSession, u64) {
    let spec = TestSpec::new(
        "rr:1x1".parse().unwrap(),
        Protocol::Tcp,
        100,
        Duration::from_secs(10),
    );
    let (mut c, ask) = ClientSession::ask(spec, Placement::with_threads(1), None, t0);
    let ClientMessage::Test { spec, .. } = to_server(&ask) else {
        panic!("the client asks for a test");
    };
    let users = u64::from(spec.users);
    let s = ServerSession::offered(users, START_CAP, t0);
    let offer = c.offer(to_client(&accepted()), t0).unwrap().unwrap();
    assert_eq!(offer.data_ports, [40_000]);
    (c, s, users)
}

/// The server's offer of `ports` and `unix_names` from the host `boot`.
fn offer_of(ports: Vec<u16>, unix_names: Vec<String>, boot: Option<&str>) -> ServerMessage {
    let ServerMessage::Accepted {
        udp_ports,
        token,
        mut environment,
        ..
    } = accepted()
    else {
        unreachable!("accepted() is an offer");
    };
    environment.boot_id = boot.map(str::to_string);
    ServerMessage::Accepted {
        data_ports: ports,
        unix_names,
        udp_ports,
        token,
        environment,
    }
}

/// A client on the host `here` asking for `rr:1x1` over `protocol` with
/// the server's workers on `server`; the server's session once it offered
/// the test at `t0`.
fn asking(
    protocol: Protocol,
    server: Placement,
    here: Option<&str>,
    t0: Instant,
) -> (ClientSession, ServerSession) {
    let spec = TestSpec::new(
        "rr:1x1".parse().unwrap(),
        protocol,
        1,
        Duration::from_secs(5),
    );
    let (c, ask) = ClientSession::ask(spec, server, here.map(str::to_string), t0);
    let ClientMessage::Test { spec, .. } = to_server(&ask) else {
        panic!("the client asks for a test");
    };
    let s = ServerSession::offered(u64::from(spec.users), START_CAP, t0);
    (c, s)
}

#[test]
fn an_offer_without_the_endpoints_the_test_connects_to_ends_it_before_it_runs() {
    let t0 = Instant::now();
    let one = || Placement::with_threads(1);
    let unix = || vec!["@linkperf-1".to_string()];
    for (protocol, offer) in [
        (Protocol::Tcp, offer_of(vec![], unix(), None)),
        (Protocol::Udp, offer_of(vec![], vec![], None)),
        (Protocol::Unix, offer_of(vec![40_000], vec![], None)),
    ] {
        let (mut c, _s) = asking(protocol, one(), None, t0);
        let no = c.offer(to_client(&offer), t0).unwrap_err();
        assert_eq!(
            no.error.to_string(),
            "talk to the server: the server offered no data endpoint",
            "{protocol:?}"
        );
        assert!(no.abort.is_none(), "the server is not told");
        assert!(c.connected(t0).is_err(), "no flows connect");
    }
    // What each needs is taken.
    for (protocol, offer) in [
        (Protocol::Tcp, offer_of(vec![40_000], vec![], None)),
        (Protocol::Unix, offer_of(vec![], unix(), None)),
    ] {
        let (mut c, _s) = asking(protocol, one(), None, t0);
        assert!(c.offer(to_client(&offer), t0).unwrap().is_some());
    }
    // A profile connects to ports: an offer of none ends it too.
    let profile = parse_profile(PROFILE, &|_| None).unwrap();
    let (mut c, _) = ClientSession::ask_profile(profile, one(), vec![], None, t0);
    let no = c
        .offer(to_client(&offer_of(vec![], unix(), None)), t0)
        .unwrap_err();
    assert!(
        no.error.to_string().contains("offered no data endpoint"),
        "{}",
        no.error
    );
}

#[test]
fn placement_same_offered_from_another_host_is_refused_and_the_server_told() {
    let t0 = Instant::now();
    let same = || Placement {
        policy: linkperf_workload::PlacementPolicy::Same,
        ..Placement::with_threads(1)
    };
    let (mut c, mut s) = asking(Protocol::Tcp, same(), Some("boot-a"), t0);
    let far = offer_of(vec![40_000], vec![], Some("boot-b"));
    let no = c.offer(to_client(&far), t0).unwrap_err();
    assert!(
        matches!(&no.error, SessionError::SameOnTwoHosts { server_host } if server_host == "server"),
        "{}",
        no.error
    );
    let reason = no.abort.expect("the server is told");
    assert!(reason.contains("another host (server)"), "{reason}");
    let abort = ClientMessage::Abort { reason };
    // The server, awaiting the start, ends the test there.
    let f = s.start(to_server(&abort)).unwrap_err();
    assert_eq!(f.code, ErrorCode::OutOfOrder);
    // From this host, or from a host that does not say, the offer is taken.
    for boot in [Some("boot-a"), None] {
        let (mut c, _) = asking(Protocol::Tcp, same(), Some("boot-a"), t0);
        let near = offer_of(vec![40_000], vec![], boot);
        assert!(c.offer(to_client(&near), t0).unwrap().is_some());
    }
}

/// The two sessions with the test running from `t1`, half a second after
/// the offer (the flows connected).
fn running(t0: Instant) -> (ClientSession, ServerSession, Instant) {
    let (mut c, mut s, _) = offered(t0);
    let t1 = t0 + 500 * MS;
    let start = c.connected(t1).unwrap();
    assert!(!c.started(quiet(), t1).unwrap(), "nothing yet: wait on");
    s.start(to_server(&start)).unwrap();
    let started = s.started(t1, t1 + DRAIN_AFTER, Some(MAX_BYTES));
    assert!(c.started(to_client(&started), t1).unwrap());
    (c, s, t1)
}

/// The server's report of an empty side, as its shell builds one.
fn results() -> ServerMessage {
    let mut env = host("server, at the end");
    let report = aggregate(Vec::new()).side_report(
        None,
        ProcessMethod::RusageThreadSum,
        10.0,
        false,
        &mut env,
    );
    ServerSession::results(report, env)
}

#[test]
fn a_test_runs_to_its_results() {
    let t0 = Instant::now();
    let (mut c, mut s, t1) = running(t0);
    // Ten seconds of looks every 100 ms while bytes move.
    for i in 1..=100u32 {
        let now = t1 + 100 * MS * i;
        s.look(&look(now, u64::from(i) * 1000)).unwrap();
        assert_eq!(c.running(quiet()), None);
    }
    let done = c.workers_done(None, t1 + DRAIN_AFTER).unwrap();
    assert_eq!(s.said(to_server(&done)).unwrap(), Ended::Finished);
    assert!(c.results(quiet(), t1 + DRAIN_AFTER).is_none(), "wait on");
    let side = c.results(to_client(&results()), t1 + DRAIN_AFTER).unwrap();
    assert!(side.report.is_some() && side.error.is_none());
    assert_eq!(side.environment.unwrap().hostname, "server, at the end");
}

#[test]
fn the_server_stops_a_test_past_its_byte_limit_and_the_client_asks_nothing_more() {
    let t0 = Instant::now();
    let (mut c, mut s, t1) = running(t0);
    s.look(&look(t1 + MS, MAX_BYTES)).unwrap();
    let f = s.look(&look(t1 + 2 * MS, MAX_BYTES + 1)).unwrap_err();
    assert_eq!(f.code, ErrorCode::Limit);
    let stop = c.running(to_client(&f.message())).unwrap();
    assert!(!stop.aborted, "a limit fails the test: {stop:?}");
    assert!(
        stop.reason.contains("the server stopped the test"),
        "{stop:?}"
    );
    assert!(c.workers_done(None, t1 + 3 * MS).is_none());
}

#[test]
fn a_start_that_does_not_come_in_time_is_refused_and_the_client_is_told_why() {
    let t0 = Instant::now();
    let (mut c, s, users) = offered(t0);
    let due = s.start_due(t0);
    assert_eq!(due, t0 + start_wait(users, START_CAP));
    // The client's flows took longer than that to connect.
    let late = s.start_late();
    assert!(late.message.contains("no start within"), "{}", late.message);
    c.connected(due).unwrap();
    let e = c.started(to_client(&late.message()), due).unwrap_err();
    match e {
        SessionError::Refused { message, .. } => assert!(message.contains("no start within")),
        other => panic!("{other}"),
    }
}

#[test]
fn a_client_gone_silent_is_let_go_after_its_host_said_nothing_for_three_seconds() {
    let t0 = Instant::now();
    let (_c, mut s, t1) = running(t0);
    s.look(&look(t1, 5000)).unwrap();
    // From now on nothing moves and the control connection's probes go
    // unanswered.
    let silent = |after: Duration| Look {
        now: t1 + after,
        shutting_down: false,
        bytes: 5000,
        control_silent: Some(after),
    };
    s.look(&silent(PEER_SILENCE - MS)).unwrap();
    let f = s.look(&silent(PEER_SILENCE)).unwrap_err();
    assert_eq!(f.code, ErrorCode::Aborted);
    assert!(f.message.contains("client vanished"), "{}", f.message);
}

#[test]
fn a_server_shutting_down_aborts_the_test_and_the_client_keeps_it_as_cut_short() {
    let t0 = Instant::now();
    let (mut c, mut s, t1) = running(t0);
    let f = s
        .look(&Look {
            shutting_down: true,
            ..look(t1 + MS, 10)
        })
        .unwrap_err();
    let stop = c.running(to_client(&f.message())).unwrap();
    assert!(stop.aborted, "{stop:?}");
}

#[test]
fn an_interrupted_client_still_gets_the_servers_side() {
    let t0 = Instant::now();
    let (mut c, mut s, t1) = running(t0);
    let abort = c
        .workers_done(Some("interrupted".into()), t1 + 2 * MS)
        .unwrap();
    assert_eq!(s.said(to_server(&abort)).unwrap(), Ended::Aborted);
    let side = c.results(to_client(&results()), t1 + 3 * MS).unwrap();
    assert!(side.report.is_some());
}

#[test]
fn a_client_not_done_in_time_is_abandoned() {
    let t0 = Instant::now();
    let (_c, mut s, t1) = running(t0);
    let end = t1 + DRAIN_AFTER + FINISH_GRACE;
    s.look(&look(end, 1)).unwrap();
    let f = s.look(&look(end + MS, 2)).unwrap_err();
    assert!(
        f.message.contains("did not finish in time"),
        "{}",
        f.message
    );
}

#[test]
fn a_message_out_of_turn_ends_the_test_on_either_side() {
    let t0 = Instant::now();
    let (mut c, mut s, t1) = running(t0);
    let f = s.said(to_server(&ClientMessage::Start)).unwrap_err();
    assert_eq!(f.code, ErrorCode::OutOfOrder);
    assert!(
        f.message.contains("expected finished, got start"),
        "{}",
        f.message
    );
    // The server's `started` again, mid-test, stops the client's test.
    let stop = c.running(to_client(&ServerMessage::Started)).unwrap();
    assert!(
        stop.reason.contains("in the middle of the test"),
        "{stop:?}"
    );
    assert!(c.workers_done(None, t1).is_none());
}

/// A profile of two users: a connect, a timed transaction of writes and
/// reads, a disconnect.
const PROFILE: &str = r#"<profile name="pair"><group nthreads="2">
  <transaction iterations="1"><flowop type="connect" options="remotehost=198.18.0.2 protocol=tcp"/></transaction>
  <transaction duration="5s"><flowop type="write" options="size=64"/><flowop type="read" options="size=64"/></transaction>
  <transaction iterations="1"><flowop type="disconnect"/></transaction>
</group></profile>"#;

/// The two sessions of [`PROFILE`] with its users running from `t1`, and
/// the server's compiled mirror of it (which transactions are timed).
fn profile_running(t0: Instant) -> (ClientSession, ServerSession, Compiled, Instant) {
    let profile = parse_profile(PROFILE, &|_| None).unwrap();
    let one = Placement::with_threads(1);
    let (mut c, ask) = ClientSession::ask_profile(profile, one, vec![], None, t0);
    let ClientMessage::Profile { profile, .. } = to_server(&ask) else {
        panic!("the client asks for a profile");
    };
    let compiled = compile(&mirror(&profile)).unwrap();
    let mut s =
        ServerSession::offered(compiled.connections(), START_CAP, t0).for_profile(profile.users());
    c.offer(to_client(&accepted()), t0).unwrap().unwrap();
    let t1 = t0 + 100 * MS;
    let start = c.connected(t1).unwrap();
    s.start(to_server(&start)).unwrap();
    let started = s.profile_started(t1, LONGEST, Some(MAX_BYTES), "limit on duration");
    assert!(c.started(to_client(&started), t1).unwrap());
    (c, s, compiled, t1)
}

/// The server's longest test in the profile tests.
const LONGEST: Duration = Duration::from_secs(60);

#[test]
fn a_profile_agrees_on_each_timed_transactions_end_and_runs_to_its_results() {
    let t0 = Instant::now();
    let (mut c, mut s, compiled, t1) = profile_running(t0);
    let t2 = t1 + Duration::from_secs(5);
    let end = c.txn_end(1, vec![7, 9], t2).unwrap();
    let said = s.profile_said(to_server(&end), |t| compiled.timed(t));
    assert_eq!(
        said.unwrap(),
        ProfileSaid::TxnEnd {
            txn: 1,
            iterations: vec![7, 9]
        }
    );
    // The server's users stop there and it tells what they wrote.
    let written = vec![vec![7 * 64], vec![9 * 64]];
    let answer = ServerMessage::TxnEnded {
        txn: 1,
        written: written.clone(),
    };
    assert_eq!(c.txn_ended(quiet(), t2), Ok(None), "wait on");
    assert_eq!(c.txn_ended(to_client(&answer), t2), Ok(Some(written)));
    s.look(&look(t2 + MS, 5000)).unwrap();
    let done = c.workers_done(None, t2 + MS).unwrap();
    let said = s.profile_said(to_server(&done), |t| compiled.timed(t));
    assert_eq!(said.unwrap(), ProfileSaid::Ended(Ended::Finished));
    let side = c.results(to_client(&results()), t2 + 2 * MS).unwrap();
    assert!(side.report.is_some());
}

#[test]
fn a_confused_client_is_refused_an_untimed_a_repeated_or_a_miscounted_transaction_end() {
    let t0 = Instant::now();
    let refused = |iterations: Vec<u64>, txn: usize, twice: bool| {
        let (mut c, mut s, compiled, t1) = profile_running(t0);
        if twice {
            let end = c.txn_end(txn, iterations.clone(), t1).unwrap();
            s.profile_said(to_server(&end), |t| compiled.timed(t))
                .unwrap();
            let answer = ServerMessage::TxnEnded {
                txn: txn as u32,
                written: vec![vec![0], vec![0]],
            };
            c.txn_ended(to_client(&answer), t1).unwrap();
        }
        let end = c.txn_end(txn, iterations, t1).unwrap();
        let f = s
            .profile_said(to_server(&end), |t| compiled.timed(t))
            .unwrap_err();
        // The client hears why, and asks nothing more.
        let why = c.txn_ended(to_client(&f.message()), t1).unwrap_err();
        assert!(why.contains("the server stopped the test"), "{why}");
        assert!(c.workers_done(None, t1).is_none());
        f
    };
    let untimed = refused(vec![1, 1], 0, false);
    assert_eq!(untimed.code, ErrorCode::OutOfOrder);
    let again = refused(vec![1, 1], 1, true);
    assert_eq!(again.code, ErrorCode::OutOfOrder);
    assert!(again.message.contains("already ended"), "{}", again.message);
    let miscounted = refused(vec![1, 1, 1], 1, false);
    assert_eq!(miscounted.code, ErrorCode::Malformed);
    assert!(
        miscounted.message.contains("3 counts for 2 users"),
        "{}",
        miscounted.message
    );
}

#[test]
fn a_transaction_end_not_answered_in_time_stops_the_client() {
    let t0 = Instant::now();
    let (mut c, _s, _, t1) = profile_running(t0);
    c.txn_end(1, vec![1, 1], t1).unwrap();
    assert_eq!(c.wait(t1), STOP_TIMEOUT);
    let why = c.txn_ended(quiet(), t1 + STOP_TIMEOUT).unwrap_err();
    assert!(
        why.contains("did not end transaction 1 within 40s"),
        "{why}"
    );
}

#[test]
fn a_profile_past_the_servers_longest_test_is_stopped_as_its_limit_says() {
    let t0 = Instant::now();
    let (mut c, mut s, _, t1) = profile_running(t0);
    let end = t1 + LONGEST + FINISH_GRACE;
    s.look(&look(end, 1)).unwrap();
    let f = s.look(&look(end + MS, 2)).unwrap_err();
    assert_eq!(f.code, ErrorCode::Limit);
    assert_eq!(
        f.message,
        "the profile ran past this server's limit on duration of 60s; the server stopped it"
    );
    let stop = c.running(to_client(&f.message())).unwrap();
    assert!(!stop.aborted, "{stop:?}");
}

/// A controller's delegation of `rr:1x1` to an agent, asked at `t0`, as
/// the agent reads it; and the agent's watch over its client as it starts.
fn delegated(t0: Instant) -> (Delegation, Delegating, Duration) {
    let spec = TestSpec::new(
        "rr:1x1".parse().unwrap(),
        Protocol::Tcp,
        4,
        Duration::from_secs(10),
    );
    let allowed = delegated_deadline(&spec);
    let one = Placement::with_threads(1);
    let (d, ask) = Delegation::ask("198.18.0.2:7700".into(), spec, one.clone(), one, t0);
    let ClientMessage::Delegate { target, spec, .. } = to_server(&ask) else {
        panic!("the controller asks for a delegated test");
    };
    assert_eq!((target.as_str(), spec.users), ("198.18.0.2:7700", 4));
    (d, Delegating::default(), allowed)
}

#[test]
fn a_delegated_test_is_answered_with_what_the_agent_measured() {
    let t0 = Instant::now();
    let (mut d, mut a, allowed) = delegated(t0);
    assert_eq!(d.wait(t0), WATCH_INTERVAL, "the cancel flag is looked at");
    // Twelve seconds of the agent's client running, the controller quiet.
    for i in 1..=240u32 {
        let now = t0 + WATCH_INTERVAL * i;
        a.look(false).unwrap();
        a.heard(quiet(), FRAME_SETTING).unwrap();
        assert!(d.heard(quiet(), now).unwrap().is_none());
    }
    // The agent's client could not reach the target: that is the answer,
    // not a failure of the delegation.
    let answer = Delegating::answer(
        Err(SessionError::Control("no route to 198.18.0.2".into())),
        SystemTime::UNIX_EPOCH,
    );
    let outcome = d
        .heard(to_client(&answer), t0 + allowed / 2)
        .unwrap()
        .unwrap();
    assert_eq!(outcome.started, "1970-01-01T00:00:00.000Z");
    assert!(outcome.error.unwrap().contains("no route"));
    assert!(outcome.client.is_none() && !outcome.aborted);
    assert_eq!(d.wait(t0 + allowed / 2), Duration::ZERO, "nothing more");
    assert!(d.heard(quiet(), t0 + allowed / 2).is_err(), "taken once");
}

#[test]
fn a_controller_that_gives_up_aborts_once_and_the_agent_stops_its_test() {
    let t0 = Instant::now();
    let (mut d, mut a, _) = delegated(t0);
    let abort = d.cancel().expect("the first cancel is said");
    assert!(d.cancel().is_none(), "and only once");
    let f = a.heard(from_client(&abort), FRAME_SETTING).unwrap_err();
    assert_eq!(f.code, ErrorCode::Aborted);
    assert!(
        f.message
            .contains("the controller gave up on the delegated test: interrupted"),
        "{}",
        f.message
    );
    assert!(
        a.look(false).is_err(),
        "a stopped watch is not looked at again"
    );
    // The agent's shell tells the controller why, and the answer is that.
    let e = d.heard(to_client(&f.message()), t0 + MS).unwrap_err();
    assert!(matches!(e, SessionError::Refused { .. }), "{e}");
}

#[test]
fn the_agent_stops_its_test_when_the_controller_vanishes_speaks_or_the_daemon_stops() {
    let t0 = Instant::now();
    let (_, mut a, _) = delegated(t0);
    let closed = Heard {
        got: Ok(Received::Closed),
        how: "closed the connection",
    };
    let f = a.heard(closed, FRAME_SETTING).unwrap_err();
    assert_eq!(f.code, ErrorCode::Aborted);
    assert!(
        f.message
            .contains("the controller vanished mid-test: it closed the connection"),
        "{}",
        f.message
    );
    let (_, mut a, _) = delegated(t0);
    let f = a
        .heard(from_client(&ClientMessage::Finished), FRAME_SETTING)
        .unwrap_err();
    assert_eq!(f.code, ErrorCode::OutOfOrder);
    // What is not a message, or is past the largest one, ends it too.
    let (_, mut a, _) = delegated(t0);
    let garbage = Heard {
        got: Ok(Received::Frame(b"{not json".to_vec())),
        how: "",
    };
    assert_eq!(
        a.heard(garbage, FRAME_SETTING).unwrap_err().code,
        ErrorCode::Malformed
    );
    let (_, mut a, _) = delegated(t0);
    let big = Heard {
        got: Err(RecvError::Wire(WireError::FrameTooLarge { len: 9, max: 8 })),
        how: "",
    };
    let f = a.heard(big, FRAME_SETTING).unwrap_err();
    assert_eq!(f.code, ErrorCode::TooLarge);
    assert!(f.message.contains(FRAME_SETTING), "{}", f.message);
    let (mut d, mut a, _) = delegated(t0);
    a.look(false).unwrap();
    let f = a.look(true).unwrap_err();
    assert!(f.message.contains("shutting down"), "{}", f.message);
    let e = d.heard(to_client(&f.message()), t0 + MS).unwrap_err();
    assert!(e.to_string().contains("shutting down"), "{e}");
}

#[test]
fn a_controller_waits_for_the_agent_until_the_test_could_have_run_and_not_longer() {
    let t0 = Instant::now();
    let (mut d, _, allowed) = delegated(t0);
    let near = t0 + allowed - 20 * MS;
    assert_eq!(d.wait(near), 20 * MS, "the last wait ends at the deadline");
    assert!(d.heard(quiet(), near).unwrap().is_none());
    let e = d.heard(quiet(), t0 + allowed).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "no answer from the agent within {allowed:?} of asking it for the test"
        )),
        "{e}"
    );
    // A close, and an answer that is not the delegation's, are named too.
    let (mut d, _, _) = delegated(t0);
    let closed = Heard {
        got: Ok(Received::Closed),
        how: "went silent",
    };
    let e = d.heard(closed, t0 + MS).unwrap_err().to_string();
    assert!(
        e.contains("the agent went silent in the middle of the delegated test"),
        "{e}"
    );
    let (mut d, _, _) = delegated(t0);
    let e = d
        .heard(to_client(&ServerMessage::Started), t0 + MS)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected delegated, got started"), "{e}");
}

/// The server's decision on what the client asked after its handshake, on
/// a daemon that holds `key`.
fn asked_of(m: &ClientMessage, key: Option<&AuthKey>) -> Result<Asked, Fail> {
    request::asked(to_server(m), key, "key setting")
}

/// The agents' key in these tests.
fn agents_key() -> AuthKey {
    AuthKey::from_bytes(b"the mesh's pre-shared key").unwrap()
}

#[test]
fn a_request_out_of_turn_invalid_or_none_at_all_is_decided_by_the_server() {
    let t0 = Instant::now();
    // Out of turn: the client hears why, as the server's refusal.
    let (mut c, _) = ClientSession::ask(
        TestSpec::new(
            "rr:1x1".parse().unwrap(),
            Protocol::Tcp,
            1,
            Duration::from_secs(1),
        ),
        Placement::with_threads(1),
        None,
        t0,
    );
    let f = asked_of(&ClientMessage::Finished, None).unwrap_err();
    assert_eq!(
        (f.code, f.message.as_str()),
        (ErrorCode::OutOfOrder, "expected test, got finished")
    );
    let no = c.offer(to_client(&f.message()), t0).unwrap_err();
    assert!(
        matches!(no.error, SessionError::Refused { .. }),
        "{}",
        no.error
    );
    // A spec the server cannot run (the client checks its own, but the
    // server takes nothing on trust).
    let (mut c, ask) = ClientSession::ask(
        TestSpec::new(
            "rr:1x1".parse().unwrap(),
            Protocol::Tcp,
            0,
            Duration::from_secs(1),
        ),
        Placement::with_threads(1),
        None,
        t0,
    );
    let f = asked_of(&ask, None).unwrap_err();
    assert_eq!(f.code, ErrorCode::Refused);
    assert!(
        f.message.contains("users must be between 1 and"),
        "{}",
        f.message
    );
    let no = c.offer(to_client(&f.message()), t0).unwrap_err();
    assert!(
        no.error.to_string().contains("users must be between"),
        "{}",
        no.error
    );
    // A controller that only asked who this agent is: no test, and no error.
    let abort = ClientMessage::Abort {
        reason: "it only asked who this agent is".into(),
    };
    match asked_of(&abort, None).unwrap() {
        Asked::Nothing { reason } => assert_eq!(reason, "it only asked who this agent is"),
        other => panic!("{other:?}"),
    }
    // A valid test is taken as asked.
    let (_, ask) = ClientSession::ask(
        TestSpec::new(
            "rr:1x1".parse().unwrap(),
            Protocol::Tcp,
            3,
            Duration::from_secs(1),
        ),
        Placement::with_threads(2),
        None,
        t0,
    );
    match asked_of(&ask, None).unwrap() {
        Asked::Test { spec, placement } => {
            assert_eq!((spec.users, placement.threads.count()), (3, Some(2)))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_profile_is_checked_before_anything_is_held_and_its_listeners_taken_without_zeros() {
    let t0 = Instant::now();
    let one = || Placement::with_threads(1);
    let profile = parse_profile(PROFILE, &|_| None).unwrap();
    let (_, ask) =
        ClientSession::ask_profile(profile.clone(), one(), vec![0, 7001, 0, 7002], None, t0);
    let Asked::Profile(p) = asked_of(&ask, None).unwrap() else {
        panic!("a profile");
    };
    assert_eq!(p.users, 2);
    assert_eq!(p.client_ports, [7001, 7002]);
    assert_eq!(
        p.connections,
        compile(&mirror(&profile)).unwrap().connections()
    );
    // Out of the parser's bounds (a group of no users), as a confused or
    // hostile client may send it: malformed, and the client told.
    let mut empty = profile.clone();
    empty.groups[0].users = 0;
    let (mut c, ask) = ClientSession::ask_profile(empty, one(), vec![], None, t0);
    let f = asked_of(&ask, None).unwrap_err();
    assert_eq!(f.code, ErrorCode::Malformed);
    assert!(
        f.message.starts_with("the profile is out of bounds: "),
        "{}",
        f.message
    );
    let no = c.offer(to_client(&f.message()), t0).unwrap_err();
    assert!(
        matches!(no.error, SessionError::Refused { .. }),
        "{}",
        no.error
    );
    // Within bounds but not runnable here.
    let udp_accept = parse_profile(
        r#"<profile name="acc"><group nthreads="1">
  <transaction iterations="1"><flowop type="accept" options="remotehost=198.18.0.2 protocol=udp"/></transaction>
</group></profile>"#,
        &|_| None,
    )
    .unwrap();
    let (_, ask) = ClientSession::ask_profile(udp_accept, one(), vec![], None, t0);
    let f = asked_of(&ask, None).unwrap_err();
    assert_eq!(f.code, ErrorCode::Refused);
    assert!(f.message.contains("is not supported yet"), "{}", f.message);
}

#[test]
fn only_an_agent_with_a_key_takes_a_delegated_workload_and_the_controller_hears_why_not() {
    let t0 = Instant::now();
    let one = || Placement::with_threads(1);
    let spec = TestSpec::new(
        "rr:1x1".parse().unwrap(),
        Protocol::Tcp,
        2,
        Duration::from_secs(5),
    );
    let (mut d, ask) = Delegation::ask("198.18.0.2:7700".into(), spec.clone(), one(), one(), t0);
    let f = asked_of(&ask, None).unwrap_err();
    assert_eq!(f.code, ErrorCode::Refused);
    assert_eq!(
        f.message,
        "this server has no key: it runs delegated tests only as an agent started with \
         key setting, for clients that prove the key"
    );
    let e = d.heard(to_client(&f.message()), t0 + MS).unwrap_err();
    assert!(e.to_string().contains("this server has no key"), "{e}");
    // With the key: the test, and the key for its target.
    let key = agents_key();
    match asked_of(&ask, Some(&key)).unwrap() {
        Asked::Delegate { target, key: k, .. } => {
            assert_eq!(target, "198.18.0.2:7700");
            assert_eq!(k, key);
        }
        other => panic!("{other:?}"),
    }
    // A profile is not delegated, key or not.
    let profile = parse_profile(PROFILE, &|_| None).unwrap();
    let as_spec = TestSpec::new(
        Workload::Profile {
            profile: Box::new(profile),
        },
        Protocol::Tcp,
        2,
        Duration::ZERO,
    );
    let (_, ask) = Delegation::ask("198.18.0.2:7700".into(), as_spec, one(), one(), t0);
    let f = asked_of(&ask, Some(&key)).unwrap_err();
    assert_eq!(
        (f.code, f.message.as_str()),
        (
            ErrorCode::Refused,
            "a uperf profile cannot be delegated; delegate workloads"
        )
    );
}
