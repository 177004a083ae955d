//! Data sockets: creating, binding and connecting them with the test's socket
//! options, for TCP, UDP and Unix stream sockets.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr as UnixAddr;
use std::time::Duration;

use linkperf_workload::{Protocol, SocketOptions, StreamDirection, TestSpec, Workload};
use socket2::{Domain, Protocol as SockProtocol, SockRef, Socket, Type};

/// Listen backlog for data listeners: enough for thousands of users connecting at once.
const LISTEN_BACKLOG: i32 = 8192;

/// The least send buffer a server's TCP data socket is locked at (as asked;
/// `tcp_wmem`'s default start is 16 KiB): a request/response server's holds
/// its largest response, as many as may be outstanding, above it.
pub const SERVER_MIN_SNDBUF: usize = 16 * 1024;

/// The most send-buffer memory one test's server locks over all its TCP
/// data connections, when the host's TCP memory allows it (see
/// [`HostTcpMemory::test_allowance`]).
pub const SERVER_SNDBUF_PER_TEST: usize = 256 << 20;

/// What the host's kernel lets TCP send buffers hold: the size a socket's
/// send buffer grows to on its own (`tcp_wmem`'s maximum) and the hard
/// limit of all TCP sockets' memory (`tcp_mem`'s third figure, in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTcpMemory {
    /// `net.ipv4.tcp_wmem`'s maximum, bytes.
    pub autotune_max: usize,
    /// `net.ipv4.tcp_mem`'s hard limit, bytes.
    pub hard_limit: usize,
}

impl HostTcpMemory {
    /// Linux's defaults where /proc cannot be read: 4 MiB a socket, 2 GiB
    /// in all.
    pub const DEFAULT: HostTcpMemory = HostTcpMemory {
        autotune_max: 4 << 20,
        hard_limit: 2 << 30,
    };

    /// This host's, read once.
    pub fn host() -> HostTcpMemory {
        static HOST: std::sync::OnceLock<HostTcpMemory> = std::sync::OnceLock::new();
        *HOST.get_or_init(|| {
            let third = |path: &str| -> Option<usize> {
                std::fs::read_to_string(path)
                    .ok()?
                    .split_whitespace()
                    .nth(2)?
                    .parse()
                    .ok()
            };
            // tcp_mem counts pages.
            let page = page_size();
            HostTcpMemory {
                autotune_max: third("/proc/sys/net/ipv4/tcp_wmem")
                    .unwrap_or(Self::DEFAULT.autotune_max),
                hard_limit: third("/proc/sys/net/ipv4/tcp_mem")
                    .map_or(Self::DEFAULT.hard_limit, |p| p.saturating_mul(page)),
            }
        })
    }

    /// The send-buffer memory one test may lock over all its connections:
    /// [`SERVER_SNDBUF_PER_TEST`], and at most an eighth of the host's TCP
    /// memory, so that no one test (nor a client that never reads) takes
    /// the host's TCP to its hard limit, where every connection stalls.
    pub fn test_allowance(&self) -> usize {
        SERVER_SNDBUF_PER_TEST.min(self.hard_limit / 8)
    }
}

/// The page size, for `tcp_mem`'s pages.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(4096)
}

/// The send buffer a server's TCP data sockets are locked at for `spec` on
/// this host (SO_SNDBUF as asked), `None` where the server leaves it to the
/// kernel: see [`server_sndbuf_on`].
pub fn server_sndbuf(spec: &TestSpec) -> Option<usize> {
    server_sndbuf_on(spec, &HostTcpMemory::host())
}

