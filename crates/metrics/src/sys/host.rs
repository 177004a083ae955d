//! Host identity: hostname, uname, and the addresses of the network interfaces.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::procfs;

/// A NUL-terminated `c_char` array as a string, lossily.
fn c_chars(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The host name: gethostname, else `/proc/sys/kernel/hostname`.
pub(crate) fn hostname() -> Option<String> {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: `buf` is writable for its length; we pass one less so it always
    // ends in NUL even if the kernel truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) };
    let from_call = (rc == 0).then(|| c_chars(&buf)).filter(|s| !s.is_empty());
    from_call.or_else(|| {
        procfs::read_text("/proc/sys/kernel/hostname")
            .and_then(|t| procfs::normalise_whitespace(&t))
    })
}

/// What uname reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Uname {
    pub sysname: String,
    pub release: String,
    pub machine: String,
}

/// uname(2); `None` if it fails.
pub(crate) fn uname() -> Option<Uname> {
    let mut uts = MaybeUninit::<libc::utsname>::uninit();
    // SAFETY: `uts` is a valid out-pointer the kernel fills on success.
    let rc = unsafe { libc::uname(uts.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: uname returned 0, so every field is written and NUL-terminated.
    let uts = unsafe { uts.assume_init() };
    Some(Uname {
        sysname: c_chars(&uts.sysname),
        release: c_chars(&uts.release),
        machine: c_chars(&uts.machine),
    })
}

/// Every (interface name, address) pair of the host's IPv4 and IPv6 addresses,
/// from getifaddrs; empty if the call fails.
pub(crate) fn interface_addresses() -> Vec<(String, IpAddr)> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success it owns a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null and points at a sockaddr of at least the
        // size its family implies.
        let family = libc::c_int::from(unsafe { (*ifa.ifa_addr).sa_family });
        let ip = match family {
            libc::AF_INET => {
                // SAFETY: family AF_INET means a sockaddr_in.
                let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()))
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6 means a sockaddr_in6.
                let sin6 = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        out.push((name, ip));
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}
