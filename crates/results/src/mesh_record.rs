//! What a mesh records: the plan it ran (so that `--resume` continues it)
//! and, in every run, the two agents it ran between.

use linkperf_measured::{AgentIdentity, Environment};
use linkperf_mesh::{Agent, Pair};
use serde::{Deserialize, Serialize};

/// The mesh that produced a document (`linkperf mesh`), so that `--resume`
/// continues it with the same agents and pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshRecord {
    /// The plan, as `--plan` names it (`all-pairs`, `random:40`, ...).
    pub plan: String,
    /// The seed the plan drew with (`path-classes`, `random`).
    pub seed: u64,
    /// `--concurrency`: a number, or `all`.
    pub concurrency: String,
    /// Every agent, as discovered, in the order of the pairs' indices.
    pub agents: Vec<Agent>,
    /// The planned pairs, indices into `agents`.
    pub pairs: Vec<Pair>,
}

/// The two agents of a mesh's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAgents {
    /// The agent that ran the client side.
    pub source: RunAgent,
    /// The agent that served it.
    pub target: RunAgent,
    /// The pair's path class (`cross-node pod`, `same-node pod-host`, ...).
    pub path_class: String,
}

/// One agent of a run: its name, address, identity and host as it
/// described itself for this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAgent {
    /// Its name in the mesh (`n1-pod`).
    pub name: String,
    /// Its control address.
    pub address: String,
    /// Who it said it is.
    #[serde(default)]
    pub identity: AgentIdentity,
    /// Its host, when the run got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
}
