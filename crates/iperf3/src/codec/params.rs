//! The parameters a client sends after `PARAM_EXCHANGE` (`send_parameters`
//! in iperf_api.c). Unknown keys from newer clients are kept in `extra` and
//! otherwise ignored, as iperf3's own server ignores keys it does not know.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::number;

/// iperf3's default test length when a client sends no `time`.
pub const DEFAULT_TIME_S: i64 = 10;
/// iperf3's default block (`len`) when a client sends none.
pub const DEFAULT_TCP_BLKSIZE: i64 = 128 * 1024;

/// The transport of a test's data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP streams (the default).
    Tcp,
    /// UDP streams, paced by the sender.
    Udp,
    /// SCTP streams.
    Sctp,
}

/// Which way the data flows, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestMode {
    /// The client sends, the server receives.
    Normal,
    /// `-R`: the server sends, the client receives.
    Reverse,
    /// `--bidir`: `parallel` streams each way.
    Bidirectional,
}

/// A test's parameters as JSON. Flags (`tcp`, `reverse`, …) count as set when
/// their key is present, as iperf3 reads them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestParams {
    /// TCP streams.
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub tcp: bool,
    /// UDP streams.
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub udp: bool,
    /// SCTP streams.
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub sctp: bool,
    /// Seconds at the start left out of the results (`-O`).
    #[serde(default, deserialize_with = "number::int")]
    pub omit: i64,
    /// CPU the server should run on (`-A n,m`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_affinity: Option<i64>,
    /// Test length in seconds (`-t`); 0 with `-n` or `-k`.
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
    /// Bytes to send in all, all streams together (`-n`); 0 for none.
    #[serde(default, deserialize_with = "number::opt_count")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num: Option<u64>,
    /// Blocks to send in all (`-k`); 0 for none.
    #[serde(default, deserialize_with = "number::opt_count")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockcount: Option<u64>,
    /// TCP maximum segment size (`-M`).
    #[serde(rename = "MSS", default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mss: Option<i64>,
    /// TCP_NODELAY (`-N`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub nodelay: bool,
    /// Streams (`-P`); each way with `bidirectional`.
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<i64>,
    /// The server sends (`-R`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub reverse: bool,
    /// Both send (`--bidir`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub bidirectional: bool,
    /// SO_SNDBUF and SO_RCVBUF of the server's streams (`-w`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<i64>,
    /// Block size: bytes per read or write, per datagram for UDP (`-l`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<i64>,
    /// Target rate of each sending stream in bits per second (`-b`).
    #[serde(default, deserialize_with = "number::opt_count")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<u64>,
    /// Fair-queue socket pacing rate in bits per second (`--fq-rate`).
    #[serde(default, deserialize_with = "number::opt_count")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqrate: Option<u64>,
    /// Microseconds between pacing checks (`--pacing-timer`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<i64>,
    /// Datagrams sent back to back (`-b rate/burst`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<i64>,
    /// IP type of service (`-S`).
    #[serde(rename = "TOS", default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos: Option<i64>,
    /// IPv6 flow label (`-L`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flowlabel: Option<i64>,
    /// A title the client prints (`-T`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free text for the JSON output (`--extra-data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    /// TCP congestion control the server should use (`-C`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The congestion control the client's streams use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// The client wants the server's output in the results (`--get-server-output`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub get_server_output: bool,
    /// UDP sequence numbers are 64 bits (`--udp-counters-64bit`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub udp_counters_64bit: bool,
    /// The payload repeats a pattern instead of random bytes (`--repeating-payload`).
    #[serde(default, deserialize_with = "number::present")]
    #[serde(skip_serializing_if = "number::is_false")]
    pub repeating_payload: bool,
    /// Authentication token (`--username`); linkperf does not check it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    /// The client's iperf3 version (3.1 and later send it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// Keys this version does not know (newer clients), kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TestParams {
    /// The streams' transport: the last of `tcp`, `udp`, `sctp` present wins
    /// (iperf3 applies them in that order); TCP without any.
    pub fn transport(&self) -> Transport {
        if self.sctp {
            Transport::Sctp
        } else if self.udp {
            Transport::Udp
        } else {
            Transport::Tcp
        }
    }

    /// Which way the data flows; `bidirectional` wins over `reverse`.
    pub fn mode(&self) -> TestMode {
        if self.bidirectional {
            TestMode::Bidirectional
        } else if self.reverse {
            TestMode::Reverse
        } else {
            TestMode::Normal
        }
    }

    /// Test length in seconds; 0 means until the bytes or blocks are done.
    pub fn duration_s(&self) -> i64 {
        self.time.unwrap_or(DEFAULT_TIME_S)
    }

    /// Streams each way.
    pub fn streams(&self) -> i64 {
        self.parallel.unwrap_or(1)
    }

    /// Bytes per read, write or datagram.
    pub fn blksize(&self) -> i64 {
        self.len.unwrap_or(DEFAULT_TCP_BLKSIZE)
    }

    /// `-n`, if given.
    pub fn bytes_limit(&self) -> Option<u64> {
        self.num.filter(|n| *n > 0)
    }

    /// `-k`, if given.
    pub fn blocks_limit(&self) -> Option<u64> {
        self.blockcount.filter(|n| *n > 0)
    }

    /// `-b`, if given: bits per second per sending stream.
    pub fn rate(&self) -> Option<u64> {
        self.bandwidth.filter(|n| *n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_json, encode_json};

    fn fixture(name: &str) -> String {
        let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    fn parse(name: &str) -> TestParams {
        decode_json(fixture(name).as_bytes()).unwrap()
    }

    /// Parsing what real iperf3 3.12 clients sent (captured on loopback).
    #[test]
    fn captured_312_parameters_parse() {
        // iperf3 -c … -t 1 -w 256K -M 1000 -N -C reno -O 1 -P 3
        let p = parse("params-tcp-options.json");
        assert_eq!(p.transport(), Transport::Tcp);
        assert_eq!(p.mode(), TestMode::Normal);
        assert_eq!(
            (p.omit, p.duration_s(), p.streams(), p.blksize()),
            (1, 1, 3, 131_072)
        );
        assert_eq!((p.mss, p.window), (Some(1000), Some(262_144)));
        assert!(p.nodelay);
        assert_eq!(p.congestion.as_deref(), Some("reno"));
        assert_eq!((p.bytes_limit(), p.blocks_limit()), (None, None));
        assert_eq!(p.client_version.as_deref(), Some("3.12"));
        assert_eq!(p.pacing_timer, Some(1000));
        assert!(
            p.extra.is_empty(),
            "3.12 sends no key unknown here: {:?}",
            p.extra
        );

        // iperf3 -c … -t 1 -u -b 10M
        let p = parse("params-udp.json");
        assert_eq!(p.transport(), Transport::Udp);
        assert_eq!((p.blksize(), p.rate()), (32_768, Some(10_000_000)));

        // iperf3 -c … -t 1 --bidir
        let p = parse("params-bidir.json");
        assert_eq!(p.mode(), TestMode::Bidirectional);

        // iperf3 -c … -k 20 -l 32K -R
        let p = parse("params-reverse-blockcount.json");
        assert_eq!(p.mode(), TestMode::Reverse);
        assert_eq!(
            (p.duration_s(), p.blocks_limit(), p.blksize()),
            (0, Some(20), 32_768)
        );

        // iperf3 -c … -n 1M -l 64K
        let p = parse("params-bytes.json");
        assert_eq!((p.duration_s(), p.bytes_limit()), (0, Some(1_048_576)));

        // iperf3 -c … -t 1 --get-server-output (3.12 sends the number 1)
        assert!(parse("params-server-output.json").get_server_output);
    }

    #[test]
    fn newer_clients_extra_keys_are_kept_not_refused() {
        // The keys of a newer 3.x client (3.16/3.17 add some of these).
        let json = r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,
            "len":131072,"pacing_timer":1000,"repeating_payload":1,"dont_fragment":1,
            "skip_rx_copy":1,"fqrate":0,"cntl_ka":{"idle":10},"client_version":"3.17.1"}"#;
        let p: TestParams = decode_json(json.as_bytes()).unwrap();
        assert_eq!(p.duration_s(), 2);
        assert!(p.repeating_payload);
        assert_eq!(p.client_version.as_deref(), Some("3.17.1"));
        assert_eq!(p.extra.len(), 3);
        assert_eq!(p.extra["cntl_ka"]["idle"], 10);
        // Written back, nothing is lost.
        let f = encode_json(&p).unwrap();
        let again: TestParams = decode_json(&f[4..]).unwrap();
        assert_eq!(again, p);
    }

    #[test]
    fn flags_are_presence_and_numbers_are_lenient() {
        // iperf3 sets a flag when its key is there, whatever the value.
        let p: TestParams =
            decode_json(br#"{"udp":false,"reverse":0,"time":2.9,"num":1e6,"parallel":4}"#).unwrap();
        assert_eq!(p.transport(), Transport::Udp);
        assert_eq!(p.mode(), TestMode::Reverse);
        assert_eq!(
            (p.duration_s(), p.bytes_limit(), p.streams()),
            (2, Some(1_000_000), 4)
        );
        // Absent keys take iperf3's defaults.
        let p: TestParams = decode_json(b"{}").unwrap();
        assert_eq!(
            (
                p.transport(),
                p.mode(),
                p.duration_s(),
                p.streams(),
                p.blksize()
            ),
            (Transport::Tcp, TestMode::Normal, 10, 1, 128 * 1024)
        );
        // A wrong type is an error value, not a panic.
        assert!(decode_json::<TestParams>(br#"{"title":7}"#).is_err());
        assert!(decode_json::<TestParams>(br#"[1,2]"#).is_err());
    }

    #[test]
    fn what_linkperf_sends_reads_like_312s() {
        let p = TestParams {
            tcp: true,
            time: Some(3),
            num: Some(0),
            blockcount: Some(0),
            parallel: Some(4),
            reverse: true,
            len: Some(131_072),
            pacing_timer: Some(1000),
            client_version: Some("3.12".into()),
            ..TestParams::default()
        };
        let f = encode_json(&p).unwrap();
        let text = std::str::from_utf8(&f[4..]).unwrap();
        assert_eq!(
            text,
            r#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":4,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#
        );
        assert_eq!(decode_json::<TestParams>(&f[4..]).unwrap(), p);
    }
}
