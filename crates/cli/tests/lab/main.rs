//! linkperf in the lab on this host: real network namespaces, veth pairs,
//! shaping, VXLAN and bridges, built by `linkperf lab` (and by the mesh test
//! as a four-node cluster), one test at a time. These need root; see
//! lab.rs for how they skip or fail without it.

// Each binary uses part of the helpers.
#[allow(dead_code, unused_imports)]
#[path = "../util/mod.rs"]
mod util;

mod lab;
mod mesh_lab;
