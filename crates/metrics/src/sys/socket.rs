//! getsockopt on a descriptor the caller owns: TCP_INFO, TCP_CONGESTION,
//! SO_SNDBUF and SO_RCVBUF. Nothing here closes or changes the caller's
//! socket; [`try_congestion_control`] alone opens (and closes) one of its own.

use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;

/// The TCP_INFO fields linkperf reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TcpInfoFields {
    pub state: u8,
    pub total_retrans: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub snd_mss: u32,
    pub last_ack_recv_ms: u32,
    /// `None` from a kernel older than 5.4, which does not report it.
    pub snd_wnd: Option<u32>,
}

/// Linux's `struct tcp_info` (include/uapi/linux/tcp.h) through
/// `tcpi_snd_wnd` (Linux 5.4), which the C library's copy (and the libc
/// crate's for glibc) stops short of. The kernel fills what it has and says
/// how much; the two asserts below tie the layout to libc's where they
/// overlap and to the kernel's documented offset of `tcpi_snd_wnd`.
#[repr(C)]
#[derive(Clone, Copy)]
struct KernelTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
}

const _: () = {
    assert!(offset_of!(KernelTcpInfo, snd_cwnd) == offset_of!(libc::tcp_info, tcpi_snd_cwnd));
    assert!(
        offset_of!(KernelTcpInfo, total_retrans) == offset_of!(libc::tcp_info, tcpi_total_retrans)
    );
    assert!(
        offset_of!(KernelTcpInfo, last_ack_recv) == offset_of!(libc::tcp_info, tcpi_last_ack_recv)
    );
    assert!(offset_of!(KernelTcpInfo, snd_wnd) == 228);
};

/// Bytes of `struct tcp_info` that must come back for the fields to mean anything:
/// through `tcpi_snd_cwnd` (every kernel since 2.6 returns more).
const MIN_TCP_INFO_LEN: usize = offset_of!(KernelTcpInfo, snd_cwnd) + size_of::<u32>();

/// Bytes needed to include `tcpi_total_retrans` (absent from very old kernels).
const TOTAL_RETRANS_END: usize = offset_of!(KernelTcpInfo, total_retrans) + size_of::<u32>();

/// Bytes needed to include `tcpi_snd_wnd` (Linux 5.4 and later).
const SND_WND_END: usize = offset_of!(KernelTcpInfo, snd_wnd) + size_of::<u32>();

/// getsockopt(IPPROTO_TCP, TCP_INFO): linkperf's one reader of it. `None` if
/// the call fails (not a TCP socket, closed descriptor) or the kernel
/// returned too little. A kernel returning a prefix without
/// `tcpi_total_retrans` gives 0 retransmits.
pub(crate) fn tcp_info(fd: RawFd) -> Option<TcpInfoFields> {
    // SAFETY: KernelTcpInfo is plain integers; all-zero is a valid value.
    let mut info: KernelTcpInfo = unsafe { std::mem::zeroed() };
    let mut len = size_of::<KernelTcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is `len` bytes long and writable; the kernel writes at most
    // `len` bytes and reports how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut KernelTcpInfo).cast::<libc::c_void>(),
            &mut len,
        )
    };
    let got = usize::try_from(len).ok()?;
    if rc != 0 || got < MIN_TCP_INFO_LEN {
        return None;
    }
    Some(TcpInfoFields {
        state: info.state,
        total_retrans: if got >= TOTAL_RETRANS_END {
            info.total_retrans
        } else {
            0
        },
        rtt_us: info.rtt,
        rttvar_us: info.rttvar,
        snd_cwnd: info.snd_cwnd,
        snd_mss: info.snd_mss,
        last_ack_recv_ms: info.last_ack_recv,
        snd_wnd: (got >= SND_WND_END).then_some(info.snd_wnd),
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
