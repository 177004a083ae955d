//! Data sockets: creating, binding and connecting them with the test's socket
//! options, for TCP, UDP and Unix stream sockets.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr as UnixAddr;
use std::time::Duration;

use linkperf_workload::SocketOptions;
use socket2::{Domain, Protocol as SockProtocol, SockRef, Socket, Type};

/// Listen backlog for data listeners: enough for thousands of users connecting at once.
const LISTEN_BACKLOG: i32 = 8192;

/// Socket options resolved for one side of one test.
#[derive(Debug, Clone)]
pub struct DataOptions {
    /// TCP_NODELAY on TCP connections.
    pub nodelay: bool,
    /// The rest, as the user asked.
    pub socket: SocketOptions,
}

/// Where a test's data connections go: one endpoint per server worker, so that
/// flow `i` lands on server worker `i % n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEndpoints {
    /// TCP ports on the server's address.
    Tcp(Vec<SocketAddr>),
    /// UDP ports on the server's address.
    Udp(Vec<SocketAddr>),
    /// Abstract Unix socket names.
    Unix(Vec<String>),
}

impl DataEndpoints {
    /// Number of endpoints.
    pub fn len(&self) -> usize {
        match self {
            DataEndpoints::Tcp(v) | DataEndpoints::Udp(v) => v.len(),
            DataEndpoints::Unix(v) => v.len(),
        }
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connected stream socket, TCP or Unix.
#[derive(Debug)]
pub enum Conn {
    /// TCP.
    Tcp(mio::net::TcpStream),
    /// Unix stream.
    Unix(mio::net::UnixStream),
}

impl Conn {
    /// Makes the socket block in reads and writes: a worker carrying this one
    /// connection waits in its read instead of in the event wait. Park a
    /// [`Conn::duplicate`] in the side's signals so that a stop can end the
    /// wait. A read waits for the peer without a timeout (a read that finds
    /// data returns with what is there). A write waits at most `write_wait`
    /// for room in the send buffer, then returns what went (or `WouldBlock`
    /// when nothing did): on a slow link a large message then takes many
    /// writes, and the worker is back at its loop (its per-second intervals,
    /// its window edges) between them. Waiting for room is the only wait the
    /// timeout arms a timer for; a write that finds room costs nothing more.
    pub fn block(&self, write_wait: Duration) -> io::Result<()> {
        let r = match self {
            Conn::Tcp(s) => SockRef::from(s),
            Conn::Unix(s) => SockRef::from(s),
        };
        r.set_read_timeout(None)?;
        r.set_write_timeout(Some(write_wait))?;
        r.set_nonblocking(false)
    }

    /// A second descriptor for the same socket (shutting it down ends the
    /// blocking calls on this one).
    pub fn duplicate(&self) -> io::Result<OwnedFd> {
        let fd = match self {
            Conn::Tcp(s) => s.as_fd(),
            Conn::Unix(s) => s.as_fd(),
        };
        fd.try_clone_to_owned()
    }

    /// Half-closes the write side.
    pub fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.shutdown(Shutdown::Write),
            Conn::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }

    /// The pending socket error, if the connect failed.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Conn::Tcp(s) => s.take_error(),
            Conn::Unix(s) => s.take_error(),
        }
    }

    /// Ok once a non-blocking connect has completed.
    pub fn is_connected(&self) -> io::Result<bool> {
        let r = match self {
            Conn::Tcp(s) => s.peer_addr().map(|_| ()),
            Conn::Unix(s) => s.peer_addr().map(|_| ()),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The mio source, for registration.
    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Conn::Tcp(s) => s,
            Conn::Unix(s) => s,
        }
    }

    /// True for TCP.
    pub fn is_tcp(&self) -> bool {
        matches!(self, Conn::Tcp(_))
    }

    /// The local IP address, for TCP.
    pub fn local_ip(&self) -> Option<IpAddr> {
        match self {
            Conn::Tcp(s) => s.local_addr().ok().map(|a| a.ip()),
            Conn::Unix(_) => None,
        }
    }
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A listener for stream connections, TCP or Unix.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(mio::net::TcpListener),
    /// Unix stream.
    Unix(mio::net::UnixListener),
}

impl Listener {
    /// Accepts one connection.
    pub fn accept(&self) -> io::Result<Conn> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
            Listener::Unix(l) => l.accept().map(|(s, _)| Conn::Unix(s)),
        }
    }

    /// The mio source, for registration.
    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) => l,
            Listener::Unix(l) => l,
        }
    }
}

fn apply_buffers(sock: &SockRef<'_>, opts: &SocketOptions) -> io::Result<()> {
    if let Some(n) = opts.sndbuf {
        sock.set_send_buffer_size(n as usize)?;
    }
    if let Some(n) = opts.rcvbuf {
        sock.set_recv_buffer_size(n as usize)?;
    }
    Ok(())
}

fn apply_tcp(sock: &SockRef<'_>, opts: &DataOptions) -> io::Result<()> {
    apply_buffers(sock, &opts.socket)?;
    if let Some(cc) = &opts.socket.cc {
        sock.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("congestion control '{cc}' is not available: {e}"),
            )
        })?;
    }
    if let Some(mss) = opts.socket.mss {
        sock.set_mss(mss)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot set MSS {mss}: {e}")))?;
    }
    Ok(())
}

