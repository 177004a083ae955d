//! A control connection in its handshake, from its bytes: the frames that
//! came (each at most [`PRE_AUTH_MAX_FRAME`] until the handshake is over),
//! the server's handshake machine ([`ServerHandshake`]) deciding on each,
//! and what to send back. The daemon's loop reads and writes; this decides.
//! What came past the handshake stays in the decoder for the session.

use std::time::Instant;

use linkperf_measured::AgentIdentity;
use linkperf_protocol::{encode_server, ErrorCode, FrameDecoder};

use crate::proto::auth::AuthKey;
use crate::proto::handshake::{Challenge, ServerHandshake};
use crate::proto::heard::{Heard, Received, RecvError};
use crate::proto::server::fail::{fail, Fail};
use crate::proto::server::request;

/// Largest control frame before the handshake is done: a hello or an
/// answer to the challenge is a few hundred bytes.
pub(crate) const PRE_AUTH_MAX_FRAME: usize = 4 * 1024;

/// Bytes of a frame's length prefix.
const PREFIX_LEN: usize = 4;

/// What a stranger's bytes came to so far.
#[derive(Debug)]
pub(crate) enum Came {
    /// No whole message yet: read on.
    Waiting,
    /// The handshake is done (once what was queued is sent): the connection
    /// is the session's, and the decoder keeps what came past it.
    Through,
    /// The handshake failed: send the error, then close.
    Failed(Fail),
}

/// What the handshake awaits next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaits {
    Hello,
    Auth,
    Nothing,
}

impl Awaits {
    /// As the messages name it.
    fn word(self) -> &'static str {
        match self {
            Awaits::Hello => "hello",
            Awaits::Auth | Awaits::Nothing => "authentication",
        }
    }
}

/// Settings every stranger of a daemon shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Door<'k> {
    /// The key a client must prove it holds, if any.
    pub key: Option<&'k AuthKey>,
    /// What the daemon says of itself in every welcome.
    pub identity: Option<&'k AgentIdentity>,
    /// The time from the accept to the end of the handshake.
    pub limit: std::time::Duration,
    /// Largest frame of the daemon (the smaller of it and
    /// [`PRE_AUTH_MAX_FRAME`] holds until the handshake is over).
    pub max_frame: usize,
    /// How the front end names the handshake timeout.
    pub limit_setting: &'static str,
    /// How the front end names the largest frame.
    pub frame_setting: &'static str,
}

/// One control connection in its handshake.
pub(crate) struct Stranger<'k> {
    decoder: FrameDecoder,
    /// Most bytes buffered at once: one whole frame and its prefix.
    holds: usize,
    handshake: ServerHandshake<'k>,
    /// Whether the client must prove the key.
    keyed: bool,
    /// This server's challenge, sent in the welcome when it holds a key.
    challenge: Option<Challenge>,
    identity: Option<&'k AgentIdentity>,
    frame_setting: &'static str,
    awaits: Awaits,
}

impl<'k> Stranger<'k> {
    /// Session `session` at `door`, accepted at `accepted`; `challenge` is
    /// this server's, made for it (used when it holds a key).
    pub(crate) fn new(
        door: Door<'k>,
        session: u64,
        accepted: Instant,
        challenge: Option<Challenge>,
    ) -> Self {
        let max_frame = PRE_AUTH_MAX_FRAME.min(door.max_frame);
        Stranger {
            decoder: FrameDecoder::new(max_frame),
            holds: max_frame + PREFIX_LEN,
            handshake: ServerHandshake::new(
                door.key,
                session,
                accepted,
                door.limit,
                door.limit_setting,
            ),
            keyed: door.key.is_some(),
            challenge,
            identity: door.identity,
            frame_setting: door.frame_setting,
            awaits: Awaits::Hello,
        }
    }

    /// How many bytes it takes now: no more than keeps one whole frame
    /// buffered (a frame is decided on as soon as it is whole). None once
    /// the handshake is over: what follows is the session's to read.
    pub(crate) fn room(&self) -> usize {
        if self.awaits == Awaits::Nothing {
            return 0;
        }
        self.holds.saturating_sub(self.decoder.buffered())
    }

    /// When the handshake must be over.
    pub(crate) fn deadline(&self) -> Instant {
        self.handshake.deadline()
    }

