//! What else may answer at a server's address: recognised from the first
//! bytes the peer sends after the client's hello.
//!
//! A linkperf server answers with a frame whose 4-byte big-endian length is
//! far below 16 MiB, so its first byte is 0. Other servers answer otherwise:
//!
//! - an iperf3 server reads the first 37 bytes as a test's cookie (the hello
//!   is longer) and answers with one state byte: `PARAM_EXCHANGE`, or
//!   `ACCESS_DENIED` when it is busy with another test, or `SERVER_ERROR`;
//! - an HTTP server refuses the request line it cannot parse with a status
//!   line, `HTTP/1.1 400 Bad Request`: read as a length, "HTTP" is 1213486160;
//! - anything else that sends text first (SSH, SMTP) shows what it is.

use linkperf_iperf3::codec::State;

/// Bytes of the peer's answer shown when it is not recognised.
const SHOWN: usize = 40;

/// A peer that is not a linkperf server, as far as its first bytes tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Foreign {
    /// An iperf3 server (`iperf3 -s`).
    Iperf3,
    /// An HTTP server; its status line.
    Http(String),
    /// Something else; the start of what it sent.
    Other(String),
}

/// Whether the first byte of an answer can start a linkperf frame.
pub(crate) fn may_be_linkperf(first: u8) -> bool {
    first == 0
}

/// How the peer began to answer the hello.
#[derive(Debug)]
pub(crate) enum Answer {
    /// With a byte a linkperf frame can start with (still unread), or it
    /// closed the connection: the control channel reads on.
    MayBeLinkperf,
    /// Nothing within the time given.
    Silent,
    /// As something else does.
    Foreign(Foreign),
}

/// What the peer is, from the start of its answer (whose first byte is not
/// linkperf's); `None` while more bytes could tell (`HT` may become `HTTP/`).
pub(crate) fn recognise(answer: &[u8]) -> Option<Foreign> {
    const HTTP: &[u8] = b"HTTP/";
    let first = *answer.first()?;
    if matches!(
        State::from_byte(first),
        Ok(State::ParamExchange | State::AccessDenied | State::ServerError)
    ) {
        return Some(Foreign::Iperf3);
    }
    if answer.len() < HTTP.len() && HTTP.starts_with(answer) {
        return None;
    }
    if answer.starts_with(HTTP) {
        let line = answer.split(|&b| b == b'\r' || b == b'\n').next();
        return Some(Foreign::Http(shown(line.unwrap_or(answer))));
    }
    Some(Foreign::Other(shown(answer)))
}

/// What an answer that could not be told apart in time shows.
pub(crate) fn undecided(answer: &[u8]) -> Foreign {
    recognise(answer).unwrap_or_else(|| Foreign::Other(shown(answer)))
}

/// The start of `bytes`, printable: text as it is, other bytes escaped.
fn shown(bytes: &[u8]) -> String {
    let mut s: String = bytes[..bytes.len().min(SHOWN)].escape_ascii().to_string();
    if bytes.len() > SHOWN {
        s.push_str("...");
    }
    s
}

impl Foreign {
    /// What to tell the user, `address` being where the client connected.
    pub(crate) fn explain(&self) -> String {
        match self {
            Foreign::Iperf3 => "this port speaks iperf3, not linkperf".to_string(),
            Foreign::Http(status) => {
                format!("this port speaks HTTP, not linkperf (it answered \"{status}\")")
            }
            Foreign::Other(start) => format!(
                "this port does not speak linkperf's control protocol (it answered \"{start}\")"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use linkperf_protocol::{encode_client, ClientMessage, PROTOCOL_VERSION};

    use super::*;

    #[test]
    fn iperf3_answers_with_one_state_byte() {
        for state in [
            State::ParamExchange,
            State::AccessDenied,
            State::ServerError,
        ] {
            assert_eq!(recognise(&[state.to_byte()]), Some(Foreign::Iperf3));
        }
    }

    /// An iperf3 server answers only once it has the 37 bytes of a cookie.
    #[test]
    fn the_hello_is_longer_than_an_iperf3_cookie() {
        let hello = encode_client(&ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            client_version: String::new(),
            challenge: None,
        });
        assert!(hello.len() >= linkperf_iperf3::codec::COOKIE_LEN);
        assert!(may_be_linkperf(0) && !may_be_linkperf(b'H'));
    }

    #[test]
    fn http_is_its_status_line() {
        assert_eq!(
            recognise(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
            Some(Foreign::Http("HTTP/1.1 400 Bad Request".into()))
        );
        assert_eq!(recognise(b"HTT"), None, "more may come");
        assert_eq!(recognise(b""), None);
        assert_eq!(undecided(b"HTT"), Foreign::Other("HTT".into()));
    }

    #[test]
    fn anything_else_is_shown() {
        assert_eq!(
            recognise(b"SSH-2.0-OpenSSH_9.6\r\n"),
            Some(Foreign::Other("SSH-2.0-OpenSSH_9.6\\r\\n".into()))
        );
        let long = [b'x'; 100];
        let Some(Foreign::Other(s)) = recognise(&long) else {
            panic!("other")
        };
        assert_eq!(s.len(), SHOWN + 3);
        assert_eq!(
            Foreign::Iperf3.explain(),
            "this port speaks iperf3, not linkperf"
        );
    }
}
