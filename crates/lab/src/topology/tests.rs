//! Golden command lists: the exact `ip`/`tc` commands of every built-in
//! configuration, and of options and pairs on them. `docs/lab.md` prints the
//! same lists; a change here is a change of what users' results record.

use super::*;
use crate::{Catalog, Program};

fn build(spec: &str, pairs: u32) -> Topology {
    let c = Catalog::builtin().resolve(spec).unwrap();
    Topology::build(&c, pairs).unwrap()
}

/// Compares the commands of `spec` with `pairs` pairs with `expected`, one
/// command per line (indentation and blank lines ignored).
fn golden(spec: &str, pairs: u32, expected: &str) {
    let got = build(spec, pairs).command_lines();
    let want: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{spec} × {pairs}: command {} differs", i + 1);
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{spec} × {pairs}: {} commands, expected {}; all:\n{}",
        got.len(),
        want.len(),
        got.join("\n")
    );
}

#[test]
fn golden_loopback() {
    golden(
        "loopback",
        1,
        "
        ip netns add lp-loopback-host
        ip -n lp-loopback-host link set lo up
        ip -n lp-loopback-host addr add 198.18.1.1/32 dev lo
        ",
    );
}

#[test]
fn golden_veth() {
    golden(
        "veth",
        1,
        "
        ip netns add lp-veth-s1
        ip netns add lp-veth-c1
        ip -n lp-veth-s1 link set lo up
        ip -n lp-veth-c1 link set lo up
        ip -n lp-veth-s1 link add lp-s1 type veth peer name lp-c1 netns lp-veth-c1
        ip -n lp-veth-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-veth-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-veth-s1 link set lp-s1 up
        ip -n lp-veth-c1 link set lp-c1 up
        ",
    );
}

#[test]
fn golden_veth_10g() {
    golden(
        "veth-10g",
        1,
        "
        ip netns add lp-veth-10g-s1
        ip netns add lp-veth-10g-c1
        ip -n lp-veth-10g-s1 link set lo up
        ip -n lp-veth-10g-c1 link set lo up
        ip -n lp-veth-10g-s1 link add lp-s1 type veth peer name lp-c1 netns lp-veth-10g-c1
        ip -n lp-veth-10g-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-veth-10g-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-veth-10g-s1 link set lp-s1 up
        ip -n lp-veth-10g-c1 link set lp-c1 up
        tc -n lp-veth-10g-s1 qdisc add dev lp-s1 root tbf rate 10gbit burst 1250000 latency 5ms
        tc -n lp-veth-10g-c1 qdisc add dev lp-c1 root tbf rate 10gbit burst 1250000 latency 5ms
        ",
    );
}

#[test]
fn golden_veth_1g() {
    golden(
        "veth-1g",
        1,
        "
        ip netns add lp-veth-1g-s1
        ip netns add lp-veth-1g-c1
        ip -n lp-veth-1g-s1 link set lo up
        ip -n lp-veth-1g-c1 link set lo up
        ip -n lp-veth-1g-s1 link add lp-s1 type veth peer name lp-c1 netns lp-veth-1g-c1
        ip -n lp-veth-1g-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-veth-1g-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-veth-1g-s1 link set lp-s1 up
        ip -n lp-veth-1g-c1 link set lp-c1 up
        tc -n lp-veth-1g-s1 qdisc add dev lp-s1 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-veth-1g-c1 qdisc add dev lp-c1 root tbf rate 1gbit burst 131072 latency 5ms
        ",
    );
}

#[test]
fn golden_vxlan() {
    golden(
        "vxlan",
        1,
        "
        ip netns add lp-vxlan-s1
        ip netns add lp-vxlan-c1
        ip -n lp-vxlan-s1 link set lo up
        ip -n lp-vxlan-c1 link set lo up
        ip -n lp-vxlan-s1 link add lp-s1 type veth peer name lp-c1 netns lp-vxlan-c1
        ip -n lp-vxlan-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-vxlan-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-vxlan-s1 link set lp-s1 up
        ip -n lp-vxlan-c1 link set lp-c1 up
        ip -n lp-vxlan-s1 link add lp-vx1 type vxlan id 1 local 198.18.1.1 remote 198.18.1.2 dev lp-s1 dstport 4789
        ip -n lp-vxlan-c1 link add lp-vx1 type vxlan id 1 local 198.18.1.2 remote 198.18.1.1 dev lp-c1 dstport 4789
        ip -n lp-vxlan-s1 addr add 198.19.1.1/24 dev lp-vx1
        ip -n lp-vxlan-c1 addr add 198.19.1.2/24 dev lp-vx1
        ip -n lp-vxlan-s1 link set lp-vx1 up
        ip -n lp-vxlan-c1 link set lp-vx1 up
        ",
    );
}

