//! The cookie: 36 characters and a NUL that name a test. The client sends it
//! first on the control connection and again first on every TCP data stream,
//! which is how the server tells its streams from new clients.

use crate::WireError;

/// Bytes of a cookie on the wire, the terminating NUL included.
pub const COOKIE_LEN: usize = 37;

/// The characters iperf3 makes cookies of (`make_cookie`: a base32 alphabet).
pub const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A test's cookie.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie([u8; COOKIE_LEN]);

impl Cookie {
    /// A new cookie from 36 random bytes (each picks a character).
    pub fn from_entropy(random: &[u8; COOKIE_LEN - 1]) -> Cookie {
        let mut c = [0u8; COOKIE_LEN];
        for (dst, r) in c.iter_mut().zip(random) {
            *dst = COOKIE_ALPHABET[usize::from(*r) % COOKIE_ALPHABET.len()];
        }
        Cookie(c)
    }

    /// Checks 37 received bytes: 36 printable ASCII characters, then NUL. Every
    /// iperf3 client sends that; anything else is not an iperf3 client.
    pub fn parse(bytes: &[u8]) -> Result<Cookie, WireError> {
        let arr: [u8; COOKIE_LEN] = bytes
            .try_into()
            .map_err(|_| WireError::BadCookie("a cookie is 37 bytes"))?;
        if arr[COOKIE_LEN - 1] != 0 {
            return Err(WireError::BadCookie("a cookie ends with a NUL byte"));
        }
        if !arr[..COOKIE_LEN - 1].iter().all(|b| b.is_ascii_graphic()) {
            return Err(WireError::BadCookie(
                "a cookie is 36 printable characters before its NUL",
            ));
        }
        Ok(Cookie(arr))
    }

    /// The 37 bytes to send.
    pub fn as_bytes(&self) -> &[u8; COOKIE_LEN] {
        &self.0
    }

    /// The 36 characters, without the NUL.
    pub fn as_str(&self) -> &str {
        // Only printable ASCII gets in (parse, from_entropy).
        std::str::from_utf8(&self.0[..COOKIE_LEN - 1]).unwrap_or("")
    }
}

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cookie({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cookie a real iperf3 3.12 client sent (strace of `iperf3 -c`), as
    /// bytes on the wire.
    const CAPTURED: &[u8; 37] = b"3gwcxwpbmvn2ye3dc4bkfzqen75wwcb2hh3y\0";

    #[test]
    fn a_captured_cookie_parses_and_encodes_byte_for_byte() {
        let c = Cookie::parse(CAPTURED).unwrap();
        assert_eq!(c.as_bytes(), CAPTURED);
        assert_eq!(c.as_str(), "3gwcxwpbmvn2ye3dc4bkfzqen75wwcb2hh3y");
        assert!(c.as_str().bytes().all(|b| COOKIE_ALPHABET.contains(&b)));
    }

    #[test]
    fn generated_cookies_look_like_iperf3s() {
        let mut random = [0u8; 36];
        for (i, r) in random.iter_mut().enumerate() {
            *r = (i * 37 + 11) as u8;
        }
        let c = Cookie::from_entropy(&random);
        assert_eq!(c.as_bytes()[36], 0);
        assert!(c.as_str().bytes().all(|b| COOKIE_ALPHABET.contains(&b)));
        assert_eq!(Cookie::parse(c.as_bytes()).unwrap(), c);
        assert_eq!(Cookie::from_entropy(&[0; 36]).as_str(), "a".repeat(36));
        assert_eq!(Cookie::from_entropy(&[31; 36]).as_str(), "7".repeat(36));
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(Cookie::parse(&CAPTURED[..36]).is_err(), "short");
        let mut no_nul = *CAPTURED;
        no_nul[36] = b'a';
        assert!(Cookie::parse(&no_nul).is_err());
        let mut binary = *CAPTURED;
        binary[3] = 0x01;
        assert!(Cookie::parse(&binary).is_err());
        let http = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nAAAAAAAAA\0";
        assert!(Cookie::parse(http).is_err());
    }
}
