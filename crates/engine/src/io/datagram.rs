//! UDP's batched system calls (Linux): a run of equal datagrams handed to
//! the kernel in one send (UDP generic segmentation offload, `UDP_SEGMENT`,
//! Linux 4.18), and a run of them received in one read (`UDP_GRO`, Linux
//! 5.0), whose segment size comes with it. The kernel splits the run into
//! its datagrams before they leave the host (in software where the device
//! cannot), so the wire carries the same datagrams as sent one by one; what
//! is saved is the kernel's per-call and per-packet work on the way. Where
//! the kernel or the path refuses, the caller falls back to one datagram per
//! call.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// Most datagrams in one segmented send (the kernel's `UDP_MAX_SEGMENTS`
/// since Linux 4.18; newer kernels take more).
pub const MAX_SEGMENTS: usize = 64;

/// Largest run of datagrams in one send or read: an IPv4 datagram's payload.
pub const MAX_RUN: usize = 65_507;

/// Room for one `int` control message.
const CMSG_ROOM: usize = 64;

/// Datagrams of `segment` bytes that fit in one run: at most
/// [`MAX_SEGMENTS`], together at most [`MAX_RUN`] bytes.
pub fn run_length(segment: usize) -> usize {
    if segment == 0 {
        return 1;
    }
    (MAX_RUN / segment).clamp(1, MAX_SEGMENTS)
}

/// Sends `buf` on UDP socket `fd` as datagrams of `segment` bytes each (the
/// last may be shorter), to `to`, or to the socket's peer when `None`, in one
/// system call. An error of `EIO`, `EINVAL` or `ENOPROTOOPT` says the kernel or
/// the device cannot: send them one by one instead.
pub fn send_segments(
    fd: RawFd,
    buf: &[u8],
    segment: usize,
    to: Option<&SocketAddr>,
) -> io::Result<usize> {
    let size = u16::try_from(segment)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment over 64 KiB"))?;
    let addr = to.map(|a| socket2::SockAddr::from(*a));
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = [0u64; CMSG_ROOM / 8];
    // SAFETY: msghdr is plain data; every pointer in it points at a live
    // local (the address, the iovec, the control buffer) for the call, with
    // its length; CMSG_* walk the control buffer we sized for one `u16`
    // message.
    let r = unsafe {
        let mut msg: libc::msghdr = MaybeUninit::zeroed().assume_init();
        if let Some(a) = &addr {
            msg.msg_name = a.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = a.len();
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
        libc::sendmsg(fd, &msg, 0)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Whether a segmented send's error says the kernel or the device cannot.
pub fn segmentation_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    )
}

/// Asks the kernel to hand socket `fd` runs of datagrams in one read where it
/// has them as one (`UDP_GRO`). False where it cannot: reads then take one
/// datagram each, as always.
pub fn receive_runs(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// What one read took in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes read.
    pub len: usize,
    /// The size of each datagram of a run (the last may be shorter); `None`:
    /// one datagram.
    pub segment: Option<usize>,
    /// Where it came from.
    pub from: Option<SocketAddr>,
}

impl Received {
    /// The datagrams read into `buf`, each as its bytes.
    pub fn datagrams<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
        let data = &buf[..self.len.min(buf.len())];
        let size = self.segment.filter(|s| *s > 0).unwrap_or(data.len().max(1));
        data.chunks(size)
    }
}

/// Reads what waits on UDP socket `fd` into `buf`: one datagram, or a run of
/// them when the socket takes runs ([`receive_runs`]).
pub fn receive(fd: RawFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; CMSG_ROOM / 8];
    // SAFETY: sockaddr_storage is plain data, large enough for any address.
    let mut name: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: as for send_segments: every pointer in msghdr points at a live
    // local with its length; the kernel writes at most those lengths, and
    // CMSG_* walk only what it reports in msg_controllen.
    let (r, msg) = unsafe {
        let mut msg: libc::msghdr = MaybeUninit::zeroed().assume_init();
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_ROOM as _;
        let r = libc::recvmsg(fd, &mut msg, 0);
        (r, msg)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut segment = None;
    // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_NXTHDR
    // stops within it, and each UDP_GRO message carries an int.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                segment = usize::try_from(size).ok().filter(|s| *s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let from = if msg.msg_namelen > 0 {
        // SAFETY: the kernel wrote a socket address of msg_namelen bytes.
        let addr = unsafe { socket2::SockAddr::new(name, msg.msg_namelen) };
        addr.as_socket()
    } else {
        None
    };
    Ok(Received {
        len: r as usize,
        segment,
        from,
    })
}

