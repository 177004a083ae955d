//! The control connection's handshake, both sides, sans-IO: messages and the
//! clock in, messages and outcomes out. No socket, no random source (the
//! callers pass their challenges in) and no waiting: the client's
//! `open` and the server's `Session::handshake` move the messages and keep
//! the time, and the tests below run the two sides against each other in
//! memory.
//!
//! The exchange: the client says `hello` (with a challenge of its own when it
//! holds a key); the server answers `welcome` (its proof of the key for that
//! challenge, and a challenge of its own when it holds a key); a client
//! holding a key checks the proof before it sends anything more, and answers
//! the server's challenge with `auth`. The client waits for the welcome at
//! most [`ANSWER_TIMEOUT`], and tells from the first bytes of the answer
//! when what listens there is not a linkperf server (foreign.rs).

use std::time::{Duration, Instant};

use linkperf_measured::AgentIdentity;
use linkperf_protocol::{ClientMessage, ErrorCode, ServerMessage, PROTOCOL_VERSION};

use crate::proto::auth::{AuthKey, CHALLENGE_LEN};
use crate::proto::client::answers::Awaited;
use crate::proto::client::foreign::{Answer, Foreign};
use crate::proto::client::session::ANSWER_TIMEOUT;
use crate::proto::heard::Heard;
use crate::proto::server::fail::{auth_failed, fail, out_of_order, Fail};
use crate::SessionError;

/// A fresh challenge: its bytes and their hex.
pub(crate) type Challenge = ([u8; CHALLENGE_LEN], String);

/// The client's side.
pub(crate) struct ClientHandshake<'k> {
    key: Option<&'k AuthKey>,
    mine: Option<[u8; CHALLENGE_LEN]>,
    /// The server's address as the user wrote it, for the messages.
    shown: String,
    /// The welcome, awaited from the hello and again from the first byte
    /// of the answer.
    welcome: Awaited,
}

/// The handshake went through.
#[derive(Debug)]
pub(crate) struct Welcomed {
    /// The server's identity as an agent, if it stated one.
    pub agent: Option<AgentIdentity>,
    /// The answer to the server's challenge, to send.
    pub auth: Option<ClientMessage>,
}

/// The reason of the `abort` a client sends to a peer that did not welcome
/// it in time: it may be a linkperf daemon that is only slow (or a plain
/// listener that reads and says nothing), told that the client has gone.
const GAVE_UP: &str = "no welcome in time: the client gave up";

/// The handshake failed; `abort`: the reason of the `abort` to send last, if
/// one is sent.
#[derive(Debug)]
pub(crate) struct Refused {
    pub error: SessionError,
    pub abort: Option<&'static str>,
}

