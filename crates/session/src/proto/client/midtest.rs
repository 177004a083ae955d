//! What the client makes of its control connection while a test runs (a
//! profile's transaction ends included) and once it asks for the server's
//! results: the connection's events in, a
//! decision out. No socket and no clock: the drivers (`run_test`,
//! `run_profile`) only receive and act.

use std::time::Duration;

use linkperf_measured::{Environment, SideReport};
use linkperf_protocol::{decode_server, ErrorCode, ServerMessage};

use crate::proto::heard::{Received, RecvError};
use crate::SessionError;

/// The server stopped the test, or went away, while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// Why, in words.
    pub reason: String,
    /// The server aborted it (shutting down): the test was cut, not failed.
    pub aborted: bool,
}

/// What one receive on the control connection while the test runs came
/// to: `None` while the server is quiet (nothing is due from it until the
/// client says the test is over), else why the test stops. `how_it_went`
/// says how a closed connection closed (the channel tells a silent host
/// from a close).
pub(crate) fn while_running(
    got: Result<Received, RecvError>,
    how_it_went: &str,
) -> Option<Stopped> {
    let reason = match got {
        Ok(Received::Timeout) => return None,
        Ok(Received::Frame(f)) => return Some(stopped_by(&f)),
        Ok(Received::Closed) => format!("the server {how_it_went} in the middle of the test"),
        Err(e) => format!("the control connection failed mid-test: {e}"),
    };
    Some(Stopped {
        reason,
        aborted: false,
    })
}

/// A frame the server sent while the test ran: every one stops it.
pub(crate) fn stopped_by(frame: &[u8]) -> Stopped {
    match decode_server(frame) {
        Ok(ServerMessage::Error { code, message, .. }) => Stopped {
            reason: format!("the server stopped the test: {}", code.tagged(&message)),
            aborted: code == ErrorCode::Aborted,
        },
        Ok(other) => Stopped {
            reason: format!("the server sent {} in the middle of the test", other.kind()),
            aborted: false,
        },
        Err(e) => Stopped {
            reason: format!("the server sent a bad control message mid-test: {e}"),
            aborted: false,
        },
    }
}

/// The server's side of a test, or why it is missing.
pub(crate) struct ServerSide {
    /// Its report.
    pub report: Option<SideReport>,
    /// Its host: from the results, else as it described itself at the start.
    pub environment: Option<Environment>,
    /// Why the report is missing.
    pub error: Option<String>,
}

/// The answer to `finished` (or `abort`): the server's results, or, keeping
/// `server_env` from the start, why they are missing.
pub(crate) fn results(
    answer: Result<ServerMessage, SessionError>,
    server_env: Environment,
) -> ServerSide {
    let missing = |error: String| ServerSide {
        report: None,
        environment: Some(server_env.clone()),
        error: Some(error),
    };
    match answer {
        Ok(ServerMessage::Results {
            report,
            environment,
        }) => ServerSide {
            report: Some(report),
            environment: Some(environment),
            error: None,
        },
        Ok(other) => missing(format!("expected results, got {}", other.kind())),
        Err(e) => missing(format!("the server's measurements are missing: {e}")),
    }
}

