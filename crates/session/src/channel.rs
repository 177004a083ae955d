//! A control connection: framed messages over a blocking TCP stream.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use linkperf_wire::{FrameDecoder, WireError};

/// What came off the control connection.
#[derive(Debug)]
pub enum Received {
    /// One frame's payload.
    Frame(Vec<u8>),
    /// Nothing within the timeout.
    Timeout,
    /// The peer closed the connection.
    Closed,
}

/// Framed blocking I/O on a control connection.
pub struct Channel {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl Channel {
    /// Wraps a connected stream; frames over `max_frame` bytes are refused.
    pub fn new(stream: TcpStream, max_frame: usize) -> Self {
        let _ = stream.set_nodelay(true);
        Channel {
            stream,
            decoder: FrameDecoder::new(max_frame),
            buf: vec![0; 16 * 1024],
        }
    }

    /// The underlying stream.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one encoded frame.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.stream
            .set_write_timeout(Some(Duration::from_secs(10)))?;
        self.stream.write_all(frame)
    }

    /// Receives one frame, waiting at most `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Result<Received, RecvError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(f) = self.decoder.next_frame().map_err(RecvError::Wire)? {
                return Ok(Received::Frame(f));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Received::Timeout);
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .map_err(RecvError::Io)?;
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Ok(Received::Closed),
                Ok(n) => self.decoder.feed(&self.buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Received::Timeout)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Ok(Received::Closed)
                }
                Err(e) => return Err(RecvError::Io(e)),
            }
        }
    }
}

/// Why receiving failed.
#[derive(Debug)]
pub enum RecvError {
    /// The bytes were not a valid frame.
    Wire(WireError),
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::Wire(e) => write!(f, "{e}"),
            RecvError::Io(e) => write!(f, "{e}"),
        }
    }
}
