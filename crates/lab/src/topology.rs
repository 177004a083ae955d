//! A configuration with a number of pairs, turned into the exact `ip` and `tc`
//! commands that build it, the namespaces they create and where each pair's
//! server and client are. Pure: the golden tests below are the specification,
//! and `docs/lab.md` prints the same lists.
//!
//! Every device is created inside a lab namespace (`ip -n NS link add … peer
//! name … netns OTHER`), never in the root namespace, so tearing a
//! configuration down is deleting its namespaces.
//!
//! How the pairs of `--pairs N` share one link:
//! - `loopback`: every pair's server has its own address on the one `lo`.
//! - `veth`, `vxlan` with one pair: the two hosts' veth is the link. With
//!   N > 1: one veth, the *wire* (`lp-ws`/`lp-wc`), joins two edge
//!   namespaces, each with a bridge; every server hangs off the server edge's
//!   bridge, every client off the client edge's, so all pairs' traffic crosses
//!   the wire, and shaping sits on the wire's two ends.
//! - `macvlan`: the underlay veth (`lp-us`/`lp-uc`) between the two edges
//!   carries every pair's macvlan devices; shaping sits on the underlay.
//! - `bridge`: every host on the one bridge. A switch gives each port its own
//!   capacity, so shaping sits on each host's port (both ends of its veth) and
//!   pairs do not share a shaped capacity, only the bridge.

use std::net::Ipv4Addr;

use linkperf_workload::BitsPerSecond;
use serde::{Deserialize, Serialize};

use crate::addresses::{
    client_addr, namespace, overlay_client_addr, overlay_server_addr, server_addr, Role, MAX_PAIRS,
    PREFIX_LEN,
};
use crate::shaping::Tbf;
use crate::{Cmd, Kind, LabError, LinkConfig, Mtu};

/// Bytes VXLAN adds to every packet (outer Ethernet, IPv4, UDP, VXLAN headers).
pub const VXLAN_OVERHEAD: u32 = 50;
/// UDP port of the VXLAN tunnels (IANA's).
pub const VXLAN_PORT: u16 = 4789;

/// Where one pair's server and client are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// 1-based pair number.
    pub index: u32,
    /// The server's namespace.
    pub server_ns: String,
    /// The client's namespace (the server's for `loopback`).
    pub client_ns: String,
    /// The address `linkperf serve` listens on.
    pub server_addr: Ipv4Addr,
    /// The client's address (the server's for `loopback`).
    pub client_addr: Ipv4Addr,
    /// The server's device that carries test traffic (`lo`, `lp-sK`, `lp-vxK`).
    pub server_device: String,
    /// The client's device that carries test traffic.
    pub client_device: String,
}

/// A configuration, built: commands, namespaces, pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// What was built.
    pub config: LinkConfig,
    /// The namespaces, in creation order.
    pub namespaces: Vec<String>,
    /// The commands that build it, in order.
    pub commands: Vec<Cmd>,
    /// Where each pair's ends are.
    pub pairs: Vec<Pair>,
}

impl Topology {
    /// The commands, namespaces and pairs of `config` with `pairs` pairs.
    pub fn build(config: &LinkConfig, pairs: u32) -> Result<Topology, LabError> {
        if !(1..=MAX_PAIRS).contains(&pairs) {
            return Err(LabError::Option(format!(
                "pairs must be between 1 and {MAX_PAIRS}, got {pairs}"
            )));
        }
        let mut b = Builder {
            name: &config.name,
            tbf: Tbf::for_config(config),
            mtu: config.mtu,
            underlay_mtu: match config.kind {
                Kind::Vxlan => config.mtu.map(|m| Mtu(m.0 + VXLAN_OVERHEAD)),
                _ => config.mtu,
            },
            namespaces: Vec::new(),
            commands: Vec::new(),
            pairs: Vec::new(),
        };
        match (config.kind, pairs) {
            (Kind::Loopback, n) => b.loopback(n),
            (Kind::Veth, 1) => b.direct(),
            (Kind::Veth, n) => b.wire(n),
            (Kind::Vxlan, 1) => {
                b.direct();
                b.vxlan(1);
            }
            (Kind::Vxlan, n) => {
                b.wire(n);
                for k in 1..=n {
                    b.vxlan(k);
                }
            }
            (Kind::Bridge, n) => b.switched(n),
            (Kind::Macvlan, n) => b.macvlan(n),
        }
        Ok(Topology {
            config: config.clone(),
            namespaces: b.namespaces,
            commands: b.commands,
            pairs: b.pairs,
        })
    }

