//! Control-connection messages: JSON objects tagged by `"type"`, one per frame.
//!
//! The client opens with [`ClientMessage::Hello`], the server answers
//! [`ServerMessage::Welcome`]; both carry [`PROTOCOL_VERSION`], and a peer
//! announcing another version is refused with [`WireError::VersionMismatch`]
//! whatever else its greeting holds. Unknown extra fields are ignored, so a
//! peer of the same version that adds fields is still understood.

use std::fmt;

use linkperf_measured::{AgentIdentity, Environment, SideReport};
use linkperf_workload::profile::Profile;
use linkperf_workload::{Placement, TestSpec};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::{encode_frame, WireError};

/// Version of the control protocol this build speaks. Both ends must speak the same.
///
/// 2: a server placement whose `threads` is 0 leaves the count to the server
/// (one worker per CPU of its host); version 1 servers refused it.
///
/// 3: the server's report carries its per-flow counts and its histogram
/// (the client counts uploads by what the server received, and merges
/// histograms), its CPU samples' distance from the window's edges, and the
/// server's boot id in its environment; data connections and UDP datagrams
/// naming a flow beyond the test's users are refused.
///
/// 4: the UDP datagram header carries the sender's send time (24 bytes, was
/// 16); UDP streams (a spec's `rate`), whose flows register their address
/// with a header-only datagram the server answers; the server's report
/// carries a UDP stream's datagram counts (`udp`, and per-second ones in its
/// intervals).
///
/// 5: authentication is mutual: a client holding a key sends its own
/// challenge in `hello` and the server answers it in `welcome` (`proof`)
/// before the client proves anything; `welcome` carries the agent's identity
/// (node, network, zone); a controller may ask an agent to run a test
/// against another agent (`delegate` → `delegated`).
///
/// 6: a profile's TCP connection numbers itself in its preamble
/// ([`ConnectSeq`](crate::ConnectSeq): transaction, connection and its place
/// among the connection's connects in the transaction), and the server's
/// n-th accept takes the n-th socket (5 paired them in the order their
/// preambles completed, which a slow server could see reordered).
pub const PROTOCOL_VERSION: u32 = 7;

/// Bytes in a [`DataToken`].
const TOKEN_LEN: usize = 16;

/// A message from the client on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// The client's greeting, the first message on the connection.
    Hello {
        /// [`PROTOCOL_VERSION`] of the client.
        protocol_version: u32,
        /// linkperf version of the client, for messages.
        client_version: String,
        /// A client holding a key: a fresh random challenge (64 hex digits)
        /// the server must answer in its `welcome` to prove it holds the
        /// same key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        challenge: Option<String>,
    },
    /// The answer to the server's challenge (a hex HMAC).
    Auth {
        /// The response, in hex.
        response: String,
    },
    /// The test to run.
    Test {
        /// The test as both ends run it.
        spec: TestSpec,
        /// How the server side places its workers.
        placement: Placement,
    },
    /// A uperf profile to run (instead of [`ClientMessage::Test`]): the
    /// server runs its mirror, the opposite flowops.
    Profile {
        /// The profile as the client runs it.
        profile: Profile,
        /// How the server side places its workers.
        placement: Placement,
        /// The client's listeners for its `accept` flowops, one per client
        /// worker, on the client's control address: the server's mirrored
        /// `connect`s go there (user `i` to `client_ports[i % len]`).
        #[serde(default)]
        client_ports: Vec<u16>,
    },
    /// The data connections are up: start the test.
    Start,
    /// A profile's timed transaction `txn` is over on the client: each
    /// user did `iterations[user]` iterations of it.
    TxnEnd {
        /// The transaction, counted from 0.
        txn: u32,
        /// Iterations by user.
        iterations: Vec<u64>,
    },
    /// Run a test against another agent, as its client, and answer with
    /// [`ServerMessage::Delegated`] (instead of [`ClientMessage::Test`]).
    /// Only a client that proved the key may ask, and the agent runs it only
    /// toward a target that proves the same key before any data flows.
    Delegate {
        /// The target agent's control address, `HOST[:PORT]`.
        target: String,
        /// The test as both ends run it.
        spec: TestSpec,
        /// How the delegated client (this agent) places its workers.
        client: Placement,
        /// How the target places its workers.
        server: Placement,
    },
    /// The client's side of the test is over: send results.
    Finished,
    /// The client gives up on the test.
    Abort {
        /// Why, in words.
        reason: String,
    },
}

/// A message from the server on the control connection.
// A handful of these exist per session, never in bulk: the size of `Results`
// costs nothing, and boxing it would burden every place that builds or matches one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// The server's answer to [`ClientMessage::Hello`].
    Welcome {
        /// [`PROTOCOL_VERSION`] of the server.
        protocol_version: u32,
        /// linkperf version of the server, for messages.
        server_version: String,
        /// The server's number for this session.
        session: u64,
        /// A challenge to answer with [`ClientMessage::Auth`], if the server
        /// requires authentication.
        challenge: Option<String>,
        /// The server's answer to the client's challenge of `hello`, when the
        /// server holds a key: proof that it holds the client's key too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<String>,
        /// Who this agent is in a mesh, when its environment says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<AgentIdentity>,
    },
    /// The test is accepted: where and how to open the data connections.
    Accepted {
        /// Ports of the TCP listeners or UDP sockets, one per server worker:
        /// flow `i` goes to `data_ports[i % len]`.
        data_ports: Vec<u16>,
        /// Abstract Unix socket names for `unix` tests, one per server worker.
        unix_names: Vec<String>,
        /// A profile's UDP connections: the server's datagram ports, one per
        /// server worker (absent for tests and TCP-only profiles).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        udp_ports: Vec<u16>,
        /// Token every data connection presents in its preamble.
        token: DataToken,
        /// The server's host.
        environment: Environment,
    },
    /// The server's side of the test has started.
    Started,
    /// The answer to [`ClientMessage::TxnEnd`]: the server's users stopped
    /// there, having written `written[user][conn]` bytes in the transaction.
    TxnEnded {
        /// The transaction.
        txn: u32,
        /// Bytes written by user and connection.
        written: Vec<Vec<u64>>,
    },
    /// The server's measurements, the answer to [`ClientMessage::Finished`].
    Results {
        /// What the server side measured.
        report: SideReport,
        /// The server's host.
        environment: Environment,
    },
    /// The answer to [`ClientMessage::Delegate`]: what the delegated test
    /// produced, as the agent that ran its client side saw it.
    Delegated {
        /// The test's outcome.
        outcome: DelegatedOutcome,
    },
    /// The server refuses a message or gives up on the test.
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// What happened, in words.
        message: String,
        /// The limit a refused request met, with its figures (`code` is then
        /// `limit`), so that a client can name the server's setting.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<LimitInfo>,
    },
}