/// The send buffer a server's TCP data sockets are locked at for `spec` on
/// a host with `host`'s TCP memory (SO_SNDBUF as asked: the kernel doubles
/// it and, the size set, no longer grows it, whatever the client reads).
/// What the client asked (`--sndbuf`), else: each user's share of the
/// test's allowance ([`HostTcpMemory::test_allowance`]), at most what the
/// kernel would grow the buffer to on its own (`tcp_wmem`'s maximum), so a
/// stream to few users runs as it would unlocked and one to many cannot
/// hold more than the allowance; a request/response server's is what it
/// sends at most at once, at least [`SERVER_MIN_SNDBUF`], within that
/// share. UDP and Unix sockets' buffers do not grow, so they are left as
/// they are. The budget charges twice this (the kernel's doubling) for
/// every data connection.
pub fn server_sndbuf_on(spec: &TestSpec, host: &HostTcpMemory) -> Option<usize> {
    if spec.protocol != Protocol::Tcp {
        return spec.socket.sndbuf.map(|n| n as usize);
    }
    if let Some(n) = spec.socket.sndbuf {
        return Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    // Each connection's share, as held (twice what is asked).
    let share = (host.test_allowance() / spec.users.max(1) as usize).min(host.autotune_max);
    let most = (share / 2).max(SERVER_MIN_SNDBUF);
    let at_once = match &spec.workload {
        Workload::Stream { direction, .. } => match direction {
            StreamDirection::Up => SERVER_MIN_SNDBUF,
            StreamDirection::Down | StreamDirection::Bidir => most,
        },
        other => {
            let outstanding = spec.offered.map_or(1, |o| o.max_outstanding.max(1));
            other
                .largest_message()
                .as_usize()
                .saturating_mul(outstanding as usize)
        }
    };
    Some(at_once.clamp(SERVER_MIN_SNDBUF, most))
}

/// The options a data socket is set up with: a test side's sockets, a
/// profile connection's, an iperf3 stream's. Every socket the engine makes
/// or accepts takes them through [`apply`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// TCP_NODELAY (TCP).
    pub nodelay: bool,
    /// SO_SNDBUF, bytes as asked (the kernel doubles and caps it).
    pub sndbuf: Option<usize>,
    /// SO_RCVBUF, bytes as asked.
    pub rcvbuf: Option<usize>,
    /// TCP congestion control (TCP_CONGESTION), e.g. `cubic`.
    pub cc: Option<String>,
    /// TCP maximum segment size (TCP_MAXSEG), before connecting.
    pub mss: Option<u32>,
    /// IP type of service (IP_TOS).
    pub tos: Option<u32>,
    /// The maximum segment size and the type of service are asked, not
    /// required: a socket that refuses them goes on (iperf3's server does
    /// so, the client's own segment size bounding the segments both ways).
    pub lenient: bool,
}

impl Settings {
    /// A test side's settings: its socket options, TCP_NODELAY as the
    /// workload has it unless asked otherwise.
    pub fn for_test(spec: &TestSpec) -> Self {
        Settings::from_options(spec.socket.nodelay_for(&spec.workload), &spec.socket)
    }

    /// A test's server side's settings: [`Settings::for_test`] with the
    /// send buffer locked at [`server_sndbuf`].
    pub fn for_server(spec: &TestSpec) -> Self {
        Settings {
            sndbuf: server_sndbuf(spec),
            ..Settings::for_test(spec)
        }
    }

    /// `options` with TCP_NODELAY `nodelay`.
    pub fn from_options(nodelay: bool, options: &SocketOptions) -> Self {
        let bytes = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
        Settings {
            nodelay,
            sndbuf: options.sndbuf.map(bytes),
            rcvbuf: options.rcvbuf.map(bytes),
            cc: options.cc.clone(),
            mss: options.mss,
            tos: None,
            lenient: false,
        }
    }
}

/// What a socket carries, for the options that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A TCP socket (a listener's too: accepted sockets inherit from it).
    Tcp,
    /// A Unix stream socket.
    Unix,
    /// A UDP socket.
    Udp,
}

/// Sets `settings` on `sock`, a socket of `kind`: the buffers on every
/// socket, the TCP options on TCP ones. The one place a data socket's
/// options are set.
pub fn apply(sock: &SockRef<'_>, kind: Kind, settings: &Settings) -> io::Result<()> {
    if let Some(n) = settings.sndbuf {
        sock.set_send_buffer_size(n)?;
    }
    if let Some(n) = settings.rcvbuf {
        sock.set_recv_buffer_size(n)?;
    }
    if kind != Kind::Tcp {
        return Ok(());
    }
    sock.set_nodelay(settings.nodelay)?;
    if let Some(cc) = &settings.cc {
        sock.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("congestion control '{cc}' is not available: {e}"),
            )
        })?;
    }
    if let Some(mss) = settings.mss {
        match sock.set_mss(mss) {
            Err(_) if settings.lenient => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot set MSS {mss}: {e}"),
                ))
            }
            Ok(()) => {}
        }
    }
    if let Some(tos) = settings.tos {
        match sock.set_tos(tos) {
            Err(_) if settings.lenient => {}
            other => other?,
        }
    }
    Ok(())
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

/// A data connection: a TCP or Unix stream, or a UDP socket connected to its
/// peer (reads and writes are then its datagrams).
#[derive(Debug)]
pub enum Conn {
    /// TCP.
    Tcp(mio::net::TcpStream),
    /// Unix stream.
    Unix(mio::net::UnixStream),
    /// UDP, connected.
    Udp(mio::net::UdpSocket),
}

