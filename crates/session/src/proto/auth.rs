//! The pre-shared key and the MACs of its challenge–response, pure: bytes
//! in, bytes out (the exchange is described in [`crate::auth`]; reading a
//! key file and drawing a challenge are the shell's, shell/key.rs).

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a challenge.
pub const CHALLENGE_LEN: usize = 32;
/// Fewest bytes of secret a key file must hold (after trimming whitespace).
pub const MIN_KEY_LEN: usize = 16;
/// Most bytes a key file may hold: it is a key, not a document.
pub const MAX_KEY_LEN: usize = 4096;
/// Appended to every authenticated message, so that a MAC computed with the
/// same key for anything else is never a valid response.
const CONTEXT: &[u8] = b"linkperf-auth-v1";
/// Appended to every server proof: a proof is never a client's response.
const SERVER_CONTEXT: &[u8] = b"linkperf-server-v1";

type HmacSha256 = Hmac<Sha256>;

/// A pre-shared key. Its `Debug` shows nothing of the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Vec<u8>);

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthKey({} bytes, redacted)", self.0.len())
    }
}

impl AuthKey {
    /// The key in `bytes`, the content of a key file: leading and trailing ASCII
    /// whitespace is trimmed (so a trailing newline does not count), and what
    /// remains must be [`MIN_KEY_LEN`] to [`MAX_KEY_LEN`] bytes. Any bytes are
    /// allowed, text or binary. `None` if there are too few or too many.
    pub fn from_bytes(bytes: &[u8]) -> Option<AuthKey> {
        let key = bytes.trim_ascii();
        (MIN_KEY_LEN..=MAX_KEY_LEN)
            .contains(&key.len())
            .then(|| AuthKey(key.to_vec()))
    }

    /// The MAC of one session's challenge.
    fn mac(&self, challenge: &[u8; CHALLENGE_LEN], session: u64) -> HmacSha256 {
        self.mac_in(challenge, session, CONTEXT)
    }

    /// The MAC of one session's challenge in `context`.
    fn mac_in(&self, challenge: &[u8; CHALLENGE_LEN], session: u64, context: &[u8]) -> HmacSha256 {
        // HMAC takes keys of any length.
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("hmac takes keys of any length");
        mac.update(challenge);
        mac.update(&session.to_be_bytes());
        mac.update(context);
        mac
    }

    /// The server's proof for the client's challenge of `hello` (64 hex
    /// digits) in `session`, or `None` if the challenge is not 64 hex digits.
    pub fn prove(&self, client_challenge_hex: &str, session: u64) -> Option<String> {
        let challenge = decode_challenge(client_challenge_hex)?;
        Some(hex::encode(
            self.mac_in(&challenge, session, SERVER_CONTEXT)
                .finalize()
                .into_bytes(),
        ))
    }

    /// True if `proof_hex` is this key's proof for `challenge` in `session`
    /// (constant time, as [`AuthKey::verify`]).
    pub fn check_proof(
        &self,
        challenge: &[u8; CHALLENGE_LEN],
        session: u64,
        proof_hex: &str,
    ) -> bool {
        let Ok(proof) = hex::decode(proof_hex) else {
            return false;
        };
        self.mac_in(challenge, session, SERVER_CONTEXT)
            .verify_slice(&proof)
            .is_ok()
    }

    /// The client's answer to the challenge of `welcome` (64 hex digits), or
    /// `None` if the challenge is not 64 hex digits.
    pub fn respond(&self, challenge_hex: &str, session: u64) -> Option<String> {
        let challenge = decode_challenge(challenge_hex)?;
        Some(hex::encode(
            self.mac(&challenge, session).finalize().into_bytes(),
        ))
    }

    /// True if `response_hex` is this key's answer to `challenge` in `session`.
    /// The comparison takes the same time wherever the bytes differ.
    pub fn verify(
        &self,
        challenge: &[u8; CHALLENGE_LEN],
        session: u64,
        response_hex: &str,
    ) -> bool {
        let Ok(response) = hex::decode(response_hex) else {
            return false;
        };
        self.mac(challenge, session).verify_slice(&response).is_ok()
    }
}

