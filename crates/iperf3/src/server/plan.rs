//! What the server will do for a client's parameters, or why it refuses.
//! Pure: parameters and limits in, a plan or a refusal out.

use std::time::Duration;

use crate::codec::{stream_count, IErrno, TestMode, TestParams, Transport, UdpHeader};

/// iperf3's own limit on streams (`MAX_STREAMS`).
pub const MAX_STREAMS: u32 = 128;
/// iperf3's largest TCP block (`MAX_BLOCKSIZE`).
pub const MAX_BLOCKSIZE: i64 = 1024 * 1024;
/// The largest UDP datagram payload (`MAX_UDP_BLOCKSIZE`).
pub const MAX_UDP_BLOCKSIZE: i64 = 65_507;
/// iperf3's largest socket buffer (`MAX_TCP_BUFFER`).
pub const MAX_WINDOW: i64 = 512 * 1024 * 1024;
/// iperf3's largest MSS (`MAX_MSS`).
pub const MAX_MSS: i64 = 9 * 1024;
/// After the test's time and omitted seconds, how long the server waits for
/// the client's `TEST_END` before it ends the test itself.
pub const END_GRACE: Duration = Duration::from_secs(10);

/// One test as the server runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestPlan {
    /// TCP or UDP.
    pub transport: Transport,
    /// Which way the data flows.
    pub mode: TestMode,
    /// Streams each way.
    pub parallel: usize,
    /// Bytes per read, write or datagram.
    pub blksize: usize,
    /// `-t`; `None` with `-n`/`-k` (the test lasts until they are done).
    pub time: Option<Duration>,
    /// `-O`.
    pub omit: Duration,
    /// `-n`.
    pub bytes: Option<u64>,
    /// `-k`.
    pub blocks: Option<u64>,
    /// `-b`, bits per second per sending stream (UDP always has one).
    pub rate: Option<u64>,
    /// `-w`: SO_SNDBUF and SO_RCVBUF.
    pub window: Option<usize>,
    /// `-M`.
    pub mss: Option<u32>,
    /// `-N`.
    pub nodelay: bool,
    /// `-C`.
    pub congestion: Option<String>,
    /// `-S`.
    pub tos: Option<u32>,
    /// `--udp-counters-64bit`.
    pub udp_wide: bool,
    /// `--get-server-output`.
    pub server_output: bool,
    /// The longest the test may run before the server ends it.
    pub limit: Duration,
    /// Options accepted but not acted on, for the log.
    pub ignored: Vec<&'static str>,
}

impl TestPlan {
    /// Streams in all.
    pub fn streams(&self) -> usize {
        stream_count(self.mode, self.parallel)
    }
}

/// A refusal: what the client is told, and what the log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// iperf3's error number.
    pub i_errno: IErrno,
    /// The system error number, 0 if none.
    pub errno: i32,
    /// For the server's log.
    pub why: String,
}

fn refuse(i_errno: IErrno, why: String) -> Refusal {
    Refusal {
        i_errno,
        errno: 0,
        why,
    }
}

/// The server's limits on one test.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The longest test (`-t` plus `-O`; `-n`/`-k` tests are cut there).
    pub max_duration: Duration,
    /// Streams per test.
    pub max_streams: u32,
}