#[test]
fn golden_bridge() {
    golden(
        "bridge",
        1,
        "
        ip netns add lp-bridge-switch
        ip netns add lp-bridge-s1
        ip netns add lp-bridge-c1
        ip -n lp-bridge-s1 link set lo up
        ip -n lp-bridge-c1 link set lo up
        ip -n lp-bridge-switch link add lp-br type bridge
        ip -n lp-bridge-switch link set lp-br up
        ip -n lp-bridge-switch link add lp-ps1 type veth peer name lp-s1 netns lp-bridge-s1
        ip -n lp-bridge-switch link add lp-pc1 type veth peer name lp-c1 netns lp-bridge-c1
        ip -n lp-bridge-switch link set lp-ps1 master lp-br
        ip -n lp-bridge-switch link set lp-ps1 up
        ip -n lp-bridge-switch link set lp-pc1 master lp-br
        ip -n lp-bridge-switch link set lp-pc1 up
        ip -n lp-bridge-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-bridge-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-bridge-s1 link set lp-s1 up
        ip -n lp-bridge-c1 link set lp-c1 up
        ",
    );
}

#[test]
fn golden_macvlan() {
    golden(
        "macvlan",
        1,
        "
        ip netns add lp-macvlan-sedge
        ip netns add lp-macvlan-cedge
        ip netns add lp-macvlan-s1
        ip netns add lp-macvlan-c1
        ip -n lp-macvlan-s1 link set lo up
        ip -n lp-macvlan-c1 link set lo up
        ip -n lp-macvlan-sedge link add lp-us type veth peer name lp-uc netns lp-macvlan-cedge
        ip -n lp-macvlan-sedge link set lp-us up
        ip -n lp-macvlan-cedge link set lp-uc up
        ip -n lp-macvlan-sedge link add lp-s1 link lp-us type macvlan mode bridge
        ip -n lp-macvlan-sedge link set lp-s1 netns lp-macvlan-s1
        ip -n lp-macvlan-cedge link add lp-c1 link lp-uc type macvlan mode bridge
        ip -n lp-macvlan-cedge link set lp-c1 netns lp-macvlan-c1
        ip -n lp-macvlan-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-macvlan-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-macvlan-s1 link set lp-s1 up
        ip -n lp-macvlan-c1 link set lp-c1 up
        ",
    );
}

#[test]
fn golden_loopback_with_options_and_pairs() {
    golden(
        "loopback,mtu=9000,rate=10gbit",
        2,
        "
        ip netns add lp-loopback-mtu9000-rate10gbit-host
        ip -n lp-loopback-mtu9000-rate10gbit-host link set lo mtu 9000
        ip -n lp-loopback-mtu9000-rate10gbit-host link set lo up
        ip -n lp-loopback-mtu9000-rate10gbit-host addr add 198.18.1.1/32 dev lo
        ip -n lp-loopback-mtu9000-rate10gbit-host addr add 198.18.2.1/32 dev lo
        tc -n lp-loopback-mtu9000-rate10gbit-host qdisc add dev lo root tbf rate 10gbit burst 1250000 latency 5ms
        ",
    );
}

#[test]
fn golden_veth_mtu() {
    golden(
        "veth,mtu=9000",
        1,
        "
        ip netns add lp-veth-mtu9000-s1
        ip netns add lp-veth-mtu9000-c1
        ip -n lp-veth-mtu9000-s1 link set lo up
        ip -n lp-veth-mtu9000-c1 link set lo up
        ip -n lp-veth-mtu9000-s1 link add lp-s1 type veth peer name lp-c1 netns lp-veth-mtu9000-c1
        ip -n lp-veth-mtu9000-s1 link set lp-s1 mtu 9000
        ip -n lp-veth-mtu9000-c1 link set lp-c1 mtu 9000
        ip -n lp-veth-mtu9000-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-veth-mtu9000-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-veth-mtu9000-s1 link set lp-s1 up
        ip -n lp-veth-mtu9000-c1 link set lp-c1 up
        ",
    );
}

