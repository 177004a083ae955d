//! Authentication of a control session with a pre-shared key: an HMAC-SHA256
//! challenge–response.
//!
//! When the daemon has a key, its `welcome` carries a fresh random 32-byte
//! challenge (64 hex digits) and the session number. The client answers
//! `auth{response}` with
//!
//! ```text
//! response = hex(HMAC-SHA256(key, challenge || session (u64, big-endian) || "linkperf-auth-v1"))
//! ```
//!
//! and the daemon checks it in constant time (`hmac`'s `verify_slice`). A
//! response is good for one challenge and one session only: the challenge is new
//! for every control connection, so a recorded response answers nothing later.
//! The key never crosses the wire.
//!
//! Authentication is mutual: a client holding a key sends a fresh challenge of
//! its own in `hello`, and a daemon holding a key answers it in `welcome`
//!
//! ```text
//! proof = hex(HMAC-SHA256(key, client challenge || session (u64, big-endian) || "linkperf-server-v1"))
//! ```
//!
//! The client checks the proof before it sends anything more (its own answer,
//! a test): a server without the key, or with another, learns nothing and is
//! sent nothing. The two directions use different context strings, so a proof
//! is never a client's response nor the other way round, whatever a peer
//! chooses as its challenge or session number.

pub use crate::proto::auth::{AuthKey, CHALLENGE_LEN, MAX_KEY_LEN, MIN_KEY_LEN};
pub use crate::shell::key::KeyError;
