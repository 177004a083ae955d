//! What has come in on a control connection and not been read yet, and the
//! messages taken from it: a state byte, the two numbers after
//! `SERVER_ERROR`, a JSON message behind its length. Bytes arrive in any
//! pieces; a message is taken once all of it is in, and until then the
//! inbox says how many more bytes it needs, so that a reader can take no
//! more from its connection than the message it waits for.

use serde::de::DeserializeOwned;

use super::{decode_json, frame_length, server_error_from_bytes, State, LENGTH_PREFIX_LEN};
use crate::WireError;

/// Bytes of the two numbers after `SERVER_ERROR`.
pub const ERROR_NUMBERS_LEN: usize = 8;

/// A message a reader waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// One state byte.
    State,
    /// iperf3's error number and `errno` after `SERVER_ERROR`.
    ErrorNumbers,
    /// A JSON message of at most `max` bytes behind its length.
    Json {
        /// The longest body accepted.
        max: usize,
    },
}

/// Bytes received and not yet taken as messages.
#[derive(Debug, Clone, Default)]
pub struct Inbox {
    bytes: Vec<u8>,
}

impl Inbox {
    /// An empty inbox.
    pub fn new() -> Self {
        Inbox::default()
    }

    /// Bytes that came in.
    pub fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True if nothing is held.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many more bytes `expect` needs before it can be taken; 0 once it
    /// can (a JSON length over its limit can be taken as soon as the length
    /// is in: as its error).
    pub fn needs(&self, expect: Expect) -> usize {
        let have = self.bytes.len();
        let whole = match expect {
            Expect::State => 1,
            Expect::ErrorNumbers => ERROR_NUMBERS_LEN,
            Expect::Json { max } => match self.prefix() {
                None => LENGTH_PREFIX_LEN,
                Some(p) => match frame_length(p, max) {
                    Ok(len) => LENGTH_PREFIX_LEN + len,
                    Err(_) => LENGTH_PREFIX_LEN,
                },
            },
        };
        whole.saturating_sub(have)
    }

    fn prefix(&self) -> Option<[u8; LENGTH_PREFIX_LEN]> {
        self.bytes.get(..LENGTH_PREFIX_LEN)?.try_into().ok()
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        self.bytes.drain(..n).collect()
    }

    /// The next state, once its byte is in; a byte iperf3 does not define
    /// is taken as its error.
    pub fn take_state(&mut self) -> Option<Result<State, WireError>> {
        let b = *self.bytes.first()?;
        self.take(1);
        Some(State::from_byte(b))
    }

    /// iperf3's error number and `errno`, once their 8 bytes are in.
    pub fn take_error_numbers(&mut self) -> Option<(i32, i32)> {
        if self.bytes.len() < ERROR_NUMBERS_LEN {
            return None;
        }
        let b: [u8; ERROR_NUMBERS_LEN] = self.take(ERROR_NUMBERS_LEN).try_into().ok()?;
        Some(server_error_from_bytes(b))
    }

