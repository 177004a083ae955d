//! The results document, schema `linkperf/results/v2`: one file per
//! configuration under test (its label), holding every test and every run of it.
//!
//! The field names are a contract with every tool that reads these files (the
//! report, scripts, other people's dashboards). Fields are added, never renamed;
//! a new field is optional (`Option` or `#[serde(default)]`) so that files
//! written before it still load; readers ignore fields they do not know. A change
//! that old readers cannot follow bumps [`SCHEMA`]. See `docs/results-schema.md`.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use linkperf_measured::{
    Environment, FlowStats, Interval, LatencySummary, SideCpu, SideReport, TcpInfoSummary,
};
use linkperf_workload::{Direction, Placement, Protocol, TestSpec, Workload};

use crate::{rfc3339, summarize, TestSummary};

/// The schema this build writes (it also reads [`SCHEMA_V1`]).
pub const SCHEMA: &str = "linkperf/results/v2";

/// The first schema: its upload throughput (client to server) was counted
/// at the sender, and its runs carry no checks. Still read; see
/// `docs/results-schema.md`.
pub const SCHEMA_V1: &str = "linkperf/results/v1";

/// Everything measured for one configuration under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsDocument {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The user's label for this configuration, e.g. `osa` or `hipersockets`.
    pub label: String,
    /// When the document was created, RFC 3339 UTC.
    pub created: String,
    /// Version of the linkperf that created the document.
    pub linkperf_version: String,
    /// The exact command that produced the file.
    pub command_line: Vec<String>,
    /// The hosts the two sides ran on.
    pub environment: Environments,
    /// Every test, in the order first run.
    pub tests: Vec<TestResult>,
    /// The suite that produced the document, when `linkperf suite` did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<SuiteRecord>,
    /// The link the tests ran over, when linkperf built it (the lab) or was
    /// told about it; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkInfo>,
    /// The mesh that produced the document, when `linkperf mesh` did: its
    /// agents, plan and pairs. Its tests are named `TEST@SOURCE->TARGET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<crate::MeshRecord>,
}

/// The link the tests of a document ran over: its configuration's name, its
/// capacity when known, and the commands that set it up, so that a report can
/// say whether the link was the limit and others can rebuild it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// The link configuration's name, e.g. `1gbit`, `veth`, `vxlan-mtu1450`.
    pub configuration: String,
    /// The link's capacity in bits per second, each direction, when known
    /// (e.g. `1e9` for a link shaped to 1 Gbit/s); `None` for an unshaped path.
    #[serde(default)]
    pub capacity_bits_per_s: Option<f64>,
    /// The commands that set the link up, in order, one shell command each.
    #[serde(default)]
    pub commands: Vec<String>,
    /// The `linkperf lab run` command line that produced the results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lab_command_line: Vec<String>,
    /// Each namespace of the lab's configuration as it was while the tests
    /// ran (`name`, `links`, `qdiscs`, `offloads`, `sysctls`), as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<serde_json::Value>,
}

/// What `linkperf suite` ran, so that `--resume` can continue it and refuse a
/// changed definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteRecord {
    /// The suite's name (`uperf45`, or a suite file's `name`).
    pub name: String,
    /// Fingerprint of the suite's definition (sha256 of its tests).
    pub fingerprint: String,
    /// Runs of every test.
    pub repeat: u32,
    /// True when the whole matrix ran once, then again.
    pub interleave: bool,
    /// The tests' names, in the order of one pass.
    pub tests: Vec<String>,
    /// With `--target-ci`: each test ran until the 95% confidence interval of
    /// its mean throughput was within this share of the mean (a fraction), between
    /// `min_repeat` and `repeat` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ci: Option<f64>,
    /// With `--target-ci`: the fewest runs of every test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_repeat: Option<u32>,
}