#[test]
fn golden_veth_1g_pairs_share_the_wire() {
    golden(
        "veth-1g",
        2,
        "
        ip netns add lp-veth-1g-sedge
        ip netns add lp-veth-1g-cedge
        ip netns add lp-veth-1g-s1
        ip netns add lp-veth-1g-c1
        ip netns add lp-veth-1g-s2
        ip netns add lp-veth-1g-c2
        ip -n lp-veth-1g-s1 link set lo up
        ip -n lp-veth-1g-c1 link set lo up
        ip -n lp-veth-1g-s2 link set lo up
        ip -n lp-veth-1g-c2 link set lo up
        ip -n lp-veth-1g-sedge link add lp-ws type veth peer name lp-wc netns lp-veth-1g-cedge
        ip -n lp-veth-1g-sedge link add lp-br type bridge
        ip -n lp-veth-1g-sedge link set lp-ws master lp-br
        ip -n lp-veth-1g-sedge link set lp-br up
        ip -n lp-veth-1g-sedge link set lp-ws up
        ip -n lp-veth-1g-cedge link add lp-br type bridge
        ip -n lp-veth-1g-cedge link set lp-wc master lp-br
        ip -n lp-veth-1g-cedge link set lp-br up
        ip -n lp-veth-1g-cedge link set lp-wc up
        tc -n lp-veth-1g-sedge qdisc add dev lp-ws root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-veth-1g-cedge qdisc add dev lp-wc root tbf rate 1gbit burst 131072 latency 5ms
        ip -n lp-veth-1g-sedge link add lp-p1 type veth peer name lp-s1 netns lp-veth-1g-s1
        ip -n lp-veth-1g-cedge link add lp-p1 type veth peer name lp-c1 netns lp-veth-1g-c1
        ip -n lp-veth-1g-sedge link set lp-p1 master lp-br
        ip -n lp-veth-1g-sedge link set lp-p1 up
        ip -n lp-veth-1g-cedge link set lp-p1 master lp-br
        ip -n lp-veth-1g-cedge link set lp-p1 up
        ip -n lp-veth-1g-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-veth-1g-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-veth-1g-s1 link set lp-s1 up
        ip -n lp-veth-1g-c1 link set lp-c1 up
        ip -n lp-veth-1g-sedge link add lp-p2 type veth peer name lp-s2 netns lp-veth-1g-s2
        ip -n lp-veth-1g-cedge link add lp-p2 type veth peer name lp-c2 netns lp-veth-1g-c2
        ip -n lp-veth-1g-sedge link set lp-p2 master lp-br
        ip -n lp-veth-1g-sedge link set lp-p2 up
        ip -n lp-veth-1g-cedge link set lp-p2 master lp-br
        ip -n lp-veth-1g-cedge link set lp-p2 up
        ip -n lp-veth-1g-s2 addr add 198.18.2.1/24 dev lp-s2
        ip -n lp-veth-1g-c2 addr add 198.18.2.2/24 dev lp-c2
        ip -n lp-veth-1g-s2 link set lp-s2 up
        ip -n lp-veth-1g-c2 link set lp-c2 up
        ",
    );
}

#[test]
fn golden_vxlan_mtu_rate() {
    golden(
        "vxlan,mtu=1450,rate=10gbit",
        1,
        "
        ip netns add lp-vxlan-mtu1450-rate10gbit-s1
        ip netns add lp-vxlan-mtu1450-rate10gbit-c1
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link set lo up
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link set lo up
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link add lp-s1 type veth peer name lp-c1 netns lp-vxlan-mtu1450-rate10gbit-c1
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link set lp-s1 mtu 1500
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link set lp-c1 mtu 1500
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link set lp-s1 up
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link set lp-c1 up
        tc -n lp-vxlan-mtu1450-rate10gbit-s1 qdisc add dev lp-s1 root tbf rate 10gbit burst 1250000 latency 5ms
        tc -n lp-vxlan-mtu1450-rate10gbit-c1 qdisc add dev lp-c1 root tbf rate 10gbit burst 1250000 latency 5ms
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link add lp-vx1 type vxlan id 1 local 198.18.1.1 remote 198.18.1.2 dev lp-s1 dstport 4789
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link add lp-vx1 type vxlan id 1 local 198.18.1.2 remote 198.18.1.1 dev lp-c1 dstport 4789
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link set lp-vx1 mtu 1450
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link set lp-vx1 mtu 1450
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 addr add 198.19.1.1/24 dev lp-vx1
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 addr add 198.19.1.2/24 dev lp-vx1
        ip -n lp-vxlan-mtu1450-rate10gbit-s1 link set lp-vx1 up
        ip -n lp-vxlan-mtu1450-rate10gbit-c1 link set lp-vx1 up
        ",
    );
}

