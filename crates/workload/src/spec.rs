use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::offered::{self, OfferedLoad};
use crate::{BitsPerSecond, CpuList, PlacementPolicy, Side, Workload, WorkloadError};

/// Bytes of linkperf header in front of every UDP datagram's payload
/// (session tag, flow id, sequence number, send time). Not counted as payload.
pub const UDP_HEADER_BYTES: usize = 24;

/// Largest UDP request or response payload (65,507 bytes of IPv4 datagram less the header).
pub const MAX_UDP_PAYLOAD: u64 = 65_507 - UDP_HEADER_BYTES as u64;

/// The pace of a UDP stream when none is given: 1 Mbit/s per user, as
/// iperf3's `-u` without `-b`.
pub const DEFAULT_UDP_RATE: BitsPerSecond = BitsPerSecond(1_000_000);

/// Fastest pace a UDP stream's user may ask for: 1 Tbit/s (nothing carries
/// more, and the time between datagrams stays above a picosecond).
pub const MAX_UDP_RATE: BitsPerSecond = BitsPerSecond(1_000_000_000_000);

/// A UDP stream's pace of 0: no pace, as fast as the socket takes.
pub const UNPACED: BitsPerSecond = BitsPerSecond(0);

/// A UDP stream's pace per user as `--rate` and a suite file's `rate` take
/// it, iperf3's `-b`: [`BitsPerSecond`]'s forms (`100m` is 100,000,000
/// bit/s: rates use powers of 1000, sizes keep k = 1024), a bare number of
/// bits per second, or `0` for no pace; at most [`MAX_UDP_RATE`].
pub fn parse_udp_rate(s: &str) -> Result<BitsPerSecond, WorkloadError> {
    let bad = |why: &str| {
        WorkloadError::Rate(format!(
            "rate '{s}': {why} (bits per second: 100m is 100,000,000 bit/s, 1g, 500k, 0 for as fast as the socket takes)"
        ))
    };
    let rate = s
        .parse::<BitsPerSecond>()
        .map_err(|e| bad(&e.to_string()))?;
    if rate > MAX_UDP_RATE {
        return Err(bad("faster than 1 Tbit/s per user"));
    }
    Ok(rate)
}

/// A UDP stream's pace as its test's name shows it: the largest SI multiple
/// that is exact, without the unit (`100m`, `2500k`, `1g`, `9001`), `max`
/// for no pace.
fn rate_label(rate: BitsPerSecond) -> String {
    if rate == UNPACED {
        return "max".to_string();
    }
    let shown = rate.to_string();
    shown.strip_suffix("bit").unwrap_or(&shown).to_string()
}

/// The transport that carries the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// TCP, one connection per user.
    Tcp,
    /// UDP datagrams: request/response (a lost datagram is a lost
    /// transaction) or paced streams (loss and jitter counted by the receiver).
    Udp,
    /// Unix stream sockets: same host only, the in-memory path.
    Unix,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Unix => "unix",
        })
    }
}

impl FromStr for Protocol {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tcp" => Ok(Protocol::Tcp),
            "udp" => Ok(Protocol::Udp),
            "unix" => Ok(Protocol::Unix),
            _ => Err(WorkloadError::UnknownProtocol(s.to_string())),
        }
    }
}

/// Socket options applied to every data connection, on both ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SocketOptions {
    /// TCP_NODELAY. `None` means the workload's default: on for rr/crr, off for streams.
    pub nodelay: Option<bool>,
    /// SO_SNDBUF in bytes, as requested (the kernel doubles it and caps it).
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes, as requested.
    pub rcvbuf: Option<u32>,
    /// TCP congestion control algorithm (TCP_CONGESTION), e.g. `cubic`, `bbr`.
    pub cc: Option<String>,
    /// TCP maximum segment size (TCP_MAXSEG), set before connecting.
    pub mss: Option<u32>,
}