impl ClientMessage {
    /// The message's `type` on the wire, for messages about it.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientMessage::Hello { .. } => "hello",
            ClientMessage::Auth { .. } => "auth",
            ClientMessage::Test { .. } => "test",
            ClientMessage::Profile { .. } => "profile",
            ClientMessage::Start => "start",
            ClientMessage::TxnEnd { .. } => "txn_end",
            ClientMessage::Delegate { .. } => "delegate",
            ClientMessage::Finished => "finished",
            ClientMessage::Abort { .. } => "abort",
        }
    }
}

impl ServerMessage {
    /// The message's `type` on the wire, for messages about it.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerMessage::Welcome { .. } => "welcome",
            ServerMessage::Accepted { .. } => "accepted",
            ServerMessage::Started => "started",
            ServerMessage::TxnEnded { .. } => "txn_ended",
            ServerMessage::Results { .. } => "results",
            ServerMessage::Delegated { .. } => "delegated",
            ServerMessage::Error { .. } => "error",
        }
    }
}

/// What a delegated test produced: both sides' measurements and hosts, or
/// why it did not run. The agent that ran the client side fills it in; the
/// target's report is the target's own, passed on unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelegatedOutcome {
    /// When the test started, RFC 3339 UTC.
    pub started: String,
    /// Why the test did not run at all (nothing measured): the target could
    /// not be reached, did not prove the key, refused the test, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The client side's measurements (this agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<SideReport>,
    /// The target's own measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<SideReport>,
    /// This agent's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_environment: Option<Environment>,
    /// The target's host, as it described itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_environment: Option<Environment>,
    /// The target's identity, from its `welcome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_agent: Option<AgentIdentity>,
    /// The test was aborted before its end.
    #[serde(default)]
    pub aborted: bool,
    /// Why the target's measurements are missing, if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_error: Option<String>,
    /// Why the test failed though both sides measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Which of a server's limits a request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Users in one test.
    Users,
    /// Warm-up and duration of one test, seconds.
    DurationS,
    /// Threads of running tests.
    Threads,
    /// File descriptors of running tests.
    Descriptors,
    /// Memory of running tests, bytes.
    MemoryBytes,
    /// Data connections of running tests.
    Connections,
    /// Sessions served at once.
    Sessions,
    /// Payload bytes of one session.
    BytesPerSession,
}

/// A limit a request met, as figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitInfo {
    /// Which limit.
    pub kind: LimitKind,
    /// What the request needed.
    pub got: u64,
    /// The most the server allows.
    pub max: u64,
    /// What other tests held (for limits shared by all tests).
    #[serde(default)]
    pub in_use: u64,
}

/// The kind of failure in a [`ServerMessage::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The client speaks another protocol version.
    VersionMismatch,
    /// A message could not be read.
    Malformed,
    /// A frame was over the size limit.
    TooLarge,
    /// A message came at the wrong point of the session.
    OutOfOrder,
    /// The test was refused (invalid, or not allowed by the server).
    Refused,
    /// Authentication failed.
    AuthFailed,
    /// A server limit was reached (sessions, users, duration).
    Limit,
    /// The server failed on its own side.
    Internal,
    /// The test was aborted.
    Aborted,
}

impl ErrorCode {
    /// A message with its code, for people: `too many users (limit)`, or
    /// the message alone when it already ends with the code's word (`the
    /// test was aborted`, not `the test was aborted (aborted)`).
    pub fn tagged(self, message: &str) -> String {
        let word = self.to_string();
        let spoken = word.replace('_', " ");
        let m = message.trim_end_matches(['.', ' ']);
        if m.ends_with(&word) || m.ends_with(&spoken) {
            message.to_string()
        } else {
            format!("{message} ({word})")
        }
    }
}

impl fmt::Display for ErrorCode {
    /// The code as it is spelled on the wire: `version_mismatch`, `too_large`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::Malformed => "malformed",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::OutOfOrder => "out_of_order",
            ErrorCode::Refused => "refused",
            ErrorCode::AuthFailed => "auth_failed",
            ErrorCode::Limit => "limit",
            ErrorCode::Internal => "internal",
            ErrorCode::Aborted => "aborted",
        })
    }
}

/// The secret a data connection presents to be matched with its session.
///
/// On the control connection it is a 32-digit lowercase hex string; decoding
/// accepts either case and refuses anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataToken(pub [u8; TOKEN_LEN]);

impl DataToken {
    /// The first four bytes, big-endian: the tag in front of every UDP datagram
    /// of the session.
    pub fn session_tag(&self) -> u32 {
        let [a, b, c, d, ..] = self.0;
        u32::from_be_bytes([a, b, c, d])
    }

    /// Reads 32 hex digits (either case); `None` for anything else.
    fn from_hex(s: &str) -> Option<DataToken> {
        let digits = s.as_bytes();
        if digits.len() != 2 * TOKEN_LEN {
            return None;
        }
        let mut bytes = [0u8; TOKEN_LEN];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            *byte = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
        }
        Some(DataToken(bytes))
    }
}