    /// The commands as text, one per line, as results files record them.
    pub fn command_lines(&self) -> Vec<String> {
        self.commands.iter().map(ToString::to_string).collect()
    }

    /// Capacity one pair's path is shaped to (`None`: unshaped).
    pub fn pair_capacity(&self) -> Option<BitsPerSecond> {
        self.config.rate
    }

    /// Capacity all pairs together can use: the shared link's rate, or for a
    /// bridge (every pair with its own shaped ports) the rate times the pairs.
    pub fn capacity(&self) -> Option<BitsPerSecond> {
        let rate = self.config.rate?;
        Some(match self.config.kind {
            Kind::Bridge => BitsPerSecond(rate.0.saturating_mul(self.pairs.len() as u64)),
            _ => rate,
        })
    }

    /// How results files describe it: `veth-1g: veth, rate=1gbit, 2 pairs`.
    pub fn describe(&self) -> String {
        let n = self.pairs.len();
        format!(
            "{}, {n} pair{}",
            self.config.summary(),
            if n == 1 { "" } else { "s" }
        )
    }
}

struct Builder<'a> {
    name: &'a str,
    tbf: Option<Tbf>,
    /// MTU of the devices test traffic uses (the overlay's for vxlan).
    mtu: Option<Mtu>,
    /// MTU of the devices under them (the same but for vxlan).
    underlay_mtu: Option<Mtu>,
    namespaces: Vec<String>,
    commands: Vec<Cmd>,
    pairs: Vec<Pair>,
}