impl ResultsDocument {
    /// An empty document for the configuration `label`, created now by this
    /// build of linkperf from `command_line`.
    pub fn new(label: String, command_line: Vec<String>) -> Self {
        ResultsDocument {
            schema: SCHEMA.to_string(),
            label,
            created: rfc3339(SystemTime::now()),
            linkperf_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line,
            environment: Environments::default(),
            tests: Vec::new(),
            suite: None,
            link: None,
            mesh: None,
        }
    }

    /// The test named `name`, e.g. `rr1c-200x1000--50`.
    pub fn find_test(&self, name: &str) -> Option<&TestResult> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The test named `name`, to change it.
    pub fn find_test_mut(&mut self, name: &str) -> Option<&mut TestResult> {
        self.tests.iter_mut().find(|t| t.name == name)
    }

    /// Appends `run` to the test named after `spec`, creating the test (with
    /// `spec` and `config`) if the document does not have it yet. An existing
    /// test keeps the spec and config it was created with, and loses its
    /// summary, which no longer covers all its runs (see
    /// [`refresh_summaries`](Self::refresh_summaries)).
    pub fn push_run(&mut self, spec: &TestSpec, config: TestConfig, run: Run) {
        self.push_named_run(spec.name(), spec, config, run);
    }

    /// [`push_run`](Self::push_run) into the test named `name` (a mesh's
    /// `rr1c-1x1--1@n1->n2`).
    pub fn push_named_run(&mut self, name: String, spec: &TestSpec, config: TestConfig, run: Run) {
        match self.find_test_mut(&name) {
            Some(test) => {
                test.runs.push(run);
                test.summary = None;
            }
            None => self.tests.push(TestResult {
                name,
                workload: WorkloadInfo::from_spec(spec),
                config,
                spec: spec.clone(),
                runs: vec![run],
                summary: None,
            }),
        }
    }

    /// Keeps only the runs that completed (ok or suspect), as a resumed suite
    /// or mesh does before it runs again what did not: each test's runs are
    /// numbered again from 1 and a retry's `retry_of` follows its run's new
    /// number (`None` when that run is gone). Tests left without runs stay.
    pub fn keep_completed_runs(&mut self) {
        for t in &mut self.tests {
            t.runs.retain(|r| r.status.completed());
            let renumbered: Vec<(u32, u32)> = t
                .runs
                .iter()
                .enumerate()
                .map(|(i, r)| (r.run, i as u32 + 1))
                .collect();
            for (i, r) in t.runs.iter_mut().enumerate() {
                r.run = i as u32 + 1;
                r.retry_of = r.retry_of.and_then(|old| {
                    renumbered
                        .iter()
                        .find(|(was, _)| *was == old)
                        .map(|(_, now)| *now)
                });
            }
        }
    }

    /// Recomputes the summary of every test from its runs (`None` for a test
    /// without an `ok` run).
    pub fn refresh_summaries(&mut self) {
        for test in &mut self.tests {
            test.summary = summarize(test);
        }
    }
}

/// The hosts the two sides ran on; `None` where a side could not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environments {
    /// The client's host.
    #[serde(default)]
    pub client: Option<Environment>,
    /// The server's host, as the server described it.
    #[serde(default)]
    pub server: Option<Environment>,
}

/// One test (one workload at one user count over one protocol) and its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test's name, e.g. `rr1c-200x1000--50` (see [`TestSpec::name`]).
    pub name: String,
    /// The workload in plain fields.
    pub workload: WorkloadInfo,
    /// How the test was set up.
    pub config: TestConfig,
    /// The exact specification, to reproduce or resume the test.
    pub spec: TestSpec,
    /// Every run of the test, in order.
    pub runs: Vec<Run>,
    /// Statistics over the `ok` runs (see [`summarize`]); absent until
    /// [`ResultsDocument::refresh_summaries`] and in files written before it
    /// existed. The runs stay as they are beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<TestSummary>,
}

impl TestResult {
    /// Whether the throughput of the test's `ok` runs varies by more than
    /// [`UNSTABLE_CV`](crate::UNSTABLE_CV) (coefficient of variation of
    /// `throughput.bytes_per_s`). Judged from the runs themselves, so a
    /// missing or stale `summary` does not change the answer; `false` with
    /// fewer than two `ok` runs.
    pub fn is_unstable(&self) -> bool {
        summarize(self).is_some_and(|s| s.unstable)
    }
}