/// The value of one hex digit.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for DataToken {
    /// 32 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Serialize for DataToken {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DataToken {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HexVisitor;

        impl Visitor<'_> for HexVisitor {
            type Value = DataToken;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a data token of 32 hex digits")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<DataToken, E> {
                DataToken::from_hex(s).ok_or_else(|| E::invalid_value(Unexpected::Str(s), &self))
            }
        }

        deserializer.deserialize_str(HexVisitor)
    }
}

/// One whole frame (length prefix and JSON) carrying a client message.
pub fn encode_client(msg: &ClientMessage) -> Vec<u8> {
    encode(msg)
}

/// One whole frame (length prefix and JSON) carrying a server message.
pub fn encode_server(msg: &ServerMessage) -> Vec<u8> {
    encode(msg)
}

/// Frames the JSON of `msg`.
fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialising these types cannot fail: every map key is a string and every
    // hand-written Serialize (DataToken) is infallible. Non-finite floats are
    // written as `null` by serde_json, which the peer refuses as malformed.
    let json = serde_json::to_vec(msg).expect("control messages always serialise to JSON");
    let mut out = Vec::with_capacity(4 + json.len());
    encode_frame(&json, &mut out);
    out
}

/// Reads one frame payload from the client.
///
/// A `hello` announcing another protocol version is a
/// [`WireError::VersionMismatch`] even if the rest of it is not this version's
/// `Hello`; anything else that does not decode is [`WireError::Malformed`].
pub fn decode_client(payload: &[u8]) -> Result<ClientMessage, WireError> {
    match serde_json::from_slice(payload) {
        Ok(ClientMessage::Hello {
            protocol_version, ..
        }) if protocol_version != PROTOCOL_VERSION => Err(mismatch(protocol_version)),
        Ok(msg) => Ok(msg),
        Err(e) => Err(other_version(payload, "hello").map_or_else(|| malformed(&e), mismatch)),
    }
}

/// Reads one frame payload from the server.
///
/// A `welcome` announcing another protocol version is a
/// [`WireError::VersionMismatch`] even if the rest of it is not this version's
/// `Welcome`; anything else that does not decode is [`WireError::Malformed`].
pub fn decode_server(payload: &[u8]) -> Result<ServerMessage, WireError> {
    match serde_json::from_slice(payload) {
        Ok(ServerMessage::Welcome {
            protocol_version, ..
        }) if protocol_version != PROTOCOL_VERSION => Err(mismatch(protocol_version)),
        Ok(msg) => Ok(msg),
        Err(e) => Err(other_version(payload, "welcome").map_or_else(|| malformed(&e), mismatch)),
    }
}

fn mismatch(theirs: u32) -> WireError {
    WireError::VersionMismatch {
        ours: PROTOCOL_VERSION,
        theirs,
    }
}

fn malformed(e: &serde_json::Error) -> WireError {
    WireError::Malformed(e.to_string())
}

