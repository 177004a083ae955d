//! JSON messages on the control connection: a 4-byte big-endian length, then
//! that many bytes of JSON (no terminating NUL).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::WireError;

/// Bytes of the length in front of every JSON message.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// The length prefix and `body`, ready to send.
pub fn encode_frame(body: &[u8]) -> Result<Vec<u8>, WireError> {
    let len = u32::try_from(body.len()).map_err(|_| WireError::TooLong {
        len: body.len() as u64,
        max: u32::MAX as usize,
    })?;
    let mut out = Vec::with_capacity(LENGTH_PREFIX_LEN + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// `value` as compact JSON behind its length prefix.
pub fn encode_json<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let body = serde_json::to_vec(value).map_err(|e| WireError::Json(e.to_string()))?;
    encode_frame(&body)
}

/// The length a received prefix announces, if it is at most `max`.
pub fn frame_length(prefix: [u8; LENGTH_PREFIX_LEN], max: usize) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(prefix);
    match usize::try_from(len) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(WireError::TooLong {
            len: u64::from(len),
            max,
        }),
    }
}

/// A received JSON body as `T`.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::Json(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_four_big_endian_bytes() {
        // A real 3.12 client announced its 123-byte parameters as 00 00 00 7b.
        let body = br#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
        assert_eq!(body.len(), 123);
        let f = encode_frame(body).unwrap();
        assert_eq!(&f[..4], &[0, 0, 0, 0x7b]);
        assert_eq!(&f[4..], body);
        assert_eq!(frame_length([0, 0, 0, 0x7b], 1 << 16), Ok(123));
        assert_eq!(frame_length([0, 0, 1, 0x8a], 1 << 16), Ok(394));
        assert_eq!(encode_frame(b"").unwrap(), vec![0, 0, 0, 0]);
    }

    #[test]
    fn lengths_beyond_the_limit_are_refused() {
        assert_eq!(
            frame_length([0xff, 0xff, 0xff, 0xff], 65_536),
            Err(WireError::TooLong {
                len: u64::from(u32::MAX),
                max: 65_536
            })
        );
        assert!(frame_length([0, 1, 0, 1], 65_536).is_err());
        assert_eq!(frame_length([0, 1, 0, 0], 65_536), Ok(65_536));
    }

    #[test]
    fn json_round_trips_and_garbage_is_a_value() {
        let v = serde_json::json!({"a": 1, "b": [true, null]});
        let f = encode_json(&v).unwrap();
        let n = frame_length(f[..4].try_into().unwrap(), 1024).unwrap();
        assert_eq!(n, f.len() - 4);
        let back: serde_json::Value = decode_json(&f[4..]).unwrap();
        assert_eq!(back, v);
        assert!(decode_json::<serde_json::Value>(b"{\"a\":").is_err());
        assert!(decode_json::<serde_json::Value>(b"").is_err());
        assert!(decode_json::<serde_json::Value>(&[0xff, 0xfe]).is_err());
    }
}