impl<'k> ClientHandshake<'k> {
    /// A client holding `key` (then with its challenge `mine`) to the server
    /// at `shown`, starting at `now`, and the hello to send.
    pub(crate) fn start(
        key: Option<&'k AuthKey>,
        mine: Option<Challenge>,
        shown: String,
        now: Instant,
    ) -> (Self, ClientMessage) {
        let hello = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            client_version: env!("CARGO_PKG_VERSION").into(),
            challenge: mine.as_ref().map(|(_, hex)| hex.clone()),
        };
        let me = ClientHandshake {
            key,
            mine: mine.map(|(bytes, _)| bytes),
            shown,
            welcome: Awaited::new("welcome", ANSWER_TIMEOUT, now),
        };
        (me, hello)
    }

    /// How long the next read may wait at `now`: until the welcome is late.
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        self.welcome.until.saturating_duration_since(now)
    }

    /// How the peer began to answer the hello, at `now`: `Ok` when it may
    /// be a linkperf server (its welcome is awaited from now on), else what
    /// it is (a foreign server, or none that answers at once).
    /// A silent peer is sent an `abort` (see [`Refused`]); a foreign one,
    /// which speaks another protocol, nothing more.
    pub(crate) fn first_answer(&mut self, answer: Answer, now: Instant) -> Result<(), Refused> {
        match answer {
            Answer::MayBeLinkperf => {
                self.welcome = Awaited::new("welcome", ANSWER_TIMEOUT, now);
                Ok(())
            }
            Answer::Foreign(f) => Err(Refused {
                error: SessionError::NotLinkperf {
                    what: f.explain(),
                    iperf3: matches!(f, Foreign::Iperf3),
                    addr: self.shown.clone(),
                },
                abort: None,
            }),
            Answer::Silent => Err(Refused {
                error: SessionError::Control(format!(
                    "no welcome from the server within {ANSWER_TIMEOUT:?} (a linkperf server \
                     answers at once: is {} a linkperf server?)",
                    self.shown
                )),
                abort: Some(GAVE_UP),
            }),
        }
    }

    /// What one receive came to at `now` while the welcome is awaited: the
    /// handshake gone through, `None` to go on waiting, or why it failed
    /// (the server's refusal, silence, a close, a welcome that is not one,
    /// a server that does not prove the key).
    pub(crate) fn welcome(
        &mut self,
        heard: Heard,
        now: Instant,
    ) -> Result<Option<Welcomed>, Refused> {
        let refuse = |error, abort| Refused { error, abort };
        // Given up on a peer that said nothing in time: it is told so.
        let late = now >= self.welcome.until;
        let Some(answer) = self.welcome.answer(heard, now) else {
            return Ok(None);
        };
        let answer = answer.map_err(|e| refuse(e, late.then_some(GAVE_UP)))?;
        let (session, challenge, proof, agent) = match answer {
            ServerMessage::Welcome {
                session,
                challenge,
                proof,
                agent,
                ..
            } => (session, challenge, proof, agent),
            other => {
                let e = SessionError::Control(format!("expected welcome, got {}", other.kind()));
                return Err(refuse(e, None));
            }
        };
        // The server proves the key first: one that cannot is sent nothing more.
        if let (Some(key), Some(mine)) = (self.key, &self.mine) {
            let why = match &proof {
                Some(p) if key.check_proof(mine, session, p) => None,
                Some(_) => Some("its proof does not match this client's key: it holds another key"),
                None => Some("it sent no proof: it holds no key"),
            };
            if let Some(why) = why {
                let e = SessionError::ServerNotProven {
                    addr: self.shown.clone(),
                    why: why.into(),
                };
                return Err(refuse(e, Some("the server did not prove it holds the key")));
            }
        }
        let auth = match (challenge, self.key) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(refuse(
                    SessionError::AuthRequired,
                    Some("this client has no key"),
                ))
            }
            (Some(challenge), Some(key)) => {
                let response = key.respond(&challenge, session).ok_or_else(|| {
                    let e =
                        SessionError::Control("the server's challenge is not 64 hex digits".into());
                    refuse(e, None)
                })?;
                Some(ClientMessage::Auth { response })
            }
        };
        Ok(Some(Welcomed { agent, auth }))
    }
}

/// The server's side.
pub(crate) struct ServerHandshake<'k> {
    key: Option<&'k AuthKey>,
    session: u64,
    deadline: Instant,
    limit: Duration,
    /// How the front end names the handshake timeout.
    setting: &'static str,
    /// The challenge this server sent, once it sent one.
    sent: Option<[u8; CHALLENGE_LEN]>,
}

impl<'k> ServerHandshake<'k> {
    /// Session `session`, accepted at `accepted`, served with `key`; the
    /// whole handshake has `limit` (the daemon's setting named `setting`).
    pub(crate) fn new(
        key: Option<&'k AuthKey>,
        session: u64,
        accepted: Instant,
        limit: Duration,
        setting: &'static str,
    ) -> Self {
        ServerHandshake {
            key,
            session,
            deadline: accepted + limit,
            limit,
            setting,
            sent: None,
        }
    }

    /// When the handshake must be over.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// What to answer when `what` did not come before the deadline.
    pub(crate) fn late(&self, what: &str) -> Fail {
        fail(
            ErrorCode::Limit,
            format!(
                "no {what} within this server's {} of {:?}; connection dropped",
                self.setting, self.limit
            ),
        )
    }

