//! The OS calls the iperf3 paths need beyond what socket2 and
//! linkperf-metrics offer, behind one small contract: every function reads
//! or sets one socket, or reads the clock, and reports failure as a value.
//! The descriptors passed in are only read, never closed.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Bytes written to `fd` that the peer has not acknowledged yet (sent or not):
/// 0 once everything written is in the peer's kernel.
pub(crate) fn unacked_bytes(fd: RawFd) -> Option<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer we pass;
    // `fd` is only read, an invalid one gives an error.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n as *mut libc::c_int) };
    (r == 0).then_some(u64::try_from(n).unwrap_or(0))
}

pub(crate) use linkperf_metrics::{peer_window, tcp_state};

/// Reads what has arrived on `fd`, at most `buf`'s length, without waiting
/// whether or not the socket blocks (`MSG_DONTWAIT`): `WouldBlock` when
/// nothing has, 0 at the end of the stream.
pub(crate) fn recv_now(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv writes at most `buf.len()` bytes into `buf`; `fd` is only
    // read, an invalid one gives an error.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// TCP states in which everything this side wrote, and its FIN, has been
/// acknowledged (or the socket is gone).
pub(crate) fn fin_acked(state: u8) -> bool {
    matches!(state, 5..=7 | 9 | 11)
}

/// Seconds and microseconds of CLOCK_MONOTONIC, the clock iperf3 3.12
/// stamps UDP datagrams with.
pub(crate) fn monotonic_now() -> (u32, u32) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u32, (ts.tv_nsec / 1000) as u32)
}

fn sockaddr(fd: RawFd, peer: bool) -> Option<SocketAddr> {
    // SAFETY: sockaddr_storage is plain data, large enough for any address.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let p = (&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
    // SAFETY: the kernel writes at most `len` bytes of address into `ss`.
    let r = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    if r != 0 {
        return None;
    }
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { *(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { *(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The same address whether it came as IPv4 or IPv4-mapped IPv6.
pub(crate) fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(canonical_ip(a.ip()), a.port())
}

/// An IPv4-mapped IPv6 address as IPv4.
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// When the peer of our connections from `locals` to `server` lives on this
/// host (loopback, or an address of this namespace): the bytes its sockets
/// have received and not read yet, summed (`rx_queue` in /proc/net/tcp and
/// tcp6). `None` when no such socket is in this namespace's tables (a remote
/// server, or sockets already closed): then nothing can be known.
pub(crate) fn local_peer_unread(server: SocketAddr, locals: &[SocketAddr]) -> Option<u64> {
    let server = canonical(server);
    let mut found = false;
    let mut unread = 0u64;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for (local, remote, rx) in text.lines().skip(1).filter_map(proc_tcp_line) {
            if canonical(local) == server && locals.contains(&canonical(remote)) {
                found = true;
                unread += rx;
            }
        }
    }
    found.then_some(unread)
}

/// One line of /proc/net/tcp{,6}: (local, remote, rx_queue).
fn proc_tcp_line(line: &str) -> Option<(SocketAddr, SocketAddr, u64)> {
    let mut f = line.split_whitespace();
    let local = proc_addr(f.nth(1)?)?;
    let remote = proc_addr(f.next()?)?;
    let queues = f.nth(1)?;
    let (_, rx) = queues.split_once(':')?;
    Some((local, remote, u64::from_str_radix(rx, 16).ok()?))
}

/// `0100007F:1451` (IPv4) or 32 hex digits and a port (IPv6): the kernel
/// prints each 32-bit word of the address as a host-order number.
fn proc_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// This process's connected sockets whose peer is `peer`: (descriptor, local
/// address). Read from /proc/self/fd; sockets may close while we look.
pub(crate) fn sockets_to(peer: SocketAddr) -> io::Result<Vec<(RawFd, SocketAddr)>> {
    let peer = canonical(peer);
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Ok(entry) = entry else { continue };
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<RawFd>().ok())
        else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .map(|t| t.to_string_lossy().starts_with("socket:"))
            .unwrap_or(false);
        if !is_socket {
            continue;
        }
        if sockaddr(fd, true).map(canonical) == Some(peer) {
            if let Some(local) = sockaddr(fd, false) {
                out.push((fd, canonical(local)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn sockets_to_a_peer_and_what_they_still_owe() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let found = sockets_to(addr).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0], (c.as_raw_fd(), c.local_addr().unwrap()));
        assert_eq!(tcp_state(c.as_raw_fd()), Some(1));
        c.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        // The peer reads the end of the stream, then writes a byte: that
        // segment acknowledges the FIN, and `c` has taken it in once it has
        // read the byte (half-closed, it still receives).
        let timeout = Some(std::time::Duration::from_secs(5));
        s.set_read_timeout(timeout).unwrap();
        assert_eq!(s.read(&mut buf).unwrap(), 0, "the FIN did not arrive");
        s.write_all(b"!").unwrap();
        c.set_read_timeout(timeout).unwrap();
        c.read_exact(&mut buf[..1]).unwrap();
        assert!(fin_acked(tcp_state(c.as_raw_fd()).unwrap()));
        assert_eq!(unacked_bytes(c.as_raw_fd()), Some(0));
        assert!(peer_window(c.as_raw_fd()).is_some_and(|w| w > 0));
        assert_eq!(unacked_bytes(-1), None);
        assert_eq!(tcp_state(-1), None);
    }

    #[test]
    fn a_local_peers_unread_bytes_are_seen_until_it_reads_them() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let me = [c.local_addr().unwrap()];
        assert_eq!(local_peer_unread(addr, &me), Some(0));
        c.write_all(&[7u8; 1000]).unwrap();
        // One segment on loopback: once the peer can see its bytes, all of
        // them are in its receive queue.
        let mut buf = [0u8; 1000];
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        assert_eq!(s.peek(&mut buf).unwrap(), 1000, "the bytes never arrive");
        assert_eq!(local_peer_unread(addr, &me), Some(1000));
        s.read_exact(&mut buf).unwrap();
        assert_eq!(local_peer_unread(addr, &me), Some(0));
        let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(local_peer_unread(elsewhere, &me), None);
        assert_eq!(
            proc_addr("0100007F:1451"),
            Some("127.0.0.1:5201".parse().unwrap())
        );
        assert_eq!(proc_addr("zz:1"), None);
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        // Microseconds: it moves on within a few reads.
        let a = monotonic_now();
        let t0 = std::time::Instant::now();
        while monotonic_now() <= a {
            assert!(t0.elapsed().as_secs() < 1, "CLOCK_MONOTONIC stands still");
        }
    }
}
