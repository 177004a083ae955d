//! Connecting a test's UDP streams. All of them arrive on the server's one UDP
//! port: each client stream's first datagram (4 bytes) comes to the shared,
//! unconnected socket; the server answers from a new socket bound to the same
//! port and connected to that client address, which then receives the
//! stream's data (the kernel prefers a connected socket). Datagrams carry no
//! cookie, so one test at a time connects its UDP streams, and only
//! datagrams from the control connection's host are taken. The test's
//! thread reads the shared socket as the blocking shells of a session read
//! their connection: each read waits at most until the streams' deadline,
//! and at most [`SHUTDOWN_CHECK`] before it looks at a shutdown.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use linkperf_engine::io::{udp_connect, Conn, Settings};

use crate::codec::udp_connect_reply;
use crate::server::registry::Shared;
use crate::sys::{canonical, canonical_ip};

/// Longest wait for a datagram before the thread looks at a shutdown.
const SHUTDOWN_CHECK: Duration = Duration::from_millis(200);

/// Socket buffers of a UDP stream when the client gives no `-w`: a burst of
/// datagrams at a high rate needs room.
const UDP_DEFAULT_BUFFER: usize = 2 * 1024 * 1024;

/// A UDP socket bound to `local` (shared with the listener) and connected to `peer`.
fn connected_socket(
    local: SocketAddr,
    peer: SocketAddr,
    window: Option<usize>,
    blksize: usize,
) -> io::Result<Conn> {
    // The kernel caps these at its maxima; not getting all is not an error.
    let buf = window.unwrap_or(UDP_DEFAULT_BUFFER).max(blksize + 1024);
    let settings = Settings {
        sndbuf: Some(buf),
        rcvbuf: Some(buf),
        ..Settings::default()
    };
    let peer = match (local, peer) {
        // A dual-stack listener sees IPv4 clients as mapped addresses.
        (SocketAddr::V6(_), SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => peer,
    };
    udp_connect(peer, Some(local), &settings)
}

/// Takes `n` UDP streams from `client` (the control connection's host) and
/// answers each; `announce` is called (with the setup lock held) to tell the
/// client to start. Gives up at `deadline`.
pub(crate) fn accept_streams(
    shared: &Shared,
    client: IpAddr,
    n: usize,
    window: Option<usize>,
    blksize: usize,
    deadline: Instant,
    announce: impl FnOnce() -> Result<(), String>,
) -> Result<Vec<Conn>, String> {
    let _setup = shared.udp_setup();
    let listener = &shared.udp;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let client = canonical_ip(client);
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // Anything queued before now belongs to no test that is connecting.
    let mut junk = [0u8; 64];
    while listener.recv_from(&mut junk).is_ok() {}
    listener.set_nonblocking(false).map_err(|e| e.to_string())?;
    announce()?;
    take(shared, listener, client, n, deadline, |from| {
        connected_socket(local, from, window, blksize)
    })
}

/// Takes `n` connect messages from `client` on the blocking `listener`,
/// answering each from a socket `open` makes.
fn take(
    shared: &Shared,
    listener: &UdpSocket,
    client: IpAddr,
    n: usize,
    deadline: Instant,
    open: impl Fn(SocketAddr) -> io::Result<Conn>,
) -> Result<Vec<Conn>, String> {
    let mut out = Vec::with_capacity(n);
    let mut buf = [0u8; 64];
    while out.len() < n {
        if shared
            .terminating
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err("the server is shutting down".into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{} of {n} UDP streams connected in time",
                out.len()
            ));
        }
        listener
            .set_read_timeout(Some(left.min(SHUTDOWN_CHECK)))
            .map_err(|e| format!("UDP listener: {e}"))?;
        let (len, from) = match listener.recv_from(&mut buf) {
            Ok(x) => x,
            // The read's timeout (EAGAIN): its deadline or a look at a
            // shutdown.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                continue
            }
            Err(e) => return Err(format!("UDP listener: {e}")),
        };
        let from = canonical(from);
        if from.ip() != client {
            continue; // another host's datagram: not this test's
        }
        let Some(reply) = udp_connect_reply(&buf[..len]) else {
            continue; // a stray data datagram, not a connect message
        };
        let mut sock = open(from).map_err(|e| format!("UDP stream socket: {e}"))?;
        sock.write(&reply)
            .map_err(|e| format!("UDP connect reply: {e}"))?;
        out.push(sock);
    }
    Ok(out)
}
