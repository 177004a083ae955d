//! What a configuration looked like while it was up, for the results: every
//! namespace's links (as `ip -d link` shows them), queueing disciplines with
//! their counters (`tc -s qdisc`), the offloads of the devices carrying test
//! traffic (`ethtool -k`), and the sysctls that shape TCP. With the commands
//! that built it, this is what another lab needs to rebuild the path and what
//! a reader needs to trust a comparison of two.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sys::System;
use crate::Topology;

/// The sysctls recorded, read inside each namespace (most of them are a
/// namespace's own).
pub const SYSCTLS: [&str; 12] = [
    "net/core/rmem_default",
    "net/core/rmem_max",
    "net/core/wmem_default",
    "net/core/wmem_max",
    "net/core/netdev_max_backlog",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_mem",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_available_congestion_control",
    "net/ipv4/tcp_mtu_probing",
    "net/ipv4/tcp_slow_start_after_idle",
];

/// One namespace, as it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceSnapshot {
    /// The namespace's name.
    pub name: String,
    /// `ip -o -d link show`, a line per device.
    pub links: Vec<String>,
    /// `tc -s qdisc show`, as printed.
    pub qdiscs: Vec<String>,
    /// Per test-traffic device, `ethtool -k`'s features: `"on"`, `"off"` (and
    /// `[fixed]` where ethtool says so). Empty when ethtool is missing.
    #[serde(default)]
    pub offloads: BTreeMap<String, BTreeMap<String, String>>,
    /// The sysctls of [`SYSCTLS`], by dotted name.
    pub sysctls: BTreeMap<String, String>,
}

/// Every namespace of `topology` as it is now.
pub fn snapshot<S: System>(sys: &S, topology: &Topology) -> Vec<NamespaceSnapshot> {
    let devices: Vec<(&str, &str)> = topology
        .pairs
        .iter()
        .flat_map(|p| {
            [
                (p.server_ns.as_str(), p.server_device.as_str()),
                (p.client_ns.as_str(), p.client_device.as_str()),
            ]
        })
        .collect();
    let has_ethtool = sys.has_program("ethtool");
    topology
        .namespaces
        .iter()
        .map(|ns| {
            let run = |program: &str, args: &[&str]| -> Vec<String> {
                let mut all = vec![
                    "netns".to_string(),
                    "exec".into(),
                    ns.clone(),
                    program.into(),
                ];
                all.extend(args.iter().map(|a| a.to_string()));
                sys.run("ip", &all)
                    .ok()
                    .filter(|o| o.success)
                    .map(|o| o.stdout.lines().map(str::to_string).collect())
                    .unwrap_or_default()
            };
            let mut offloads = BTreeMap::new();
            if has_ethtool {
                for (_, dev) in devices.iter().filter(|(n, _)| *n == ns.as_str()) {
                    let features = parse_ethtool_k(&run("ethtool", &["-k", dev]).join("\n"));
                    if !features.is_empty() {
                        offloads.insert((*dev).to_string(), features);
                    }
                }
            }
            let sysctls = SYSCTLS
                .iter()
                .filter_map(|k| {
                    let v = run("cat", &[&format!("/proc/sys/{k}")]).join(" ");
                    let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
                    (!v.is_empty()).then(|| (k.replace('/', "."), v))
                })
                .collect();
            NamespaceSnapshot {
                name: ns.clone(),
                links: run("ip", &["-o", "-d", "link", "show"]),
                qdiscs: run("tc", &["-s", "qdisc", "show"]),
                offloads,
                sysctls,
            }
        })
        .collect()
}

/// `ethtool -k`'s `feature: on [fixed]` lines as a map.
pub fn parse_ethtool_k(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let (k, v) = (k.trim(), v.trim());
            // The first line names the device; sub-features are indented too.
            (!k.is_empty() && !k.starts_with("Features for") && !v.is_empty())
                .then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_features_are_read_as_a_map() {
        let text = "Features for lp-c1:\nrx-checksumming: on\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\ngeneric-segmentation-offload: on\n";
        let f = parse_ethtool_k(text);
        assert_eq!(f.len(), 4);
        assert_eq!(f["tx-checksum-ipv4"], "off [fixed]");
        assert_eq!(f["generic-segmentation-offload"], "on");
        assert!(!f.contains_key("Features for lp-c1"));
    }
}