/// Sends datagram `d` on UDP socket `sock`: to `to`, or to the socket's peer
/// when `None` (one system call, no segmentation).
#[inline]
pub fn send_one(sock: &mio::net::UdpSocket, d: &[u8], to: Option<SocketAddr>) -> io::Result<usize> {
    match to {
        Some(a) => sock.send_to(d, a),
        None => sock.send(d),
    }
}

/// Reads one datagram from the peer of connected UDP socket `sock` into
/// `buf` (`recv`: the kernel has only the peer's to hand, and no address to
/// write back).
#[inline]
pub fn receive_connected(sock: &mio::net::UdpSocket, buf: &mut [u8]) -> io::Result<usize> {
    sock.recv(buf)
}

/// Reads one datagram waiting on UDP socket `fd` into `buf`, with no room
/// for control messages (`recvfrom`: cheaper for the kernel than
/// [`receive`]'s `recvmsg`, for a socket that takes no runs).
pub fn receive_one(fd: RawFd, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: sockaddr_storage is plain data, large enough for any address.
    let mut name: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the buffer and the address are live locals passed with their
    // lengths; the kernel writes at most those.
    let r = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&mut name as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let from = (len > 0)
        // SAFETY: the kernel wrote a socket address of `len` bytes.
        .then(|| unsafe { socket2::SockAddr::new(name, len) })
        .and_then(|a| a.as_socket());
    Ok(Received {
        len: r as usize,
        segment: None,
        from,
    })
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn runs_fit_in_a_datagram() {
        assert_eq!(run_length(1424), 46);
        assert_eq!(run_length(100), MAX_SEGMENTS);
        assert_eq!(run_length(65_507), 1);
        assert_eq!(run_length(0), 1);
    }

    #[test]
    fn a_run_arrives_as_its_datagrams() {
        let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let to = rx.local_addr().unwrap();
        // Five datagrams of 100 bytes and a short one, numbered in their first byte.
        let mut buf = vec![0u8; 530];
        for (i, c) in buf.chunks_mut(100).enumerate() {
            c[0] = i as u8;
        }
        let sent = match send_segments(tx.as_raw_fd(), &buf, 100, Some(&to)) {
            Ok(n) => n,
            // A kernel without UDP GSO: the callers fall back.
            Err(e) if segmentation_refused(&e) => return,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(sent, 530);
        // Without UDP_GRO every datagram reads alone.
        let mut got = Vec::new();
        let mut rbuf = vec![0u8; 65_536];
        while got.len() < 6 {
            let r = receive(rx.as_raw_fd(), &mut rbuf).unwrap();
            assert_eq!(r.from, Some(tx.local_addr().unwrap()));
            for d in r.datagrams(&rbuf) {
                got.push((d[0], d.len()));
            }
        }
        assert_eq!(
            got,
            [(0, 100), (1, 100), (2, 100), (3, 100), (4, 100), (5, 30)]
        );
        // With it, the same, in as many reads as the kernel pleases.
        if receive_runs(rx.as_raw_fd()) {
            send_segments(tx.as_raw_fd(), &buf, 100, Some(&to)).unwrap();
            let mut got = Vec::new();
            while got.len() < 6 {
                let r = receive(rx.as_raw_fd(), &mut rbuf).unwrap();
                for d in r.datagrams(&rbuf) {
                    got.push((d[0], d.len()));
                }
            }
            assert_eq!(
                got,
                [(0, 100), (1, 100), (2, 100), (3, 100), (4, 100), (5, 30)]
            );
        }
    }

    /// Blocking mio sockets (mio leaves a socket it is given as it is), so
    /// that each receive waits for its datagram; bounded by a read timeout.
    fn blocking(sock: UdpSocket) -> mio::net::UdpSocket {
        sock.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        mio::net::UdpSocket::from_std(sock)
    }

    #[test]
    fn a_datagram_goes_to_the_peer_or_the_address_named_and_only_the_peers_is_read() {
        let server = blocking(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap());
        let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let client = blocking(client);
        let stranger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut buf = [0u8; 64];

        assert_eq!(send_one(&client, b"request", None).unwrap(), 7);
        let r = receive_one(server.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..r.len], b"request");
        assert_eq!(r.from, Some(client.local_addr().unwrap()));
        assert_eq!(r.segment, None);

        // The stranger's datagram comes first, but only the peer's is read.
        stranger
            .send_to(b"stranger", client.local_addr().unwrap())
            .unwrap();
        assert_eq!(send_one(&server, b"answer", r.from).unwrap(), 6);
        let k = receive_connected(&client, &mut buf).unwrap();
        assert_eq!(&buf[..k], b"answer");
    }
}