impl SocketOptions {
    /// Whether TCP_NODELAY is on for this workload.
    pub fn nodelay_for(&self, workload: &Workload) -> bool {
        self.nodelay.unwrap_or(workload.is_request_response())
    }
}

/// How one side runs its event-loop workers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// How many event-loop worker threads; every user is carried by one of
    /// them.
    pub threads: Threads,
    /// CPUs the workers are pinned to, worker i on `cpus[i % len]`; `None` leaves them free.
    pub affinity: Option<CpuList>,
    /// Workers poll without sleeping (zero-timeout event waits).
    pub busy_poll: bool,
    /// Where the workers go when `affinity` is not given: the side settles
    /// it against its own host's CPUs before it runs (`free`, pinning
    /// nothing, is left out of messages and files).
    #[serde(default, skip_serializing_if = "PlacementPolicy::is_free")]
    pub policy: PlacementPolicy,
}

impl Placement {
    /// `threads` workers, free to run anywhere, sleeping when idle.
    pub fn with_threads(threads: u32) -> Self {
        Placement {
            threads: Threads::Count(threads),
            affinity: None,
            busy_poll: false,
            policy: PlacementPolicy::Free,
        }
    }

    /// Settles the policy into a CPU list for `side` on a host whose usable
    /// CPUs are `allowed`; an explicit list wins and is kept.
    pub fn settle(&mut self, side: Side, allowed: &[usize]) {
        if self.affinity.is_none() {
            self.affinity = self.policy.cpus(side, allowed);
        }
    }
}

/// How many event-loop workers a side runs.
///
/// Written as a bare number, as the control protocol and results documents
/// have always carried it: the count, and 0 for [`Threads::ServerDefault`]
/// (so a 0 read back is `ServerDefault`, never a count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Threads {
    /// This many (at least 1).
    Count(u32),
    /// The server decides: one per CPU of its host. Only in the server's
    /// placement a client sends; the server settles it before it runs.
    ServerDefault,
}

impl Threads {
    /// The count, or `None` while the server is to decide.
    pub fn count(self) -> Option<u32> {
        match self {
            Threads::Count(n) => Some(n),
            Threads::ServerDefault => None,
        }
    }
}

/// The number that stands for [`Threads::ServerDefault`] on the wire and in files.
const SERVER_DEFAULT_THREADS: u32 = 0;

impl Serialize for Threads {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.count().unwrap_or(SERVER_DEFAULT_THREADS))
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match u32::deserialize(d)? {
            SERVER_DEFAULT_THREADS => Threads::ServerDefault,
            n => Threads::Count(n),
        })
    }
}

/// One test as both ends agree on it: what each user does, over which protocol,
/// how many users, for how long.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TestSpec {
    /// What each user does.
    pub workload: Workload,
    /// Transport of the data connections.
    pub protocol: Protocol,
    /// Concurrent flows, each with its own connection.
    pub users: u32,
    /// Length of the measurement window.
    pub duration: Duration,
    /// Time before the window, excluded from every metric.
    pub warmup: Duration,
    /// Socket options for every data connection.
    pub socket: SocketOptions,
    /// How long a UDP transaction waits for its response before it counts as lost.
    pub udp_timeout: Duration,
    /// The pace of each user's UDP stream (UDP streams only): `None` is
    /// [`DEFAULT_UDP_RATE`], a rate of 0 no pace. See [`TestSpec::stream_rate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<BitsPerSecond>,
    /// Open loop: transactions offered at this load over all users, each
    /// timed from when it was due; `None` is closed loop (each user's next
    /// request goes when its last answer came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<OfferedLoad>,
}

/// Most users in one test.
pub const MAX_USERS: u32 = 100_000;

/// Longest duration, warmup or UDP timeout a test may ask for: 7 days. Far
/// beyond any study (a server refuses past its `--max-duration`, 1 h by
/// default), and far from the overflow of the sums and clocks computed from them.
pub const MAX_TEST_TIME: Duration = Duration::from_secs(7 * 24 * 3600);

