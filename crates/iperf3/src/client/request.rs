//! What a test against a stock `iperf3 -s` is asked with and comes to: the
//! server's address, the request and its outcome, what iperf3's protocol
//! can say of a spec, and the spec in iperf3's words (its cookie and its
//! parameters).

use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::SystemTime;

use linkperf_measured::{Environment, SideReport};
use linkperf_workload::{Placement, Protocol, StreamDirection, TestSpec, Workload};

use crate::client::RemoteReport;
use crate::codec::{Cookie, TestParams};
use crate::ClientError;

/// iperf3's limits: streams (each way), block size, test length.
const MAX_STREAMS: u32 = 128;
const MAX_BLOCKSIZE: u64 = 1024 * 1024;
const MAX_TIME_S: u64 = 86_400;
const MAX_MSS: u32 = 9 * 1024;

/// Where the iperf3 server is.
#[derive(Debug, Clone)]
pub struct Iperf3Target {
    /// `host` or `host:port` as the user gave it.
    pub address: String,
    /// Port used when `address` has none (iperf3's is 5201).
    pub default_port: u16,
}

/// One test to run against an iperf3 server.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// The test: a TCP stream workload.
    pub spec: TestSpec,
    /// The client's workers.
    pub placement: Placement,
    /// Set to abort the test; what was measured is kept.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The command line, for the environment record.
    pub command_line: Vec<String>,
}

/// What one test produced.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// When it started.
    pub started: SystemTime,
    /// The client's measurements, as against a linkperf server.
    pub client: SideReport,
    /// The client host.
    pub client_environment: Environment,
    /// What the iperf3 server reported (`None` if the test was aborted first).
    pub server: Option<RemoteReport>,
    /// True if the test was aborted before its end.
    pub aborted: bool,
}

/// Refuses, before anything is sent, what iperf3's protocol cannot say.
pub fn check_spec(spec: &TestSpec) -> Result<(), ClientError> {
    let no = |m: String| Err(ClientError::Unsupported(m));
    let Workload::Stream { message, .. } = &spec.workload else {
        return no(format!(
            "{} against an iperf3 server: iperf3 carries streams only (stream-up:SIZE, stream-down:SIZE, stream-bidir:SIZE)",
            spec.workload.name()
        ));
    };
    if spec.protocol != Protocol::Tcp {
        return no(format!(
            "over {} against an iperf3 server: linkperf drives iperf3 with TCP streams only",
            spec.protocol
        ));
    }
    if spec.users == 0 || spec.users > MAX_STREAMS {
        return no(format!(
            "{} users against an iperf3 server: iperf3 runs 1 to {MAX_STREAMS} streams (each way)",
            spec.users
        ));
    }
    if message.0 > MAX_BLOCKSIZE {
        return no(format!(
            "{}-byte messages against an iperf3 server: iperf3's largest block is 1 MiB",
            message.0
        ));
    }
    if test_seconds(spec) > MAX_TIME_S {
        return no(format!(
            "a {} s test against an iperf3 server: iperf3 runs at most {MAX_TIME_S} s",
            test_seconds(spec)
        ));
    }
    if spec.socket.mss.is_some_and(|m| m == 0 || m > MAX_MSS) {
        return no(format!("an MSS above iperf3's {MAX_MSS}"));
    }
    Ok(())
}

/// iperf3's whole-second test length covering warmup and window.
fn test_seconds(spec: &TestSpec) -> u64 {
    (spec.warmup + spec.duration).as_secs_f64().ceil() as u64
}

pub(super) fn resolve(t: &Iperf3Target) -> Result<SocketAddr, ClientError> {
    let err = |why: String| ClientError::Resolve {
        addr: t.address.clone(),
        why,
    };
    let text = if let Ok(ip) = t.address.parse::<IpAddr>() {
        SocketAddr::new(ip, t.default_port).to_string()
    } else if t
        .address
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        t.address.clone()
    } else {
        format!("{}:{}", t.address, t.default_port)
    };
    text.to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".into()))
}

