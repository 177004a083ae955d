//! linkperf's mesh: many agents (`linkperf serve --auth-key` on every node,
//! one on the pod network and one on the host network), a controller that
//! plans which pairs to measure and runs them through the agents.
//!
//! Pure: nothing here opens a socket or reads a clock.
//! - [`agents`]: an agent's address and identity, and the names tests are
//!   known by (`n1`, or `n1-pod` and `n1-host` when a node has two).
//! - [`classes`]: the path class of a pair: same node or cross node, pod or
//!   host network (or between them), same zone or cross zone.
//! - [`plan`]: the plans (`all-pairs`, `ring`, `one-to-all:AGENT`,
//!   `path-classes`, `random:K`) turned into pairs, with what they cost.
//! - [`schedule`]: which (pair, test, run) goes next, at a bounded
//!   concurrency, no node in two pairs at once unless every pair runs at once.
//!
//! The controller itself (`linkperf mesh`) is in the binary; the delegated
//! test in `linkperf-session`; the report in `linkperf-report`.
#![warn(missing_docs)]

pub mod agents;
pub mod classes;
mod error;
pub mod plan;
#[cfg(test)]
mod scale_tests;
pub mod schedule;

pub use agents::{name_agents, nodes_of, Agent};
pub use classes::{classify, Locality, PathClass, ZonePath};
pub use error::MeshError;
pub use plan::{plan_pairs, Pair, Plan, PlanCost, DEFAULT_PER_CLASS, MAX_AGENTS};
pub use schedule::{Concurrency, Item, Scheduler, MAX_AT_ONCE};