/// Applies per-connection options to an accepted TCP connection.
pub fn apply_accepted(conn: &Conn, opts: &DataOptions) -> io::Result<()> {
    if let Conn::Tcp(s) = conn {
        s.set_nodelay(opts.nodelay)?;
        let r = SockRef::from(s);
        apply_buffers(&r, &opts.socket)?;
        if let Some(cc) = &opts.socket.cc {
            r.set_tcp_congestion(cc.as_bytes())?;
        }
    }
    Ok(())
}

/// A TCP listener on `ip`, an ephemeral port, with the options accepted
/// connections inherit.
pub fn tcp_listener(ip: IpAddr, opts: &DataOptions) -> io::Result<Listener> {
    let addr = SocketAddr::new(ip, 0);
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(SockProtocol::TCP),
    )?;
    sock.set_reuse_address(true)?;
    apply_tcp(&SockRef::from(&sock), opts)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(LISTEN_BACKLOG)?;
    Ok(Listener::Tcp(mio::net::TcpListener::from_std(sock.into())))
}

/// Starts a non-blocking TCP connect to `addr`.
pub fn tcp_connect(addr: SocketAddr, opts: &DataOptions) -> io::Result<Conn> {
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(SockProtocol::TCP),
    )?;
    let r = SockRef::from(&sock);
    apply_tcp(&r, opts)?;
    sock.set_nodelay(opts.nodelay)?;
    sock.set_nonblocking(true)?;
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(Conn::Tcp(mio::net::TcpStream::from_std(sock.into())))
}

fn abstract_addr(name: &str) -> io::Result<UnixAddr> {
    UnixAddr::from_abstract_name(name.as_bytes())
}

/// A Unix stream listener on an abstract name (no file to clean up).
pub fn unix_listener(name: &str, opts: &DataOptions) -> io::Result<Listener> {
    let l = std::os::unix::net::UnixListener::bind_addr(&abstract_addr(name)?)?;
    apply_buffers(&SockRef::from(&l), &opts.socket)?;
    l.set_nonblocking(true)?;
    Ok(Listener::Unix(mio::net::UnixListener::from_std(l)))
}

/// Starts a non-blocking connect to an abstract Unix name.
pub fn unix_connect(name: &str, opts: &DataOptions) -> io::Result<Conn> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    apply_buffers(&SockRef::from(&sock), &opts.socket)?;
    sock.set_nonblocking(true)?;
    // socket2 has no abstract-address constructor; build the sockaddr_un by hand.
    let sockaddr = abstract_sockaddr(name)?;
    match sock.connect(&sockaddr) {
        Ok(()) => {}
        Err(e)
            if e.raw_os_error() == Some(libc::EINPROGRESS)
                || e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    let std_stream: std::os::unix::net::UnixStream = sock.into();
    Ok(Conn::Unix(mio::net::UnixStream::from_std(std_stream)))
}

fn abstract_sockaddr(name: &str) -> io::Result<socket2::SockAddr> {
    let bytes = name.as_bytes();
    // SAFETY: sockaddr_un is plain data; we fill sun_family and a leading NUL
    // followed by the name, and report the exact length used.
    unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            let sun = storage.cast::<libc::sockaddr_un>();
            let path = &mut (*sun).sun_path;
            if bytes.len() + 1 > path.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "unix socket name too long",
                ));
            }
            (*sun).sun_family = libc::AF_UNIX as libc::sa_family_t;
            path[0] = 0;
            for (i, b) in bytes.iter().enumerate() {
                path[i + 1] = *b as libc::c_char;
            }
            let base = std::mem::size_of::<libc::sa_family_t>();
            *len = (base + 1 + bytes.len()) as libc::socklen_t;
            Ok(())
        })
        .map(|((), addr)| addr)
    }
}

/// A UDP socket bound to `ip` on an ephemeral port.
pub fn udp_bind(ip: IpAddr, opts: &SocketOptions) -> io::Result<mio::net::UdpSocket> {
    let addr = SocketAddr::new(ip, 0);
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(SockProtocol::UDP),
    )?;
    apply_buffers(&SockRef::from(&sock), opts)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(mio::net::UdpSocket::from_std(sock.into()))
}

/// A UDP socket connected to `remote`.
pub fn udp_connect(remote: SocketAddr, opts: &SocketOptions) -> io::Result<mio::net::UdpSocket> {
    let any = match remote {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let s = udp_bind(any, opts)?;
    s.connect(remote)?;
    Ok(s)
}

/// Whether a datagram from `from` is taken in, when only `peer`'s are (`None`:
/// anyone's). An IPv4 peer also matches its IPv4-mapped IPv6 form.
pub(crate) fn answers(peer: Option<IpAddr>, from: IpAddr) -> bool {
    peer.is_none_or(|p| p.to_canonical() == from.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_unix_listener_accepts_a_connect() {
        let name = format!("linkperf-test-{}", std::process::id());
        let opts = DataOptions {
            nodelay: false,
            socket: SocketOptions::default(),
        };
        let l = unix_listener(&name, &opts).unwrap();
        let c = unix_connect(&name, &opts).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert!(l.accept().is_ok());
        assert!(c.is_connected().unwrap());
    }

    #[test]
    fn only_the_peers_datagrams_are_answered() {
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let v6: IpAddr = "::1".parse().unwrap();
        assert!(answers(Some(v4), v4));
        assert!(answers(Some(v4), mapped));
        assert!(answers(Some(mapped), v4));
        assert!(!answers(Some(v4), other));
        assert!(!answers(Some(v4), v6));
        assert!(answers(Some(v6), v6));
        assert!(answers(None, other));
    }
}