    /// `bytes` came (at most [`Stranger::room`]); what they came to, with
    /// what to send appended to `out` (the welcome).
    pub(crate) fn heard(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Came {
        if self.awaits == Awaits::Nothing {
            return Came::Through;
        }
        self.decoder.feed(bytes);
        loop {
            let got = match self.decoder.next_frame() {
                Ok(None) => return Came::Waiting,
                Ok(Some(f)) => Ok(Received::Frame(f)),
                Err(e) => Err(RecvError::Wire(e)),
            };
            let heard = Heard {
                got,
                how: "closed the control connection",
            };
            let msg = match request::awaited(heard, self.awaits.word(), self.frame_setting) {
                Ok(Some(msg)) => msg,
                // A frame is always a message or a failure.
                Ok(None) => return Came::Waiting,
                Err(f) => return Came::Failed(f),
            };
            match self.awaits {
                Awaits::Hello => {
                    let challenge = self.challenge.take();
                    // With a key, a welcome without a challenge would let
                    // the client through unproven.
                    if self.keyed && challenge.is_none() {
                        let f = fail(
                            ErrorCode::Internal,
                            "no challenge was made for this session",
                        );
                        return Came::Failed(f);
                    }
                    let identity = self.identity.cloned();
                    match self.handshake.hello(msg, challenge, identity) {
                        Ok(welcome) => out.extend_from_slice(&encode_server(&welcome)),
                        Err(f) => return Came::Failed(f),
                    }
                    if !self.handshake.awaits_auth() {
                        self.awaits = Awaits::Nothing;
                        return Came::Through;
                    }
                    self.awaits = Awaits::Auth;
                }
                Awaits::Auth => {
                    if let Err(f) = self.handshake.auth(msg) {
                        return Came::Failed(f);
                    }
                    self.awaits = Awaits::Nothing;
                    return Came::Through;
                }
                Awaits::Nothing => return Came::Through,
            }
        }
    }

    /// Why it failed when the peer closed before the handshake was over.
    pub(crate) fn closed(&self) -> Fail {
        let heard = Heard {
            got: Ok(Received::Closed),
            how: "closed the control connection",
        };
        match request::awaited(heard, self.awaits.word(), self.frame_setting) {
            Err(f) => f,
            // A close is always a failure.
            Ok(_) => self.late(),
        }
    }

    /// Why it failed when its deadline passed first.
    pub(crate) fn late(&self) -> Fail {
        self.handshake.late(self.awaits.word())
    }

    /// The decoder, holding what came past the handshake, for the session.
    pub(crate) fn into_rest(self) -> FrameDecoder {
        self.decoder
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_protocol::{
        decode_server, encode_client, encode_frame, ClientMessage, ServerMessage,
    };

    use super::*;
    use crate::proto::auth::CHALLENGE_LEN;
    use crate::proto::handshake::ClientHandshake;

    const LIMIT: Duration = Duration::from_secs(5);

    fn door(key: Option<&AuthKey>) -> Door<'_> {
        Door {
            key,
            identity: None,
            limit: LIMIT,
            max_frame: 1 << 20,
            limit_setting: "--handshake-timeout",
            frame_setting: "--max-frame",
        }
    }

    fn challenge(byte: u8) -> Challenge {
        let bytes = [byte; CHALLENGE_LEN];
        (bytes, hex::encode(bytes))
    }

    fn hello(mine: Option<Challenge>, key: Option<&AuthKey>) -> (ClientHandshake<'_>, Vec<u8>) {
        let (c, hello) = ClientHandshake::start(key, mine, "h:1".into(), Instant::now());
        (c, encode_client(&hello))
    }

    /// The messages in `out`, taken off.
    fn sent(out: &mut Vec<u8>) -> Vec<ServerMessage> {
        let mut d = FrameDecoder::default();
        d.feed(out);
        out.clear();
        std::iter::from_fn(|| d.next_frame().unwrap())
            .map(|f| decode_server(&f).unwrap())
            .collect()
    }

    fn request() -> Vec<u8> {
        encode_client(&ClientMessage::Abort {
            reason: "the request that follows".into(),
        })
    }

    #[test]
    fn without_a_key_a_hello_in_pieces_is_welcomed_and_what_follows_is_kept() {
        let t0 = Instant::now();
        let mut s = Stranger::new(door(None), 7, t0, None);
        assert_eq!(s.deadline(), t0 + LIMIT);
        let (_, mut bytes) = hello(None, None);
        bytes.extend(request());
        let mut out = Vec::new();
        let (first, rest) = bytes.split_at(3);
        assert!(matches!(s.heard(first, &mut out), Came::Waiting));
        assert!(out.is_empty());
        assert!(matches!(s.heard(rest, &mut out), Came::Through));
        match &sent(&mut out)[..] {
            [ServerMessage::Welcome {
                session: 7,
                challenge: None,
                ..
            }] => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(s.room(), 0, "past the handshake it reads no more");
        let mut rest = s.into_rest();
        assert_eq!(rest.next_frame().unwrap().unwrap(), request()[4..]);
    }

    #[test]
    fn with_a_key_the_answer_to_the_challenge_lets_it_through() {
        let key = AuthKey::from_bytes(b"a key of some length, for a test").unwrap();
        let t0 = Instant::now();
        let mut s = Stranger::new(door(Some(&key)), 3, t0, Some(challenge(2)));
        let (mut client, bytes) = hello(Some(challenge(1)), Some(&key));
        let mut out = Vec::new();
        assert!(matches!(s.heard(&bytes, &mut out), Came::Waiting));
        let welcome = sent(&mut out).pop().unwrap();
        let heard = Heard {
            got: Ok(Received::Frame(
                linkperf_protocol::encode_server(&welcome)[4..].to_vec(),
            )),
            how: "closed",
        };
        use crate::proto::client::foreign::Answer;
        client.first_answer(Answer::MayBeLinkperf, t0).unwrap();
        let auth = client.welcome(heard, t0).unwrap().unwrap().auth.unwrap();
        let mut bytes = encode_client(&auth);
        bytes.extend(request());
        // A byte at a time.
        let mut came = Came::Waiting;
        for b in &bytes {
            came = s.heard(std::slice::from_ref(b), &mut out);
            if !matches!(came, Came::Waiting) {
                break;
            }
        }
        assert!(matches!(came, Came::Through), "{came:?}");
        assert!(out.is_empty(), "nothing more is sent");
        assert_eq!(s.room(), 0);
    }

    #[test]
    fn with_a_key_and_no_challenge_made_no_one_is_let_through() {
        let key = AuthKey::from_bytes(b"a key of some length, for a test").unwrap();
        let mut s = Stranger::new(door(Some(&key)), 3, Instant::now(), None);
        let (_, bytes) = hello(None, None);
        match s.heard(&bytes, &mut Vec::new()) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::Internal),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_answer_fails_authentication() {
        let key = AuthKey::from_bytes(b"a key of some length, for a test").unwrap();
        let mut s = Stranger::new(door(Some(&key)), 3, Instant::now(), Some(challenge(2)));
        let (_, bytes) = hello(None, None);
        let mut out = Vec::new();
        assert!(matches!(s.heard(&bytes, &mut out), Came::Waiting));
        let wrong = encode_client(&ClientMessage::Auth {
            response: "00".repeat(32),
        });
        match s.heard(&wrong, &mut out) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::AuthFailed),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_frame_longer_than_a_handshake_needs_is_refused_from_its_length() {
        let mut s = Stranger::new(door(None), 1, Instant::now(), None);
        assert_eq!(s.room(), PRE_AUTH_MAX_FRAME + 4);
        // 4 KiB and one byte announced, none of it sent.
        let prefix = (PRE_AUTH_MAX_FRAME as u32 + 1).to_be_bytes();
        match s.heard(&prefix, &mut Vec::new()) {
            Came::Failed(f) => {
                assert_eq!(f.code, ErrorCode::TooLarge);
                assert!(f.message.contains("4096") && f.message.contains("--max-frame"));
            }
            other => panic!("{other:?}"),
        }
        // A frame of exactly 4 KiB is taken in whole, and no more.
        let mut s = Stranger::new(door(None), 1, Instant::now(), None);
        let mut frame = Vec::new();
        encode_frame(&[b' '; PRE_AUTH_MAX_FRAME], &mut frame);
        assert!(matches!(
            s.heard(&frame[..PRE_AUTH_MAX_FRAME], &mut Vec::new()),
            Came::Waiting
        ));
        assert_eq!(s.room(), 4);
        match s.heard(&frame[PRE_AUTH_MAX_FRAME..], &mut Vec::new()) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::Malformed, "{}", f.message),
            other => panic!("{other:?}"),
        }
        // A smaller --max-frame holds from the start.
        let small = Door {
            max_frame: 100,
            ..door(None)
        };
        assert_eq!(Stranger::new(small, 1, Instant::now(), None).room(), 104);
    }

