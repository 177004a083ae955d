//! Record types: what one side measured over a test's window. These travel in the
//! control protocol (the server's own measurements) and are embedded in the
//! results document, so their field names are a contract: add fields with
//! `#[serde(default)]`, never rename.

use serde::{Deserialize, Serialize};

use crate::{FlowCounts, Interval};

/// Transaction-time distribution, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of transactions recorded.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// Where a side's system-wide busy time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyMethod {
    /// Root cgroup `cpuacct.usage` (cgroup v1), nanosecond-precise.
    CgroupV1Cpuacct,
    /// Root cgroup `cpu.stat` `usage_usec` (cgroup v2), in microseconds; for the
    /// root the kernel sums the same per-CPU counters as /proc/stat, so it is only
    /// finer than ticks where the kernel's CPU accounting is.
    CgroupV2CpuStat,
    /// `/proc/stat` jiffies: tick-sampled, may miss short wake-ups.
    ProcStat,
}

/// Where a side's process CPU time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessMethod {
    /// `getrusage(RUSAGE_SELF)`: the whole process (the side has a process of its own).
    RusageSelf,
    /// Sum of `getrusage(RUSAGE_THREAD)` over the side's threads (both sides share a process).
    RusageThreadSum,
}

/// The /proc/stat breakdown of system-wide CPU time over the window, in seconds
/// summed over all CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcStatBreakdown {
    /// user + nice.
    pub user_s: f64,
    /// system (kernel, excluding irq and softirq).
    pub system_s: f64,
    /// hardware interrupts.
    pub irq_s: f64,
    /// software interrupts (most of the network stack's receive work).
    pub softirq_s: f64,
    /// time stolen by the hypervisor.
    pub steal_s: f64,
    /// idle + iowait.
    pub idle_s: f64,
}

impl ProcStatBreakdown {
    /// Busy time: everything but idle (and steal, which is not this guest's work).
    pub fn busy_s(&self) -> f64 {
        self.user_s + self.system_s + self.irq_s + self.softirq_s
    }
}

/// One CPU's time over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// The CPU's number.
    pub cpu: usize,
    /// Its time, by kind (`busy_s()` is everything but idle and steal).
    #[serde(flatten)]
    pub time: ProcStatBreakdown,
}

/// CPU time used by one side over the measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SideCpu {
    /// Process CPU (user + system) in seconds.
    pub process_s: f64,
    /// Process user time in seconds.
    pub process_user_s: f64,
    /// Process system time in seconds.
    pub process_system_s: f64,
    /// How `process_s` was taken.
    pub process_method: ProcessMethod,
    /// System-wide busy CPU time of the host in seconds, summed over CPUs.
    pub system_busy_s: f64,
    /// How `system_busy_s` was taken.
    pub system_busy_method: BusyMethod,
    /// Software-interrupt time from /proc/stat, in seconds.
    pub softirq_s: f64,
    /// The /proc/stat breakdown beside the precise figure.
    pub proc_stat: ProcStatBreakdown,
    /// Online CPUs of the host.
    pub cpus: u32,
    /// Wall-clock length of the window the CPU was measured over, in seconds.
    pub window_s: f64,
    /// When the CPU was sampled at the window's opening, in seconds after the
    /// traffic window opened (negative: before it). Absent in files written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_late_s: Option<f64>,
    /// When the CPU was sampled at the window's close, in seconds after the
    /// traffic window closed (negative: before it, as when a run is cut short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_late_s: Option<f64>,
}

/// A UDP stream's datagrams as one side counted them in the window: those it
/// sent, and the accounting of those it received (sequence gaps, order,
/// duplicates, RFC 3550 interarrival jitter). Each side reports the halves it
/// ran: a sender's are its `sent`, a receiver's the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DatagramCounts {
    /// Datagrams sent in the window.
    pub sent: u64,
    /// Datagrams received in the window: new ones, in sequence or late within
    /// the reorder window (duplicates and those too late to tell are not).
    pub received: u64,
    /// Sequence numbers the window's arrivals accounted for (RFC 3550's
    /// "expected": how far each moved its flow's highest sequence number);
    /// `expected − received` were lost.
    pub expected: u64,
    /// Datagrams that came after one with a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams whose sequence number had come before.
    pub duplicates: u64,
    /// Datagrams from further behind than the reorder window: too late to
    /// tell whether new, left counted lost.
    pub late: u64,
    /// The flows' interarrival jitter (RFC 3550) at the window's close,
    /// averaged over the flows that received, µs; `None` when none did.
    pub jitter_us: Option<f64>,
    /// The flows that jitter is averaged over (aggregates weigh by it).
    pub jitter_flows: u32,
}