/// Checks a client's parameters against iperf3's rules and the server's limits.
pub fn plan(p: &TestParams, limits: &Limits) -> Result<TestPlan, Refusal> {
    let transport = p.transport();
    if transport == Transport::Sctp {
        return Err(refuse(IErrno::Protocol, "SCTP is not supported".into()));
    }
    if p.authtoken.is_some() {
        return Err(refuse(
            IErrno::AuthTest,
            "the client authenticates (--username); linkperf's iperf3 server does not check iperf3 credentials".into(),
        ));
    }
    let mode = p.mode();
    let max_streams = i64::from(limits.max_streams.min(MAX_STREAMS));
    let parallel = p.streams();
    if parallel < 1 || parallel > max_streams {
        return Err(refuse(
            IErrno::NumStreams,
            format!("{parallel} streams asked, 1 to {max_streams} served"),
        ));
    }
    let blksize = p.blksize();
    let (min_blk, max_blk) = match transport {
        Transport::Udp => (
            UdpHeader::len(p.udp_counters_64bit) as i64,
            MAX_UDP_BLOCKSIZE,
        ),
        _ => (1, MAX_BLOCKSIZE),
    };
    if blksize < min_blk || blksize > max_blk {
        let code = if transport == Transport::Udp {
            IErrno::UdpBlockSize
        } else {
            IErrno::BlockSize
        };
        return Err(refuse(
            code,
            format!("block size {blksize} outside {min_blk} to {max_blk}"),
        ));
    }
    let duration = p.duration_s();
    let omit = p.omit;
    if duration < 0 || omit < 0 {
        return Err(refuse(
            IErrno::Duration,
            format!("negative time ({duration} s) or omit ({omit} s)"),
        ));
    }
    let total = duration.saturating_add(omit);
    if Duration::from_secs(total as u64) > limits.max_duration {
        return Err(refuse(
            IErrno::Duration,
            format!(
                "{total} s asked (time plus omit), at most {} s served (the server's limit on duration)",
                limits.max_duration.as_secs()
            ),
        ));
    }
    let (bytes, blocks) = (p.bytes_limit(), p.blocks_limit());
    let time = if duration > 0 {
        Some(Duration::from_secs(duration as u64))
    } else if bytes.is_some() || blocks.is_some() {
        None
    } else {
        return Err(refuse(
            IErrno::Duration,
            "no end: time 0 without bytes or blocks".into(),
        ));
    };
    let window = match p.window {
        None | Some(0) => None,
        Some(w) if (1..=MAX_WINDOW).contains(&w) => Some(w as usize),
        Some(w) => {
            return Err(refuse(
                IErrno::BufSize,
                format!("window {w} outside 1 to {MAX_WINDOW}"),
            ))
        }
    };
    let mss = match p.mss {
        None | Some(0) => None,
        Some(m) if (1..=MAX_MSS).contains(&m) => Some(m as u32),
        Some(m) => {
            return Err(refuse(
                IErrno::Mss,
                format!("MSS {m} outside 1 to {MAX_MSS}"),
            ))
        }
    };
    let congestion = p.congestion.clone().filter(|c| !c.is_empty());
    if let Some(c) = &congestion {
        if c.len() > 15
            || !c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Refusal {
                i_errno: IErrno::SetCongestion,
                errno: libc::ENOENT,
                why: format!("congestion control {c:?} is not a name"),
            });
        }
    }
    let tos = p.tos.filter(|t| *t != 0).map(|t| (t & 0xff) as u32);
    let limit = match time {
        Some(t) => {
            (t + Duration::from_secs(omit as u64) + END_GRACE).min(limits.max_duration + END_GRACE)
        }
        None => limits.max_duration,
    };
    let mut ignored = Vec::new();
    if p.server_affinity.is_some() {
        ignored.push("server CPU affinity (-A n,m)");
    }
    if p.fqrate.is_some_and(|r| r > 0) {
        ignored.push("fair-queue pacing (--fq-rate)");
    }
    if p.flowlabel.is_some_and(|l| l != 0) {
        ignored.push("flow label (-L)");
    }
    Ok(TestPlan {
        transport,
        mode,
        parallel: parallel as usize,
        blksize: blksize as usize,
        time,
        omit: Duration::from_secs(omit as u64),
        bytes,
        blocks,
        rate: p.rate(),
        window,
        mss,
        nodelay: p.nodelay,
        congestion,
        tos,
        udp_wide: p.udp_counters_64bit,
        server_output: p.get_server_output,
        limit,
        ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_json;

    const LIMITS: Limits = Limits {
        max_duration: Duration::from_secs(3600),
        max_streams: 128,
    };

    fn params(json: &str) -> TestParams {
        decode_json(json.as_bytes()).unwrap()
    }

    fn refused(json: &str) -> IErrno {
        plan(&params(json), &LIMITS).unwrap_err().i_errno
    }

    #[test]
    fn a_312_client_s_options_become_a_plan() {
        let p = params(
            r#"{"tcp":true,"omit":1,"time":1,"num":0,"blockcount":0,"MSS":1000,"nodelay":true,
            "parallel":3,"window":262144,"len":131072,"pacing_timer":1000,"congestion":"reno",
            "client_version":"3.12"}"#,
        );
        let t = plan(&p, &LIMITS).unwrap();
        assert_eq!(t.transport, Transport::Tcp);
        assert_eq!((t.parallel, t.streams(), t.blksize), (3, 3, 131_072));
        assert_eq!(t.time, Some(Duration::from_secs(1)));
        assert_eq!(t.omit, Duration::from_secs(1));
        assert_eq!(
            (t.window, t.mss, t.nodelay),
            (Some(262_144), Some(1000), true)
        );
        assert_eq!(t.congestion.as_deref(), Some("reno"));
        assert_eq!(t.limit, Duration::from_secs(12));

        let t = plan(
            &params(r#"{"tcp":true,"time":0,"num":1048576,"parallel":2,"bidirectional":true}"#),
            &LIMITS,
        )
        .unwrap();
        assert_eq!((t.time, t.bytes, t.streams()), (None, Some(1_048_576), 4));
        assert_eq!(t.limit, LIMITS.max_duration);

        let t = plan(
            &params(r#"{"udp":true,"time":1,"len":32768,"bandwidth":10000000}"#),
            &LIMITS,
        )
        .unwrap();
        assert_eq!((t.transport, t.rate), (Transport::Udp, Some(10_000_000)));
    }

    #[test]
    fn what_cannot_be_served_is_refused_with_iperf3s_numbers() {
        assert_eq!(refused(r#"{"sctp":true}"#), IErrno::Protocol);
        assert_eq!(refused(r#"{"parallel":129}"#), IErrno::NumStreams);
        assert_eq!(refused(r#"{"parallel":0}"#), IErrno::NumStreams);
        assert_eq!(refused(r#"{"len":2000000}"#), IErrno::BlockSize);
        assert_eq!(refused(r#"{"len":0}"#), IErrno::BlockSize);
        assert_eq!(refused(r#"{"udp":true,"len":70000}"#), IErrno::UdpBlockSize);
        assert_eq!(refused(r#"{"udp":true,"len":8}"#), IErrno::UdpBlockSize);
        assert_eq!(refused(r#"{"time":3601}"#), IErrno::Duration);
        assert_eq!(refused(r#"{"time":3600,"omit":1}"#), IErrno::Duration);
        assert_eq!(refused(r#"{"time":-1}"#), IErrno::Duration);
        assert_eq!(refused(r#"{"time":0}"#), IErrno::Duration);
        assert_eq!(refused(r#"{"window":1073741824}"#), IErrno::BufSize);
        assert_eq!(refused(r#"{"MSS":100000}"#), IErrno::Mss);
        assert_eq!(
            refused(r#"{"congestion":"../../etc"}"#),
            IErrno::SetCongestion
        );
        assert_eq!(refused(r#"{"authtoken":"abc"}"#), IErrno::AuthTest);
        let small = Limits {
            max_duration: Duration::from_secs(5),
            max_streams: 2,
        };
        assert_eq!(
            plan(&params(r#"{"parallel":3}"#), &small)
                .unwrap_err()
                .i_errno,
            IErrno::NumStreams
        );
        assert_eq!(
            plan(&params(r#"{"time":6}"#), &small).unwrap_err().i_errno,
            IErrno::Duration
        );
        let t = plan(&params(r#"{"time":0,"blockcount":5}"#), &small).unwrap();
        assert_eq!(t.limit, Duration::from_secs(5));
    }

    proptest::proptest! {
        #[test]
        fn any_numbers_give_a_plan_within_limits_or_a_refusal(
            time in proptest::num::i64::ANY, omit in proptest::num::i64::ANY,
            parallel in proptest::num::i64::ANY, len in proptest::num::i64::ANY,
            window in proptest::num::i64::ANY, mss in proptest::num::i64::ANY,
            num in proptest::num::u64::ANY, udp in proptest::bool::ANY, wide in proptest::bool::ANY,
        ) {
            let p = TestParams {
                udp,
                udp_counters_64bit: wide,
                time: Some(time),
                omit,
                parallel: Some(parallel),
                len: Some(len),
                window: Some(window),
                mss: Some(mss),
                num: Some(num),
                ..TestParams::default()
            };
            if let Ok(t) = plan(&p, &LIMITS) {
                proptest::prop_assert!((1..=128).contains(&t.parallel));
                proptest::prop_assert!(t.blksize >= 1 && t.blksize as i64 <= MAX_BLOCKSIZE);
                proptest::prop_assert!(t.limit <= LIMITS.max_duration + END_GRACE);
                proptest::prop_assert!(t.time.is_some() || t.bytes.is_some() || t.blocks.is_some());
            }
        }
    }

    #[test]
    fn options_without_effect_here_are_named() {
        let t = plan(
            &params(r#"{"time":1,"server_affinity":1,"fqrate":100,"flowlabel":3}"#),
            &LIMITS,
        )
        .unwrap();
        assert_eq!(t.ignored.len(), 3);
    }
}