#[test]
fn golden_vxlan_pairs() {
    golden(
        "vxlan",
        2,
        "
        ip netns add lp-vxlan-sedge
        ip netns add lp-vxlan-cedge
        ip netns add lp-vxlan-s1
        ip netns add lp-vxlan-c1
        ip netns add lp-vxlan-s2
        ip netns add lp-vxlan-c2
        ip -n lp-vxlan-s1 link set lo up
        ip -n lp-vxlan-c1 link set lo up
        ip -n lp-vxlan-s2 link set lo up
        ip -n lp-vxlan-c2 link set lo up
        ip -n lp-vxlan-sedge link add lp-ws type veth peer name lp-wc netns lp-vxlan-cedge
        ip -n lp-vxlan-sedge link add lp-br type bridge
        ip -n lp-vxlan-sedge link set lp-ws master lp-br
        ip -n lp-vxlan-sedge link set lp-br up
        ip -n lp-vxlan-sedge link set lp-ws up
        ip -n lp-vxlan-cedge link add lp-br type bridge
        ip -n lp-vxlan-cedge link set lp-wc master lp-br
        ip -n lp-vxlan-cedge link set lp-br up
        ip -n lp-vxlan-cedge link set lp-wc up
        ip -n lp-vxlan-sedge link add lp-p1 type veth peer name lp-s1 netns lp-vxlan-s1
        ip -n lp-vxlan-cedge link add lp-p1 type veth peer name lp-c1 netns lp-vxlan-c1
        ip -n lp-vxlan-sedge link set lp-p1 master lp-br
        ip -n lp-vxlan-sedge link set lp-p1 up
        ip -n lp-vxlan-cedge link set lp-p1 master lp-br
        ip -n lp-vxlan-cedge link set lp-p1 up
        ip -n lp-vxlan-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-vxlan-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-vxlan-s1 link set lp-s1 up
        ip -n lp-vxlan-c1 link set lp-c1 up
        ip -n lp-vxlan-sedge link add lp-p2 type veth peer name lp-s2 netns lp-vxlan-s2
        ip -n lp-vxlan-cedge link add lp-p2 type veth peer name lp-c2 netns lp-vxlan-c2
        ip -n lp-vxlan-sedge link set lp-p2 master lp-br
        ip -n lp-vxlan-sedge link set lp-p2 up
        ip -n lp-vxlan-cedge link set lp-p2 master lp-br
        ip -n lp-vxlan-cedge link set lp-p2 up
        ip -n lp-vxlan-s2 addr add 198.18.2.1/24 dev lp-s2
        ip -n lp-vxlan-c2 addr add 198.18.2.2/24 dev lp-c2
        ip -n lp-vxlan-s2 link set lp-s2 up
        ip -n lp-vxlan-c2 link set lp-c2 up
        ip -n lp-vxlan-s1 link add lp-vx1 type vxlan id 1 local 198.18.1.1 remote 198.18.1.2 dev lp-s1 dstport 4789
        ip -n lp-vxlan-c1 link add lp-vx1 type vxlan id 1 local 198.18.1.2 remote 198.18.1.1 dev lp-c1 dstport 4789
        ip -n lp-vxlan-s1 addr add 198.19.1.1/24 dev lp-vx1
        ip -n lp-vxlan-c1 addr add 198.19.1.2/24 dev lp-vx1
        ip -n lp-vxlan-s1 link set lp-vx1 up
        ip -n lp-vxlan-c1 link set lp-vx1 up
        ip -n lp-vxlan-s2 link add lp-vx2 type vxlan id 2 local 198.18.2.1 remote 198.18.2.2 dev lp-s2 dstport 4789
        ip -n lp-vxlan-c2 link add lp-vx2 type vxlan id 2 local 198.18.2.2 remote 198.18.2.1 dev lp-c2 dstport 4789
        ip -n lp-vxlan-s2 addr add 198.19.2.1/24 dev lp-vx2
        ip -n lp-vxlan-c2 addr add 198.19.2.2/24 dev lp-vx2
        ip -n lp-vxlan-s2 link set lp-vx2 up
        ip -n lp-vxlan-c2 link set lp-vx2 up
        ",
    );
}