/// The version announced by a payload that failed to decode, if it is a JSON
/// object of type `greeting` with a `protocol_version` other than ours.
fn other_version(payload: &[u8], greeting: &str) -> Option<u32> {
    /// The part of a greeting every protocol version shares.
    #[derive(Deserialize)]
    struct Greeting {
        #[serde(rename = "type")]
        kind: String,
        protocol_version: u32,
    }
    let g: Greeting = serde_json::from_slice(payload).ok()?;
    (g.kind == greeting && g.protocol_version != PROTOCOL_VERSION).then_some(g.protocol_version)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_measured::{
        BusyMethod, Interval, LatencySummary, ProcStatBreakdown, ProcessMethod, SideCpu,
        TcpInfoSummary, Totals, WorkerPlacement,
    };
    use linkperf_workload::{
        Bytes, CpuList, PlacementPolicy, Protocol, SocketOptions, StreamDirection, Threads,
        Workload,
    };
    use proptest::prelude::*;

    use super::*;
    use crate::{FrameDecoder, DEFAULT_MAX_FRAME};

    #[test]
    fn a_code_is_said_once() {
        assert_eq!(
            ErrorCode::Aborted.tagged("the server is shutting down; the test was aborted"),
            "the server is shutting down; the test was aborted"
        );
        assert_eq!(ErrorCode::Aborted.tagged("overdue"), "overdue (aborted)");
        assert_eq!(
            ErrorCode::TooLarge.tagged("frame too large"),
            "frame too large"
        );
        assert_eq!(
            ErrorCode::Limit.tagged("past this server's limit of 4 users"),
            "past this server's limit of 4 users (limit)"
        );
    }

    /// The one payload in a whole frame, through the decoder.
    fn unframe(frame: &[u8]) -> Vec<u8> {
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        d.feed(frame);
        let payload = d.next_frame().unwrap().expect("a whole frame");
        assert_eq!(d.buffered(), 0, "exactly one frame");
        payload
    }

    fn client_round_trip(msg: &ClientMessage) {
        let frame = encode_client(msg);
        let back = decode_client(&unframe(&frame)).unwrap();
        assert_eq!(&back, msg);
        assert_eq!(encode_client(&back), frame, "byte-exact");
    }

    fn server_round_trip(msg: &ServerMessage) {
        let frame = encode_server(msg);
        let back = decode_server(&unframe(&frame)).unwrap();
        assert_eq!(&back, msg);
        assert_eq!(encode_server(&back), frame, "byte-exact");
    }

    fn token() -> DataToken {
        DataToken([
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff,
        ])
    }

    fn environment() -> Environment {
        Environment {
            hostname: "bench-b.example.net".into(),
            kernel: "6.8.0-45-generic".into(),
            os: "Linux x86_64".into(),
            cpu_model: "AMD EPYC 7B13 64-Core Processor".into(),
            cpu_count: 16,
            interface: Some("ens4".into()),
            mtu: Some(1460),
            congestion_control: Some("cubic".into()),
            socket_congestion_control: Some("bbr".into()),
            tcp_rmem: Some("4096 131072 6291456".into()),
            tcp_wmem: Some("4096 16384 4194304".into()),
            socket_sndbuf: Some(425_984),
            socket_rcvbuf: Some(131_072),
            socket_nodelay: Some(true),
            boot_id: None,
            linkperf_version: "0.1.0".into(),
            command_line: vec![
                "linkperf".into(),
                "server".into(),
                "--port".into(),
                "7201".into(),
            ],
        }
    }

    fn interval(i: u64) -> Interval {
        Interval {
            start_s: i as f64 + 0.000_183_27,
            length_s: 1.000_021_943,
            tx_bytes: 12_345_678_901 + i,
            rx_bytes: 9_876_543_210 + i,
            transactions: 87_654_321 + i,
            ..Default::default()
        }
    }

    fn report(intervals: u64, workers: u32) -> SideReport {
        SideReport {
            window_s: 10.000_213_457,
            tx_bytes: 1_234_567_890,
            rx_bytes: 246_913_578,
            transactions: 1_234_567,
            errors: 3,
            totals: Totals {
                tx_bytes: 1_358_024_679,
                rx_bytes: 271_604_935,
                transactions: 1_358_024,
            },
            latency: Some(LatencySummary {
                count: 1_234_567,
                mean: 80.912_345_678_9,
                p50: 77.311,
                p90: 95.743,
                p99: 143.871_999_999_999_99,
                p999: 412.159,
                min: 41.2,
                max: 10_234.56,
            }),
            intervals: (0..intervals).map(interval).collect(),
            cpu: SideCpu {
                process_s: 9.871_234,
                process_user_s: 1.234_567,
                process_system_s: 8.636_667,
                process_method: ProcessMethod::RusageThreadSum,
                system_busy_s: 31.415_926_535_897_93,
                system_busy_method: BusyMethod::CgroupV2CpuStat,
                softirq_s: 7.123_456_789,
                proc_stat: ProcStatBreakdown {
                    user_s: 2.01,
                    system_s: 20.33,
                    irq_s: 0.0,
                    softirq_s: 7.12,
                    steal_s: 0.04,
                    idle_s: 128.5,
                },
                cpus: 16,
                window_s: 10.000_213_457,
                opened_late_s: None,
                closed_late_s: None,
            },
            tcp_info: Some(TcpInfoSummary {
                flows: 50,
                retransmits: 17,
                rtt_us_mean: 63.281_25,
                rtt_us_max: 212.0,
                rttvar_us_mean: 11.9,
                snd_cwnd_mean: 10.0,
                snd_mss_mean: 1448.0,
            }),
            workers: (0..workers)
                .map(|w| WorkerPlacement {
                    worker: w,
                    pinned: (w % 2 == 0).then(|| vec![w as usize]),
                    allowed_cpus: (0..16).collect(),
                    last_cpu: Some(w as usize),
                    flows: 25,
                })
                .collect(),
            busy_poll: true,
            connections: 50,
            error_samples: vec!["flow 7: connection reset by peer (os error 104)".into()],
            profile: None,
            latency_histogram: None,
            flows: Default::default(),
            udp: None,
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
        }
    }

    fn spec(workload: Workload, protocol: Protocol) -> TestSpec {
        TestSpec {
            workload,
            protocol,
            users: 50,
            duration: Duration::from_secs(30),
            warmup: Duration::from_millis(1500),
            socket: SocketOptions {
                nodelay: Some(true),
                sndbuf: Some(262_144),
                rcvbuf: Some(524_288),
                cc: Some("bbr".into()),
                mss: Some(1400),
            },
            udp_timeout: Duration::from_nanos(250_000_001),
            rate: None,
            offered: None,
        }
    }

    #[test]
    fn every_client_message_round_trips() {
        let placement = Placement {
            threads: Threads::Count(4),
            affinity: Some(CpuList(vec![0, 2, 4, 6])),
            busy_poll: true,
            policy: PlacementPolicy::Split,
        };
        let workloads = [
            Workload::Rr {
                request: Bytes(200),
                response: Bytes(30 * 1024),
            },
            Workload::Crr {
                request: Bytes(1),
                response: Bytes(1),
            },
            Workload::Stream {
                message: Bytes(30 * 1024),
                direction: StreamDirection::Up,
            },
            Workload::Stream {
                message: Bytes(1 << 20),
                direction: StreamDirection::Bidir,
            },
        ];
        let mut msgs = vec![
            ClientMessage::Hello {
                protocol_version: PROTOCOL_VERSION,
                client_version: "0.1.0".into(),
                challenge: None,
            },
            ClientMessage::Auth {
                response: "9f86d081884c7d659a2feaa0c55ad015".into(),
            },
            ClientMessage::Test {
                spec: TestSpec::new(
                    workloads[0].clone(),
                    Protocol::Udp,
                    1,
                    Duration::from_secs(5),
                ),
                placement: Placement::with_threads(1),
            },
            ClientMessage::Start,
            ClientMessage::Finished,
            ClientMessage::Abort {
                reason: "interrupted by the user (\"ctrl-c\")\n".into(),
            },
            ClientMessage::Profile {
                profile: linkperf_workload::profile::parse_profile(
                    "<profile name=p><group nthreads=2><transaction duration=1s rate=2.5>\
                     <flowop type=connect options=\"remotehost=h wndsz=64k tcp_nodelay\"/>\
                     <flowop type=write options=\"size=rand(1,90) count=3\"/>\
                     <flowop type=think options=\"duration=5m busy\"/>\
                     </transaction></group></profile>",
                    &|_| None,
                )
                .unwrap(),
                placement: Placement::with_threads(2),
                client_ports: vec![40001, 40002],
            },
            ClientMessage::TxnEnd {
                txn: 3,
                iterations: vec![0, 17, u64::MAX],
            },
        ];
        for (w, p) in
            workloads
                .into_iter()
                .zip([Protocol::Tcp, Protocol::Tcp, Protocol::Unix, Protocol::Tcp])
        {
            msgs.push(ClientMessage::Test {
                spec: spec(w, p),
                placement: placement.clone(),
            });
        }
        msgs.push(ClientMessage::Test {
            spec: udp_stream_spec(),
            placement: placement.clone(),
        });
        for m in &msgs {
            client_round_trip(m);
        }
    }

    fn udp_stream_spec() -> TestSpec {
        let mut s = TestSpec::new(
            "stream-bidir:1400".parse().unwrap(),
            Protocol::Udp,
            4,
            Duration::from_secs(10),
        );
        s.rate = Some(linkperf_workload::BitsPerSecond(100_000_000));
        s
    }

    #[test]
    fn golden_udp_stream_test() {
        let m = ClientMessage::Test {
            spec: udp_stream_spec(),
            placement: Placement::with_threads(1),
        };
        assert_eq!(
            String::from_utf8(unframe(&encode_client(&m))).unwrap(),
            r#"{"type":"test","spec":{"workload":{"kind":"stream","message":1400,"direction":"bidir"},"protocol":"udp","users":4,"duration":{"secs":10,"nanos":0},"warmup":{"secs":1,"nanos":0},"socket":{"nodelay":null,"sndbuf":null,"rcvbuf":null,"cc":null,"mss":null},"udp_timeout":{"secs":0,"nanos":250000000},"rate":100000000},"placement":{"threads":1,"affinity":null,"busy_poll":false}}"#
        );
    }

    #[test]
    fn golden_udp_stream_results() {
        let mut r = report(1, 0);
        r.intervals[0] = Interval {
            start_s: 0.0,
            length_s: 1.0,
            tx_bytes: 0,
            rx_bytes: 1400,
            transactions: 1,
            datagrams: Some(1),
            expected: Some(2),
            jitter_us: Some(3.5),
            ..Interval::default()
        };
        r.udp = Some(linkperf_measured::DatagramCounts {
            sent: 7,
            received: 1,
            expected: 2,
            out_of_order: 3,
            duplicates: 4,
            late: 5,
            jitter_us: Some(3.5),
            jitter_flows: 1,
        });
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["intervals"][0],
            serde_json::json!({"start_s": 0.0, "length_s": 1.0, "tx_bytes": 0, "rx_bytes": 1400,
                "transactions": 1, "datagrams": 1, "expected": 2, "jitter_us": 3.5})
        );
        assert_eq!(
            json["udp"],
            serde_json::json!({"sent": 7, "received": 1, "expected": 2, "out_of_order": 3,
                "duplicates": 4, "late": 5, "jitter_us": 3.5, "jitter_flows": 1})
        );
        server_round_trip(&ServerMessage::Results {
            report: r,
            environment: environment(),
        });
        // Other runs' reports say nothing of datagrams, as before.
        let plain = serde_json::to_value(report(1, 0)).unwrap();
        assert!(plain.get("udp").is_none());
        assert!(plain["intervals"][0].get("datagrams").is_none());
    }

    #[test]
    fn every_server_message_round_trips() {
        let mut msgs = vec![
            ServerMessage::Welcome {
                protocol_version: PROTOCOL_VERSION,
                server_version: "0.1.0".into(),
                session: u64::MAX,
                challenge: Some("c2VydmVyIGNoYWxsZW5nZQ".into()),
                proof: None,
                agent: None,
            },
            ServerMessage::Welcome {
                protocol_version: PROTOCOL_VERSION,
                server_version: "0.1.0-dev".into(),
                session: 7,
                challenge: None,
                proof: None,
                agent: None,
            },
            ServerMessage::Accepted {
                data_ports: vec![7202, 7203],
                unix_names: vec!["linkperf-7.0".into()],
                udp_ports: vec![7204, 7205],
                token: token(),
                environment: environment(),
            },
            ServerMessage::Accepted {
                data_ports: vec![],
                unix_names: vec![],
                udp_ports: vec![],
                token: DataToken([0; 16]),
                environment: Environment::default(),
            },
            ServerMessage::Started,
            ServerMessage::TxnEnded {
                txn: 1,
                written: vec![vec![], vec![90, 0, 1 << 40]],
            },
            ServerMessage::Results {
                report: report(10, 4),
                environment: environment(),
            },
        ];
        let mut bare = report(0, 0);
        bare.latency = None;
        bare.tcp_info = None;
        bare.cpu.process_method = ProcessMethod::RusageSelf;
        bare.cpu.system_busy_method = BusyMethod::ProcStat;
        msgs.push(ServerMessage::Results {
            report: bare,
            environment: Environment::default(),
        });
        for code in [
            ErrorCode::VersionMismatch,
            ErrorCode::Malformed,
            ErrorCode::TooLarge,
            ErrorCode::OutOfOrder,
            ErrorCode::Refused,
            ErrorCode::AuthFailed,
            ErrorCode::Limit,
            ErrorCode::Internal,
            ErrorCode::Aborted,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{code}\""), "Display spells the wire name");
            msgs.push(ServerMessage::Error {
                code,
                message: format!("failed: {code}"),
                limit: None,
            });
        }
        msgs.push(ServerMessage::Error {
            code: ErrorCode::Limit,
            message: "needs 3,150 descriptors, this server may use 2,048".into(),
            limit: Some(LimitInfo {
                kind: LimitKind::Descriptors,
                got: 3150,
                max: 2048,
                in_use: 0,
            }),
        });
        for m in &msgs {
            server_round_trip(m);
        }
    }

    #[test]
    fn golden_limit_error() {
        let m = ServerMessage::Error {
            code: ErrorCode::Limit,
            message: "needs 3,150 descriptors, this server may use 2,048".into(),
            limit: Some(LimitInfo {
                kind: LimitKind::Descriptors,
                got: 3150,
                max: 2048,
                in_use: 12,
            }),
        };
        assert_eq!(
            String::from_utf8(unframe(&encode_server(&m))).unwrap(),
            r#"{"type":"error","code":"limit","message":"needs 3,150 descriptors, this server may use 2,048","limit":{"kind":"descriptors","got":3150,"max":2048,"in_use":12}}"#
        );
        // Without a limit the field is absent, as before it existed.
        let plain = ServerMessage::Error {
            code: ErrorCode::Refused,
            message: "no".into(),
            limit: None,
        };
        assert_eq!(
            String::from_utf8(unframe(&encode_server(&plain))).unwrap(),
            r#"{"type":"error","code":"refused","message":"no"}"#
        );
    }

    #[test]
    fn golden_hello_and_start() {
        let hello = ClientMessage::Hello {
            protocol_version: 2,
            client_version: "0.1.0".into(),
            challenge: None,
        };
        let json = br#"{"type":"hello","protocol_version":2,"client_version":"0.1.0"}"#;
        let mut frame = (json.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(json);
        assert_eq!(encode_client(&hello), frame);

        assert_eq!(
            encode_client(&ClientMessage::Start),
            b"\x00\x00\x00\x10{\"type\":\"start\"}"
        );
    }

    /// The server's placement a client sends carries `threads` as it always
    /// has: 0 when the server is to decide, else the count.
    #[test]
    fn golden_test_placements() {
        let test = |threads| {
            let m = ClientMessage::Test {
                spec: spec(
                    Workload::Rr {
                        request: Bytes(1),
                        response: Bytes(1),
                    },
                    Protocol::Tcp,
                ),
                placement: Placement {
                    threads,
                    affinity: None,
                    busy_poll: false,
                    policy: PlacementPolicy::Free,
                },
            };
            let frame = encode_client(&m);
            let json = std::str::from_utf8(&frame[4..]).unwrap().to_string();
            assert_eq!(decode_client(&frame[4..]).unwrap(), m);
            json
        };
        let placement = r#""placement":{"threads":0,"affinity":null,"busy_poll":false}"#;
        assert!(test(Threads::ServerDefault).ends_with(&format!("{placement}}}")));
        let placement = r#""placement":{"threads":8,"affinity":null,"busy_poll":false}"#;
        assert!(test(Threads::Count(8)).ends_with(&format!("{placement}}}")));
    }

    #[test]
    fn golden_mutual_authentication_and_identity() {
        let hello = ClientMessage::Hello {
            protocol_version: 7,
            client_version: "0.1.0".into(),
            challenge: Some("ab".repeat(32)),
        };
        let json = format!(
            r#"{{"type":"hello","protocol_version":7,"client_version":"0.1.0","challenge":"{}"}}"#,
            "ab".repeat(32)
        );
        assert_eq!(
            String::from_utf8(unframe(&encode_client(&hello))).unwrap(),
            json
        );
        let welcome = ServerMessage::Welcome {
            protocol_version: 7,
            server_version: "0.1.0".into(),
            session: 9,
            challenge: Some("cd".repeat(32)),
            proof: Some("ef".repeat(32)),
            agent: Some(AgentIdentity {
                node: Some("n1".into()),
                network: Some("pod".into()),
                zone: None,
            }),
        };
        let json = format!(
            r#"{{"type":"welcome","protocol_version":7,"server_version":"0.1.0","session":9,"challenge":"{}","proof":"{}","agent":{{"node":"n1","network":"pod"}}}}"#,
            "cd".repeat(32),
            "ef".repeat(32)
        );
        assert_eq!(
            String::from_utf8(unframe(&encode_server(&welcome))).unwrap(),
            json
        );
        server_round_trip(&welcome);
        client_round_trip(&hello);
    }

    #[test]
    fn golden_delegation() {
        let delegate = ClientMessage::Delegate {
            target: "198.18.0.2:7410".into(),
            spec: TestSpec::new(
                Workload::Rr {
                    request: Bytes(1),
                    response: Bytes(1),
                },
                Protocol::Tcp,
                1,
                Duration::from_secs(1),
            ),
            client: Placement::with_threads(1),
            server: Placement::with_threads(1),
        };
        let json = String::from_utf8(unframe(&encode_client(&delegate))).unwrap();
        assert!(
            json.starts_with(r#"{"type":"delegate","target":"198.18.0.2:7410","spec":{"#),
            "{json}"
        );
        client_round_trip(&delegate);
        let failed = ServerMessage::Delegated {
            outcome: DelegatedOutcome {
                started: "2025-01-01T00:00:00.000Z".into(),
                error: Some("the target did not prove it holds the key".into()),
                ..DelegatedOutcome::default()
            },
        };
        assert_eq!(
            String::from_utf8(unframe(&encode_server(&failed))).unwrap(),
            r#"{"type":"delegated","outcome":{"started":"2025-01-01T00:00:00.000Z","error":"the target did not prove it holds the key","aborted":false}}"#
        );
        let full = ServerMessage::Delegated {
            outcome: DelegatedOutcome {
                started: "2025-01-01T00:00:00.000Z".into(),
                error: None,
                client: Some(report(2, 1)),
                server: Some(report(2, 2)),
                client_environment: Some(environment()),
                server_environment: Some(environment()),
                target_agent: Some(AgentIdentity {
                    node: Some("n2".into()),
                    network: Some("host".into()),
                    zone: Some("z1".into()),
                }),
                aborted: false,
                server_error: None,
                failure: None,
            },
        };
        server_round_trip(&full);
    }

    #[test]
    fn golden_token_is_lowercase_hex() {
        let json = serde_json::to_string(&token()).unwrap();
        assert_eq!(json, r#""00112233445566778899aabbccddeeff""#);
        assert_eq!(token().to_string(), "00112233445566778899aabbccddeeff");
        assert_eq!(token().session_tag(), 0x0011_2233);
        let upper: DataToken =
            serde_json::from_str(r#""00112233445566778899AABBCCDDEEFF""#).unwrap();
        assert_eq!(upper, token());
    }

    #[test]
    fn bad_tokens_are_refused() {
        for bad in [
            r#""""#,
            r#""00112233445566778899aabbccddeef""#,
            r#""00112233445566778899aabbccddeeff00""#,
            r#""0011223344556677889gaabbccddeeff""#,
            r#""+0112233445566778899aabbccddeeff""#,
            r#""00112233445566778899aabbccddeeé""#,
            "12",
            "null",
            "[0,1]",
        ] {
            assert!(serde_json::from_str::<DataToken>(bad).is_err(), "{bad}");
        }
        let msg = r#"{"type":"accepted","data_ports":[1],"unix_names":[],"token":"xyz","environment":{}}"#;
        match decode_server(msg.as_bytes()) {
            Err(WireError::Malformed(m)) => assert!(m.contains("32 hex digits"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    fn malformed_client(payload: &[u8]) -> String {
        match decode_client(payload) {
            Err(WireError::Malformed(m)) => m,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(payload)),
        }
    }

    fn malformed_server(payload: &[u8]) -> String {
        match decode_server(payload) {
            Err(WireError::Malformed(m)) => m,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(payload)),
        }
    }

    #[test]
    fn garbage_is_malformed() {
        let mut deep = vec![b'['; 100_000];
        deep.extend(vec![b']'; 100_000]);
        let cases: &[&[u8]] = &[
            b"not json",
            b"\xff\xfe\x00",
            b"[1,2,3]",
            b"\"hello\"",
            b"42",
            b"null",
            b"{}",
            br#"{"type":5}"#,
            br#"{"type":null}"#,
            br#"{"type":"hello","protocol_ver"#,
            br#"{"type":"start"} trailing"#,
            br#"{"type":"abort","reason":"\xff"}"#,
            br#"{"type":"hello","protocol_version":"2","client_version":"x"}"#,
            br#"{"type":"hello","protocol_version":-2,"client_version":"x"}"#,
            br#"{"type":"hello","protocol_version":5294967296,"client_version":"x"}"#,
            &deep,
        ];
        for c in cases {
            malformed_client(c);
            malformed_server(c);
        }
        let m = malformed_client(br#"{"type":"teleport"}"#);
        assert!(m.contains("unknown variant `teleport`"), "{m}");
        let m = malformed_client(br#"{"type":"hello","protocol_version":7}"#);
        assert!(m.contains("client_version"), "{m}");
        // Each side's messages are foreign to the other's decoder.
        malformed_client(&unframe(&encode_server(&ServerMessage::Started)));
        malformed_server(&unframe(&encode_client(&ClientMessage::Start)));
        malformed_client(br#"{"type":"welcome","protocol_version":7}"#);
        malformed_server(br#"{"type":"hello","protocol_version":7}"#);
        malformed_server(br#"{"type":"error","code":"exploded","message":"x"}"#);
    }

    #[test]
    fn other_protocol_versions_are_a_mismatch() {
        let v8 = WireError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: 8,
        };
        for hello in [
            r#"{"type":"hello","protocol_version":8,"client_version":"2.0.0"}"#,
            r#"{"type":"hello","protocol_version":8}"#,
            r#"{"protocol_version":8,"type":"hello","client_version":{"major":2},"caps":["x"]}"#,
        ] {
            assert_eq!(decode_client(hello.as_bytes()), Err(v8.clone()), "{hello}");
        }
        let welcome =
            r#"{"type":"welcome","protocol_version":8,"server":{"name":"x"},"nonce":[1]}"#;
        assert_eq!(decode_server(welcome.as_bytes()), Err(v8));
        let old = ServerMessage::Welcome {
            protocol_version: 0,
            server_version: "0.0.1".into(),
            session: 1,
            challenge: None,
            proof: None,
            agent: None,
        };
        assert_eq!(
            decode_server(&unframe(&encode_server(&old))),
            Err(WireError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: 0
            })
        );
    }

    #[test]
    fn unknown_extra_fields_are_ignored() {
        let hello =
            br#"{"type":"hello","protocol_version":7,"client_version":"0.2.0","features":["x"]}"#;
        assert_eq!(
            decode_client(hello),
            Ok(ClientMessage::Hello {
                protocol_version: 7,
                client_version: "0.2.0".into(),
                challenge: None
            })
        );
        assert_eq!(
            decode_client(br#"{"type":"start","at":12}"#),
            Ok(ClientMessage::Start)
        );
        assert_eq!(
            decode_server(br#"{"extra":null,"type":"started"}"#),
            Ok(ServerMessage::Started)
        );
        // A missing optional field reads as None.
        let welcome =
            br#"{"type":"welcome","protocol_version":7,"server_version":"0.1.0","session":3}"#;
        assert_eq!(
            decode_server(welcome),
            Ok(ServerMessage::Welcome {
                protocol_version: 7,
                server_version: "0.1.0".into(),
                session: 3,
                challenge: None,
                proof: None,
                agent: None,
            })
        );
    }

    #[test]
    fn an_hour_of_results_fits_in_a_default_frame() {
        // An hour of seconds, the most users a server takes (20,000), each
        // with an hour's counts, and a histogram spanning 1 µs to an hour.
        let mut report = report(3600, 64);
        report.flows = linkperf_measured::FlowCounts::from_counts(
            (0..20_000u32)
                .map(|f| linkperf_measured::FlowCount {
                    flow: f,
                    transactions: 40_000_000 + u64::from(f),
                    tx_bytes: 400_000_000_000 + u64::from(f),
                    rx_bytes: 400_000_000_000 - u64::from(f),
                })
                .collect(),
        );
        let mut h = linkperf_metrics::LatencyRecorder::new();
        let mut ns = 1_000u64;
        while ns < 3_600_000_000_000 {
            h.record_n_ns(ns, 1 + ns % 97);
            ns += ns / 300 + 1;
        }
        report.latency_histogram = h.encode_histogram();
        let msg = ServerMessage::Results {
            report,
            environment: environment(),
        };
        let frame = encode_server(&msg);
        assert!(
            frame.len() - 4 <= DEFAULT_MAX_FRAME,
            "{} bytes",
            frame.len() - 4
        );
        server_round_trip(&msg);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_client(&bytes);
            let _ = decode_server(&bytes);
            let mut d = FrameDecoder::new(256);
            d.feed(&bytes);
            while let Ok(Some(payload)) = d.next_frame() {
                let _ = decode_client(&payload);
                let _ = decode_server(&payload);
            }
        }

        #[test]
        fn json_like_bytes_never_panic(
            s in r#"\{"type":"(hello|welcome|start|test|accepted|results|error)"(,"[a-z_]{1,16}":(-?[0-9]{1,12}|"[0-9a-f]{0,40}"|null|\{\}|\[\]))*\}"#
        ) {
            let _ = decode_client(s.as_bytes());
            let _ = decode_server(s.as_bytes());
        }

        #[test]
        fn messages_with_any_text_round_trip(
            text in "\\PC{0,64}",
            number in any::<u64>(),
            version in any::<u32>(),
            challenge in proptest::option::of("[0-9a-f]{64}"),
        ) {
            for m in [
                ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, client_version: text.clone() , challenge: None},
                ClientMessage::Auth { response: text.clone() },
                ClientMessage::Abort { reason: text.clone() },
            ] {
                client_round_trip(&m);
            }
            for m in [
                ServerMessage::Welcome {
                    protocol_version: PROTOCOL_VERSION,
                    server_version: text.clone(),
                    session: number,
                    challenge: challenge.clone(),
                    proof: None,
                    agent: None,
                },
                ServerMessage::Error { code: ErrorCode::AuthFailed, message: text.clone(), limit: None },
            ] {
                server_round_trip(&m);
            }
            // Any other version is a mismatch, whatever else the greeting holds.
            let hello = ClientMessage::Hello { protocol_version: version, client_version: text , challenge: None};
            let decoded = decode_client(&unframe(&encode_client(&hello)));
            if version == PROTOCOL_VERSION {
                prop_assert_eq!(decoded, Ok(hello));
            } else {
                prop_assert_eq!(decoded, Err(mismatch(version)));
            }
        }

        /// Every message that carries numbers, lists or a spec survives a round
        /// trip byte for byte, whatever the values (what the server then
        /// accepts is its own check, not the decoder's).
        #[test]
        fn messages_with_any_numbers_round_trip(
            users in any::<u32>(),
            nanos in any::<u64>(),
            threads in prop_oneof![Just(Threads::ServerDefault), (1u32..).prop_map(Threads::Count)],
            busy_poll in any::<bool>(),
            cpus in proptest::collection::vec(0usize..4096, 1..8),
            ports in proptest::collection::vec(any::<u16>(), 0..16),
            counts in proptest::collection::vec(any::<u64>(), 0..64),
            written in proptest::collection::vec(proptest::collection::vec(any::<u64>(), 0..4), 0..16),
            txn in any::<u32>(),
            size in 1u64..=(64 << 20),
            workload in prop_oneof![
                Just("rr1c-1x1"), Just("rr1c-200x30k"), Just("str-writex30k"),
                Just("crr:200x1k"), Just("stream-bidir:1m"), Just("mix:200x200*1,200x8k*3"),
            ],
            protocol in prop_oneof![Just(Protocol::Tcp), Just(Protocol::Udp), Just(Protocol::Unix)],
        ) {
            let placement = Placement {
                threads,
                affinity: Some(CpuList(cpus)),
                busy_poll,
                policy: PlacementPolicy::Same,
            };
            let mut test = spec(workload.parse().unwrap(), protocol);
            test.users = users;
            test.duration = Duration::from_nanos(nanos);
            test.warmup = Duration::from_nanos(nanos / 3);
            test.udp_timeout = Duration::from_nanos(nanos % 1_000_000_007);
            let mut profile = linkperf_workload::profile::parse_profile(
                "<profile name=p><group nthreads=1><transaction iterations=1>\
                 <flowop type=connect/><flowop type=write options=\"size=10\"/>\
                 </transaction></group></profile>",
                &|_| None,
            )
            .unwrap();
            profile.groups[0].users = users;
            profile.groups[0].transactions[0].limit =
                linkperf_workload::profile::Limit::Duration(Duration::from_nanos(nanos));
            if let linkperf_workload::profile::FlowopKind::Write(x) =
                &mut profile.groups[0].transactions[0].flowops[1].kind
            {
                x.size = linkperf_workload::profile::Size::Rand { min: 1, max: size };
            }
            for m in [
                ClientMessage::Test { spec: test, placement: placement.clone() },
                ClientMessage::Profile { profile, placement, client_ports: ports.clone() },
                ClientMessage::TxnEnd { txn, iterations: counts },
            ] {
                client_round_trip(&m);
            }
            for m in [
                ServerMessage::Accepted {
                    data_ports: ports.clone(),
                    unix_names: ports.iter().map(|p| format!("linkperf-{p}")).collect(),
                    udp_ports: ports,
                    token: DataToken((nanos as u128).to_be_bytes()),
                    environment: Environment::default(),
                },
                ServerMessage::TxnEnded { txn, written },
            ] {
                server_round_trip(&m);
            }
        }

        #[test]
        fn token_hex_round_trips(bytes in any::<[u8; 16]>()) {
            let t = DataToken(bytes);
            let hex = t.to_string();
            prop_assert_eq!(hex.len(), 32);
            prop_assert!(hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            let json = serde_json::to_string(&t).unwrap();
            prop_assert_eq!(&json, &format!("\"{hex}\""));
            prop_assert_eq!(serde_json::from_str::<DataToken>(&json).unwrap(), t);
            prop_assert_eq!(t.session_tag(), u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
        }

        #[test]
        fn measured_floats_reach_the_client_bit_for_bit(
            floats in proptest::collection::vec(any::<f64>().prop_filter("finite", |f| f.is_finite()), 8)
        ) {
            let mut r = report(1, 1);
            let l = r.latency.as_mut().unwrap();
            l.mean = floats[0];
            l.p50 = floats[1];
            l.p99 = floats[2];
            l.max = floats[3];
            r.window_s = floats[4];
            r.cpu.system_busy_s = floats[5];
            r.intervals[0].start_s = floats[6];
            r.cpu.proc_stat.softirq_s = floats[7];
            let msg = ServerMessage::Results { report: r, environment: Environment::default() };
            let frame = encode_server(&msg);
            let back = decode_server(&unframe(&frame)).unwrap();
            prop_assert_eq!(&back, &msg);
            prop_assert_eq!(encode_server(&back), frame);
        }
    }
}