/// The workload of a test in plain fields, for readers that do not want to parse
/// [`TestSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// `rr`, `crr`, `mix` or `stream`.
    pub kind: String,
    /// The workload's name, e.g. `rr1c-200x1000`, `str-readx30k`; a UDP
    /// stream's with its pace, `str-readx1400@100m`.
    pub name: String,
    /// Request payload in bytes (rr, crr).
    #[serde(default)]
    pub request_bytes: Option<u64>,
    /// Response payload in bytes (rr, crr).
    #[serde(default)]
    pub response_bytes: Option<u64>,
    /// Message payload in bytes (stream).
    #[serde(default)]
    pub message_bytes: Option<u64>,
    /// Which way payload flows.
    pub direction: Direction,
    /// Transport of the data connections.
    pub protocol: Protocol,
    /// Concurrent flows, each with its own connection.
    pub users: u32,
    /// Length of the measurement window, seconds.
    pub duration_s: f64,
    /// Time before the window, excluded from every figure, seconds.
    pub warmup_s: f64,
    /// The entries of a `mix` workload (request, response, weight); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<Vec<linkperf_workload::MixEntry>>,
}

impl WorkloadInfo {
    /// The plain description of a spec's workload.
    pub fn from_spec(spec: &TestSpec) -> Self {
        let (kind, request_bytes, response_bytes, message_bytes) = match &spec.workload {
            Workload::Rr { request, response } => ("rr", Some(request.0), Some(response.0), None),
            Workload::Crr { request, response } => ("crr", Some(request.0), Some(response.0), None),
            Workload::Mix { .. } => ("mix", None, None, None),
            Workload::Stream { message, .. } => ("stream", None, None, Some(message.0)),
            Workload::Profile { .. } => ("profile", None, None, None),
        };
        WorkloadInfo {
            kind: kind.to_string(),
            name: spec.workload_name(),
            request_bytes,
            response_bytes,
            message_bytes,
            direction: spec.workload.direction(),
            protocol: spec.protocol,
            users: spec.users,
            duration_s: spec.duration.as_secs_f64(),
            warmup_s: spec.warmup.as_secs_f64(),
            mix: match &spec.workload {
                Workload::Mix { entries } => Some(entries.clone()),
                _ => None,
            },
        }
    }
}

/// How a test was set up, beyond its workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestConfig {
    /// The server's address as given, or `embedded` when the client ran its own.
    pub server: String,
    /// The client's event-loop workers.
    pub client_placement: Placement,
    /// The server's event-loop workers.
    pub server_placement: Placement,
    /// Whether TCP_NODELAY was on.
    pub nodelay: bool,
    /// SO_SNDBUF requested, bytes (`None`: the kernel's default).
    #[serde(default)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF requested, bytes (`None`: the kernel's default).
    #[serde(default)]
    pub rcvbuf: Option<u32>,
    /// TCP congestion control requested (`None`: the host's default).
    #[serde(default)]
    pub cc: Option<String>,
    /// TCP maximum segment size requested, bytes (`None`: the kernel's choice).
    #[serde(default)]
    pub mss: Option<u32>,
    /// How long a UDP transaction waited for its response, seconds (UDP only).
    #[serde(default)]
    pub udp_timeout_s: Option<f64>,
    /// The largest share of lost UDP transactions a run may have and pass its
    /// `udp_loss` check (`--max-loss`, a fraction: 0.01 is 1 %); `None`: loss
    /// is reported, not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_loss: Option<f64>,
    /// UDP streams: the pace asked of each user, payload bits per second (0:
    /// as fast as the socket takes); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bits_per_s: Option<f64>,
}

