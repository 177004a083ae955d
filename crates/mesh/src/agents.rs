//! Agents and their names.

use std::collections::HashMap;

use linkperf_measured::AgentIdentity;
use serde::{Deserialize, Serialize};

/// One agent of a mesh: where it listens and who it says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    /// The name its tests and the report use (see [`name_agents`]).
    pub name: String,
    /// Its control address, `HOST:PORT`.
    pub address: String,
    /// What its `welcome` said of it.
    #[serde(default)]
    pub identity: AgentIdentity,
}

/// Characters a name keeps; anything else becomes `_`, so that a name is
/// safe in a test name, a file name and an HTML page.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Names every agent: its node (`n1`) where it is the only agent there, its
/// node and network (`n1-pod`, `n1-host`) where its node has several, its
/// address where it states no node; `-2`, `-3`, ... where that still
/// leaves two alike. Names are made of letters, digits, `.`, `_` and `-`.
pub fn name_agents(agents: &mut [Agent]) {
    let node_of = |a: &Agent| a.identity.node.as_deref().map(clean);
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for a in agents.iter() {
        if let Some(n) = node_of(a) {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let mut taken: HashMap<String, usize> = HashMap::new();
    for a in agents.iter_mut() {
        let base = match node_of(a) {
            Some(n) if per_node[&n] > 1 => match a.identity.network.as_deref() {
                Some(net) => format!("{n}-{}", clean(net)),
                None => n,
            },
            Some(n) => n,
            None => clean(&a.address),
        };
        let seen = taken.entry(base.clone()).or_default();
        *seen += 1;
        a.name = if *seen == 1 {
            base
        } else {
            format!("{base}-{seen}")
        };
    }
}

/// Each agent's node as an index from 0: agents stating the same node share
/// one; an agent that states none is a node of its own.
pub fn nodes_of(agents: &[Agent]) -> Vec<u32> {
    let mut index: HashMap<&str, u32> = HashMap::new();
    let mut next = 0u32;
    let mut fresh = || {
        next += 1;
        next - 1
    };
    agents
        .iter()
        .map(|a| match a.identity.node.as_deref() {
            Some(n) => *index.entry(n).or_insert_with(&mut fresh),
            None => fresh(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(address: &str, node: Option<&str>, network: Option<&str>) -> Agent {
        Agent {
            name: String::new(),
            address: address.into(),
            identity: AgentIdentity {
                node: node.map(Into::into),
                network: network.map(Into::into),
                zone: None,
            },
        }
    }

    #[test]
    fn agents_of_one_node_share_its_index() {
        let a = vec![
            agent("a:1", Some("n1"), Some("host")),
            agent("b:1", None, None),
            agent("c:1", Some("n1"), Some("pod")),
            agent("d:1", Some("n2"), None),
            agent("e:1", None, None),
        ];
        assert_eq!(nodes_of(&a), [0, 1, 0, 2, 3]);
    }

    #[test]
    fn agents_are_named_after_their_node_and_network_where_needed() {
        let mut a = vec![
            agent("198.18.0.1:7410", Some("n1"), Some("host")),
            agent("198.19.0.1:7411", Some("n1"), Some("pod")),
            agent("198.18.0.2:7410", Some("n2"), Some("host")),
            agent("198.18.0.3:7410", None, None),
            agent("198.18.0.4:7410", Some("n4 <b>"), None),
            agent("198.18.0.5:7410", Some("n4 <b>"), None),
        ];
        name_agents(&mut a);
        let names: Vec<&str> = a.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "n1-host",
                "n1-pod",
                "n2",
                "198.18.0.3_7410",
                "n4__b_",
                "n4__b_-2"
            ]
        );
    }
}
