//! linkperf's results document (schema `linkperf/results/v2`): the versioned
//! serde types every exporter and comparison reads, the derivation of a run's
//! figures (throughput, transaction time, CPU efficiency) from what the client
//! and the server measured, the statistics of a test's repeated runs, and
//! saving and loading the file; and the events of the live stream of a test
//! (`linkperf/stream/v1`).
//!
//! Saving is atomic (temporary file, sync, rename, directory sync); loading
//! refuses a missing, empty, truncated, foreign or newer file with a message that
//! names the file and the problem. The schema is documented for users and tool
//! writers in `docs/results-schema.md`.
#![warn(missing_docs)]

mod checks;
mod derive;
mod document;
mod error;
mod host_noise;
mod link_use;
mod mesh_record;
mod open_loop;
#[cfg(test)]
mod reader_never_panics;
mod space;
mod store;
mod stream;
mod summary;
mod timestamp;
mod udp;

pub use checks::{
    checks, host_cpus, hosts_of_run, judge_run, unserved_users, Check, CheckName, CheckStatus,
    HostCpu, Judge, Unserved, CPU_WINDOW_FLOOR_S, CPU_WINDOW_SHARE, LITTLE_TOLERANCE, STALL_SHARE,
};
pub use derive::{derive_run, failed_run, flow_stats};
pub use document::{
    CountedAt, Counter, CpuPair, DirectionBytes, Efficiency, Environments, IntervalRate, LinkInfo,
    Loss, Part, Payload, PinnedCpu, PinnedSide, ResultsDocument, Run, RunStatus, SuiteRecord,
    TestConfig, TestResult, Throughput, WorkloadInfo, SCHEMA, SCHEMA_V1,
};
pub use error::ResultsError;
pub use host_noise::{HOST_NOISE_MAX, HOST_NOISE_MIN_WINDOW_S};
pub use link_use::{LinkDirection, LinkUse};
pub use mesh_record::{MeshRecord, RunAgent, RunAgents};
pub use open_loop::{open_loop, OpenLoop, BEHIND_BOUND, RATE_TOLERANCE};
pub use space::{run_bytes, save_fallback, SpaceReserve};
pub use store::remove_stale_temp_files;
pub use stream::{StreamError, StreamEvent, StreamInterval, StreamStart, STREAM_SCHEMA};
pub use summary::{summarize, TestSummary, UNSTABLE_CV};
pub use timestamp::{rfc3339, rfc3339_millis};
pub use udp::{udp_stream, UdpDirection, UdpStream, PACE_TOLERANCE};
