//! What the server makes of a request before it holds anything for it:
//! what each receive comes to while a message is awaited, the request
//! itself (a test, a profile, a delegated test, or none) with the checks
//! each kind must pass, the limits a test or a profile must keep whatever
//! the budget (its users, its time, its threads), and the client's answer
//! once its test is accepted. No socket, no clock, no shared state: the
//! session charges the budget, checks what only its host can tell (a
//! congestion control), and moves the messages.

use std::time::Duration;

use linkperf_engine::program::compile;
use linkperf_protocol::{decode_client, ClientMessage, ErrorCode, LimitKind, WireError};
use linkperf_workload::profile::{check_runnable, mirror, Profile};
use linkperf_workload::{Placement, TestSpec, Threads, Workload};

use super::midtest::wire_fail;
use crate::proto::auth::AuthKey;
use crate::proto::budget::Limit;
use crate::proto::heard::{Heard, Received, RecvError};
use crate::proto::server::fail::{fail, limit_fail, out_of_order, Fail};

/// Most worker threads one test may ask for, whatever the budget.
pub(crate) const MAX_TEST_THREADS: u32 = 1024;

/// The daemon's bounds on one request, whatever the budget.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Most users in one test.
    pub max_users: u32,
    /// Longest test (warm-up and duration).
    pub max_duration: Duration,
}

/// The limits a request of `users` users running for `time` on `threads`
/// must keep on this server, before its cost is charged: the daemon's
/// `bounds` on users and on time (whole seconds, rounded up) and at most
/// [`MAX_TEST_THREADS`] threads (a count of 0 is no count).
pub(crate) fn within_limits(
    bounds: Bounds,
    users: u32,
    time: Duration,
    threads: Threads,
) -> Result<(), Fail> {
    if users > bounds.max_users {
        return Err(limit_fail(Limit {
            kind: LimitKind::Users,
            got: u64::from(users),
            max: u64::from(bounds.max_users),
            in_use: 0,
        }));
    }
    if time > bounds.max_duration {
        return Err(limit_fail(Limit {
            kind: LimitKind::DurationS,
            got: time.as_secs_f64().ceil() as u64,
            max: bounds.max_duration.as_secs(),
            in_use: 0,
        }));
    }
    match threads {
        Threads::Count(n) if n == 0 || n > MAX_TEST_THREADS => Err(fail(
            ErrorCode::Refused,
            format!("server threads must be between 1 and {MAX_TEST_THREADS}, got {n}"),
        )),
        _ => Ok(()),
    }
}

/// What one receive came to while `waiting_for` is awaited, before a test
/// runs: the client's message, `None` when nothing came in the wait, or
/// why the session ends: the connection closed, failed, or carried what
/// is not a message (a hello of another protocol version among them; a
/// frame past the largest control message, which `frame_setting` names).
pub(crate) fn awaited(
    heard: Heard,
    waiting_for: &str,
    frame_setting: &str,
) -> Result<Option<ClientMessage>, Fail> {
    match heard.got {
        Ok(Received::Timeout) => Ok(None),
        Ok(Received::Frame(f)) => decode_client(&f).map(Some).map_err(|e| {
            let code = match e {
                WireError::VersionMismatch { .. } => ErrorCode::VersionMismatch,
                _ => ErrorCode::Malformed,
            };
            fail(code, e.to_string())
        }),
        Ok(Received::Closed) => Err(fail(
            ErrorCode::Aborted,
            format!("client closed the control connection before {waiting_for}"),
        )),
        Err(RecvError::Wire(e)) => Err(wire_fail(e, frame_setting)),
        Err(e) => Err(fail(ErrorCode::Internal, e.to_string())),
    }
}

/// Why the session ends when `waiting_for` did not come within `timeout`,
/// the daemon's setting that `setting` names.
pub(crate) fn silent(waiting_for: &str, timeout: Duration, setting: &str) -> Fail {
    fail(
        ErrorCode::Refused,
        format!("no {waiting_for} within {timeout:?} (the server's {setting})"),
    )
}