impl TestConfig {
    /// The configuration of a spec's socket options, with where the server was
    /// and how each side placed its workers.
    pub fn from_spec(
        spec: &TestSpec,
        server: String,
        client_placement: Placement,
        server_placement: Placement,
    ) -> Self {
        TestConfig {
            server,
            client_placement,
            server_placement,
            nodelay: spec.socket.nodelay_for(&spec.workload),
            sndbuf: spec.socket.sndbuf,
            rcvbuf: spec.socket.rcvbuf,
            cc: spec.socket.cc.clone(),
            mss: spec.socket.mss,
            udp_timeout_s: (spec.protocol == Protocol::Udp)
                .then_some(spec.udp_timeout.as_secs_f64()),
            max_loss: None,
            rate_bits_per_s: spec.stream_rate().map(|r| r.as_f64()),
        }
    }
}

/// How a run ended. From worst to best: `failed`, `aborted`, `suspect`, `ok`
/// (the order of [`RunStatus::severity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The window completed, both sides reported, and every check passed.
    Ok,
    /// The window completed but a check says the measurement is not to be
    /// believed (a stall, a broken window, a noisy host, ...): kept with its
    /// figures and `status_reasons`, left out of statistics and comparisons.
    Suspect,
    /// The run was interrupted (by the user, or a deadline) before it completed.
    Aborted,
    /// The run could not be carried out; `error` says why.
    Failed,
}

impl RunStatus {
    /// How bad it is: `ok` 0, `suspect` 1, `aborted` 2, `failed` 3.
    pub fn severity(self) -> u8 {
        match self {
            RunStatus::Ok => 0,
            RunStatus::Suspect => 1,
            RunStatus::Aborted => 2,
            RunStatus::Failed => 3,
        }
    }

    /// The word for it: `ok`, `suspect`, `aborted`, `failed`.
    pub fn word(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Suspect => "suspect",
            RunStatus::Aborted => "aborted",
            RunStatus::Failed => "failed",
        }
    }

    /// Whether the run completed its window (`ok` or `suspect`): what
    /// `--resume` keeps.
    pub fn completed(self) -> bool {
        matches!(self, RunStatus::Ok | RunStatus::Suspect)
    }
}

/// One run of a test.
///
/// A run that measured nothing (failed or aborted before its window closed)
/// has `status` and `error` but no `throughput`, `transaction_time_us`, `cpu`,
/// `efficiency`, `tcp_info`, `client` or `server`; its `intervals` are empty and
/// its `errors` zero. Those blocks are then absent from the JSON, not zeroed:
/// no figure is ever invented.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// 1-based index of the run within its test.
    pub run: u32,
    /// When the run started, RFC 3339 UTC.
    pub started: String,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run failed or was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the run is not `ok`, one sentence per failed check (and the error
    /// of a failed or aborted run first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_reasons: Vec<String>,
    /// The run this one repeats because that one was suspect (its `run`
    /// number); absent for a run of its own. Retries do not count toward a
    /// suite's repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<u32>,
    /// Payload rates over the client's window, each direction counted by its
    /// receiver (see [`Throughput::counted_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Throughput>,
    /// Payload bytes of the window per direction: what the sender wrote, what
    /// the receiver read, and the difference (bytes still in flight, in socket
    /// buffers and on the wire, when the window closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    /// How evenly the users were served: the distribution of one figure over
    /// the test's flows (transactions for request/response, bytes received
    /// for streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowStats>,
    /// UDP request/response: transactions lost (unanswered within the
    /// timeout) and their share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// What the link carried each way, headers included, read from each
    /// sender's own interface and its root queue: absent on the loopback
    /// (`wire` in the document: the schema's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<crate::LinkUse>,
    /// Each side's CPU from the CPUs it was pinned to, when both sides were
    /// pinned to CPUs the other did not use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedCpu>,
    /// UDP streams: datagrams received, lost, out of order, duplicated, the
    /// loss rate and jitter, and the senders' pace, per direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<crate::UdpStream>,
    /// An open-loop test's schedule: offered and achieved rates, what
    /// became of the arrivals, service times and pacing errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<crate::OpenLoop>,
    /// The validity checks, in a fixed order (see [`crate::CheckName`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::Check>,
    /// An aggregate's parts: what each server (or lab pair) carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    /// Transaction-time distribution in microseconds, as the client measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_time_us: Option<LatencySummary>,
    /// CPU time of each side over its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuPair>,
    /// Payload moved per CPU-second and CPU per transaction, for each side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<Efficiency>,
    /// The client's per-second samples, with rates.
    #[serde(default)]
    pub intervals: Vec<IntervalRate>,
    /// Failed or lost transactions in the window, both sides together.
    #[serde(default)]
    pub errors: u64,
    /// TCP_INFO aggregated over the client's flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfoSummary>,
    /// Everything the client measured, raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<SideReport>,
    /// Everything the server measured, raw, as it sent it over the control
    /// connection (`None` when the server cannot report, e.g. a foreign server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<SideReport>,
    /// A mesh's run: the two agents, who each is and its host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<crate::RunAgents>,
}