#[test]
fn golden_bridge_rate_pairs() {
    golden(
        "bridge,rate=1gbit,mtu=9000",
        2,
        "
        ip netns add lp-bridge-rate1gbit-mtu9000-switch
        ip netns add lp-bridge-rate1gbit-mtu9000-s1
        ip netns add lp-bridge-rate1gbit-mtu9000-c1
        ip netns add lp-bridge-rate1gbit-mtu9000-s2
        ip netns add lp-bridge-rate1gbit-mtu9000-c2
        ip -n lp-bridge-rate1gbit-mtu9000-s1 link set lo up
        ip -n lp-bridge-rate1gbit-mtu9000-c1 link set lo up
        ip -n lp-bridge-rate1gbit-mtu9000-s2 link set lo up
        ip -n lp-bridge-rate1gbit-mtu9000-c2 link set lo up
        ip -n lp-bridge-rate1gbit-mtu9000-switch link add lp-br type bridge
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-br up
        ip -n lp-bridge-rate1gbit-mtu9000-switch link add lp-ps1 type veth peer name lp-s1 netns lp-bridge-rate1gbit-mtu9000-s1
        ip -n lp-bridge-rate1gbit-mtu9000-switch link add lp-pc1 type veth peer name lp-c1 netns lp-bridge-rate1gbit-mtu9000-c1
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps1 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc1 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-s1 link set lp-s1 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-c1 link set lp-c1 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps1 master lp-br
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps1 up
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc1 master lp-br
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc1 up
        ip -n lp-bridge-rate1gbit-mtu9000-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-bridge-rate1gbit-mtu9000-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-bridge-rate1gbit-mtu9000-s1 link set lp-s1 up
        ip -n lp-bridge-rate1gbit-mtu9000-c1 link set lp-c1 up
        tc -n lp-bridge-rate1gbit-mtu9000-s1 qdisc add dev lp-s1 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-c1 qdisc add dev lp-c1 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-switch qdisc add dev lp-ps1 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-switch qdisc add dev lp-pc1 root tbf rate 1gbit burst 131072 latency 5ms
        ip -n lp-bridge-rate1gbit-mtu9000-switch link add lp-ps2 type veth peer name lp-s2 netns lp-bridge-rate1gbit-mtu9000-s2
        ip -n lp-bridge-rate1gbit-mtu9000-switch link add lp-pc2 type veth peer name lp-c2 netns lp-bridge-rate1gbit-mtu9000-c2
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps2 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc2 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-s2 link set lp-s2 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-c2 link set lp-c2 mtu 9000
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps2 master lp-br
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-ps2 up
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc2 master lp-br
        ip -n lp-bridge-rate1gbit-mtu9000-switch link set lp-pc2 up
        ip -n lp-bridge-rate1gbit-mtu9000-s2 addr add 198.18.2.1/24 dev lp-s2
        ip -n lp-bridge-rate1gbit-mtu9000-c2 addr add 198.18.2.2/24 dev lp-c2
        ip -n lp-bridge-rate1gbit-mtu9000-s2 link set lp-s2 up
        ip -n lp-bridge-rate1gbit-mtu9000-c2 link set lp-c2 up
        tc -n lp-bridge-rate1gbit-mtu9000-s2 qdisc add dev lp-s2 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-c2 qdisc add dev lp-c2 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-switch qdisc add dev lp-ps2 root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-bridge-rate1gbit-mtu9000-switch qdisc add dev lp-pc2 root tbf rate 1gbit burst 131072 latency 5ms
        ",
    );
}

