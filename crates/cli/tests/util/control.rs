//! The control protocol spoken by hand (with linkperf-protocol's encoder and
//! decoder), where a test must see exactly what a server or an agent
//! answers, and when.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use linkperf_protocol::{
    decode_server, encode_client, ClientMessage, FrameDecoder, ServerMessage, PROTOCOL_VERSION,
};

/// A control connection driven by hand.
pub struct Control {
    /// The connection, for what the protocol does not say (a frame's
    /// length alone, a byte at a time).
    pub stream: TcpStream,
    decoder: FrameDecoder,
}

impl Control {
    /// Connects to the control port at `addr`.
    pub fn connect(addr: impl ToSocketAddrs) -> Control {
        let stream = TcpStream::connect(addr).expect("connect to the control port");
        Control {
            stream,
            decoder: FrameDecoder::default(),
        }
    }

    /// Sends `m`.
    pub fn send(&mut self, m: &ClientMessage) {
        self.stream.write_all(&encode_client(m)).expect("send");
    }

    /// The next message, or `None` if the server closed the connection first;
    /// the test fails when none came within `within`.
    pub fn recv(&mut self, within: Duration) -> Option<ServerMessage> {
        self.recv_within(within)
            .unwrap_or_else(|| panic!("no answer from the server within {within:?}"))
    }

    /// The next message if one comes within `within` (`Some(None)` if the
    /// server closed the connection first); `None` if nothing came.
    pub fn recv_within(&mut self, within: Duration) -> Option<Option<ServerMessage>> {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(f) = self.decoder.next_frame().expect("a good frame") {
                return Some(Some(decode_server(&f).expect("a server message")));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return Some(None),
                Ok(n) => self.decoder.feed(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(None),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading the control connection: {e}"),
            }
        }
    }

    /// `hello` with `challenge` (the client's, for a server to prove its
    /// key); the welcome.
    pub fn hello_with(&mut self, challenge: Option<String>) -> ServerMessage {
        self.send(&ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            client_version: "tests".into(),
            challenge,
        });
        match self.recv(Duration::from_secs(10)) {
            Some(w @ ServerMessage::Welcome { .. }) => w,
            other => panic!("expected welcome, got {other:?}"),
        }
    }

    /// `hello`: the session's id and the server's challenge, if it has a key.
    pub fn hello(&mut self) -> (u64, Option<String>) {
        match self.hello_with(None) {
            ServerMessage::Welcome {
                session, challenge, ..
            } => (session, challenge),
            _ => unreachable!("hello_with returns a welcome"),
        }
    }
}

/// The server's error: (code, message); panics on anything else.
pub fn expect_error(m: Option<ServerMessage>) -> (String, String) {
    match m {
        Some(ServerMessage::Error { code, message, .. }) => (code.to_string(), message),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A key file `name` in `dir` holding `key`.
pub fn key_file(dir: &Path, name: &str, key: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, key).expect("write the key");
    p
}
