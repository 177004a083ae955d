//! linkperf's lab: emulated network configurations in network namespaces, so
//! that one Linux host can reproduce the shape of a study: an in-memory path
//! (veth) against shaped links (10 Gb, 1 Gb), a tunnel (VXLAN) against plain,
//! a virtual switch, macvlan, one MTU against another.
//!
//! - [`config`]: the built-in configurations, options (`veth,mtu=9000,rate=10gbit`)
//!   and custom configurations in a TOML file ([`Catalog::with_file`]).
//! - [`topology`]: a configuration and a number of pairs turned into the exact
//!   `ip`/`tc` commands, namespaces and addresses ([`addresses`]), shaping
//!   with tbf ([`shaping`]). Pure.
//! - [`Lab`]: preflight, bring-up that cleans up after a failed command,
//!   tear-down, the inventory of what is up and what is stale ([`inventory`]).
//! - [`sys`]: the one place that runs programs, reads `/proc` and writes the
//!   lab's records; everything above it is tested with a fake.
//! - [`aggregate()`](aggregate::aggregate): one results document for N pairs;
//!   [`LinkRecord`]: the `"link"` block of a results document;
//!   [`throughput_table`]: the plain comparison of configurations;
//!   [`pairs_table`]: a configuration's pairs, each and together.
//!
//! See `docs/lab.md` for the address plan, every configuration's commands,
//! the shaping parameters and the file format.
#![warn(missing_docs)]

pub mod addresses;
pub mod aggregate;
pub mod command;
pub mod config;
mod config_file;
mod error;
pub mod inventory;
mod lab;
mod link_record;
pub mod preflight;
pub mod shaping;
pub mod snapshot;
pub mod sys;
mod table;
pub mod topology;
mod units;

pub use aggregate::aggregate;
pub use command::{Cmd, Program};
pub use config::{builtin_configs, check_name, Catalog, Kind, LinkConfig};
pub use error::LabError;
pub use inventory::{Owner, Record, Stale, Survey};
pub use lab::{Lab, Up, STATE_DIR};
pub use link_record::LinkRecord;
pub use preflight::Missing;
pub use snapshot::{snapshot, NamespaceSnapshot};
pub use table::{pairs_table, throughput_table};
pub use topology::{Pair, Topology};
pub use units::{parse_rate, Mtu, MAX_MTU, MAX_RATE, MIN_MTU, MIN_RATE};