    /// The next JSON message of at most `max` bytes, once all of it is in. A
    /// length over `max` is taken (its 4 bytes) as its error as soon as it
    /// is in; a body that is not the JSON expected is taken as its error.
    pub fn take_json<T: DeserializeOwned>(&mut self, max: usize) -> Option<Result<T, WireError>> {
        let len = match frame_length(self.prefix()?, max) {
            Ok(len) => len,
            Err(e) => {
                self.take(LENGTH_PREFIX_LEN);
                return Some(Err(e));
            }
        };
        if self.bytes.len() < LENGTH_PREFIX_LEN + len {
            return None;
        }
        let frame = self.take(LENGTH_PREFIX_LEN + len);
        Some(decode_json(&frame[LENGTH_PREFIX_LEN..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{encode_json, server_error_bytes, IErrno, TestParams};
    use proptest::prelude::*;

    const PARAMS: &[u8] = br#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;

    fn framed(body: &[u8]) -> Vec<u8> {
        crate::codec::encode_frame(body).unwrap()
    }

    #[test]
    fn a_json_message_byte_by_byte_says_what_it_still_needs() {
        let f = framed(PARAMS);
        let json = Expect::Json { max: 1 << 16 };
        let mut inbox = Inbox::new();
        assert_eq!(inbox.needs(json), 4, "its length first");
        for (i, b) in f.iter().enumerate() {
            assert!(inbox.take_json::<TestParams>(1 << 16).is_none());
            if i >= 4 {
                assert_eq!(
                    inbox.needs(json),
                    f.len() - i,
                    "the body, once its length is in"
                );
            }
            inbox.push(&[*b]);
        }
        assert_eq!(inbox.needs(json), 0);
        let p = inbox.take_json::<TestParams>(1 << 16).unwrap().unwrap();
        assert_eq!(p.parallel, Some(2));
        assert!(inbox.is_empty());
    }

    #[test]
    fn states_error_numbers_and_json_come_out_in_the_order_they_came_in() {
        let mut inbox = Inbox::new();
        let mut bytes = vec![State::ParamExchange.to_byte()];
        bytes.extend(server_error_bytes(IErrno::NumStreams, 0));
        bytes.extend(framed(b"{}"));
        bytes.push(State::DisplayResults.to_byte());
        inbox.push(&bytes);
        assert_eq!(inbox.needs(Expect::State), 0);
        assert_eq!(inbox.take_state(), Some(Ok(State::ParamExchange)));
        assert_eq!(inbox.take_state(), Some(Ok(State::ServerError)));
        assert_eq!(inbox.take_error_numbers(), Some((6, 0)));
        let v: serde_json::Value = inbox.take_json(16).unwrap().unwrap();
        assert_eq!(v, serde_json::json!({}));
        assert_eq!(inbox.take_state(), Some(Ok(State::DisplayResults)));
        assert_eq!(inbox.take_state(), None);
        assert_eq!(inbox.take_error_numbers(), None);
        assert_eq!(inbox.needs(Expect::ErrorNumbers), 8);
    }

    #[test]
    fn what_is_not_the_protocol_is_taken_as_its_error() {
        let mut inbox = Inbox::new();
        inbox.push(&[99]);
        assert_eq!(inbox.take_state(), Some(Err(WireError::UnknownState(99))));
        // A length over the limit is an error as soon as the length is in.
        inbox.push(&[0, 1, 0, 1]);
        assert_eq!(inbox.needs(Expect::Json { max: 65_536 }), 0);
        assert_eq!(
            inbox.take_json::<TestParams>(65_536),
            Some(Err(WireError::TooLong {
                len: 65_537,
                max: 65_536
            }))
        );
        assert!(inbox.is_empty());
        // A body that is not JSON is taken whole, as its error.
        inbox.push(&framed(b"{\"time\":"));
        inbox.push(&[State::IperfDone.to_byte()]);
        assert!(matches!(
            inbox.take_json::<TestParams>(1024),
            Some(Err(WireError::Json(_)))
        ));
        assert_eq!(inbox.take_state(), Some(Ok(State::IperfDone)));
    }

    proptest! {
        #[test]
        fn any_bytes_are_taken_as_values_or_errors_and_needs_says_when(
            bytes in proptest::collection::vec(any::<u8>(), 0..256),
            max in 0usize..128,
        ) {
            let mut inbox = Inbox::new();
            inbox.push(&bytes);
            let json = Expect::Json { max };
            let ready = inbox.needs(json) == 0;
            prop_assert_eq!(ready, inbox.clone().take_json::<serde_json::Value>(max).is_some());
            let ready = inbox.needs(Expect::ErrorNumbers) == 0;
            prop_assert_eq!(ready, inbox.clone().take_error_numbers().is_some());
            let ready = inbox.needs(Expect::State) == 0;
            prop_assert_eq!(ready, inbox.take_state().is_some());
        }

        #[test]
        fn however_the_bytes_are_cut_the_messages_are_the_same(
            cuts in proptest::collection::vec(1usize..40, 0..20),
            time in 0i64..100_000,
        ) {
            let p = TestParams { time: Some(time), ..TestParams::default() };
            let mut bytes = vec![State::ParamExchange.to_byte()];
            bytes.extend(encode_json(&p).unwrap());
            bytes.push(State::TestEnd.to_byte());
            let mut inbox = Inbox::new();
            let mut taken = Vec::new();
            let mut rest: &[u8] = &bytes;
            let mut cuts = cuts.into_iter().chain(std::iter::repeat(usize::MAX));
            let mut step = 0;
            while taken.len() < 3 {
                let n = cuts.next().unwrap().min(rest.len());
                inbox.push(&rest[..n]);
                rest = &rest[n..];
                loop {
                    let got = match step {
                        0 | 2 => inbox.take_state().map(|s| format!("{:?}", s.unwrap())),
                        _ => inbox
                            .take_json::<TestParams>(1024)
                            .map(|p| format!("{:?}", p.unwrap().time)),
                    };
                    match got {
                        Some(g) => {
                            taken.push(g);
                            step += 1;
                        }
                        None => break,
                    }
                    if step == 3 {
                        break;
                    }
                }
            }
            prop_assert_eq!(
                taken,
                vec!["ParamExchange".to_string(), format!("{:?}", Some(time)), "TestEnd".to_string()]
            );
            prop_assert!(inbox.is_empty());
        }
    }
}
