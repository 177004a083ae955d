//! The control connection, either end: bytes over a blocking TCP stream,
//! each write bounded in time, each read taking at most what the control's
//! state machine awaits, either by a deadline or only what has arrived.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub(crate) use crate::proto::ControlError;
use crate::sys;

/// One end of a control connection.
pub(crate) struct ControlConn {
    stream: TcpStream,
}

impl ControlConn {
    pub(crate) fn new(stream: TcpStream) -> io::Result<ControlConn> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(ControlConn { stream })
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<(), ControlError> {
        self.stream.write_all(bytes).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => ControlError::Closed,
            _ => ControlError::Io(e),
        })
    }

    /// Waits at most `timeout` for bytes (or the peer's end) to arrive,
    /// taking none of them.
    pub(crate) fn wait_readable(&mut self, timeout: Duration) -> io::Result<()> {
        if timeout.is_zero() {
            return Ok(());
        }
        self.stream.set_read_timeout(Some(timeout))?;
        // Its end: bytes, the peer's end, the timeout (EAGAIN), a signal,
        // or a failure, which the next read takes up.
        let _ = self.stream.peek(&mut [0u8; 1]);
        Ok(())
    }

    /// At most `max` bytes of what has arrived, without waiting: `None`
    /// when nothing has.
    pub(crate) fn recv_now(&mut self, max: usize) -> Result<Option<Vec<u8>>, ControlError> {
        let mut buf = vec![0u8; max];
        loop {
            return match sys::recv_now(self.stream.as_raw_fd(), &mut buf) {
                Ok(0) if max > 0 => Err(ControlError::Closed),
                Ok(n) => {
                    buf.truncate(n);
                    Ok(Some(buf))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Err(ControlError::Closed),
                Err(e) => Err(ControlError::Io(e)),
            };
        }
    }

    /// At least one byte and at most `max`, waiting at most until
    /// `deadline`.
    pub(crate) fn recv_by(
        &mut self,
        max: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, ControlError> {
        let start = Instant::now();
        let mut buf = vec![0u8; max];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::TimedOut(
                    deadline.saturating_duration_since(start),
                ));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(ControlError::Closed),
                Ok(n) => {
                    buf.truncate(n);
                    return Ok(buf);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(ControlError::Closed)
                }
                Err(e) => return Err(ControlError::Io(e)),
            }
        }
    }
}
