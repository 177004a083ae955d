//! getsockopt on a descriptor the caller owns: TCP_INFO, TCP_CONGESTION,
//! SO_SNDBUF and SO_RCVBUF. Nothing here closes or changes the caller's
//! socket; [`try_congestion_control`] alone opens (and closes) one of its own.

use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;

/// The TCP_INFO fields linkperf reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TcpInfoFields {
    pub total_retrans: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub snd_mss: u32,
    pub last_ack_recv_ms: u32,
}

/// Bytes of `struct tcp_info` that must come back for the fields to mean anything:
/// through `tcpi_snd_cwnd` (every kernel since 2.6 returns more).
const MIN_TCP_INFO_LEN: usize = offset_of!(libc::tcp_info, tcpi_snd_cwnd) + size_of::<u32>();

/// Bytes needed to include `tcpi_total_retrans` (absent from very old kernels).
const TOTAL_RETRANS_END: usize = offset_of!(libc::tcp_info, tcpi_total_retrans) + size_of::<u32>();

/// getsockopt(IPPROTO_TCP, TCP_INFO). `None` if the call fails (not a TCP socket,
/// closed descriptor) or the kernel returned too little. A kernel returning a
/// prefix without `tcpi_total_retrans` gives 0 retransmits.
pub(crate) fn tcp_info(fd: RawFd) -> Option<TcpInfoFields> {
    // SAFETY: tcp_info is plain integers; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is `len` bytes long and writable; the kernel writes at most
    // `len` bytes and reports how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast::<libc::c_void>(),
            &mut len,
        )
    };
    let got = usize::try_from(len).ok()?;
    if rc != 0 || got < MIN_TCP_INFO_LEN {
        return None;
    }
    Some(TcpInfoFields {
        total_retrans: if got >= TOTAL_RETRANS_END {
            info.tcpi_total_retrans
        } else {
            0
        },
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        snd_cwnd: info.tcpi_snd_cwnd,
        snd_mss: info.tcpi_snd_mss,
        last_ack_recv_ms: info.tcpi_last_ack_recv,
    })
}

/// The kernel's TCP_CA_NAME_MAX.
const CA_NAME_MAX: usize = 16;

/// getsockopt(IPPROTO_TCP, TCP_CONGESTION): the socket's congestion control.
pub(crate) fn congestion_control(fd: RawFd) -> Option<String> {
    let mut buf = [0u8; CA_NAME_MAX];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is `len` bytes long and writable.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let got = usize::try_from(len).ok()?.min(buf.len());
    let name = &buf[..got];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let name = std::str::from_utf8(&name[..end]).ok()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// An `int` socket option at SOL_SOCKET level, as a `u32`.
fn sol_socket_u32(fd: RawFd, option: libc::c_int) -> Option<u32> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is an int, `len` its size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    u32::try_from(value).ok()
}

/// TCP_NODELAY of a TCP socket; `None` for another kind.
pub(crate) fn nodelay(fd: RawFd) -> Option<bool> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is a writable c_int and `len` its size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(value != 0)
}

/// SO_SNDBUF and SO_RCVBUF as the kernel set them (double what was asked).
pub(crate) fn buffers(fd: RawFd) -> (Option<u32>, Option<u32>) {
    (
        sol_socket_u32(fd, libc::SO_SNDBUF),
        sol_socket_u32(fd, libc::SO_RCVBUF),
    )
}

/// Sets TCP_CONGESTION to `name` on a fresh TCP socket of this process's own,
/// closed again at once: whether this host lets this process use it (the
/// kernel's own answer, module loading and permissions included).
pub(crate) fn try_congestion_control(name: &str) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened here and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::socklen_t::try_from(name.len())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `name` is `len` readable bytes; the kernel only reads them.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
