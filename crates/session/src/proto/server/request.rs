//! What the server makes of a request before it holds anything for it: the
//! limits a test or a profile must keep whatever the budget (its users, its
//! time, its threads), and the client's answer once its test is accepted.
//! No socket, no clock, no shared state: the session charges the budget and
//! moves the messages.

use std::time::Duration;

use linkperf_wire::{ClientMessage, ErrorCode, LimitKind};
use linkperf_workload::Threads;

use crate::proto::budget::Limit;
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
}
