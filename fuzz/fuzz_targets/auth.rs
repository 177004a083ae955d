//! Authentication input from outside: key files (any bytes) and the peer's
//! half of the mutual challenge–response (the challenge a server sends, the
//! response a client sends, the challenge a client sends in hello, the proof a
//! server sends in welcome). A key, a response, a proof or a refusal; never a
//! panic, and only the right response or proof passes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_session::AuthKey;

fuzz_target!(|data: &[u8]| {
    // Key file content: a key, or None.
    let _ = AuthKey::from_bytes(data);

    let key = AuthKey::from_bytes(b"fuzzing key, sixteen bytes or more").expect("a good key");
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A challenge from a server: a response only for 64 hex digits.
    if let Some(r) = key.respond(text, 7) {
        assert_eq!(text.len(), 64);
        assert_eq!(r.len(), 64);
    }
    // A response from a client, against a fixed challenge.
    let challenge = [0x5au8; 32];
    let right = key
        .respond(&"5a".repeat(32), 7)
        .expect("64 hex digits get a response");
    assert_eq!(
        key.verify(&challenge, 7, text),
        text.eq_ignore_ascii_case(&right)
    );
    // A client's challenge in hello: a proof only for 64 hex digits.
    if let Some(p) = key.prove(text, 7) {
        assert_eq!(text.len(), 64);
        assert_eq!(p.len(), 64);
    }
    // A server's proof, against this client's fixed challenge: never a
    // response, only the right proof.
    let proof = key
        .prove(&"5a".repeat(32), 7)
        .expect("64 hex digits get a proof");
    assert_eq!(
        key.check_proof(&challenge, 7, text),
        text.eq_ignore_ascii_case(&proof)
    );
    assert!(!key.check_proof(&challenge, 7, &right), "a response is no proof");
});