impl Conn {
    fn sock(&self) -> SockRef<'_> {
        match self {
            Conn::Tcp(s) => SockRef::from(s),
            Conn::Unix(s) => SockRef::from(s),
            Conn::Udp(s) => SockRef::from(s),
        }
    }

    /// What it carries.
    pub fn kind(&self) -> Kind {
        match self {
            Conn::Tcp(_) => Kind::Tcp,
            Conn::Unix(_) => Kind::Unix,
            Conn::Udp(_) => Kind::Udp,
        }
    }

    /// Sets `settings` on it (see [`apply`]).
    pub fn apply(&self, settings: &Settings) -> io::Result<()> {
        apply(&self.sock(), self.kind(), settings)
    }

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
        let r = self.sock();
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
            Conn::Udp(s) => s.as_fd(),
        };
        fd.try_clone_to_owned()
    }

    /// Half-closes the write side (a datagram socket has none: nothing).
    pub fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.shutdown(Shutdown::Write),
            Conn::Unix(s) => s.shutdown(Shutdown::Write),
            Conn::Udp(_) => Ok(()),
        }
    }

    /// The pending socket error, if the connect failed.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Conn::Tcp(s) => s.take_error(),
            Conn::Unix(s) => s.take_error(),
            Conn::Udp(s) => s.take_error(),
        }
    }

    /// Ok once a non-blocking connect has completed.
    pub fn is_connected(&self) -> io::Result<bool> {
        let r = match self {
            Conn::Tcp(s) => s.peer_addr().map(|_| ()),
            Conn::Unix(s) => s.peer_addr().map(|_| ()),
            Conn::Udp(s) => s.peer_addr().map(|_| ()),
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
            Conn::Udp(s) => s,
        }
    }

    /// True for TCP.
    pub fn is_tcp(&self) -> bool {
        matches!(self, Conn::Tcp(_))
    }

    /// The UDP socket, for one.
    pub fn udp(&self) -> Option<&mio::net::UdpSocket> {
        match self {
            Conn::Udp(s) => Some(s),
            _ => None,
        }
    }

    /// The local IP address (none for a Unix socket).
    pub fn local_ip(&self) -> Option<IpAddr> {
        match self {
            Conn::Tcp(s) => s.local_addr().ok().map(|a| a.ip()),
            Conn::Unix(_) => None,
            Conn::Udp(s) => s.local_addr().ok().map(|a| a.ip()),
        }
    }

    /// Its addresses, local and peer (none for a Unix socket).
    pub fn addresses(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        match self {
            Conn::Tcp(s) => Ok((s.local_addr()?, s.peer_addr()?)),
            Conn::Udp(s) => Ok((s.local_addr()?, s.peer_addr()?)),
            Conn::Unix(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a Unix socket has no IP address",
            )),
        }
    }
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
            Conn::Udp(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
            Conn::Udp(s) => s.recv(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
            Conn::Udp(s) => s.send(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Shuts `socket` down both ways, ignoring errors: a thread blocked in a read
/// on it (or on another descriptor of it) returns end-of-file, one in a write
/// fails.
pub fn shut_down(socket: &OwnedFd) {
    let _ = SockRef::from(socket).shutdown(Shutdown::Both);
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

/// A TCP listener on `ip`, an ephemeral port, with the settings accepted
/// connections inherit.
pub fn tcp_listener(ip: IpAddr, settings: &Settings) -> io::Result<Listener> {
    let addr = SocketAddr::new(ip, 0);
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(SockProtocol::TCP),
    )?;
    sock.set_reuse_address(true)?;
    apply(&SockRef::from(&sock), Kind::Tcp, settings)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(LISTEN_BACKLOG)?;
    Ok(Listener::Tcp(mio::net::TcpListener::from_std(sock.into())))
}

/// Starts a non-blocking TCP connect to `addr`.
pub fn tcp_connect(addr: SocketAddr, settings: &Settings) -> io::Result<Conn> {
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(SockProtocol::TCP),
    )?;
    apply(&SockRef::from(&sock), Kind::Tcp, settings)?;
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
pub fn unix_listener(name: &str, settings: &Settings) -> io::Result<Listener> {
    let l = std::os::unix::net::UnixListener::bind_addr(&abstract_addr(name)?)?;
    apply(&SockRef::from(&l), Kind::Unix, settings)?;
    l.set_nonblocking(true)?;
    Ok(Listener::Unix(mio::net::UnixListener::from_std(l)))
}

/// Starts a non-blocking connect to an abstract Unix name.
pub fn unix_connect(name: &str, settings: &Settings) -> io::Result<Conn> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    apply(&SockRef::from(&sock), Kind::Unix, settings)?;
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

/// A UDP socket bound to `local`, with the settings' buffers; with
/// `reuse`, one that shares its port with another bound to it (iperf3's
/// server answers each stream from a socket on its own port).
fn udp_socket(local: SocketAddr, settings: &Settings, reuse: bool) -> io::Result<Socket> {
    let sock = Socket::new(
        Domain::for_address(local),
        Type::DGRAM,
        Some(SockProtocol::UDP),
    )?;
    if reuse {
        sock.set_reuse_address(true)?;
    }
    apply(&SockRef::from(&sock), Kind::Udp, settings)?;
    sock.set_nonblocking(true)?;
    sock.bind(&local.into())?;
    Ok(sock)
}

/// A UDP socket bound to `ip` on an ephemeral port.
pub fn udp_bind(ip: IpAddr, settings: &Settings) -> io::Result<mio::net::UdpSocket> {
    let sock = udp_socket(SocketAddr::new(ip, 0), settings, false)?;
    Ok(mio::net::UdpSocket::from_std(sock.into()))
}

/// A UDP socket connected to `remote`, bound to `local` (an ephemeral
/// port of any address when `None`; a port another socket is bound to,
/// shared, when given).
pub fn udp_connect(
    remote: SocketAddr,
    local: Option<SocketAddr>,
    settings: &Settings,
) -> io::Result<Conn> {
    let any = match remote {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let sock = udp_socket(
        local.unwrap_or(SocketAddr::new(any, 0)),
        settings,
        local.is_some(),
    )?;
    sock.connect(&remote.into())?;
    Ok(Conn::Udp(mio::net::UdpSocket::from_std(sock.into())))
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
        let l = unix_listener(&name, &Settings::default()).unwrap();
        // A Unix connect is queued on the listener before it returns.
        let c = unix_connect(&name, &Settings::default()).unwrap();
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

#[cfg(test)]
mod sndbuf_tests {
    use std::time::Duration;

    use super::*;

    fn spec(workload: &str, users: u32) -> TestSpec {
        TestSpec::new(
            workload.parse().unwrap(),
            Protocol::Tcp,
            users,
            Duration::from_secs(1),
        )
    }

    const HOST: HostTcpMemory = HostTcpMemory::DEFAULT;

    #[test]
    fn a_download_to_few_users_grows_as_the_kernel_would_to_many_within_the_allowance() {
        // One user: tcp_wmem's maximum as held (half of it asked).
        assert_eq!(
            server_sndbuf_on(&spec("str-writex30k", 1), &HOST),
            Some(2 << 20)
        );
        assert_eq!(
            server_sndbuf_on(&spec("str-writex30k", 64), &HOST),
            Some(2 << 20)
        );
        // 300: the allowance shared, 256 MiB in all as held.
        let each = server_sndbuf_on(&spec("str-writex30k", 300), &HOST).unwrap();
        assert_eq!(each, (256 << 20) / 300 / 2);
        // A host with little TCP memory: an eighth of it.
        let small = HostTcpMemory {
            autotune_max: 4 << 20,
            hard_limit: 64 << 20,
        };
        assert_eq!(small.test_allowance(), 8 << 20);
        assert_eq!(
            server_sndbuf_on(&spec("str-writex30k", 8), &small),
            Some((8 << 20) / 8 / 2)
        );
        // Never below the least.
        assert_eq!(
            server_sndbuf_on(&spec("str-writex30k", 100_000), &small),
            Some(SERVER_MIN_SNDBUF)
        );
    }

    #[test]
    fn request_response_holds_what_it_sends_at_once_and_an_asked_size_is_kept() {
        assert_eq!(
            server_sndbuf_on(&spec("rr1c-1x1", 1), &HOST),
            Some(SERVER_MIN_SNDBUF)
        );
        assert_eq!(
            server_sndbuf_on(&spec("rr1c-200x30k", 1), &HOST),
            Some(30 * 1024)
        );
        // An upload's (str-read: the server reads) server sends nothing but acknowledgements.
        assert_eq!(
            server_sndbuf_on(&spec("str-readx30k", 1), &HOST),
            Some(SERVER_MIN_SNDBUF)
        );
        let mut asked = spec("str-writex30k", 1);
        asked.socket.sndbuf = Some(64 * 1024);
        assert_eq!(server_sndbuf_on(&asked, &HOST), Some(64 * 1024));
        let mut udp = spec("rr1c-1x1", 1);
        udp.protocol = Protocol::Udp;
        assert_eq!(server_sndbuf_on(&udp, &HOST), None);
    }
}
