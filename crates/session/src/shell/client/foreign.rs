//! Reading what answers first at a server's address: the first bytes the
//! peer sends after the client's hello, read until proto/client/foreign.rs
//! can tell what the peer is.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::proto::client::foreign::{may_be_linkperf, recognise, undecided, Answer};

/// Waits at most `timeout` for the first byte of the answer to the hello,
/// without consuming it. If it cannot start a linkperf frame, reads on (the
/// connection is given up then) until [`recognise`] tells what the peer is,
/// the peer stops sending or the time is up.
pub(crate) fn first_answer(stream: &TcpStream, timeout: Duration) -> Answer {
    let deadline = Instant::now() + timeout;
    let mut first = [0u8; 1];
    let _ = stream.set_read_timeout(Some(timeout));
    let peeked = loop {
        match stream.peek(&mut first) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other,
        }
    };
    match peeked {
        Ok(1) if !may_be_linkperf(first[0]) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Answer::Silent
        }
        // A linkperf frame, or the peer closed or failed: the channel says which.
        _ => return Answer::MayBeLinkperf,
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 256];
    let mut reader = stream;
    loop {
        if let Some(f) = recognise(&answer) {
            return Answer::Foreign(f);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Answer::Foreign(undecided(&answer))
}