impl DatagramCounts {
    /// Datagrams lost: `expected − received`, 0 when late arrivals of
    /// datagrams expected before the window outnumber the losses.
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Adds another side's or worker's counts (jitter weighted by flows).
    pub fn merge(&mut self, o: &DatagramCounts) {
        let flows = self.jitter_flows + o.jitter_flows;
        self.jitter_us = match (self.jitter_us, o.jitter_us) {
            (Some(a), Some(b)) if flows > 0 => Some(
                (a * f64::from(self.jitter_flows) + b * f64::from(o.jitter_flows))
                    / f64::from(flows),
            ),
            (a, b) => a.or(b),
        };
        self.jitter_flows = flows;
        self.sent += o.sent;
        self.received += o.received;
        self.expected += o.expected;
        self.out_of_order += o.out_of_order;
        self.duplicates += o.duplicates;
        self.late += o.late;
    }
}

/// TCP_INFO read from every flow at the end of the window, aggregated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfoSummary {
    /// Flows whose TCP_INFO was read.
    pub flows: u32,
    /// Sum of `tcpi_total_retrans` over the flows.
    pub retransmits: u64,
    /// Mean smoothed RTT in microseconds.
    pub rtt_us_mean: f64,
    /// Largest smoothed RTT in microseconds.
    pub rtt_us_max: f64,
    /// Mean RTT variance in microseconds.
    pub rttvar_us_mean: f64,
    /// Mean congestion window, in segments.
    pub snd_cwnd_mean: f64,
    /// Mean send MSS in bytes.
    pub snd_mss_mean: f64,
}

/// Where one event-loop worker ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerPlacement {
    /// Worker index on its side.
    pub worker: u32,
    /// CPUs the worker was pinned to, or `None` if it was free.
    pub pinned: Option<Vec<usize>>,
    /// CPUs the worker was allowed to run on (its affinity mask).
    pub allowed_cpus: Vec<usize>,
    /// CPU the worker was on when the window closed.
    pub last_cpu: Option<usize>,
    /// Flows the worker carried.
    pub flows: u32,
}

/// Counts over the whole life of the data connections (warmup and drain
/// included), for checking that both sides saw the same traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Payload bytes written.
    pub tx_bytes: u64,
    /// Payload bytes read.
    pub rx_bytes: u64,
    /// Transactions completed (messages, for streams).
    pub transactions: u64,
}

/// Everything one side measured in one test run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    /// Length of this side's measurement window in seconds.
    pub window_s: f64,
    /// Payload bytes written in the window.
    pub tx_bytes: u64,
    /// Payload bytes read in the window.
    pub rx_bytes: u64,
    /// Transactions completed in the window (messages, for streams).
    pub transactions: u64,
    /// Failed or lost transactions in the window (UDP timeouts, connection errors).
    pub errors: u64,
    /// Whole-life counts.
    pub totals: Totals,
    /// Transaction times, where this side measures them (the client).
    pub latency: Option<LatencySummary>,
    /// Per-second samples over the window.
    pub intervals: Vec<Interval>,
    /// CPU over the window.
    pub cpu: SideCpu,
    /// TCP_INFO aggregate (TCP only).
    pub tcp_info: Option<TcpInfoSummary>,
    /// Where the workers ran.
    pub workers: Vec<WorkerPlacement>,
    /// Whether the workers busy-polled.
    pub busy_poll: bool,
    /// Connections opened over the test (users, or every transaction's for crr).
    pub connections: u64,
    /// Errors in words, at most a few distinct ones, for the report.
    #[serde(default)]
    pub error_samples: Vec<String>,
    /// A uperf profile's results per transaction element and flowop type
    /// (the client's side of a profile run only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileReport>,
    /// The transaction-time histogram behind `latency`, in its compact text
    /// form (`linkperf_metrics::LatencyRecorder::encode_histogram`), so that the runs
    /// of several sides merge into exact percentiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<String>,
    /// What each flow this side carried moved in the window, in a compact
    /// text form ([`FlowCounts`]).
    #[serde(default, skip_serializing_if = "FlowCounts::is_empty")]
    pub flows: FlowCounts,
    /// A UDP stream's datagrams, sent and received (UDP streams only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<DatagramCounts>,
    /// What this side's network interfaces carried over the window (their own
    /// counters and their root queues'), busiest sender first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<crate::LinkCounters>,
    /// The time of each CPU this side's workers were pinned to, over the
    /// window, softirq and irq included: with the two sides pinned apart on
    /// one host, what each side's CPUs did, whoever's code it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_cpus: Vec<CpuShare>,
    /// An open-loop test's schedule as this side kept it (the client's
    /// side of an open-loop test only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopRecord>,
}