/// The challenge's bytes from its 64 hex digits.
fn decode_challenge(hex_digits: &str) -> Option<[u8; CHALLENGE_LEN]> {
    let mut out = [0u8; CHALLENGE_LEN];
    hex::decode_to_slice(hex_digits, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key() -> AuthKey {
        AuthKey::from_bytes(b"correct horse battery staple\n").unwrap()
    }

    /// A challenge of `byte`s, and its hex.
    fn challenge(byte: u8) -> ([u8; CHALLENGE_LEN], String) {
        let c = [byte; CHALLENGE_LEN];
        (c, hex::encode(c))
    }

    #[test]
    fn known_answer() {
        // HMAC-SHA256("correct horse battery staple",
        //   0x00..0x1f || 00 00 00 00 00 00 00 07 || "linkperf-auth-v1"),
        // computed independently with Python's hmac module.
        let challenge: [u8; 32] = std::array::from_fn(|i| i as u8);
        let hex_challenge = hex::encode(challenge);
        let r = key().respond(&hex_challenge, 7).unwrap();
        assert_eq!(r.len(), 64);
        assert!(key().verify(&challenge, 7, &r));
        assert_eq!(r, KNOWN_ANSWER);
    }

    /// See `known_answer`.
    const KNOWN_ANSWER: &str = "e45e7b6d8b0cb003a3cae7bab3cfd7ad732c8a8aa21822fda179c9500486b3cc";

    #[test]
    fn a_response_is_bound_to_its_challenge_session_and_key() {
        let (c, hex_c) = challenge(0x5a);
        let r = key().respond(&hex_c, 1).unwrap();
        assert!(key().verify(&c, 1, &r));
        assert!(key().verify(&c, 1, &r.to_uppercase()), "hex of either case");
        assert!(!key().verify(&c, 2, &r), "another session");
        let (c2, _) = challenge(0x5b);
        assert!(!key().verify(&c2, 1, &r), "another challenge");
        let other = AuthKey::from_bytes(b"correct horse battery stapler").unwrap();
        assert!(!other.verify(&c, 1, &r), "another key");
        for bad in [
            "",
            "00",
            &r[..62],
            &format!("{r}00"),
            &r.replace(&r[..1], "g"),
        ] {
            assert!(!key().verify(&c, 1, bad), "{bad:?}");
        }
    }

    #[test]
    fn a_keys_bytes_are_trimmed_and_checked() {
        assert_eq!(
            AuthKey::from_bytes(b"  0123456789abcdef\r\n"),
            AuthKey::from_bytes(b"0123456789abcdef")
        );
        assert!(
            AuthKey::from_bytes(b"0123456789abcde\n").is_none(),
            "15 bytes"
        );
        assert!(AuthKey::from_bytes(b"\n\n").is_none());
        assert!(AuthKey::from_bytes(&[0xff; 16]).is_some(), "binary keys");
        assert!(AuthKey::from_bytes(&[b'k'; MAX_KEY_LEN + 1]).is_none());
        assert_eq!(
            format!("{:?}", key()),
            "AuthKey(28 bytes, redacted)",
            "no secret in Debug"
        );
    }

    #[test]
    fn a_proof_is_bound_to_its_challenge_session_and_key_and_is_never_a_response() {
        let (c, hex_c) = challenge(0xc3);
        let p = key().prove(&hex_c, 5).unwrap();
        assert!(key().check_proof(&c, 5, &p));
        assert!(!key().check_proof(&c, 6, &p), "another session");
        let other = AuthKey::from_bytes(b"correct horse battery stapler").unwrap();
        assert!(!other.check_proof(&c, 5, &p), "another key");
        let r = key().respond(&hex_c, 5).unwrap();
        assert_ne!(p, r, "the two directions differ");
        assert!(!key().check_proof(&c, 5, &r), "a response is no proof");
        assert!(!key().verify(&c, 5, &p), "a proof is no response");
        assert_eq!(key().prove("xyz", 5), None);
        assert!(!key().check_proof(&c, 5, "zz"));
        // Known answer: HMAC-SHA256("correct horse battery staple",
        //   0x00..0x1f || 00 00 00 00 00 00 00 07 || "linkperf-server-v1").
        let challenge: [u8; 32] = std::array::from_fn(|i| i as u8);
        assert_eq!(
            key().prove(&hex::encode(challenge), 7).unwrap(),
            KNOWN_PROOF
        );
    }

    /// See the test above; computed independently with Python's hmac module.
    const KNOWN_PROOF: &str = "e10cf250503df33fedbe8af97bbdf42732907bec3d7a4bed1f623d6df716ac7d";

    #[test]
    fn bad_challenges_get_no_response() {
        for bad in ["", "00", &"0".repeat(63), &"0".repeat(66), &"x".repeat(64)] {
            assert_eq!(key().respond(bad, 1), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_response_string_is_refused_or_is_the_right_one(s in ".{0,80}", session in any::<u64>(), c in any::<[u8; CHALLENGE_LEN]>()) {
            let hex_c = hex::encode(c);
            let right = key().respond(&hex_c, session).unwrap();
            prop_assert_eq!(key().verify(&c, session, &s), s.eq_ignore_ascii_case(&right));
        }

        #[test]
        fn any_key_file_bytes_give_a_key_or_none(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            match AuthKey::from_bytes(&bytes) {
                Some(k) => prop_assert!(k.0.len() >= MIN_KEY_LEN && !k.0[0].is_ascii_whitespace()),
                None => prop_assert!(bytes.trim_ascii().len() < MIN_KEY_LEN),
            }
        }
    }
}