    /// The client's first message; `challenge` is this server's (used when
    /// it holds a key). The welcome to send.
    pub(crate) fn hello(
        &mut self,
        msg: ClientMessage,
        challenge: Option<Challenge>,
        identity: Option<AgentIdentity>,
    ) -> Result<ServerMessage, Fail> {
        let client_challenge = match msg {
            ClientMessage::Hello {
                protocol_version,
                challenge,
                ..
            } if protocol_version == PROTOCOL_VERSION => challenge,
            ClientMessage::Hello {
                protocol_version, ..
            } => {
                return Err(fail(
                    ErrorCode::VersionMismatch,
                    format!(
                        "client speaks control protocol {protocol_version}, this server speaks \
                         {PROTOCOL_VERSION}"
                    ),
                ))
            }
            other => return Err(out_of_order("hello", &other)),
        };
        // A client holding a key asks this server to prove it holds it too.
        let proof = match (self.key, &client_challenge) {
            (Some(key), Some(c)) => Some(key.prove(c, self.session).ok_or_else(|| {
                fail(
                    ErrorCode::Malformed,
                    "the client's challenge is not 64 hex digits",
                )
            })?),
            _ => None,
        };
        let challenge = self.key.and(challenge);
        self.sent = challenge.as_ref().map(|(bytes, _)| *bytes);
        Ok(ServerMessage::Welcome {
            protocol_version: PROTOCOL_VERSION,
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            session: self.session,
            challenge: challenge.map(|(_, hex)| hex),
            proof,
            agent: identity,
        })
    }

    /// Whether the client must still answer this server's challenge.
    pub(crate) fn awaits_auth(&self) -> bool {
        self.sent.is_some()
    }

