//! What the host must have before the lab creates anything: the privileges
//! to make namespaces and links, and iproute2's `ip` and `tc`.

use std::fmt;

/// `CAP_NET_ADMIN`: links, addresses, qdiscs.
pub const CAP_NET_ADMIN: u32 = 12;
/// `CAP_SYS_ADMIN`: `ip netns add` mounts and unshares a network namespace.
pub const CAP_SYS_ADMIN: u32 = 21;

/// Something the lab needs that the host lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A capability of the effective set, by name.
    Capability(&'static str),
    /// A program, and the package that has it.
    Program {
        /// Its name.
        name: &'static str,
        /// The Debian/Ubuntu package that installs it.
        package: &'static str,
    },
    /// `/proc/self/status` could not be read or had no `CapEff`.
    Status(String),
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Capability(c) => write!(
                f,
                "missing {c}: run as root (sudo linkperf lab …) or grant the capability"
            ),
            Missing::Program { name, package } => write!(
                f,
                "missing the `{name}` program: install {package} (apt-get install {package}, or scripts/setup.sh)"
            ),
            Missing::Status(why) => write!(f, "cannot tell this process's capabilities: {why}"),
        }
    }
}

/// The effective capability set from the text of `/proc/self/status`.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// What is missing, given the status text (or why it could not be read) and
/// which programs are present.
pub fn missing(status: Result<&str, String>, has_ip: bool, has_tc: bool) -> Vec<Missing> {
    let mut out = Vec::new();
    match status.map(parse_cap_eff) {
        Ok(Some(caps)) => {
            for (bit, name) in [
                (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
                (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
            ] {
                if caps & (1 << bit) == 0 {
                    out.push(Missing::Capability(name));
                }
            }
        }
        Ok(None) => out.push(Missing::Status(
            "no CapEff line in /proc/self/status".into(),
        )),
        Err(why) => out.push(Missing::Status(why)),
    }
    for (present, name) in [(has_ip, "ip"), (has_tc, "tc")] {
        if !present {
            out.push(Missing::Program {
                name,
                package: "iproute2",
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "Name:\tlinkperf\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
    const USER: &str = "Name:\tlinkperf\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n";
    const NET_ONLY: &str = "CapEff:\t0000000000001000\n";

    #[test]
    fn root_with_iproute2_has_everything() {
        assert_eq!(parse_cap_eff(ROOT), Some(0x1ff_ffff_ffff));
        assert!(missing(Ok(ROOT), true, true).is_empty());
    }

    #[test]
    fn a_user_without_capabilities_or_tc_is_told_each_thing() {
        let m = missing(Ok(USER), true, false);
        let text: Vec<String> = m.iter().map(ToString::to_string).collect();
        assert_eq!(m.len(), 3, "{text:?}");
        assert!(text[0].starts_with("missing CAP_NET_ADMIN: run as root"));
        assert!(text[1].starts_with("missing CAP_SYS_ADMIN"));
        assert!(text[2].contains("`tc`") && text[2].contains("iproute2"));
    }

    #[test]
    fn net_admin_alone_is_not_enough_for_namespaces() {
        assert_eq!(
            missing(Ok(NET_ONLY), true, true),
            [Missing::Capability("CAP_SYS_ADMIN")]
        );
    }

    #[test]
    fn an_unreadable_status_is_said() {
        let m = missing(Err("permission denied".into()), false, true);
        assert_eq!(
            m[0].to_string(),
            "cannot tell this process's capabilities: permission denied"
        );
        assert!(m[1].to_string().contains("`ip`"));
        assert_eq!(missing(Ok("Name: x"), true, true).len(), 1);
    }
}