    #[test]
    fn a_close_or_the_deadline_say_what_was_awaited() {
        let key = AuthKey::from_bytes(b"a key of some length, for a test").unwrap();
        let mut s = Stranger::new(door(Some(&key)), 1, Instant::now(), Some(challenge(2)));
        let f = s.closed();
        assert_eq!(f.code, ErrorCode::Aborted);
        assert_eq!(
            f.message,
            "client closed the control connection before hello"
        );
        assert_eq!(
            s.late().message,
            "no hello within this server's --handshake-timeout of 5s; connection dropped"
        );
        let (_, bytes) = hello(None, None);
        assert!(matches!(s.heard(&bytes, &mut Vec::new()), Came::Waiting));
        assert!(s.late().message.starts_with("no authentication within"));
        assert!(s.closed().message.ends_with("before authentication"));
    }

    #[test]
    fn garbage_or_another_message_first_is_refused() {
        let mut s = Stranger::new(door(None), 1, Instant::now(), None);
        let mut junk = Vec::new();
        encode_frame(b"not json", &mut junk);
        match s.heard(&junk, &mut Vec::new()) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::Malformed),
            other => panic!("{other:?}"),
        }
        let mut s = Stranger::new(door(None), 1, Instant::now(), None);
        match s.heard(&encode_client(&ClientMessage::Start), &mut Vec::new()) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::OutOfOrder),
            other => panic!("{other:?}"),
        }
        let mut s = Stranger::new(door(None), 1, Instant::now(), None);
        match s.heard(&[0, 0, 0, 0], &mut Vec::new()) {
            Came::Failed(f) => assert_eq!(f.code, ErrorCode::Malformed, "{}", f.message),
            other => panic!("{other:?}"),
        }
    }
}
