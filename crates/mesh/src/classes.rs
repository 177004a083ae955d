//! Path classes: what kind of path a pair of agents measures.
//!
//! - **node**: both agents on one node (`same-node`: the memory path, the
//!   analog of the studies' in-memory interconnect) or on two (`cross-node`:
//!   the wire); `unknown-node` when either states no node.
//! - **network**: the networks the two agents serve on, `pod` (the overlay),
//!   `host` (the underlay), or both in order (`pod-host`: a pod reaching a
//!   host-network agent); `unknown` when either states none.
//! - **zone**: `same-zone` or `cross-zone` when both agents state a zone,
//!   else nothing is said of zones.

use std::fmt;

use linkperf_measured::AgentIdentity;
use serde::{Deserialize, Serialize};

/// Whether a pair's two agents share a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Locality {
    /// One node: the memory path.
    SameNode,
    /// Two nodes: the wire.
    CrossNode,
    /// Either agent states no node.
    UnknownNode,
}

/// Whether a pair's two agents share a zone, when both state one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZonePath {
    /// Both in one zone.
    SameZone,
    /// In two zones.
    CrossZone,
    /// Either states no zone.
    Unknown,
}

/// The class of a pair's path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathClass {
    /// Same node or cross node.
    pub locality: Locality,
    /// `pod`, `host`, `pod-host`, `host-pod`, ... (source first when they differ).
    pub network: String,
    /// Same zone or cross zone, when known.
    pub zone: ZonePath,
}

impl PathClass {
    /// The class with another network path (for comparisons that vary only it).
    pub fn with_network(&self, network: &str) -> PathClass {
        PathClass {
            network: network.to_string(),
            ..self.clone()
        }
    }
}

impl fmt::Display for PathClass {
    /// `cross-node pod`, `same-node pod-host`, `cross-node cross-zone host`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = match self.locality {
            Locality::SameNode => "same-node",
            Locality::CrossNode => "cross-node",
            Locality::UnknownNode => "unknown-node",
        };
        let zone = match self.zone {
            ZonePath::SameZone => " same-zone",
            ZonePath::CrossZone => " cross-zone",
            ZonePath::Unknown => "",
        };
        write!(f, "{node}{zone} {}", self.network)
    }
}

/// The path class from agent `source` to agent `target`.
pub fn classify(source: &AgentIdentity, target: &AgentIdentity) -> PathClass {
    let locality = match (&source.node, &target.node) {
        (Some(a), Some(b)) if a == b => Locality::SameNode,
        (Some(_), Some(_)) => Locality::CrossNode,
        _ => Locality::UnknownNode,
    };
    let network = match (&source.network, &target.network) {
        (Some(a), Some(b)) if a == b => a.clone(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "unknown".to_string(),
    };
    let zone = match (&source.zone, &target.zone) {
        (Some(a), Some(b)) if a == b => ZonePath::SameZone,
        (Some(_), Some(_)) => ZonePath::CrossZone,
        _ => ZonePath::Unknown,
    };
    PathClass {
        locality,
        network,
        zone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node: &str, network: &str, zone: Option<&str>) -> AgentIdentity {
        AgentIdentity {
            node: Some(node.into()),
            network: Some(network.into()),
            zone: zone.map(Into::into),
        }
    }

    #[test]
    fn pairs_are_classed_by_node_network_and_zone() {
        let c = classify(&id("n1", "pod", None), &id("n2", "pod", None));
        assert_eq!(c.to_string(), "cross-node pod");
        let c = classify(&id("n1", "pod", None), &id("n1", "host", None));
        assert_eq!(c.to_string(), "same-node pod-host");
        let c = classify(&id("n1", "host", Some("a")), &id("n2", "host", Some("b")));
        assert_eq!(c.to_string(), "cross-node cross-zone host");
        let c = classify(&id("n1", "host", Some("a")), &id("n2", "host", Some("a")));
        assert_eq!(c.to_string(), "cross-node same-zone host");
        let c = classify(&AgentIdentity::default(), &id("n2", "host", None));
        assert_eq!(c.to_string(), "unknown-node unknown");
        assert_eq!(
            c.with_network("pod").to_string(),
            "unknown-node pod",
            "only the network changes"
        );
    }
}