/// Payload rates over the client's measurement window. `tx` is the client to
/// server direction, `rx` the server to client direction; each is counted
/// where it is true, at its receiver (`counted_at` says where it was).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Payload bytes per second, both directions together.
    pub bytes_per_s: f64,
    /// Payload bytes per second, client to server.
    pub tx_bytes_per_s: f64,
    /// Payload bytes per second, server to client.
    pub rx_bytes_per_s: f64,
    /// Transactions completed per second (request/response: as the client
    /// completed them; streams: messages whole at their receiver).
    pub transactions_per_s: f64,
    /// Where each direction's bytes were counted. Absent in
    /// `linkperf/results/v1` files, which counted client to server at the
    /// sender (the client) and server to client at the receiver (the client).
    #[serde(default = "CountedAt::v1")]
    pub counted_at: CountedAt,
}

/// Which side counted a direction's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// The side that read them: what the path delivered.
    Receiver,
    /// The side that wrote them: includes bytes still in flight when the
    /// window closed (only where the receiver could not report).
    Sender,
}

/// Where each direction's bytes of a [`Throughput`] were counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedAt {
    /// Client to server (`tx_bytes_per_s`).
    pub client_to_server: Counter,
    /// Server to client (`rx_bytes_per_s`).
    pub server_to_client: Counter,
}

impl CountedAt {
    /// What a `linkperf/results/v1` file's throughput was: the client counted
    /// both directions, so uploads at their sender.
    pub fn v1() -> Self {
        CountedAt {
            client_to_server: Counter::Sender,
            server_to_client: Counter::Receiver,
        }
    }

    /// Both directions at their receivers.
    pub fn receivers() -> Self {
        CountedAt {
            client_to_server: Counter::Receiver,
            server_to_client: Counter::Receiver,
        }
    }
}

/// Payload bytes of one direction over the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionBytes {
    /// Written by the sender in its window.
    pub sent: u64,
    /// Read by the receiver in its window (`None` when the receiver did not
    /// report, e.g. a foreign server).
    #[serde(default)]
    pub received: Option<u64>,
    /// `sent − received`: bytes written but not yet read when the windows
    /// closed (in socket buffers and on the wire). Negative when the
    /// receiver's window began before the sender's and read bytes written
    /// before it.
    #[serde(default)]
    pub in_flight: Option<i64>,
}

/// Payload bytes of the window, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Client to server.
    pub client_to_server: DirectionBytes,
    /// Server to client.
    pub server_to_client: DirectionBytes,
}

/// Lost UDP transactions of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    /// Transactions counted lost (no answer within the timeout).
    pub lost: u64,
    /// Transactions answered.
    pub answered: u64,
    /// `lost / (lost + answered)`, 0 to 1.
    pub rate: f64,
}

impl Loss {
    /// `lost` transactions lost and `answered` answered.
    pub fn of(lost: u64, answered: u64) -> Self {
        let total = lost + answered;
        Loss {
            lost,
            answered,
            rate: if total == 0 {
                0.0
            } else {
                lost as f64 / total as f64
            },
        }
    }
}

