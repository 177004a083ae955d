//! Whether this host's TCP can use a congestion control, and which ones it has.
//! Checked before a test, on both hosts, so that a missing algorithm is
//! refused with the list of the ones there are instead of failing the first
//! data socket.

use crate::sys::{procfs, socket};
use crate::MetricsError;

/// The congestion controls of this host's TCP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CongestionControls {
    /// Loaded in the kernel (`tcp_available_congestion_control`).
    pub available: Vec<String>,
    /// Those a process without CAP_NET_ADMIN may set (`tcp_allowed_congestion_control`).
    pub allowed: Vec<String>,
}

/// The congestion controls this host's kernel lists; empty lists where it
/// lists none (no `/proc/sys/net`).
pub fn congestion_controls() -> CongestionControls {
    let list = |path: &str| {
        procfs::read_text(path)
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    CongestionControls {
        available: list(procfs::TCP_AVAILABLE_CC),
        allowed: list(procfs::TCP_ALLOWED_CC),
    }
}

/// Checks that this process can set congestion control `name` on a TCP
/// socket here, by setting it on a socket of its own as the data sockets
/// will (for a process with CAP_NET_ADMIN the kernel loads the algorithm's
/// module if it has one). The error names the ones this host has.
pub fn check_congestion_control(name: &str) -> Result<(), MetricsError> {
    socket::try_congestion_control(name)
        .map_err(|e| congestion_refusal(name, &e, &congestion_controls()))
}

/// Why `name` was refused by the kernel with `error`, with the host's lists.
fn congestion_refusal(
    name: &str,
    error: &std::io::Error,
    host: &CongestionControls,
) -> MetricsError {
    let list = |v: &[String]| {
        if v.is_empty() {
            "unknown".to_string()
        } else {
            v.join(" ")
        }
    };
    let mut has = format!("available: {}", list(&host.available));
    if host.allowed != host.available && !host.allowed.is_empty() {
        has.push_str(&format!("; without CAP_NET_ADMIN: {}", list(&host.allowed)));
    }
    let why = match error.raw_os_error() {
        Some(libc::ENOENT) => "is not available".to_string(),
        Some(libc::EPERM) => {
            "is not allowed for this process, which lacks CAP_NET_ADMIN".to_string()
        }
        _ => format!("cannot be set: {error}"),
    };
    MetricsError::CongestionControl {
        name: name.to_string(),
        why,
        has,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(available: &str, allowed: &str) -> CongestionControls {
        let v = |s: &str| s.split_whitespace().map(str::to_string).collect();
        CongestionControls {
            available: v(available),
            allowed: v(allowed),
        }
    }

    fn refusal(name: &str, errno: i32, h: &CongestionControls) -> String {
        congestion_refusal(name, &std::io::Error::from_raw_os_error(errno), h).to_string()
    }

    #[test]
    fn a_missing_algorithm_is_named_with_the_ones_there_are() {
        let h = host("reno bbr cubic", "reno bbr");
        assert_eq!(
            refusal("nosuchcc", libc::ENOENT, &h),
            "congestion control 'nosuchcc' is not available \
             (available: reno bbr cubic; without CAP_NET_ADMIN: reno bbr)"
        );
        let same = host("reno cubic", "reno cubic");
        assert_eq!(
            refusal("bbr", libc::ENOENT, &same),
            "congestion control 'bbr' is not available (available: reno cubic)"
        );
        assert!(refusal("x", libc::ENOENT, &host("", "")).ends_with("(available: unknown)"));
    }

    #[test]
    fn an_algorithm_this_process_may_not_set_says_so() {
        let e = refusal("cubic", libc::EPERM, &host("reno bbr cubic", "reno bbr"));
        assert!(
            e.contains("'cubic' is not allowed for this process, which lacks CAP_NET_ADMIN"),
            "{e}"
        );
        assert!(e.contains("without CAP_NET_ADMIN: reno bbr"), "{e}");
    }

    #[test]
    fn this_hosts_lists_are_read_and_its_own_algorithm_can_be_set() {
        let h = congestion_controls();
        let Some(first) = h.allowed.first().or(h.available.first()) else {
            eprintln!("skipped: this host lists no congestion control");
            return;
        };
        check_congestion_control(first).unwrap();
        let e = check_congestion_control("nosuchcc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'nosuchcc' is not available"), "{e}");
        assert!(e.contains(first.as_str()), "{e}");
    }
}