pub(super) fn new_cookie() -> Cookie {
    let mut r = [0u8; 36];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut r));
    if filled.is_err() {
        // Unique enough for a cookie: it only tells tests apart.
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        for (i, b) in r.iter_mut().enumerate() {
            *b = (seed >> ((i * 7) % 120)) as u8 ^ (i as u8).wrapping_mul(31);
        }
    }
    Cookie::from_entropy(&r)
}

/// The parameters linkperf sends for `spec`.
pub(super) fn params(spec: &TestSpec, message: u64, direction: StreamDirection) -> TestParams {
    let s = &spec.socket;
    TestParams {
        tcp: true,
        omit: 0,
        time: Some(test_seconds(spec) as i64),
        num: Some(0),
        blockcount: Some(0),
        mss: s.mss.map(i64::from),
        nodelay: s.nodelay_for(&spec.workload),
        parallel: Some(i64::from(spec.users)),
        reverse: direction == StreamDirection::Down,
        bidirectional: direction == StreamDirection::Bidir,
        window: s.sndbuf.max(s.rcvbuf).map(i64::from),
        len: Some(message as i64),
        pacing_timer: Some(1000),
        congestion: s.cc.clone(),
        // The protocol version linkperf speaks.
        client_version: Some("3.12".into()),
        ..TestParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_workload::Bytes;
    use std::time::Duration;

    fn spec(w: &str, users: u32) -> TestSpec {
        TestSpec::new(
            w.parse().unwrap(),
            Protocol::Tcp,
            users,
            Duration::from_secs(2),
        )
    }

    #[test]
    fn what_iperf3_cannot_say_is_refused_up_front() {
        assert!(check_spec(&spec("stream-up:128k", 4)).is_ok());
        assert!(check_spec(&spec("stream-down:1m", 128)).is_ok());
        assert!(check_spec(&spec("stream-bidir:64k", 2)).is_ok());
        for bad in [spec("rr1c-1x1", 1), spec("crr:1x1", 1), spec("mix:1x1", 1)] {
            let e = check_spec(&bad).unwrap_err().to_string();
            assert!(e.contains("iperf3 carries streams only"), "{e}");
        }
        assert!(check_spec(&spec("stream-up:2m", 1)).is_err());
        assert!(check_spec(&spec("stream-up:128k", 129)).is_err());
        let mut udp = spec("stream-up:1k", 1);
        udp.protocol = Protocol::Udp;
        assert!(check_spec(&udp).is_err());
        let mut long = spec("stream-up:1k", 1);
        long.duration = Duration::from_secs(86_400);
        assert!(
            check_spec(&long).is_err(),
            "warmup + duration over iperf3's day"
        );
    }

    #[test]
    fn parameters_say_the_spec_in_iperf3s_words() {
        let mut s = spec("stream-down:64k", 4);
        s.warmup = Duration::from_millis(500);
        s.duration = Duration::from_secs(2);
        s.socket.sndbuf = Some(262_144);
        s.socket.cc = Some("reno".into());
        s.socket.mss = Some(1000);
        let p = params(&s, 65_536, StreamDirection::Down);
        assert_eq!(p.time, Some(3), "warmup + duration, rounded up");
        assert_eq!((p.omit, p.parallel, p.len), (0, Some(4), Some(65_536)));
        assert!(p.reverse && !p.bidirectional && !p.nodelay);
        assert_eq!((p.window, p.mss), (Some(262_144), Some(1000)));
        assert_eq!(p.congestion.as_deref(), Some("reno"));
        let p = params(&spec("stream-bidir:1k", 1), 1024, StreamDirection::Bidir);
        assert!(p.bidirectional && !p.reverse);
        let _ = Bytes(1);
    }

    #[test]
    fn targets_take_iperf3s_port_unless_given() {
        let t = |a: &str| {
            resolve(&Iperf3Target {
                address: a.into(),
                default_port: 5201,
            })
            .unwrap()
        };
        assert_eq!(t("127.0.0.1"), "127.0.0.1:5201".parse().unwrap());
        assert_eq!(t("127.0.0.1:7000"), "127.0.0.1:7000".parse().unwrap());
        assert_eq!(t("localhost:7001").port(), 7001);
        assert_eq!(t("::1"), "[::1]:5201".parse().unwrap());
    }
}