#[test]
fn golden_macvlan_pairs() {
    golden(
        "macvlan,rate=1gbit,mtu=9000",
        2,
        "
        ip netns add lp-macvlan-rate1gbit-mtu9000-sedge
        ip netns add lp-macvlan-rate1gbit-mtu9000-cedge
        ip netns add lp-macvlan-rate1gbit-mtu9000-s1
        ip netns add lp-macvlan-rate1gbit-mtu9000-c1
        ip netns add lp-macvlan-rate1gbit-mtu9000-s2
        ip netns add lp-macvlan-rate1gbit-mtu9000-c2
        ip -n lp-macvlan-rate1gbit-mtu9000-s1 link set lo up
        ip -n lp-macvlan-rate1gbit-mtu9000-c1 link set lo up
        ip -n lp-macvlan-rate1gbit-mtu9000-s2 link set lo up
        ip -n lp-macvlan-rate1gbit-mtu9000-c2 link set lo up
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link add lp-us type veth peer name lp-uc netns lp-macvlan-rate1gbit-mtu9000-cedge
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link set lp-us mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link set lp-uc mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link set lp-us up
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link set lp-uc up
        tc -n lp-macvlan-rate1gbit-mtu9000-sedge qdisc add dev lp-us root tbf rate 1gbit burst 131072 latency 5ms
        tc -n lp-macvlan-rate1gbit-mtu9000-cedge qdisc add dev lp-uc root tbf rate 1gbit burst 131072 latency 5ms
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link add lp-s1 link lp-us type macvlan mode bridge
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link set lp-s1 netns lp-macvlan-rate1gbit-mtu9000-s1
        ip -n lp-macvlan-rate1gbit-mtu9000-s1 link set lp-s1 mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link add lp-c1 link lp-uc type macvlan mode bridge
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link set lp-c1 netns lp-macvlan-rate1gbit-mtu9000-c1
        ip -n lp-macvlan-rate1gbit-mtu9000-c1 link set lp-c1 mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-s1 addr add 198.18.1.1/24 dev lp-s1
        ip -n lp-macvlan-rate1gbit-mtu9000-c1 addr add 198.18.1.2/24 dev lp-c1
        ip -n lp-macvlan-rate1gbit-mtu9000-s1 link set lp-s1 up
        ip -n lp-macvlan-rate1gbit-mtu9000-c1 link set lp-c1 up
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link add lp-s2 link lp-us type macvlan mode bridge
        ip -n lp-macvlan-rate1gbit-mtu9000-sedge link set lp-s2 netns lp-macvlan-rate1gbit-mtu9000-s2
        ip -n lp-macvlan-rate1gbit-mtu9000-s2 link set lp-s2 mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link add lp-c2 link lp-uc type macvlan mode bridge
        ip -n lp-macvlan-rate1gbit-mtu9000-cedge link set lp-c2 netns lp-macvlan-rate1gbit-mtu9000-c2
        ip -n lp-macvlan-rate1gbit-mtu9000-c2 link set lp-c2 mtu 9000
        ip -n lp-macvlan-rate1gbit-mtu9000-s2 addr add 198.18.2.1/24 dev lp-s2
        ip -n lp-macvlan-rate1gbit-mtu9000-c2 addr add 198.18.2.2/24 dev lp-c2
        ip -n lp-macvlan-rate1gbit-mtu9000-s2 link set lp-s2 up
        ip -n lp-macvlan-rate1gbit-mtu9000-c2 link set lp-c2 up
        ",
    );
}