/// What a client asked for once its handshake was done.
#[derive(Debug)]
pub(crate) enum Asked {
    /// A workload test, its spec valid; the server's workers on `placement`.
    Test {
        /// The test.
        spec: TestSpec,
        /// The server's workers, as the client asked.
        placement: Placement,
    },
    /// A uperf profile that this side can run.
    Profile(Box<ProfileAsk>),
    /// A test to run as the client of another agent, toward `target`.
    Delegate {
        /// The target agent's control address.
        target: String,
        /// The test, its spec valid and not a profile.
        spec: TestSpec,
        /// This agent's workers (the test's client side), as asked.
        client: Placement,
        /// The target's workers.
        server: Placement,
        /// The key this agent proves itself with to the target.
        key: AuthKey,
    },
    /// No test: a controller that only asked who this agent is.
    Nothing {
        /// Why, as the client said.
        reason: String,
    },
}

/// A profile as the client sent it, checked: within the parser's bounds,
/// runnable, with users; and what this side runs of it.
#[derive(Debug)]
pub(crate) struct ProfileAsk {
    /// The client's profile.
    pub profile: Profile,
    /// The server's workers, as the client asked.
    pub placement: Placement,
    /// Its users.
    pub users: u32,
    /// This side's profile: the client's mirrored.
    pub mirrored: Profile,
    /// The data connections the mirror holds at most.
    pub connections: u64,
    /// The ports the client listens on for this side's connects (its
    /// accepts), zeros left out.
    pub client_ports: Vec<u16>,
}

/// The client's request after its handshake: a test, a profile or a
/// delegated test, each with the checks its kind must pass before anything
/// is charged, or nothing more (a controller's `abort`); anything else is
/// out of order. A delegated test is taken only by a daemon holding a key
/// (`key`; `key_setting` names the setting that gives one).
pub(crate) fn asked(
    msg: ClientMessage,
    key: Option<&AuthKey>,
    key_setting: &str,
) -> Result<Asked, Fail> {
    match msg {
        ClientMessage::Test { spec, placement } => {
            spec.validate()
                .map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
            Ok(Asked::Test { spec, placement })
        }
        ClientMessage::Profile {
            profile,
            placement,
            client_ports,
        } => profile_asked(profile, placement, client_ports).map(|p| Asked::Profile(Box::new(p))),
        ClientMessage::Delegate {
            target,
            spec,
            client,
            server,
        } => {
            let key = delegated(&spec, key, key_setting)?;
            Ok(Asked::Delegate {
                target,
                spec,
                client,
                server,
                key,
            })
        }
        ClientMessage::Abort { reason } => Ok(Asked::Nothing { reason }),
        other => Err(out_of_order("test", &other)),
    }
}

/// A profile the client built: nothing computes with it before it is
/// inside the bounds the parser keeps; then it must be runnable, have
/// users, and its mirror compile.
fn profile_asked(
    profile: Profile,
    placement: Placement,
    client_ports: Vec<u16>,
) -> Result<ProfileAsk, Fail> {
    profile.check().map_err(|e| {
        fail(
            ErrorCode::Malformed,
            format!("the profile is out of bounds: {e}"),
        )
    })?;
    check_runnable(&profile).map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
    let users = profile.users();
    if users == 0 {
        return Err(fail(ErrorCode::Refused, "the profile has no users"));
    }
    let mirrored = mirror(&profile);
    let compiled = compile(&mirrored).map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
    Ok(ProfileAsk {
        connections: compiled.connections(),
        profile,
        placement,
        users,
        mirrored,
        client_ports: client_ports.into_iter().filter(|p| *p != 0).collect(),
    })
}

/// A delegated test of `spec`: this daemon's `key` (it has none: refused,
/// naming `key_setting`), a workload (a profile is not delegated), a valid
/// spec.
fn delegated(spec: &TestSpec, key: Option<&AuthKey>, key_setting: &str) -> Result<AuthKey, Fail> {
    let Some(key) = key else {
        return Err(fail(
            ErrorCode::Refused,
            format!(
                "this server has no key: it runs delegated tests only as an agent started \
                 with {key_setting}, for clients that prove the key"
            ),
        ));
    };
    if matches!(spec.workload, Workload::Profile { .. }) {
        return Err(fail(
            ErrorCode::Refused,
            "a uperf profile cannot be delegated; delegate workloads",
        ));
    }
    spec.validate()
        .map_err(|e| fail(ErrorCode::Refused, e.to_string()))?;
    Ok(key.clone())
}