impl TestSpec {
    /// A spec with the defaults: 1 s warmup, default socket options, 250 ms UDP timeout.
    pub fn new(workload: Workload, protocol: Protocol, users: u32, duration: Duration) -> Self {
        TestSpec {
            workload,
            protocol,
            users,
            duration,
            warmup: Duration::from_secs(1),
            socket: SocketOptions::default(),
            udp_timeout: Duration::from_millis(250),
            rate: None,
            offered: None,
        }
    }

    /// Whether this is a UDP stream (paced datagrams one way or both).
    pub fn is_udp_stream(&self) -> bool {
        self.protocol == Protocol::Udp && matches!(self.workload, Workload::Stream { .. })
    }

    /// The pace of each user's stream, for a UDP stream: the rate asked for,
    /// or [`DEFAULT_UDP_RATE`]; 0 is no pace. `None` for anything else.
    pub fn stream_rate(&self) -> Option<BitsPerSecond> {
        self.is_udp_stream()
            .then(|| self.rate.unwrap_or(DEFAULT_UDP_RATE))
    }

    /// The workload's name with what else sets it apart: a UDP stream's pace
    /// (`str-readx1400@100m`, `@max` for no pace).
    pub fn workload_name(&self) -> String {
        match self.stream_rate() {
            Some(r) => format!("{}@{}", self.workload.name(), rate_label(r)),
            None => self.workload.name(),
        }
    }

    /// The test's name in the study's form: `rr1c-200x1000--50`; a protocol other
    /// than TCP is appended: `rr1c-1x1--50--udp`, a UDP stream's pace to its
    /// workload: `str-readx1400@100m--1--udp`, and an offered load last:
    /// `rr1c-1x1--50--50k/s`.
    pub fn name(&self) -> String {
        let name = match self.protocol {
            Protocol::Tcp => format!("{}--{}", self.workload_name(), self.users),
            p => format!("{}--{}--{}", self.workload_name(), self.users, p),
        };
        match &self.offered {
            Some(load) => format!("{name}--{}/s", offered::label(load.rate)),
            None => name,
        }
    }

    /// Checks that the combination can run.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        self.workload.validate()?;
        for (what, d) in [
            ("duration", self.duration),
            ("warmup", self.warmup),
            ("udp timeout", self.udp_timeout),
        ] {
            if d > MAX_TEST_TIME {
                return Err(WorkloadError::Invalid(format!(
                    "{what} of {} is longer than a test may last (7 days)",
                    humantime::format_duration(d)
                )));
            }
        }
        if self.users == 0 || self.users > MAX_USERS {
            return Err(WorkloadError::Invalid(format!(
                "users must be between 1 and {MAX_USERS}, got {}",
                self.users
            )));
        }
        // A profile's transactions set its length; its duration is their least time.
        if self.duration.is_zero() && !matches!(self.workload, Workload::Profile { .. }) {
            return Err(WorkloadError::Invalid(
                "duration must be longer than zero".into(),
            ));
        }
        if self.protocol == Protocol::Udp {
            match &self.workload {
                // A profile checks its own datagram sizes (engine::program).
                Workload::Profile { .. } => {}
                Workload::Rr { request, response } => {
                    request.check_range("UDP request", 1, MAX_UDP_PAYLOAD)?;
                    response.check_range("UDP response", 1, MAX_UDP_PAYLOAD)?;
                }
                Workload::Mix { entries } => {
                    for e in entries {
                        e.request.check_range("UDP request", 1, MAX_UDP_PAYLOAD)?;
                        e.response.check_range("UDP response", 1, MAX_UDP_PAYLOAD)?;
                    }
                }
                Workload::Stream { message, .. } => {
                    message.check_range("UDP message", 1, MAX_UDP_PAYLOAD)?;
                }
                other => {
                    return Err(WorkloadError::Invalid(format!(
                    "workload {} cannot run over udp: udp carries request/response (rr, mix) and streams",
                    other.name()
                )))
                }
            }
            if self.udp_timeout.is_zero() {
                return Err(WorkloadError::Invalid(
                    "udp timeout must be longer than zero".into(),
                ));
            }
        }
        if let Some(r) = self.rate {
            if !self.is_udp_stream() {
                return Err(WorkloadError::RateNotUdpStream {
                    workload: self.workload.name(),
                    protocol: self.protocol,
                });
            }
            if r > MAX_UDP_RATE {
                return Err(WorkloadError::Invalid(format!(
                    "rate {r} is faster than 1 Tbit/s per user"
                )));
            }
        }
        if let Some(load) = &self.offered {
            load.check()?;
            if !matches!(self.workload, Workload::Rr { .. } | Workload::Mix { .. }) {
                return Err(WorkloadError::Offered(format!(
                    "an offered load runs request/response on persistent connections (rr, mix); \
                     {} is not one",
                    self.workload.name()
                )));
            }
        }
        if let Some(cc) = &self.socket.cc {
            check_cc_name(cc)?;
        }
        if self.protocol != Protocol::Tcp && (self.socket.cc.is_some() || self.socket.mss.is_some())
        {
            return Err(WorkloadError::TcpOptions(self.protocol));
        }
        Ok(())
    }
}

