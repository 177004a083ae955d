//! The control connection: bytes from a peer through the frame decoder (fed in
//! pieces, as a socket delivers them), every whole frame through both message
//! decoders. Whatever arrives must give frames, a wait for more, or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_protocol::{decode_client, decode_server, encode_client, encode_server, FrameDecoder};

fuzz_target!(|data: &[u8]| {
    // The raw bytes as one payload, as a decoder would see a frame's content.
    check_payload(data);

    // The bytes as a stream: the first byte picks a small frame limit (so the
    // too-large path is reached too) and the size of the pieces.
    let Some((&knob, stream)) = data.split_first() else {
        return;
    };
    let max = if knob & 0x80 == 0 {
        1 << 20
    } else {
        usize::from(knob & 0x7f) * 8
    };
    let piece = usize::from(knob & 0x0f) + 1;
    let mut decoder = FrameDecoder::new(max);
    for chunk in stream.chunks(piece) {
        decoder.feed(chunk);
        loop {
            match decoder.next_frame() {
                Ok(Some(payload)) => {
                    assert!(!payload.is_empty() && payload.len() <= max);
                    check_payload(&payload);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});

/// Decodes `payload` both ways; whatever decodes must re-encode to something
/// that decodes to the same message.
fn check_payload(payload: &[u8]) {
    if let Ok(m) = decode_client(payload) {
        let frame = encode_client(&m);
        assert_eq!(decode_client(&frame[4..]).as_ref(), Ok(&m));
    }
    if let Ok(m) = decode_server(payload) {
        let frame = encode_server(&m);
        // Floats that are not finite become null and are refused; everything
        // else comes back equal.
        if let Ok(back) = decode_server(&frame[4..]) {
            assert_eq!(back, m);
        }
    }
}