/// The client's message once its test is accepted: `start`, or out of
/// order.
pub(crate) fn started(msg: ClientMessage) -> Result<(), Fail> {
    match msg {
        ClientMessage::Start => Ok(()),
        other => Err(out_of_order("start", &other)),
    }
}

#[cfg(test)]
mod tests {
    use linkperf_protocol::{encode_client, PROTOCOL_VERSION};

    use super::*;

    fn bounds() -> Bounds {
        Bounds {
            max_users: 100,
            max_duration: Duration::from_secs(60),
        }
    }

    #[test]
    fn users_time_and_threads_each_have_a_bound_and_the_bound_itself_is_allowed() {
        let ok = |users, secs: f64, threads| {
            within_limits(bounds(), users, Duration::from_secs_f64(secs), threads)
        };
        assert!(ok(100, 60.0, Threads::Count(MAX_TEST_THREADS)).is_ok());
        assert!(ok(1, 0.5, Threads::ServerDefault).is_ok());
        let f = ok(101, 1.0, Threads::Count(1)).unwrap_err();
        let l = f.limit.expect("a limit's figures");
        assert_eq!(
            (f.code, l.kind, l.got, l.max),
            (ErrorCode::Limit, LimitKind::Users, 101, 100)
        );
        let f = ok(1, 60.2, Threads::Count(1)).unwrap_err();
        let l = f.limit.expect("a limit's figures");
        assert_eq!((l.kind, l.got, l.max), (LimitKind::DurationS, 61, 60));
        for n in [0, MAX_TEST_THREADS + 1, u32::MAX] {
            let f = ok(1, 1.0, Threads::Count(n)).unwrap_err();
            assert_eq!(f.code, ErrorCode::Refused, "{n} threads");
            assert_eq!(
                f.message,
                format!("server threads must be between 1 and 1024, got {n}")
            );
        }
    }

    #[test]
    fn only_start_starts_an_accepted_test() {
        assert!(started(ClientMessage::Start).is_ok());
        let f = started(ClientMessage::Finished).unwrap_err();
        assert_eq!(
            (f.code, f.message.as_str()),
            (ErrorCode::OutOfOrder, "expected start, got finished")
        );
    }

    #[test]
    fn each_receive_before_the_test_comes_to_quiet_a_message_or_why_the_session_ends() {
        let heard = |got| Heard { got, how: "" };
        let setting = "largest control message";
        assert!(awaited(heard(Ok(Received::Timeout)), "hello", setting)
            .unwrap()
            .is_none());
        let start = encode_client(&ClientMessage::Start)[4..].to_vec();
        let got = awaited(heard(Ok(Received::Frame(start))), "start", setting).unwrap();
        assert!(matches!(got, Some(ClientMessage::Start)));
        // A hello of another protocol version is told as such.
        let newer = encode_client(&ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION + 1,
            client_version: "9".into(),
            challenge: None,
        })[4..]
            .to_vec();
        let f = awaited(heard(Ok(Received::Frame(newer))), "hello", setting).unwrap_err();
        assert_eq!(f.code, ErrorCode::VersionMismatch);
        let bad = b"{not a message".to_vec();
        let f = awaited(heard(Ok(Received::Frame(bad))), "hello", setting).unwrap_err();
        assert_eq!(f.code, ErrorCode::Malformed);
        let f = awaited(heard(Ok(Received::Closed)), "test request", setting).unwrap_err();
        assert_eq!(
            (f.code, f.message.as_str()),
            (
                ErrorCode::Aborted,
                "client closed the control connection before test request"
            )
        );
        let big = RecvError::Wire(WireError::FrameTooLarge { len: 9, max: 8 });
        let f = awaited(heard(Err(big)), "hello", setting).unwrap_err();
        assert_eq!(f.code, ErrorCode::TooLarge);
        assert!(
            f.message
                .ends_with("(this server's largest control message)"),
            "{}",
            f.message
        );
        let f = silent("test request", Duration::from_secs(10), "control timeout");
        assert_eq!(
            (f.code, f.message.as_str()),
            (
                ErrorCode::Refused,
                "no test request within 10s (the server's control timeout)"
            )
        );
    }
}