/// Longest name of a TCP congestion control (the kernel's TCP_CA_NAME_MAX, less its NUL).
const MAX_CC_NAME: usize = 15;

/// A congestion control's name as the kernel names them (`cubic`, `bbr`,
/// `highspeed`): checked before any host is asked for it.
fn check_cc_name(cc: &str) -> Result<(), WorkloadError> {
    let ok = !cc.is_empty()
        && cc.len() <= MAX_CC_NAME
        && cc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(WorkloadError::Invalid(format!(
            "congestion control {cc:?} is not a name: 1 to {MAX_CC_NAME} letters, digits, - or _ \
             (e.g. cubic, bbr, reno)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Bytes;

    /// What a server gets from the wire is held to the bounds the command
    /// line's parser keeps: a mix with a weight of 0, or more entries than a
    /// mix may have, is refused by the one validation both share.
    #[test]
    fn a_hand_made_mix_is_held_to_the_parsers_bounds() {
        use crate::{Bytes, MixEntry, MAX_MIX_ENTRIES};
        let entry = |weight| MixEntry {
            request: Bytes(200),
            response: Bytes(200),
            weight,
        };
        let mix = |entries: Vec<MixEntry>| {
            TestSpec::new(
                Workload::Mix { entries },
                Protocol::Tcp,
                1,
                Duration::from_secs(1),
            )
        };
        assert!(mix(vec![entry(1), entry(3)]).validate().is_ok());
        let e = mix(vec![entry(1), entry(0)])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("weight 0"), "{e}");
        let many = (0..=MAX_MIX_ENTRIES).map(|_| entry(1)).collect();
        let e = mix(many).validate().unwrap_err().to_string();
        assert!(e.contains("more than 64"), "{e}");
        assert!(mix(vec![]).validate().is_err());
        // The parser refuses the same, with the same words.
        let e = "mix:200x200*0".parse::<Workload>().unwrap_err().to_string();
        assert!(e.contains("weight 0"), "{e}");
    }

    #[test]
    fn threads_are_written_as_they_always_were_0_for_the_servers_choice() {
        let mut server = Placement {
            threads: Threads::ServerDefault,
            affinity: None,
            busy_poll: false,
            policy: PlacementPolicy::Free,
        };
        let json = serde_json::to_string(&server).unwrap();
        assert_eq!(json, r#"{"threads":0,"affinity":null,"busy_poll":false}"#);
        assert_eq!(serde_json::from_str::<Placement>(&json).unwrap(), server);
        // A policy is written when it pins something, and settled by the side.
        server.policy = PlacementPolicy::Split;
        let json = serde_json::to_string(&server).unwrap();
        assert_eq!(
            json,
            r#"{"threads":0,"affinity":null,"busy_poll":false,"policy":"split"}"#
        );
        assert_eq!(serde_json::from_str::<Placement>(&json).unwrap(), server);
        server.settle(Side::Server, &[0, 1]);
        assert_eq!(server.affinity, Some(CpuList(vec![1])));
        // An explicit list wins.
        let mut client = Placement::with_threads(1);
        client.affinity = Some(CpuList(vec![1]));
        client.policy = PlacementPolicy::Split;
        client.settle(Side::Client, &[0, 1]);
        assert_eq!(client.affinity, Some(CpuList(vec![1])));
        let four = Placement::with_threads(4);
        let json = serde_json::to_string(&four).unwrap();
        assert_eq!(json, r#"{"threads":4,"affinity":null,"busy_poll":false}"#);
        assert_eq!(serde_json::from_str::<Placement>(&json).unwrap(), four);
        assert!(serde_json::from_str::<Placement>(
            r#"{"threads":-1,"affinity":null,"busy_poll":false}"#
        )
        .is_err());
    }

    #[test]
    fn a_congestion_control_is_a_kernel_name() {
        let with_cc = |cc: &str| {
            let mut s = spec("stream-up:16k", Protocol::Tcp, 1);
            s.socket.cc = Some(cc.into());
            s.validate()
        };
        for good in ["cubic", "bbr", "highspeed", "tcp_x-1", "abcdefghijklmno"] {
            assert!(with_cc(good).is_ok(), "{good}");
        }
        for bad in ["", "../../etc", "a b", "abcdefghijklmnop", "cubic\0"] {
            let e = with_cc(bad).unwrap_err().to_string();
            assert!(e.contains("is not a name"), "{bad:?}: {e}");
        }
    }

    fn spec(w: &str, p: Protocol, users: u32) -> TestSpec {
        TestSpec::new(w.parse().unwrap(), p, users, Duration::from_secs(1))
    }

    #[test]
    fn times_past_seven_days_are_refused_before_anything_sums_them() {
        let mut s = TestSpec::new("rr1c-1x1".parse().unwrap(), Protocol::Tcp, 1, MAX_TEST_TIME);
        s.warmup = MAX_TEST_TIME;
        assert!(s.validate().is_ok());
        // What a hostile client could send: warmup + duration overflows.
        for edit in [
            |s: &mut TestSpec| s.duration = Duration::MAX,
            |s: &mut TestSpec| s.warmup = Duration::MAX,
            |s: &mut TestSpec| s.udp_timeout = MAX_TEST_TIME + Duration::from_nanos(1),
        ] {
            let mut bad = s.clone();
            edit(&mut bad);
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains("longer than a test may last (7 days)"), "{e}");
        }
    }

    #[test]
    fn names_follow_the_study() {
        assert_eq!(
            spec("rr1c-200x1000", Protocol::Tcp, 50).name(),
            "rr1c-200x1000--50"
        );
        assert_eq!(spec("rr:1x1", Protocol::Udp, 1).name(), "rr1c-1x1--1--udp");
    }

    #[test]
    fn udp_carries_rr_and_streams_within_datagram_size() {
        assert!(spec("rr1c-200x1000", Protocol::Udp, 1).validate().is_ok());
        assert!(spec("stream-up:1400", Protocol::Udp, 1).validate().is_ok());
        assert!(spec("stream-bidir:63k", Protocol::Udp, 1)
            .validate()
            .is_ok());
        let e = spec("str-readx64k", Protocol::Udp, 1)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("UDP message must be between 1 and 65483"), "{e}");
        assert!(spec("rr:200x64k", Protocol::Udp, 1).validate().is_err());
        assert!(spec("crr:1x1", Protocol::Udp, 1).validate().is_err());
    }

    #[test]
    fn a_rate_paces_udp_streams_only() {
        let mut s = spec("stream-up:1400", Protocol::Udp, 2);
        assert_eq!(s.stream_rate(), Some(DEFAULT_UDP_RATE), "iperf3's default");
        assert_eq!(s.name(), "str-readx1400@1m--2--udp");
        s.rate = Some("100m".parse().unwrap());
        assert!(s.validate().is_ok());
        assert_eq!(s.name(), "str-readx1400@100m--2--udp");
        s.rate = Some(UNPACED);
        assert_eq!(s.name(), "str-readx1400@max--2--udp");
        assert_eq!(s.workload_name(), "str-readx1400@max");
        for (w, p) in [
            ("stream-up:1400", Protocol::Tcp),
            ("rr1c-1x1", Protocol::Udp),
        ] {
            let mut s = spec(w, p, 1);
            assert_eq!(s.stream_rate(), None);
            s.rate = Some(BitsPerSecond(1000));
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains("a rate paces UDP streams"), "{e}");
            assert!(!e.contains("--"), "a library message names no flag: {e}");
        }
        let mut s = spec("stream-down:1k", Protocol::Udp, 1);
        s.rate = Some(BitsPerSecond(MAX_UDP_RATE.0 + 1));
        assert!(s.validate().is_err());
    }

    #[test]
    fn udp_rates_read_as_iperf3_reads_b() {
        for (s, bits) in [
            ("100m", 100_000_000),
            ("100M", 100_000_000),
            ("1g", 1_000_000_000),
            ("1.5G", 1_500_000_000),
            ("64k", 64_000),
            ("250000", 250_000),
            ("100mbit", 100_000_000),
            ("1t", 1_000_000_000_000),
            ("0", 0),
            (" 10m ", 10_000_000),
        ] {
            assert_eq!(parse_udp_rate(s).unwrap(), BitsPerSecond(bits), "{s}");
        }
        assert_eq!(parse_udp_rate("0").unwrap(), UNPACED);
    }

    #[test]
    fn bad_udp_rates_say_why() {
        for (s, why) in [
            ("", "no number"),
            ("m", "no number"),
            ("10mbps", "unknown unit"),
            ("10x", "unknown unit"),
            ("1.2.3m", "not a number"),
            ("1.5", "whole number"),
            ("2t", "faster than"),
            ("-1m", "no number"),
        ] {
            let e = parse_udp_rate(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.contains("100m is 100,000,000"), "{e}");
        }
    }

    #[test]
    fn udp_rates_show_compactly_in_names_and_read_back() {
        for (bits, s) in [
            (100_000_000, "100m"),
            (2_500_000, "2500k"),
            (1_000_000_000, "1g"),
            (9_001, "9001"),
        ] {
            assert_eq!(rate_label(BitsPerSecond(bits)), s);
            assert_eq!(parse_udp_rate(s).unwrap(), BitsPerSecond(bits));
        }
        assert_eq!(rate_label(UNPACED), "max");
    }

    #[test]
    fn specs_without_a_rate_serialise_as_before() {
        let s = spec("rr1c-1x1", Protocol::Udp, 1);
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("rate"), "{json}");
        let mut u = spec("stream-up:1400", Protocol::Udp, 1);
        u.rate = Some(BitsPerSecond(100_000_000));
        let json = serde_json::to_value(&u).unwrap();
        assert_eq!(json["rate"], 100_000_000);
        assert_eq!(serde_json::from_value::<TestSpec>(json).unwrap(), u);
    }

    #[test]
    fn refuses_zero_users_and_duration() {
        assert!(spec("rr1c-1x1", Protocol::Tcp, 0).validate().is_err());
        let mut s = spec("rr1c-1x1", Protocol::Tcp, 1);
        s.duration = Duration::ZERO;
        assert!(s.validate().is_err());
    }

    #[test]
    fn nodelay_defaults_by_kind() {
        let o = SocketOptions::default();
        assert!(o.nodelay_for(&"rr1c-1x1".parse().unwrap()));
        assert!(!o.nodelay_for(&"str-readx30k".parse().unwrap()));
        let _ = Bytes(1);
    }
}