/// What an open-loop client's schedule came to over the window: its
/// arrivals and what became of them, each transaction's service time (from
/// its send; the transaction time `latency` runs from when it was due),
/// how late the generator sent what it had room to send, and what the
/// checks of the schedule need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopRecord {
    /// Arrivals that came due in the window.
    pub arrivals: u64,
    /// Of them, sent.
    pub sent: u64,
    /// Arrivals that found their connection's outstanding transactions at
    /// their bound and waited (the server or the path slow).
    pub late: u64,
    /// Arrivals dropped: too many were waiting on their connection.
    pub dropped: u64,
    /// Arrivals sent more than a millisecond after they were due although
    /// their connection had room: the generator fell behind.
    pub behind: u64,
    /// Service times (from the send to the whole answer), µs.
    pub service: Option<LatencySummary>,
    /// Their histogram, in the compact text form of `latency_histogram`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_histogram: Option<String>,
    /// How long after it was due each arrival with room was sent, µs: the
    /// pacing error.
    pub pacing: Option<LatencySummary>,
    /// The pacing error's histogram, compact text form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_histogram: Option<String>,
    /// The 99th percentile of the transaction time (from the due time) in
    /// each second of the window, µs (`None` for a second without one).
    #[serde(default)]
    pub seconds_p99_us: Vec<Option<f64>>,
    /// A sample of the gaps between one user's consecutive sends that did
    /// not wait, ns: what the generator produced, for the check of the
    /// arrivals' distribution.
    #[serde(default)]
    pub gaps_ns: Vec<u64>,
}

/// What a profile run measured, per transaction element and per flowop type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    /// The profile's name.
    pub name: String,
    /// One entry per `<transaction>` element of every group, in file order.
    pub transactions: Vec<ProfileTransaction>,
    /// One entry per flowop type the profile uses.
    pub flowops: Vec<ProfileFlowop>,
}

/// One `<transaction>` element over all the users of its group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileTransaction {
    /// Its group, counted from 0 in file order.
    pub group: u32,
    /// Its place in the group, counted from 0.
    pub index: u32,
    /// Line of the element in the profile.
    pub line: u32,
    /// `iterations=N` or `duration=T`, and `rate=R` if set, as written.
    pub limit: String,
    /// Users of its group.
    pub users: u32,
    /// Iterations completed by all users.
    pub iterations: u64,
    /// Wall time from the transaction's start (all users together) until
    /// its last user finished.
    pub seconds: f64,
    /// Payload bytes written in it by this side.
    pub tx_bytes: u64,
    /// Payload bytes read in it by this side.
    pub rx_bytes: u64,
    /// Failed operations.
    pub errors: u64,
    /// Time of one iteration (the transaction time), think time included.
    pub latency: Option<LatencySummary>,
}

/// Every operation of one flowop type over the whole profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFlowop {
    /// `connect`, `write`, `read`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Operations done (each of a `count=N` flowop's N counts).
    pub operations: u64,
    /// Payload bytes written by them.
    pub tx_bytes: u64,
    /// Payload bytes read by them.
    pub rx_bytes: u64,
    /// Failed operations.
    pub errors: u64,
    /// Time of one operation.
    pub latency: Option<LatencySummary>,
}

