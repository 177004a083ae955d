use thiserror::Error;

/// Why a mesh could not be planned. Messages read after "failed to ...".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MeshError {
    /// A `--plan` that is none of the plans.
    #[error(
        "read the plan '{0}': use all-pairs, ring, one-to-all:AGENT, path-classes, \
         path-classes:N (N pairs per class) or random:K"
    )]
    BadPlan(String),
    /// A `--concurrency` that is neither a count nor `all`.
    #[error("read the concurrency '{0}': use a number from 1 up, or all")]
    BadConcurrency(String),
    /// Too few or too many agents.
    #[error("plan a mesh of {got} agents: a mesh needs 2 to {max}")]
    AgentCount {
        /// Agents found.
        got: usize,
        /// The most a mesh takes.
        max: usize,
    },
    /// `one-to-all:AGENT` names no agent.
    #[error("plan one-to-all:{0}: no agent is named so (agents: {1})")]
    NoSuchAgent(String, String),
    /// Two agents at one address.
    #[error("plan the mesh: the agent {0} is listed twice")]
    Duplicate(String),
}
