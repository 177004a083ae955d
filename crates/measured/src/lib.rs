//! linkperf's records: what one side of a test measured (its report, CPU,
//! latency summary, per-flow counts, datagram counts, TCP_INFO summary,
//! interface counters) and the host's environment, as they cross the control
//! connection and land in the results document. Plain serialisable data: no
//! operating-system code and no system crate, so the wire's contract
//! (`linkperf-protocol`) depends on nothing that touches the host. The means of
//! taking these measurements (histograms, CPU accounting, TCP_INFO, placement,
//! environment capture, statistics) are in `linkperf-metrics`, which fills
//! these types in but does not re-export them.
#![warn(missing_docs)]

mod flows;
mod interval;
mod link;
mod record;

pub use flows::{
    FlowCount, FlowCounts, FlowCountsError, FlowMeasure, FlowStats, MAX_FLOWS, UNFAIR_JAIN,
};
pub use interval::{Interval, JitterSum, Latencies};
pub use link::{LinkCounters, QdiscCounters};
pub use record::*;