/// What one part of an aggregate (one server of `run --server h1,h2`, one
/// pair of the lab's `--pairs`) carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The server's address, or `pairK`.
    pub label: String,
    /// Its users.
    pub users: u32,
    /// Its status.
    pub status: RunStatus,
    /// Its payload bytes per second, both directions, as counted by its receivers.
    #[serde(default)]
    pub bytes_per_s: Option<f64>,
    /// Its transactions per second.
    #[serde(default)]
    pub transactions_per_s: Option<f64>,
}

/// CPU time of each side over its window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPair {
    /// The client's CPU.
    pub client: SideCpu,
    /// The server's CPU, as the server measured it (`None` if it cannot report).
    #[serde(default)]
    pub server: Option<SideCpu>,
}

/// CPU efficiency of each side: payload moved (both directions, over the window)
/// per CPU-second, and CPU-microseconds per transaction. Each figure comes once
/// from the side's process CPU time and once from the host's system-wide busy
/// time (which includes the network stack's softirq work). A figure whose CPU
/// time or transaction count is zero is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Payload bytes per client process CPU-second.
    #[serde(default)]
    pub client_bytes_per_cpu_s: Option<f64>,
    /// Payload bytes per server process CPU-second.
    #[serde(default)]
    pub server_bytes_per_cpu_s: Option<f64>,
    /// Client process CPU-microseconds per transaction.
    #[serde(default)]
    pub client_cpu_us_per_txn: Option<f64>,
    /// Server process CPU-microseconds per transaction.
    #[serde(default)]
    pub server_cpu_us_per_txn: Option<f64>,
    /// Payload bytes per busy CPU-second of the client's host.
    #[serde(default)]
    pub client_bytes_per_system_cpu_s: Option<f64>,
    /// Payload bytes per busy CPU-second of the server's host.
    #[serde(default)]
    pub server_bytes_per_system_cpu_s: Option<f64>,
    /// Busy CPU-microseconds of the client's host per transaction.
    #[serde(default)]
    pub client_system_cpu_us_per_txn: Option<f64>,
    /// Busy CPU-microseconds of the server's host per transaction.
    #[serde(default)]
    pub server_system_cpu_us_per_txn: Option<f64>,
    /// Payload bytes per busy second of the CPUs the client was pinned to
    /// (softirq included; see [`Run::pinned`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_bytes_per_pinned_cpu_s: Option<f64>,
    /// Payload bytes per busy second of the CPUs the server was pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_bytes_per_pinned_cpu_s: Option<f64>,
    /// Busy CPU-microseconds of the client's pinned CPUs per transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_pinned_cpu_us_per_txn: Option<f64>,
    /// Busy CPU-microseconds of the server's pinned CPUs per transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pinned_cpu_us_per_txn: Option<f64>,
}

/// Each side's CPU, read from the CPUs it alone was pinned to: on one host
/// the kernel's work for a flow (softirq: the receive path, the tunnel's
/// encapsulation) runs on whichever CPU takes it, and is counted in no
/// process; with the two sides pinned to different CPUs, each CPU's time is
/// its side's, whoever's code it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedCpu {
    /// The client's CPUs.
    pub client: PinnedSide,
    /// The server's CPUs.
    pub server: PinnedSide,
}

/// One side's pinned CPUs over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedSide {
    /// The CPUs.
    pub cpus: Vec<usize>,
    /// Their busy seconds (everything but idle and steal), softirq included.
    pub busy_s: f64,
    /// Of which softirq.
    pub softirq_s: f64,
    /// Busy CPUs on average over the window (0.85: 85% of one CPU).
    pub utilisation: f64,
    /// The most CPUs any user kept busy on average: `utilisation / users`
    /// (a stream per user: the CPU per stream).
    pub per_user: f64,
}

