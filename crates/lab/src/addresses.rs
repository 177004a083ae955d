//! The address and name plan: which namespace is which, which address each
//! host has. Everything lives in 198.18.0.0/15 (RFC 2544's range for
//! benchmarking) and in namespaces named `lp-CONFIG-ROLE`.
//!
//! | what                          | address / name |
//! |-------------------------------|----------------|
//! | pair K's server               | 198.18.K.1/24 (K = 1…[`MAX_PAIRS`]) |
//! | pair K's client               | 198.18.K.2/24 |
//! | pair K's server, VXLAN overlay| 198.19.K.1/24 (198.18.K.x is then the underlay) |
//! | pair K's client, VXLAN overlay| 198.19.K.2/24 |
//! | namespaces                    | `lp-CONFIG-sK`, `lp-CONFIG-cK`, `lp-CONFIG-host` (loopback), `lp-CONFIG-switch` (bridge), `lp-CONFIG-sedge` and `lp-CONFIG-cedge` (the two ends of a shared link) |

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// Every namespace and link the lab creates starts with this.
pub const PREFIX: &str = "lp-";
/// Most client/server pairs through one configuration (each needs its own /24).
pub const MAX_PAIRS: u32 = 64;
/// Prefix length of every subnet the lab assigns.
pub const PREFIX_LEN: u8 = 24;

/// Pair `k`'s server: 198.18.K.1.
pub fn server_addr(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, octet(k), 1)
}

/// Pair `k`'s client: 198.18.K.2.
pub fn client_addr(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, octet(k), 2)
}

/// Pair `k`'s server inside a VXLAN tunnel: 198.19.K.1.
pub fn overlay_server_addr(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, octet(k), 1)
}

/// Pair `k`'s client inside a VXLAN tunnel: 198.19.K.2.
pub fn overlay_client_addr(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, octet(k), 2)
}

fn octet(k: u32) -> u8 {
    debug_assert!((1..=MAX_PAIRS).contains(&k), "pair {k} out of range");
    k.min(255) as u8
}

/// What a namespace is for, within its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The one namespace of `loopback`: client and server together.
    Host,
    /// The bridge of `bridge`.
    Switch,
    /// The server-side end of a shared link (veth/vxlan with pairs, macvlan).
    ServerEdge,
    /// The client-side end of a shared link.
    ClientEdge,
    /// Pair K's server host.
    Server(u32),
    /// Pair K's client host.
    Client(u32),
}

impl Role {
    /// The namespace-name suffix: `host`, `switch`, `sedge`, `cedge`, `sK`, `cK`.
    pub fn suffix(self) -> String {
        match self {
            Role::Host => "host".into(),
            Role::Switch => "switch".into(),
            Role::ServerEdge => "sedge".into(),
            Role::ClientEdge => "cedge".into(),
            Role::Server(k) => format!("s{k}"),
            Role::Client(k) => format!("c{k}"),
        }
    }

    fn parse(s: &str) -> Option<Role> {
        let pair = |rest: &str| {
            rest.parse::<u32>()
                .ok()
                .filter(|k| (1..=MAX_PAIRS).contains(k) && !rest.starts_with('0'))
        };
        match s {
            "host" => Some(Role::Host),
            "switch" => Some(Role::Switch),
            "sedge" => Some(Role::ServerEdge),
            "cedge" => Some(Role::ClientEdge),
            _ => match s.split_at_checked(1)? {
                ("s", rest) => pair(rest).map(Role::Server),
                ("c", rest) => pair(rest).map(Role::Client),
                _ => None,
            },
        }
    }
}

/// The namespace of `role` in configuration `config`: `lp-veth-1g-s1`.
pub fn namespace(config: &str, role: Role) -> String {
    format!("{PREFIX}{config}-{}", role.suffix())
}

/// The configuration and role of a lab namespace name, if it has the lab's form.
pub fn parse_namespace(name: &str) -> Option<(&str, Role)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (config, role) = rest.rsplit_once('-')?;
    let role = Role::parse(role)?;
    crate::check_name(config).ok()?;
    Some((config, role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_addresses_are_in_the_benchmarking_range() {
        assert_eq!(server_addr(1).to_string(), "198.18.1.1");
        assert_eq!(client_addr(1).to_string(), "198.18.1.2");
        assert_eq!(server_addr(64).to_string(), "198.18.64.1");
        assert_eq!(overlay_server_addr(2).to_string(), "198.19.2.1");
        assert_eq!(overlay_client_addr(2).to_string(), "198.19.2.2");
        for k in 1..=MAX_PAIRS {
            for a in [
                server_addr(k),
                client_addr(k),
                overlay_server_addr(k),
                overlay_client_addr(k),
            ] {
                let [a0, a1, ..] = a.octets();
                // 198.18.0.0/15: 198.18.x.x and 198.19.x.x.
                assert!(a0 == 198 && (a1 & 0xfe) == 18, "{a}");
            }
        }
    }

    #[test]
    fn namespace_names_round_trip() {
        for (config, role, name) in [
            ("veth", Role::Server(1), "lp-veth-s1"),
            ("veth-1g", Role::Client(12), "lp-veth-1g-c12"),
            ("loopback", Role::Host, "lp-loopback-host"),
            ("bridge", Role::Switch, "lp-bridge-switch"),
            ("macvlan", Role::ServerEdge, "lp-macvlan-sedge"),
            ("a-c1", Role::ClientEdge, "lp-a-c1-cedge"),
        ] {
            assert_eq!(namespace(config, role), name);
            assert_eq!(parse_namespace(name), Some((config, role)), "{name}");
        }
        for foreign in [
            "lp-",
            "lp-veth",
            "lp-veth-x1",
            "lp-veth-s0",
            "lp-veth-s01",
            "lp-veth-s65",
            "lp--s1",
            "veth-s1",
            "lp-Veth-s1",
        ] {
            assert_eq!(parse_namespace(foreign), None, "{foreign}");
        }
    }
}
