//! The connecting side of a data connection: its connect completes, then
//! its greeting (linkperf's preamble with the session's token, iperf3's
//! cookie) goes out whole, before anything else is written on it. The
//! accepting side reads the greeting behind the gate (gate.rs). The
//! client's test flows and a profile's connects dial alike.

use std::io::{self, Write};

use crate::io::gate::MAX_GREETING;
use crate::io::socket::Conn;

/// A connection on its way out: connecting, then greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dial {
    greeting: [u8; MAX_GREETING],
    len: usize,
    sent: usize,
    connected: bool,
}

/// Why a connection did not open.
#[derive(Debug)]
pub enum DialError {
    /// The connect failed.
    Connect(io::Error),
    /// The greeting could not be written (the peer closed, the connection
    /// failed).
    Greet(io::Error),
}

impl DialError {
    /// The error underneath.
    pub fn into_inner(self) -> io::Error {
        match self {
            DialError::Connect(e) | DialError::Greet(e) => e,
        }
    }
}

impl Dial {
    /// A connect that will greet with `greeting` (at most [`MAX_GREETING`]
    /// bytes; the longer part is never sent).
    pub fn new(greeting: &[u8]) -> Self {
        debug_assert!(greeting.len() <= MAX_GREETING, "a greeting too long");
        let len = greeting.len().min(MAX_GREETING);
        let mut g = [0; MAX_GREETING];
        g[..len].copy_from_slice(&greeting[..len]);
        Dial {
            greeting: g,
            len,
            sent: 0,
            connected: false,
        }
    }

    /// Whether the connect has completed (the greeting may still be on its
    /// way).
    pub fn connected(&self) -> bool {
        self.connected
    }

    /// Moves the connection on as far as its socket lets it: `Ok(true)`
    /// once it is connected and its greeting all written, `Ok(false)` while
    /// it waits for the socket.
    pub fn advance(&mut self, conn: &mut Conn) -> Result<bool, DialError> {
        if !self.connected {
            if let Some(e) = conn.take_error().map_err(DialError::Connect)? {
                return Err(DialError::Connect(e));
            }
            if !conn.is_connected().map_err(DialError::Connect)? {
                return Ok(false);
            }
            self.connected = true;
        }
        while self.sent < self.len {
            match conn.write(&self.greeting[self.sent..self.len]) {
                Ok(0) => {
                    return Err(DialError::Greet(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "connection closed during preamble",
                    )))
                }
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(DialError::Greet(e)),
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_dial_connects_then_writes_its_greeting_whole() {
        let (a, mut b) = mio::net::UnixStream::pair().unwrap();
        let mut conn = Conn::Unix(a);
        let mut dial = Dial::new(b"hello, server");
        assert!(dial.advance(&mut conn).unwrap());
        assert!(dial.connected());
        let mut got = [0u8; 13];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello, server");
        // Done: moving it on again writes nothing more.
        assert!(dial.advance(&mut conn).unwrap());
    }

    #[test]
    fn a_greeting_to_a_closed_peer_fails_as_a_greeting() {
        let (a, b) = mio::net::UnixStream::pair().unwrap();
        drop(b);
        let mut conn = Conn::Unix(a);
        let mut dial = Dial::new(b"x");
        assert!(matches!(dial.advance(&mut conn), Err(DialError::Greet(_))));
    }
}