/// One per-second sample of a run: the second ([`Interval`]: each direction
/// from its receiver, its receivers' jitter) and the rates derived from it
/// when it is written, in this order: `start_s`, `length_s`, `tx_bytes`,
/// `rx_bytes`, `transactions`, `bytes_per_s` (both directions),
/// `transactions_per_s` (each over `length_s`), then a UDP stream's
/// `loss_rate` and `jitter_us`. Read back, the rates are computed again from
/// the counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalRate {
    /// The second.
    pub second: Interval,
    /// UDP streams: the share of the second's datagrams lost (RFC 3550's
    /// fraction lost, 0 when late arrivals outnumber losses), over its
    /// receivers. Kept, not derived: a run's intervals do not carry the
    /// datagrams it is computed from.
    pub loss_rate: Option<f64>,
}

impl IntervalRate {
    /// Payload bytes per second, both directions.
    pub fn bytes_per_s(&self) -> f64 {
        let i = &self.second;
        crate::derive::rate(i.tx_bytes as f64 + i.rx_bytes as f64, i.length_s)
    }

    /// Transactions per second.
    pub fn transactions_per_s(&self) -> f64 {
        crate::derive::rate(self.second.transactions as f64, self.second.length_s)
    }
}

impl Serialize for IntervalRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let i = &self.second;
        let fields = 7 + usize::from(self.loss_rate.is_some()) + usize::from(i.jitter_us.is_some());
        let mut m = s.serialize_struct("IntervalRate", fields)?;
        m.serialize_field("start_s", &i.start_s)?;
        m.serialize_field("length_s", &i.length_s)?;
        m.serialize_field("tx_bytes", &i.tx_bytes)?;
        m.serialize_field("rx_bytes", &i.rx_bytes)?;
        m.serialize_field("transactions", &i.transactions)?;
        m.serialize_field("bytes_per_s", &self.bytes_per_s())?;
        m.serialize_field("transactions_per_s", &self.transactions_per_s())?;
        if let Some(r) = &self.loss_rate {
            m.serialize_field("loss_rate", r)?;
        }
        if let Some(j) = &i.jitter_us {
            m.serialize_field("jitter_us", j)?;
        }
        m.end()
    }
}

/// What a run's per-second sample is read back from: its counts (the rates
/// are computed again).
#[derive(Deserialize)]
struct CountedSample {
    start_s: f64,
    length_s: f64,
    tx_bytes: u64,
    rx_bytes: u64,
    transactions: u64,
    #[serde(default)]
    loss_rate: Option<f64>,
    #[serde(default)]
    jitter_us: Option<f64>,
}