    /// The client's answer to the challenge.
    pub(crate) fn auth(&self, msg: ClientMessage) -> Result<(), Fail> {
        let (Some(key), Some(challenge)) = (self.key, &self.sent) else {
            return Ok(());
        };
        match msg {
            ClientMessage::Auth { response } if key.verify(challenge, self.session, &response) => {
                Ok(())
            }
            ClientMessage::Auth { .. } => Err(auth_failed("wrong response to the challenge")),
            ClientMessage::Abort { reason } => Err(auth_failed(format!(
                "the client gave up instead of answering the challenge: {reason}"
            ))),
            other => Err(auth_failed(format!(
                "the client sent {} instead of answering the challenge",
                other.kind()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use linkperf_protocol::{decode_client, encode_client};

    use super::*;
    use crate::proto::heard::Received;
    use crate::proto::pair::{quiet, to_client};

    fn key(byte: u8) -> AuthKey {
        AuthKey::from_bytes(&[b'A' + byte; 32]).unwrap()
    }

    fn challenge(byte: u8) -> Challenge {
        let bytes = [byte; CHALLENGE_LEN];
        let hex = bytes.iter().map(|b| format!("{b:02x}")).collect();
        (bytes, hex)
    }

    /// Each message through the wire's encoding, as the shells send it.
    fn over_wire_c(m: ClientMessage) -> ClientMessage {
        decode_client(&encode_client(&m)[4..]).unwrap()
    }

    /// What became of each side: the client's outcome, and the server's
    /// (the failure it sends, if any).
    struct Ends {
        client: Result<Welcomed, Refused>,
        server: Result<(), (ErrorCode, String, Option<String>)>,
    }

    /// The two sides over an in-memory pair, each with its key.
    fn shake(client_key: Option<&AuthKey>, server_key: Option<&AuthKey>) -> Ends {
        let t0 = Instant::now();
        let mine = client_key.map(|_| challenge(1));
        let (mut client, hello) = ClientHandshake::start(client_key, mine, "far:6001".into(), t0);
        let mut server = ServerHandshake::new(server_key, 7, t0, Duration::from_secs(5), "limit");
        let welcome = match server.hello(over_wire_c(hello), Some(challenge(2)), None) {
            Ok(w) => w,
            Err(f) => panic!("the hello was refused: {}", f.message),
        };
        client.first_answer(Answer::MayBeLinkperf, t0).unwrap();
        let client = client
            .welcome(to_client(&welcome), t0)
            .map(|w| w.expect("the welcome came"));
        let last = match &client {
            Ok(w) => w.auth.clone(),
            Err(r) => r.abort.map(|reason| ClientMessage::Abort {
                reason: reason.into(),
            }),
        };
        let server = match (server.awaits_auth(), last) {
            (false, _) => Ok(()),
            (true, Some(m)) => server.auth(over_wire_c(m)),
            (true, None) => Err(server.late("authentication")),
        }
        .map_err(|f| (f.code, f.message, f.detail));
        Ends { client, server }
    }

    #[test]
    fn without_keys_the_handshake_is_hello_and_welcome() {
        let ends = shake(None, None);
        let w = ends.client.unwrap();
        assert!(w.auth.is_none());
        assert!(ends.server.is_ok());
    }

    #[test]
    fn the_same_key_proves_both_sides() {
        let k = key(9);
        let ends = shake(Some(&k), Some(&k));
        assert!(ends.client.unwrap().auth.is_some());
        assert!(ends.server.is_ok());
    }

    #[test]
    fn a_server_without_the_clients_key_is_sent_nothing_more() {
        let k = key(9);
        for (server_key, why) in [
            (None, "it sent no proof"),
            (Some(key(8)), "it holds another key"),
        ] {
            let ends = shake(Some(&k), server_key.as_ref());
            let r = ends.client.unwrap_err();
            match &r.error {
                SessionError::ServerNotProven { addr, why: w } => {
                    assert_eq!(addr, "far:6001");
                    assert!(w.contains(why), "{w}");
                }
                other => panic!("{other:?}"),
            }
            // All the server hears is that the client gave up.
            assert_eq!(r.abort, Some("the server did not prove it holds the key"));
            if server_key.is_some() {
                let (code, message, detail) = ends.server.unwrap_err();
                assert_eq!(code, ErrorCode::AuthFailed);
                assert_eq!(message, "authentication failed");
                assert!(detail.unwrap().contains("gave up"));
            }
        }
    }

    #[test]
    fn a_client_without_the_servers_key_is_told_it_needs_one() {
        let k = key(9);
        let ends = shake(None, Some(&k));
        assert!(matches!(
            ends.client.unwrap_err().error,
            SessionError::AuthRequired
        ));
        assert_eq!(ends.server.unwrap_err().0, ErrorCode::AuthFailed);
    }

    #[test]
    fn a_wrong_answer_or_another_message_fails_authentication_and_says_no_more() {
        let k = key(9);
        let t0 = Instant::now();
        for answer in [
            ClientMessage::Auth {
                response: "00".repeat(32),
            },
            ClientMessage::Start,
        ] {
            let mut server = ServerHandshake::new(Some(&k), 3, t0, Duration::from_secs(5), "x");
            let (_, hello) = ClientHandshake::start(None, None, "h".into(), t0);
            server.hello(hello, Some(challenge(2)), None).unwrap();
            let f = server.auth(answer).unwrap_err();
            assert_eq!(
                (f.code, f.message.as_str()),
                (ErrorCode::AuthFailed, "authentication failed")
            );
        }
    }

    #[test]
    fn another_protocol_version_or_message_first_is_refused() {
        let mut server = ServerHandshake::new(None, 1, Instant::now(), Duration::from_secs(5), "x");
        let old = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION - 1,
            client_version: "0".into(),
            challenge: None,
        };
        let f = server.hello(old, None, None).unwrap_err();
        assert_eq!(f.code, ErrorCode::VersionMismatch);
        assert!(f
            .message
            .contains(&format!("this server speaks {PROTOCOL_VERSION}")));
        let f = server.hello(ClientMessage::Start, None, None).unwrap_err();
        assert_eq!(f.code, ErrorCode::OutOfOrder);
    }

    #[test]
    fn the_handshake_has_its_limit_from_the_accept_and_names_the_setting() {
        let t0 = Instant::now();
        let server = ServerHandshake::new(
            None,
            1,
            t0,
            Duration::from_millis(1500),
            "--handshake-timeout",
        );
        assert_eq!(server.deadline(), t0 + Duration::from_millis(1500));
        let f = server.late("hello");
        assert_eq!(f.code, ErrorCode::Limit);
        assert_eq!(
            f.message,
            "no hello within this server's --handshake-timeout of 1.5s; connection dropped"
        );
    }

    #[test]
    fn a_welcome_that_is_not_one_ends_the_client() {
        let t0 = Instant::now();
        let (mut client, _) = ClientHandshake::start(None, None, "h".into(), t0);
        let r = client
            .welcome(to_client(&ServerMessage::Started), t0)
            .unwrap_err();
        assert!(r
            .error
            .to_string()
            .contains("expected welcome, got started"));
        assert!(r.abort.is_none());
    }

    #[test]
    fn what_is_not_a_linkperf_server_is_named_from_its_first_bytes() {
        let t0 = Instant::now();
        let (mut client, _) = ClientHandshake::start(None, None, "far:5201".into(), t0);
        assert_eq!(client.wait(t0), ANSWER_TIMEOUT);
        match client.first_answer(Answer::Foreign(Foreign::Iperf3), t0) {
            Err(Refused {
                error: SessionError::NotLinkperf { addr, what, iperf3 },
                abort: None,
            }) => {
                assert_eq!(addr, "far:5201");
                assert_eq!(what, "this port speaks iperf3, not linkperf");
                assert!(iperf3);
            }
            other => panic!("{other:?}"),
        }
        let http = Foreign::Http("HTTP/1.1 400 Bad Request".into());
        let e = client.first_answer(Answer::Foreign(http), t0).unwrap_err();
        assert!(
            matches!(&e.error, SessionError::NotLinkperf { iperf3: false, .. }),
            "{}",
            e.error
        );
        let silent = client.first_answer(Answer::Silent, t0).unwrap_err();
        // A silent peer is told the client gave up (docs/security.md).
        assert_eq!(silent.abort, Some(GAVE_UP));
        assert_eq!(
            silent.error.to_string(),
            "talk to the server: no welcome from the server within 15s (a linkperf server \
             answers at once: is far:5201 a linkperf server?)"
        );
    }

    #[test]
    fn the_welcome_is_awaited_from_the_first_byte_and_a_late_or_closed_one_is_named() {
        let t0 = Instant::now();
        let (mut client, _) = ClientHandshake::start(None, None, "h:1".into(), t0);
        // The first byte came after 2 s: the welcome has its whole time from there.
        let t1 = t0 + Duration::from_secs(2);
        client.first_answer(Answer::MayBeLinkperf, t1).unwrap();
        assert_eq!(client.wait(t1), ANSWER_TIMEOUT);
        assert!(client
            .welcome(quiet(), t1 + Duration::from_secs(14))
            .unwrap()
            .is_none());
        let late = client.welcome(quiet(), t1 + ANSWER_TIMEOUT).unwrap_err();
        assert_eq!(
            late.error.to_string(),
            "talk to the server: no welcome from the server within 15s"
        );
        assert_eq!(late.abort, Some(GAVE_UP), "a silent server is told");
        let (mut client, _) = ClientHandshake::start(None, None, "h:1".into(), t0);
        client.first_answer(Answer::MayBeLinkperf, t0).unwrap();
        let closed = Heard {
            got: Ok(Received::Closed),
            how: "closed the control connection",
        };
        let r = client.welcome(closed, t0).unwrap_err();
        assert_eq!(
            r.error.to_string(),
            "talk to the server: the server closed the control connection before welcome"
        );
        assert!(r.abort.is_none(), "nothing is sent to a closed connection");
    }

    #[test]
    fn a_server_that_refuses_the_hello_is_heard_as_a_refusal() {
        let t0 = Instant::now();
        let (mut client, hello) = ClientHandshake::start(None, None, "h:1".into(), t0);
        // A client of another protocol version, as the server reads it.
        let ClientMessage::Hello {
            client_version,
            challenge,
            ..
        } = over_wire_c(hello)
        else {
            panic!("a hello");
        };
        let newer = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION + 1,
            client_version,
            challenge,
        };
        let mut server = ServerHandshake::new(None, 1, t0, Duration::from_secs(5), "x");
        let f = server.hello(newer, None, None).unwrap_err();
        client.first_answer(Answer::MayBeLinkperf, t0).unwrap();
        let r = client.welcome(to_client(&f.message()), t0).unwrap_err();
        match r.error {
            SessionError::Refused { code, message, .. } => {
                assert_eq!(code, ErrorCode::VersionMismatch.to_string());
                assert!(message.contains("this server speaks"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
