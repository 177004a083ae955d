//! linkperf's measurements: what one side of a test recorded (the record types,
//! serialisable, shared by the control protocol and the results document), and
//! the means of taking them: latency histograms, CPU accounting from getrusage,
//! /proc/stat and cgroup counters, TCP_INFO, CPU placement, and the environment
//! of a host.
#![warn(missing_docs)]

mod record;

pub use record::*;
