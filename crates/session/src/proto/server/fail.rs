//! Why the server ends a session early: the failure it sends the client
//! (an `error` message with its code) and what more it keeps for its log.

use linkperf_protocol::{ClientMessage, ErrorCode, ServerMessage};

use crate::proto::budget::Limit;

/// Why a session ended early, as sent to the client.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    /// More than the client is told, for the daemon's log.
    pub(crate) detail: Option<String>,
    /// The limit a refused request met, with its figures.
    pub(crate) limit: Option<Limit>,
}

impl Fail {
    /// The `error` message that tells the client.
    pub(crate) fn message(&self) -> ServerMessage {
        ServerMessage::Error {
            code: self.code,
            message: self.message.clone(),
            limit: self.limit.map(|l| l.info()),
        }
    }
}

/// A failure with `code` and `message`, nothing more.
pub(crate) fn fail(code: ErrorCode, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
        detail: None,
        limit: None,
    }
}

/// A request that met one of this server's limits.
pub(crate) fn limit_fail(limit: Limit) -> Fail {
    Fail {
        code: ErrorCode::Limit,
        message: limit.to_string(),
        detail: None,
        limit: Some(limit),
    }
}

/// Authentication failed; the client is told no more than that.
pub(crate) fn auth_failed(detail: impl Into<String>) -> Fail {
    Fail {
        code: ErrorCode::AuthFailed,
        message: "authentication failed".into(),
        detail: Some(detail.into()),
        limit: None,
    }
}

/// The daemon is shutting down: the running test is aborted.
pub(crate) fn shutting_down() -> Fail {
    fail(
        ErrorCode::Aborted,
        "the server is shutting down; the test was aborted",
    )
}

/// The client's message came out of turn: `expected` was due.
pub(crate) fn out_of_order(expected: &str, got: &ClientMessage) -> Fail {
    fail(
        ErrorCode::OutOfOrder,
        format!("expected {expected}, got {}", got.kind()),
    )
}