/// The answer to the end of timed transaction `txn` of a profile (the
/// client waited `waited` for it): what the server's users wrote in it, by
/// user and connection, or why the test stops. `how_it_went` says how a
/// closed connection closed.
pub(crate) fn txn_ended(
    got: Result<Received, RecvError>,
    txn: u32,
    waited: Duration,
    how_it_went: &str,
) -> Result<Vec<Vec<u64>>, String> {
    match got {
        Ok(Received::Frame(f)) => match decode_server(&f) {
            Ok(ServerMessage::TxnEnded { txn: t, written }) if t == txn => Ok(written),
            Ok(ServerMessage::Error { code, message, .. }) => Err(format!(
                "the server stopped the test: {}",
                code.tagged(&message)
            )),
            Ok(other) => Err(format!(
                "the server answered the end of transaction {txn} with {}",
                other.kind()
            )),
            Err(e) => Err(format!("the server sent a bad control message: {e}")),
        },
        Ok(Received::Timeout) => Err(format!(
            "the server did not end transaction {txn} within {waited:?}"
        )),
        Ok(Received::Closed) => Err(format!(
            "the server {how_it_went} in the middle of the test"
        )),
        Err(e) => Err(format!("the control connection failed mid-test: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_protocol::encode_server;
    use std::io;

    fn frame(m: &ServerMessage) -> Received {
        Received::Frame(encode_server(m)[4..].to_vec())
    }

    const CLOSED: &str = "closed the control connection";

    #[test]
    fn a_quiet_server_lets_the_test_run() {
        assert_eq!(while_running(Ok(Received::Timeout), CLOSED), None);
    }

    #[test]
    fn the_servers_error_stops_the_test_and_its_shutdown_is_an_abort() {
        let error = |code| ServerMessage::Error {
            code,
            message: "going away".into(),
            limit: None,
        };
        let s = while_running(Ok(frame(&error(ErrorCode::Aborted))), CLOSED).unwrap();
        assert!(s.aborted);
        assert_eq!(
            s.reason,
            format!(
                "the server stopped the test: going away ({})",
                ErrorCode::Aborted
            )
        );
        let s = while_running(Ok(frame(&error(ErrorCode::Limit))), CLOSED).unwrap();
        assert!(!s.aborted);
        assert!(s
            .reason
            .starts_with("the server stopped the test: going away"));
    }

    #[test]
    fn anything_else_from_the_server_or_its_going_away_stops_it_naming_what() {
        let s = while_running(Ok(frame(&ServerMessage::Started)), CLOSED).unwrap();
        assert_eq!(
            s,
            Stopped {
                reason: "the server sent started in the middle of the test".into(),
                aborted: false,
            }
        );
        let s = while_running(Ok(Received::Frame(b"{nonsense".to_vec())), CLOSED).unwrap();
        assert!(
            s.reason
                .starts_with("the server sent a bad control message mid-test: "),
            "{}",
            s.reason
        );
        let s = while_running(Ok(Received::Closed), CLOSED).unwrap();
        assert_eq!(
            s.reason,
            "the server closed the control connection in the middle of the test"
        );
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let s = while_running(Err(RecvError::Io(reset)), CLOSED).unwrap();
        assert!(s
            .reason
            .starts_with("the control connection failed mid-test: "));
    }

    #[test]
    fn results_come_with_the_servers_host_and_their_absence_keeps_the_first_one() {
        let first = Environment {
            hostname: "at-start".into(),
            ..Environment::default()
        };
        // The results message of the wire's contract, as a server sends it.
        let golden = include_str!("../../../../protocol/golden/v6/server-results.json");
        let answer = decode_server(golden.as_bytes()).unwrap();
        let ServerMessage::Results { environment, .. } = &answer else {
            panic!("{answer:?}");
        };
        let theirs = environment.hostname.clone();
        assert_ne!(theirs, first.hostname);
        let got = results(Ok(answer), first.clone());
        assert!(got.report.is_some() && got.error.is_none());
        assert_eq!(got.environment.unwrap().hostname, theirs);
        let got = results(Ok(ServerMessage::Started), first.clone());
        assert!(got.report.is_none());
        assert_eq!(got.error.as_deref(), Some("expected results, got started"));
        assert_eq!(got.environment.unwrap().hostname, "at-start");
        let got = results(Err(SessionError::Control("gone".into())), first);
        assert!(got
            .error
            .unwrap()
            .starts_with("the server's measurements are missing: "));
    }

    #[test]
    fn a_transactions_end_is_answered_by_its_own_txn_ended_and_anything_else_stops_the_test() {
        let waited = Duration::from_secs(30);
        let ended = |txn| ServerMessage::TxnEnded {
            txn,
            written: vec![vec![10, 20], vec![30, 40]],
        };
        assert_eq!(
            txn_ended(Ok(frame(&ended(3))), 3, waited, CLOSED).unwrap(),
            vec![vec![10, 20], vec![30, 40]]
        );
        let e = txn_ended(Ok(frame(&ended(2))), 3, waited, CLOSED).unwrap_err();
        assert_eq!(
            e,
            "the server answered the end of transaction 3 with txn_ended"
        );
        let error = ServerMessage::Error {
            code: ErrorCode::OutOfOrder,
            message: "already ended".into(),
            limit: None,
        };
        let e = txn_ended(Ok(frame(&error)), 3, waited, CLOSED).unwrap_err();
        assert!(
            e.starts_with("the server stopped the test: already ended"),
            "{e}"
        );
        let e = txn_ended(Ok(Received::Frame(b"{".to_vec())), 3, waited, CLOSED).unwrap_err();
        assert!(
            e.starts_with("the server sent a bad control message"),
            "{e}"
        );
        let e = txn_ended(Ok(Received::Timeout), 3, waited, CLOSED).unwrap_err();
        assert_eq!(e, "the server did not end transaction 3 within 30s");
        let e = txn_ended(Ok(Received::Closed), 3, waited, CLOSED).unwrap_err();
        assert_eq!(e, format!("the server {CLOSED} in the middle of the test"));
        let failed = RecvError::Io(io::Error::other("reset"));
        let e = txn_ended(Err(failed), 3, waited, CLOSED).unwrap_err();
        assert!(
            e.starts_with("the control connection failed mid-test"),
            "{e}"
        );
    }
}
