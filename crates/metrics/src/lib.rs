//! linkperf's means of measuring: latency histograms, CPU accounting from
//! getrusage, /proc/stat and cgroup counters, TCP_INFO, interface and queue
//! counters, CPU placement, fd and memory limits, the environment of a host;
//! and the statistics of repeated runs (mean, spread, confidence interval,
//! Welch's t-test) and of one open-loop run (the fidelity of its arrivals,
//! intervals of its quantiles, the stationarity of its per-second series).
//! Operating-system calls live in `sys/`.
//!
//! What these measurements produce, the serialisable types that cross the
//! control connection and land in the results document (`SideReport`,
//! `SideCpu`, `Environment`, ...), is not here: it is `linkperf-measured`,
//! which this crate fills in but does not re-export.
#![warn(missing_docs)]

mod arrivals;
mod congestion;
mod cpu;
mod environment;
mod error;
mod goodness_of_fit;
mod latency;
mod limits;
mod link;
mod order_statistics;
mod placement;
mod stationarity;
mod stats;
mod subsample;
mod sys;
mod tcp_info;

pub use arrivals::{
    arrival_fidelity, exponential_fit, fixed_regularity, rate_fidelity, ArrivalFidelity,
    ArrivalProcess, ArrivalShape, ExponentialFit, FixedRegularity, RateFidelity, FIT_ALPHA,
    FIT_SAMPLE_SIZE, FIXED_GAP_TOLERANCE, FIXED_MAX_OFF_SHARE, FIXED_MAX_SPREAD, MIN_ARRIVAL_GAPS,
    RATE_NOISE_Z, RATE_TOLERANCE,
};
pub use congestion::{check_congestion_control, congestion_controls, CongestionControls};
pub use cpu::{
    online_cpus, per_cpu_between, process_cpu_now, side_cpu, system_busy_method,
    system_cpu_between, system_cpu_now, thread_cpu_now, ProcessCpu, SystemCpuDelta,
    SystemCpuSample,
};
pub use environment::{boot_id, capture_environment};
pub use error::MetricsError;
pub use goodness_of_fit::{
    anderson_darling, anderson_darling_p_value, kolmogorov_smirnov, kolmogorov_smirnov_p_value,
};
pub use latency::{LatencyRecorder, MAX_HISTOGRAM_BYTES};
pub use limits::{
    fd_limit, memory_available_bytes, peak_rss_bytes, raise_fd_limit, return_freed_memory,
};
pub use link::{
    interfaces_now, links_between, sending_link, InterfaceSample, QdiscSample, MAX_INTERFACES,
};
pub use order_statistics::{
    quantile_interval, quantile_interval_by, quantile_interval_sorted, quantile_ranks,
    QuantileRanks,
};
pub use placement::{
    current_cpu, current_thread_allowed_cpus, pin_current_thread, prefer_realtime_current_thread,
};
pub use stationarity::{
    mann_kendall, sen_slope, spread_between_halves, stationarity, MannKendall, SpreadBetweenHalves,
    Stationarity, MAX_RELATIVE_DRIFT, MAX_SPREAD_RATIO, MIN_TREND_POINTS, TREND_ALPHA,
    TREND_MAX_POINTS,
};
pub use stats::{describe, student_t_quantile, welch_t_test, Stats, Welch, CONFIDENCE};
pub use tcp_info::{
    peer_window, read_tcp_info, since_last_ack, socket_buffers, socket_congestion_control,
    socket_nodelay, tcp_state, TcpInfoAggregator, TcpInfoSnapshot,
};
