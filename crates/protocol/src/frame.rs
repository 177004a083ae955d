//! Control-connection framing: a 4-byte big-endian payload length, then the
//! payload (one UTF-8 JSON message).

use crate::WireError;

/// Default largest control frame payload accepted (1 MiB).
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

/// Bytes of the length prefix in front of every frame.
const PREFIX_LEN: usize = 4;

/// Appends one frame (length prefix, then `payload`) to `out`.
///
/// # Panics
///
/// If `payload` is longer than `u32::MAX` bytes, which no control message is.
/// This checks what this side is about to send, never what it received.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("control frame payload longer than u32::MAX");
    out.reserve(PREFIX_LEN + payload.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Splits a received byte stream into frame payloads.
///
/// Feed it bytes as they arrive with [`feed`](Self::feed), then call
/// [`next_frame`](Self::next_frame) until it returns `Ok(None)`. An error leaves
/// the decoder where it was, so later calls report the same error: the stream
/// cannot be trusted past it and the connection should be closed.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    /// Largest payload accepted.
    max: usize,
    /// Received bytes not yet returned as frames.
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// A decoder refusing payloads longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        FrameDecoder {
            max: max_frame,
            buf: Vec::new(),
        }
    }

    /// Changes the largest payload accepted from the next frame on (a server
    /// keeps it small until its peer has authenticated).
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max = max_frame;
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete payload, `Ok(None)` if more bytes are needed.
    ///
    /// A length prefix over the limit is refused as soon as its four bytes are
    /// in, before any of its payload is buffered; a zero length is refused too.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, WireError> {
        let Some(prefix) = self.buf.first_chunk::<PREFIX_LEN>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix);
        if len == 0 {
            return Err(WireError::EmptyFrame);
        }
        // A u32 always fits in a u64; on targets where it does not fit in a
        // usize it is certainly over any limit the caller could have set.
        let too_large = WireError::FrameTooLarge {
            len: u64::from(len),
            max: self.max,
        };
        let len = usize::try_from(len).map_err(|_| too_large.clone())?;
        if len > self.max {
            return Err(too_large);
        }
        let end = PREFIX_LEN + len;
        if self.buf.len() < end {
            return Ok(None);
        }
        let payload = self.buf[PREFIX_LEN..end].to_vec();
        self.buf.drain(..end);
        Ok(Some(payload))
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

impl Default for FrameDecoder {
    /// A decoder with the [`DEFAULT_MAX_FRAME`] limit.
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode_frame(p, &mut out);
        }
        out
    }

    #[test]
    fn encodes_big_endian_length_then_payload() {
        let mut out = vec![0xAA];
        encode_frame(b"{}", &mut out);
        assert_eq!(out, [0xAA, 0, 0, 0, 2, b'{', b'}']);
    }

    #[test]
    fn byte_at_a_time() {
        let bytes = framed(&[b"hello", b"world!"]);
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        let mut got = Vec::new();
        for b in &bytes {
            d.feed(std::slice::from_ref(b));
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), b"world!".to_vec()]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn two_frames_in_one_feed() {
        let mut d = FrameDecoder::new(16);
        let mut bytes = framed(&[b"one", b"two"]);
        bytes.extend_from_slice(&[0, 0]); // start of a third prefix
        d.feed(&bytes);
        assert_eq!(d.next_frame().unwrap(), Some(b"one".to_vec()));
        assert_eq!(d.next_frame().unwrap(), Some(b"two".to_vec()));
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.buffered(), 2);
    }

    #[test]
    fn partial_frame_waits_for_more() {
        let bytes = framed(&[b"abcdef"]);
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        d.feed(&bytes[..2]);
        assert_eq!(d.next_frame().unwrap(), None);
        d.feed(&bytes[2..7]);
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.buffered(), 7);
        d.feed(&bytes[7..]);
        assert_eq!(d.next_frame().unwrap(), Some(b"abcdef".to_vec()));
    }

    #[test]
    fn huge_length_prefix_refused_before_payload() {
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        d.feed(&[0xFF, 0xFF, 0xFF, 0xFF]);
        let want = WireError::FrameTooLarge {
            len: 0xFFFF_FFFF,
            max: DEFAULT_MAX_FRAME,
        };
        assert_eq!(d.next_frame(), Err(want.clone()));
        // The error stays: the stream cannot be read past it.
        d.feed(b"more");
        assert_eq!(d.next_frame(), Err(want));
    }

    #[test]
    fn limit_is_inclusive() {
        let mut d = FrameDecoder::new(3);
        d.feed(&framed(&[b"abc"]));
        assert_eq!(d.next_frame().unwrap(), Some(b"abc".to_vec()));
        d.feed(&framed(&[b"abcd"])[..4]);
        assert_eq!(
            d.next_frame(),
            Err(WireError::FrameTooLarge { len: 4, max: 3 })
        );
    }

    #[test]
    fn empty_frame_refused() {
        let mut d = FrameDecoder::default();
        d.feed(&[0, 0, 0, 0]);
        assert_eq!(d.next_frame(), Err(WireError::EmptyFrame));
    }

    #[test]
    fn nothing_fed_needs_more() {
        let mut d = FrameDecoder::default();
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(d.buffered(), 0);
    }

    proptest! {
        #[test]
        fn frames_survive_any_split(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..64), 0..8),
            cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
        ) {
            let mut bytes = Vec::new();
            for p in &payloads {
                encode_frame(p, &mut bytes);
            }
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            cuts.push(0);
            cuts.push(bytes.len());
            cuts.sort_unstable();
            let mut d = FrameDecoder::new(64);
            let mut got = Vec::new();
            for w in cuts.windows(2) {
                d.feed(&bytes[w[0]..w[1]]);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            prop_assert_eq!(got, payloads);
            prop_assert_eq!(d.buffered(), 0);
        }
    }
}
