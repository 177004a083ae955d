//! A control connection: framed messages over a blocking TCP stream.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use linkperf_protocol::FrameDecoder;

use crate::proto::heard::{Heard, Received, RecvError};

/// With no packet from the peer for this long, the kernel asks whether it is
/// still there (a TCP keepalive probe), then again every
/// [`KEEPALIVE_INTERVAL`]. A control connection is silent for the whole of a
/// test, so only the answers to these show that the other host is still
/// there: see [`Channel::since_last_ack`].
const KEEPALIVE_IDLE: Duration = Duration::from_secs(1);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Unanswered probes before the kernel itself gives the connection up: a
/// backstop (about half a minute). Whether a silent peer is gone is decided
/// sooner by whoever watches, with more than this connection to go by.
const KEEPALIVE_PROBES: u32 = 30;

/// Framed blocking I/O on a control connection.
pub struct Channel {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
    silent: bool,
}

impl Channel {
    /// Wraps a connected stream; frames over `max_frame` bytes are refused.
    pub fn new(stream: TcpStream, max_frame: usize) -> Self {
        Channel::resume(stream, FrameDecoder::new(max_frame))
    }

    /// Wraps a connected stream whose first bytes were read elsewhere (the
    /// daemon's lobby, through the handshake): `decoder` holds what came
    /// past them, and its largest frame holds.
    pub fn resume(stream: TcpStream, decoder: FrameDecoder) -> Self {
        let _ = stream.set_nodelay(true);
        let s = socket2::SockRef::from(&stream);
        let probes = socket2::TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_PROBES);
        let _ = s.set_tcp_keepalive(&probes);
        Channel {
            stream,
            decoder,
            buf: vec![0; 16 * 1024],
            silent: false,
        }
    }

    /// How the peer went, for a message: `closed the control connection` or
    /// that its host stopped answering.
    pub fn how_it_went(&self) -> &'static str {
        if self.silent {
            "stopped answering (nothing came from its host: the host or the path to it went away)"
        } else {
            "closed the control connection"
        }
    }

    /// How long ago the peer's host last acknowledged anything on this
    /// connection (data, or a keepalive probe: one a second while it is
    /// there); `None` where TCP_INFO cannot tell.
    pub fn since_last_ack(&self) -> Option<Duration> {
        use std::os::fd::AsRawFd;
        linkperf_metrics::since_last_ack(self.stream.as_raw_fd())
    }

    /// Refuses frames over `max_frame` bytes from now on.
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.decoder.set_max_frame(max_frame);
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

    /// One receive, waiting at most `timeout`, as the machines hear it:
    /// what came, and how a close came about.
    pub fn hear(&mut self, timeout: Duration) -> Heard {
        let got = self.recv(timeout);
        Heard {
            got,
            how: self.how_it_went(),
        }
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
                // The read's own timeout (SO_RCVTIMEO) is EAGAIN.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Received::Timeout),
                // ETIMEDOUT: the kernel gave the connection up, its peer silent.
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    self.silent = true;
                    return Ok(Received::Closed);
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