impl<'de> Deserialize<'de> for IntervalRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let c = CountedSample::deserialize(d)?;
        Ok(IntervalRate {
            second: Interval {
                start_s: c.start_s,
                length_s: c.length_s,
                tx_bytes: c.tx_bytes,
                rx_bytes: c.rx_bytes,
                transactions: c.transactions,
                jitter_us: c.jitter_us,
                ..Interval::default()
            },
            loss_rate: c.loss_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_workload::Direction;

    use super::*;

    fn spec(w: &str, p: Protocol, users: u32) -> TestSpec {
        TestSpec::new(w.parse().unwrap(), p, users, Duration::from_secs(50))
    }

    #[test]
    fn workload_info_states_sizes_in_bytes() {
        let info = WorkloadInfo::from_spec(&spec("rr1c-200x30k", Protocol::Tcp, 50));
        assert_eq!(info.kind, "rr");
        assert_eq!(info.name, "rr1c-200x30k");
        assert_eq!(
            (info.request_bytes, info.response_bytes, info.message_bytes),
            (Some(200), Some(30720), None)
        );
        assert_eq!(info.direction, Direction::RoundTrip);
        assert_eq!(
            (info.users, info.duration_s, info.warmup_s),
            (50, 50.0, 1.0)
        );

        let info = WorkloadInfo::from_spec(&spec("str-writex30k", Protocol::Tcp, 250));
        assert_eq!(info.kind, "stream");
        assert_eq!(
            (info.request_bytes, info.response_bytes, info.message_bytes),
            (None, None, Some(30720))
        );
        assert_eq!(info.direction, Direction::ServerToClient);

        let info = WorkloadInfo::from_spec(&spec("crr:64x1k", Protocol::Tcp, 1));
        assert_eq!(info.kind, "crr");
    }

    #[test]
    fn config_states_udp_timeout_for_udp_only() {
        let p = Placement::with_threads(2);
        let tcp = TestConfig::from_spec(
            &spec("rr1c-1x1", Protocol::Tcp, 1),
            "embedded".into(),
            p.clone(),
            p.clone(),
        );
        assert_eq!(tcp.udp_timeout_s, None);
        assert!(tcp.nodelay, "rr defaults to nodelay");
        let udp = TestConfig::from_spec(
            &spec("rr1c-1x1", Protocol::Udp, 1),
            "10.0.0.2:7000".into(),
            p.clone(),
            p,
        );
        assert_eq!(udp.udp_timeout_s, Some(0.25));
        assert_eq!(udp.server, "10.0.0.2:7000");
    }

    #[test]
    fn push_run_appends_to_the_test_of_the_same_name() {
        let mut doc = ResultsDocument::new("osa".into(), vec!["linkperf".into(), "run".into()]);
        assert_eq!(doc.schema, SCHEMA);
        assert!(doc.created.ends_with('Z'), "{}", doc.created);
        let s50 = spec("rr1c-200x1000", Protocol::Tcp, 50);
        let s10 = spec("rr1c-200x1000", Protocol::Tcp, 10);
        let cfg = |s: &TestSpec| {
            TestConfig::from_spec(
                s,
                "embedded".into(),
                Placement::with_threads(1),
                Placement::with_threads(1),
            )
        };
        let run = |n| crate::failed_run(n, String::new(), RunStatus::Failed, "x".into());
        doc.push_run(&s50, cfg(&s50), run(1));
        doc.push_run(&s10, cfg(&s10), run(1));
        doc.push_run(&s50, cfg(&s50), run(2));
        assert_eq!(doc.tests.len(), 2);
        let t = doc.find_test("rr1c-200x1000--50").unwrap();
        assert_eq!(t.runs.iter().map(|r| r.run).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(t.spec, s50);
        assert_eq!(t.workload, WorkloadInfo::from_spec(&s50));
        assert_eq!(doc.tests[1].name, "rr1c-200x1000--10");
        doc.find_test_mut("rr1c-200x1000--10").unwrap().runs.clear();
        assert!(doc.find_test("rr1c-200x1000--10").unwrap().runs.is_empty());
        assert!(doc.find_test("rr1c-1x1--1").is_none());
    }

    #[test]
    fn run_status_is_snake_case() {
        for (s, j) in [
            (RunStatus::Ok, "\"ok\""),
            (RunStatus::Aborted, "\"aborted\""),
            (RunStatus::Failed, "\"failed\""),
        ] {
            assert_eq!(serde_json::to_string(&s).unwrap(), j);
        }
    }

    #[test]
    fn a_runs_sample_is_written_as_before_and_read_back_unchanged() {
        let tcp = r#"{"start_s":1.0,"length_s":0.5,"tx_bytes":100,"rx_bytes":50,"transactions":3,"bytes_per_s":300.0,"transactions_per_s":6.0}"#;
        let udp = r#"{"start_s":0.0,"length_s":1.0,"tx_bytes":0,"rx_bytes":1400,"transactions":1,"bytes_per_s":1400.0,"transactions_per_s":1.0,"loss_rate":0.5,"jitter_us":3.5}"#;
        for j in [tcp, udp] {
            let i: IntervalRate = serde_json::from_str(j).unwrap();
            assert_eq!(serde_json::to_string(&i).unwrap(), j);
        }
        let i: IntervalRate = serde_json::from_str(udp).unwrap();
        assert_eq!((i.second.rx_bytes, i.loss_rate), (1400, Some(0.5)));
        assert_eq!(i.bytes_per_s(), 1400.0);
    }
}