impl Builder<'_> {
    fn ns(&self, role: Role) -> String {
        namespace(self.name, role)
    }

    fn ip(&mut self, ns: &str, args: &str) {
        self.commands.push(Cmd::ip_in(ns, args));
    }

    /// `ip netns add`, and `lo` up for hosts.
    fn netns(&mut self, role: Role) {
        let ns = self.ns(role);
        self.commands.push(Cmd::ip(&format!("netns add {ns}")));
        self.namespaces.push(ns);
    }

    fn lo_up(&mut self, role: Role) {
        let ns = self.ns(role);
        self.ip(&ns, "link set lo up");
    }

    /// A veth pair from `dev_a` in `a` to `dev_b` in `b`.
    fn veth(&mut self, a: Role, dev_a: &str, b: Role, dev_b: &str) {
        let (na, nb) = (self.ns(a), self.ns(b));
        self.ip(
            &na,
            &format!("link add {dev_a} type veth peer name {dev_b} netns {nb}"),
        );
    }

    fn underlay_mtu(&mut self, role: Role, dev: &str) {
        if let Some(m) = self.underlay_mtu {
            let ns = self.ns(role);
            self.ip(&ns, &format!("link set {dev} mtu {m}"));
        }
    }

    fn addr(&mut self, role: Role, dev: &str, addr: Ipv4Addr, len: u8) {
        let ns = self.ns(role);
        self.ip(&ns, &format!("addr add {addr}/{len} dev {dev}"));
    }

    fn up(&mut self, role: Role, dev: &str) {
        let ns = self.ns(role);
        self.ip(&ns, &format!("link set {dev} up"));
    }

    fn add_bridge(&mut self, role: Role) {
        let ns = self.ns(role);
        self.ip(&ns, "link add lp-br type bridge");
    }

    fn master(&mut self, role: Role, dev: &str) {
        let ns = self.ns(role);
        self.ip(&ns, &format!("link set {dev} master lp-br"));
    }

    fn shape(&mut self, role: Role, dev: &str) {
        if let Some(t) = self.tbf {
            let ns = self.ns(role);
            self.commands.push(Cmd::tc_in(&ns, &t.qdisc_args(dev)));
        }
    }

    /// Pair `k` with its server on `lp-sK` and client on `lp-cK` (198.18.K.x).
    fn pair(&mut self, k: u32, server_device: &str, client_device: &str) {
        self.pairs.push(Pair {
            index: k,
            server_ns: self.ns(Role::Server(k)),
            client_ns: self.ns(Role::Client(k)),
            server_addr: server_addr(k),
            client_addr: client_addr(k),
            server_device: server_device.into(),
            client_device: client_device.into(),
        });
    }

    /// Addresses and up on pair `k`'s host devices `lp-sK` and `lp-cK`.
    fn hosts_up(&mut self, k: u32) {
        let (s, c) = (format!("lp-s{k}"), format!("lp-c{k}"));
        self.addr(Role::Server(k), &s, server_addr(k), PREFIX_LEN);
        self.addr(Role::Client(k), &c, client_addr(k), PREFIX_LEN);
        self.up(Role::Server(k), &s);
        self.up(Role::Client(k), &c);
    }

    fn pair_namespaces(&mut self, n: u32) {
        for k in 1..=n {
            self.netns(Role::Server(k));
            self.netns(Role::Client(k));
        }
        for k in 1..=n {
            self.lo_up(Role::Server(k));
            self.lo_up(Role::Client(k));
        }
    }

    /// `loopback`: one namespace, every pair's server address on `lo`.
    fn loopback(&mut self, n: u32) {
        self.netns(Role::Host);
        let ns = self.ns(Role::Host);
        if let Some(m) = self.mtu {
            self.ip(&ns, &format!("link set lo mtu {m}"));
        }
        self.ip(&ns, "link set lo up");
        for k in 1..=n {
            self.ip(&ns, &format!("addr add {}/32 dev lo", server_addr(k)));
            self.pairs.push(Pair {
                index: k,
                server_ns: ns.clone(),
                client_ns: ns.clone(),
                server_addr: server_addr(k),
                client_addr: server_addr(k),
                server_device: "lo".into(),
                client_device: "lo".into(),
            });
        }
        // One qdisc: both directions and every pair share it.
        self.shape(Role::Host, "lo");
    }

    /// One pair, its two hosts joined by one veth (`lp-s1` — `lp-c1`).
    fn direct(&mut self) {
        self.pair_namespaces(1);
        self.veth(Role::Server(1), "lp-s1", Role::Client(1), "lp-c1");
        self.underlay_mtu(Role::Server(1), "lp-s1");
        self.underlay_mtu(Role::Client(1), "lp-c1");
        self.hosts_up(1);
        self.shape(Role::Server(1), "lp-s1");
        self.shape(Role::Client(1), "lp-c1");
        self.pair(1, "lp-s1", "lp-c1");
    }

    /// N pairs through one wire between two bridged edges.
    fn wire(&mut self, n: u32) {
        let (se, ce) = (Role::ServerEdge, Role::ClientEdge);
        self.netns(se);
        self.netns(ce);
        self.pair_namespaces(n);
        self.veth(se, "lp-ws", ce, "lp-wc");
        self.underlay_mtu(se, "lp-ws");
        self.underlay_mtu(ce, "lp-wc");
        for (edge, wire) in [(se, "lp-ws"), (ce, "lp-wc")] {
            self.add_bridge(edge);
            self.master(edge, wire);
            self.up(edge, "lp-br");
            self.up(edge, wire);
        }
        self.shape(se, "lp-ws");
        self.shape(ce, "lp-wc");
        for k in 1..=n {
            let port = format!("lp-p{k}");
            let (s, c) = (format!("lp-s{k}"), format!("lp-c{k}"));
            self.veth(se, &port, Role::Server(k), &s);
            self.veth(ce, &port, Role::Client(k), &c);
            for (role, dev) in [
                (se, &port),
                (ce, &port),
                (Role::Server(k), &s),
                (Role::Client(k), &c),
            ] {
                self.underlay_mtu(role, dev);
            }
            for edge in [se, ce] {
                self.master(edge, &port);
                self.up(edge, &port);
            }
            self.hosts_up(k);
            self.pair(k, &s, &c);
        }
    }

    /// A VXLAN tunnel between pair `k`'s hosts over their `lp-sK`/`lp-cK`;
    /// the pair's traffic moves into it (198.19.K.x on `lp-vxK`).
    fn vxlan(&mut self, k: u32) {
        let (s, c, vx) = (format!("lp-s{k}"), format!("lp-c{k}"), format!("lp-vx{k}"));
        let (sa, ca) = (server_addr(k), client_addr(k));
        for (role, local, remote, under) in
            [(Role::Server(k), sa, ca, &s), (Role::Client(k), ca, sa, &c)]
        {
            let ns = self.ns(role);
            self.ip(
                &ns,
                &format!(
                    "link add {vx} type vxlan id {k} local {local} remote {remote} dev {under} dstport {VXLAN_PORT}"
                ),
            );
        }
        if let Some(m) = self.mtu {
            for role in [Role::Server(k), Role::Client(k)] {
                let ns = self.ns(role);
                self.ip(&ns, &format!("link set {vx} mtu {m}"));
            }
        }
        self.addr(Role::Server(k), &vx, overlay_server_addr(k), PREFIX_LEN);
        self.addr(Role::Client(k), &vx, overlay_client_addr(k), PREFIX_LEN);
        self.up(Role::Server(k), &vx);
        self.up(Role::Client(k), &vx);
        let p = self
            .pairs
            .iter_mut()
            .find(|p| p.index == k)
            .expect("pair built");
        p.server_addr = overlay_server_addr(k);
        p.client_addr = overlay_client_addr(k);
        p.server_device = vx.clone();
        p.client_device = vx;
    }

    /// Every host on one bridge; each host's port shaped on both ends.
    fn switched(&mut self, n: u32) {
        let sw = Role::Switch;
        self.netns(sw);
        self.pair_namespaces(n);
        self.add_bridge(sw);
        self.up(sw, "lp-br");
        for k in 1..=n {
            let (s, c) = (format!("lp-s{k}"), format!("lp-c{k}"));
            let (ps, pc) = (format!("lp-ps{k}"), format!("lp-pc{k}"));
            self.veth(sw, &ps, Role::Server(k), &s);
            self.veth(sw, &pc, Role::Client(k), &c);
            for (role, dev) in [
                (sw, &ps),
                (sw, &pc),
                (Role::Server(k), &s),
                (Role::Client(k), &c),
            ] {
                self.underlay_mtu(role, dev);
            }
            for port in [&ps, &pc] {
                self.master(sw, port);
                self.up(sw, port);
            }
            self.hosts_up(k);
            for (role, dev) in [
                (Role::Server(k), &s),
                (Role::Client(k), &c),
                (sw, &ps),
                (sw, &pc),
            ] {
                self.shape(role, dev);
            }
            self.pair(k, &s, &c);
        }
    }

    /// Every host a macvlan device on the underlay veth between two edges.
    fn macvlan(&mut self, n: u32) {
        let (se, ce) = (Role::ServerEdge, Role::ClientEdge);
        self.netns(se);
        self.netns(ce);
        self.pair_namespaces(n);
        self.veth(se, "lp-us", ce, "lp-uc");
        self.underlay_mtu(se, "lp-us");
        self.underlay_mtu(ce, "lp-uc");
        self.up(se, "lp-us");
        self.up(ce, "lp-uc");
        self.shape(se, "lp-us");
        self.shape(ce, "lp-uc");
        for k in 1..=n {
            for (edge, under, host, dev) in [
                (se, "lp-us", Role::Server(k), format!("lp-s{k}")),
                (ce, "lp-uc", Role::Client(k), format!("lp-c{k}")),
            ] {
                let (edge_ns, host_ns) = (self.ns(edge), self.ns(host));
                self.ip(
                    &edge_ns,
                    &format!("link add {dev} link {under} type macvlan mode bridge"),
                );
                self.ip(&edge_ns, &format!("link set {dev} netns {host_ns}"));
                self.underlay_mtu(host, &dev);
            }
            self.hosts_up(k);
            self.pair(k, &format!("lp-s{k}"), &format!("lp-c{k}"));
        }
    }
}

#[cfg(test)]
mod tests;