/// The host a side ran on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system and architecture (`uname -s -m`).
    pub os: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: u32,
    /// Interface carrying the test traffic, if known.
    pub interface: Option<String>,
    /// MTU of that interface.
    pub mtu: Option<u32>,
    /// Default TCP congestion control of the host.
    pub congestion_control: Option<String>,
    /// Congestion control of the data connections, as read from a socket.
    pub socket_congestion_control: Option<String>,
    /// `net.ipv4.tcp_rmem` (min default max).
    pub tcp_rmem: Option<String>,
    /// `net.ipv4.tcp_wmem` (min default max).
    pub tcp_wmem: Option<String>,
    /// SO_SNDBUF of a data socket, as the kernel set it.
    pub socket_sndbuf: Option<u32>,
    /// SO_RCVBUF of a data socket, as the kernel set it.
    pub socket_rcvbuf: Option<u32>,
    /// TCP_NODELAY of a data socket, as read back from it (TCP only).
    #[serde(default)]
    pub socket_nodelay: Option<bool>,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): two sides with
    /// the same one ran on the same host (and share its CPUs), whatever their
    /// namespaces call themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// linkperf version.
    pub linkperf_version: String,
    /// The command line that started this side.
    pub command_line: Vec<String>,
}

/// Who an agent is in a mesh: what its own environment says of it
/// (`LINKPERF_NODE`, `LINKPERF_NETWORK`, `LINKPERF_ZONE`, filled by the
/// deployment, e.g. from Kubernetes' downward API). Each field is `None`
/// where the variable is unset or empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentIdentity {
    /// The node (host) the agent runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The network it serves on: `pod` (an overlay) or `host` (the
    /// underlay), or whatever the operator calls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The zone of its node, where the operator sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// Most bytes of one [`AgentIdentity`] field: names, not documents.
pub const MAX_IDENTITY_FIELD: usize = 253;

impl AgentIdentity {
    /// The identity from `var` (the process environment's reader): each
    /// value trimmed, empty ones dropped, and cut to [`MAX_IDENTITY_FIELD`]
    /// bytes at a character boundary.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> AgentIdentity {
        let get = |name: &str| {
            let v = var(name)?;
            let v = v.trim();
            if v.is_empty() {
                return None;
            }
            let mut end = v.len().min(MAX_IDENTITY_FIELD);
            while !v.is_char_boundary(end) {
                end -= 1;
            }
            Some(v[..end].to_string())
        };
        AgentIdentity {
            node: get("LINKPERF_NODE"),
            network: get("LINKPERF_NETWORK"),
            zone: get("LINKPERF_ZONE"),
        }
    }

    /// The identity this process's environment gives it.
    pub fn from_env() -> AgentIdentity {
        AgentIdentity::from_vars(|n| std::env::var(n).ok())
    }

    /// Whether any field is set.
    pub fn is_empty(&self) -> bool {
        self.node.is_none() && self.network.is_none() && self.zone.is_none()
    }
}

#[cfg(test)]
mod identity_tests {
    use super::*;

    #[test]
    fn identity_comes_from_three_variables_trimmed_and_bounded() {
        let vars = |n: &str| match n {
            "LINKPERF_NODE" => Some(" worker-1 \n".to_string()),
            "LINKPERF_NETWORK" => Some("pod".to_string()),
            "LINKPERF_ZONE" => Some("   ".to_string()),
            _ => None,
        };
        let id = AgentIdentity::from_vars(vars);
        assert_eq!(id.node.as_deref(), Some("worker-1"));
        assert_eq!(id.network.as_deref(), Some("pod"));
        assert_eq!(id.zone, None);
        assert!(!id.is_empty());
        assert!(AgentIdentity::from_vars(|_| None).is_empty());
        let long = AgentIdentity::from_vars(|n| (n == "LINKPERF_NODE").then(|| "é".repeat(300)));
        let node = long.node.unwrap();
        assert!(node.len() <= MAX_IDENTITY_FIELD && node.chars().all(|c| c == 'é'));
        assert_eq!(
            serde_json::to_string(&AgentIdentity::default()).unwrap(),
            "{}"
        );
    }
}
