//! What linkperf runs: workloads (request/response, connect-per-transaction,
//! streams), their sizes, the transport protocol, and the specification of one
//! test as both ends agree on it; suites of tests (built-in, or read from TOML
//! suite files) and the order their repeated runs happen in.
//!
//! Names follow the uperf study's vocabulary: `rr1c-200x1000` is a
//! request/response workload with a 200-byte request and a 1000-byte response on
//! one persistent connection per user; `str-readx30k` streams 30 KiB messages from
//! client to server. Sizes use binary suffixes (`k` = 1024, `m` = 1024²).
#![warn(missing_docs)]

mod builtin;
mod cpus;
mod duration;
mod error;
mod mix;
mod offered;
#[cfg(test)]
mod parsers_never_panic;
pub mod profile;
mod rate;
mod size;
mod spec;
mod suite;
mod suite_file;
mod workload;

pub use builtin::{builtin_suite, builtin_suites, STUDY_USERS, STUDY_WORKLOADS};
pub use cpus::{CpuList, PlacementPolicy, Side};
pub use duration::parse_duration;
pub use error::WorkloadError;
pub use mix::{MixEntry, TransactionSizes, MAX_MIX_ENTRIES, MAX_MIX_WEIGHT};
pub use offered::{
    label as offered_label, parse_offered, Arrival, OfferedLoad, TransactionsPerSecond,
    MAX_OFFERED, MAX_OUTSTANDING,
};
pub use rate::{BitsPerSecond, RateError};
pub use size::{parse_percent, Bytes};
pub use spec::{
    parse_udp_rate, Placement, Protocol, SocketOptions, TestSpec, Threads, DEFAULT_UDP_RATE,
    MAX_TEST_TIME, MAX_UDP_PAYLOAD, MAX_UDP_RATE, MAX_USERS, UDP_HEADER_BYTES, UNPACED,
};
pub use suite::{run_order, Location, Suite, SuiteError, SuiteTest, TestOverrides, RUN_OVERHEAD};
pub use suite_file::parse_suite;
pub use workload::{Direction, StreamDirection, Workload, SMALL_STREAM_MESSAGE};
