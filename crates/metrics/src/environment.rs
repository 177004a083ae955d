//! The host a side runs on, captured once per run for the results document.

use std::net::IpAddr;

use crate::online_cpus;
use crate::sys::{host, procfs};
use linkperf_measured::Environment;

/// The loopback interface's name on Linux.
const LOOPBACK: &str = "lo";

/// Captures the host's description. `local_addr` is the local address of the test
/// traffic (a data or control socket's), used to find the interface and its MTU;
/// `command_line` is recorded as given. The `socket_*` fields are left `None` for
/// the caller to fill from a data socket ([`crate::socket_congestion_control`],
/// [`crate::socket_buffers`]). Never fails: what cannot be read is `None` or
/// `"unknown"`.
pub fn capture_environment(local_addr: Option<IpAddr>, command_line: Vec<String>) -> Environment {
    let uname = host::uname().unwrap_or_default();
    let known = |s: String| {
        if s.is_empty() {
            "unknown".to_string()
        } else {
            s
        }
    };
    let os = procfs::normalise_whitespace(&format!("{} {}", uname.sysname, uname.machine));
    let interface = local_addr.and_then(|addr| interface_for(addr, &host::interface_addresses()));
    let mtu = interface.as_deref().and_then(procfs::read_interface_mtu);
    let sysctl = |name: &str| {
        procfs::read_text(format!("/proc/sys/net/ipv4/{name}"))
            .and_then(|t| procfs::normalise_whitespace(&t))
    };
    Environment {
        hostname: host::hostname().unwrap_or_else(|| "unknown".to_string()),
        kernel: known(uname.release),
        os: os.unwrap_or_else(|| "unknown".to_string()),
        cpu_model: procfs::read_text(procfs::PROC_CPUINFO)
            .and_then(|t| procfs::parse_cpuinfo_model(&t))
            .unwrap_or_else(|| "unknown".to_string()),
        cpu_count: online_cpus(),
        interface,
        mtu,
        congestion_control: sysctl("tcp_congestion_control"),
        socket_congestion_control: None,
        tcp_rmem: sysctl("tcp_rmem"),
        tcp_wmem: sysctl("tcp_wmem"),
        socket_sndbuf: None,
        socket_rcvbuf: None,
        socket_nodelay: None,
        boot_id: boot_id(),
        linkperf_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
    }
}

/// This kernel's boot id: two processes that read the same one run on one host.
pub fn boot_id() -> Option<String> {
    procfs::read_text("/proc/sys/kernel/random/boot_id")
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The interface owning `addr`, among (interface, address) pairs. Any loopback
/// address (127.0.0.0/8, ::1, or IPv4-mapped 127.x) is the loopback interface
/// even where only 127.0.0.1 is configured; an unspecified address has none.
fn interface_for(addr: IpAddr, addresses: &[(String, IpAddr)]) -> Option<String> {
    let addr = addr.to_canonical();
    if addr.is_unspecified() {
        return None;
    }
    if addr.is_loopback() {
        return Some(LOOPBACK.to_string());
    }
    addresses
        .iter()
        .find(|(_, a)| a.to_canonical() == addr)
        .map(|(name, _)| name.clone())
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn table() -> Vec<(String, IpAddr)> {
        vec![
            ("lo".into(), IpAddr::V4(Ipv4Addr::LOCALHOST)),
            ("eth0".into(), "10.0.0.5".parse().unwrap()),
            ("eth0".into(), "fe80::1".parse().unwrap()),
            ("ib0".into(), "192.168.7.2".parse().unwrap()),
        ]
    }

    #[test]
    fn finds_the_interface_of_an_address() {
        let t = table();
        assert_eq!(
            interface_for("10.0.0.5".parse().unwrap(), &t).as_deref(),
            Some("eth0")
        );
        assert_eq!(
            interface_for("192.168.7.2".parse().unwrap(), &t).as_deref(),
            Some("ib0")
        );
        assert_eq!(
            interface_for("::ffff:10.0.0.5".parse().unwrap(), &t).as_deref(),
            Some("eth0")
        );
        assert_eq!(
            interface_for("fe80::1".parse().unwrap(), &t).as_deref(),
            Some("eth0")
        );
        assert_eq!(interface_for("10.9.9.9".parse().unwrap(), &t), None);
        assert_eq!(interface_for(IpAddr::V4(Ipv4Addr::UNSPECIFIED), &t), None);
    }

    #[test]
    fn loopback_addresses_are_lo() {
        for a in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(
                interface_for(a.parse().unwrap(), &[]).as_deref(),
                Some("lo"),
                "{a}"
            );
        }
        assert_eq!(interface_for(IpAddr::V6(Ipv6Addr::UNSPECIFIED), &[]), None);
    }

    #[test]
    fn captures_this_host() {
        let env = capture_environment(
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            vec!["linkperf".into(), "-s".into()],
        );
        assert_eq!(env.interface.as_deref(), Some("lo"));
        assert!(env.mtu.is_some_and(|m| m > 0), "{env:?}");
        assert!(
            !env.hostname.is_empty() && env.hostname != "unknown",
            "{env:?}"
        );
        assert!(env.os.starts_with("Linux "), "{env:?}");
        assert_ne!(env.kernel, "unknown");
        assert!(env.cpu_count >= 1);
        assert_eq!(
            env.command_line,
            vec!["linkperf".to_string(), "-s".to_string()]
        );
        assert_eq!(env.linkperf_version, env!("CARGO_PKG_VERSION"));
        assert!(env.socket_congestion_control.is_none() && env.socket_sndbuf.is_none());
        if let Some(rmem) = &env.tcp_rmem {
            assert_eq!(rmem.split(' ').count(), 3, "{rmem:?}");
        }
        let none = capture_environment(None, Vec::new());
        assert_eq!((none.interface, none.mtu), (None, None));
    }
}