#[test]
fn every_configuration_is_built_inside_its_own_namespaces() {
    let cat = Catalog::builtin();
    for c in cat.configs() {
        for pairs in [1, 2, 8] {
            let t = Topology::build(c, pairs).unwrap();
            let prefix = format!("lp-{}-", c.name);
            assert!(
                t.namespaces.iter().all(|n| n.starts_with(&prefix)),
                "{:?}",
                t.namespaces
            );
            assert_eq!(t.pairs.len(), pairs as usize);
            for cmd in &t.commands {
                let line = cmd.to_string();
                // Every command but `ip netns add` runs inside a lab namespace.
                if cmd.args[0] == "netns" {
                    assert_eq!(cmd.args[1], "add", "{line}");
                    assert!(t.namespaces.contains(&cmd.args[2]), "{line}");
                } else {
                    assert_eq!(cmd.args[0], "-n", "{line}");
                    assert!(t.namespaces.contains(&cmd.args[1]), "{line}");
                }
                // Interface names fit IFNAMSIZ (15 characters) and are the lab's.
                for w in cmd.args.windows(2) {
                    if matches!(
                        w[0].as_str(),
                        "dev" | "add" | "name" | "link" | "set" | "master"
                    ) && !w[1].starts_with("lp-")
                    {
                        continue;
                    }
                    if w[1].starts_with("lp-") && !t.namespaces.contains(&w[1]) {
                        assert!(w[1].len() <= 15, "{line}: {} is too long", w[1]);
                    }
                }
                // Addresses only from 198.18.0.0/15.
                for a in cmd.args.iter().filter(|a| a.contains('.')) {
                    let ip = a.split('/').next().unwrap();
                    if let Ok(ip) = ip.parse::<std::net::Ipv4Addr>() {
                        let o = ip.octets();
                        assert!(o[0] == 198 && (o[1] == 18 || o[1] == 19), "{line}");
                    }
                }
            }
            for p in &t.pairs {
                let o = p.server_addr.octets();
                assert_eq!((o[0], o[2]), (198, p.index as u8));
            }
            // Shaping iff a rate: tc only for shaped configurations.
            let shaped = t.commands.iter().any(|c| c.program == Program::Tc);
            assert_eq!(shaped, c.rate.is_some(), "{}", c.name);
        }
    }
}

#[test]
fn pairs_are_where_the_addresses_are() {
    let t = build("vxlan", 2);
    let p = &t.pairs[1];
    assert_eq!(p.index, 2);
    assert_eq!(
        (p.server_ns.as_str(), p.client_ns.as_str()),
        ("lp-vxlan-s2", "lp-vxlan-c2")
    );
    assert_eq!(p.server_addr.to_string(), "198.19.2.1");
    assert_eq!(p.client_addr.to_string(), "198.19.2.2");
    assert_eq!(
        (p.server_device.as_str(), p.client_device.as_str()),
        ("lp-vx2", "lp-vx2")
    );

    let t = build("loopback", 3);
    assert_eq!(t.namespaces, ["lp-loopback-host"]);
    assert!(t
        .pairs
        .iter()
        .all(|p| p.server_ns == p.client_ns && p.client_device == "lo"));
    assert_eq!(t.pairs[2].server_addr.to_string(), "198.18.3.1");

    let t = build("veth-1g", 3);
    assert_eq!(
        t.namespaces,
        [
            "lp-veth-1g-sedge",
            "lp-veth-1g-cedge",
            "lp-veth-1g-s1",
            "lp-veth-1g-c1",
            "lp-veth-1g-s2",
            "lp-veth-1g-c2",
            "lp-veth-1g-s3",
            "lp-veth-1g-c3"
        ]
    );
    // With pairs, the wire is shaped, once per direction: the pairs share it.
    let tc: Vec<String> = t
        .commands
        .iter()
        .filter(|c| c.program == Program::Tc)
        .map(ToString::to_string)
        .collect();
    assert_eq!(tc.len(), 2);
    assert!(
        tc[0].contains("dev lp-ws") && tc[1].contains("dev lp-wc"),
        "{tc:?}"
    );
}

#[test]
fn descriptions_and_capacities() {
    let t = build("veth-10g", 1);
    assert_eq!(t.describe(), "veth-10g: veth, rate=10gbit, 1 pair");
    assert_eq!(t.capacity(), Some(BitsPerSecond(10_000_000_000)));
    assert_eq!(build("veth", 2).describe(), "veth: veth, 2 pairs");
    assert_eq!(build("veth", 2).capacity(), None);
    let br = build("bridge,rate=1gbit", 3);
    assert_eq!(br.pair_capacity(), Some(BitsPerSecond(1_000_000_000)));
    assert_eq!(br.capacity(), Some(BitsPerSecond(3_000_000_000)));
}

#[test]
fn pair_counts_are_bounded() {
    let c = Catalog::builtin();
    let veth = c.get("veth").unwrap();
    for bad in [0, MAX_PAIRS + 1] {
        let e = Topology::build(veth, bad).unwrap_err().to_string();
        assert!(e.contains("between 1 and 64"), "{e}");
    }
    assert_eq!(Topology::build(veth, MAX_PAIRS).unwrap().pairs.len(), 64);
}
