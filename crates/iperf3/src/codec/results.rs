//! The results both ends exchange after `EXCHANGE_RESULTS` (`send_results`
//! and `get_results` in iperf_api.c): the client sends its own first, then the
//! server. The keys iperf3 requires are required here; unknown keys are kept
//! in `extra`. iperf3 3.14 and later add `omitted_errors` and
//! `omitted_packets` to each stream (both or neither: those versions refuse a
//! stream with one alone) and derive UDP loss from them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::number;

/// One side's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestResults {
    /// CPU used by the side's process over the test, percent of wall time.
    #[serde(deserialize_with = "number::float")]
    pub cpu_util_total: f64,
    /// User part of it.
    #[serde(deserialize_with = "number::float")]
    pub cpu_util_user: f64,
    /// System part of it.
    #[serde(deserialize_with = "number::float")]
    pub cpu_util_system: f64,
    /// 1 if the side's sending streams report retransmits, 0 if not, -1 if the
    /// side did not send (3.12 writes -1 as 18446744073709551615).
    #[serde(deserialize_with = "number::int")]
    pub sender_has_retransmits: i64,
    /// The TCP congestion control the side used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// The server's output as text (`--get-server-output` against a text server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// The server's output as JSON (`--get-server-output` against `iperf3 -s -J`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<Value>,
    /// One entry per stream, by stream id.
    pub streams: Vec<StreamResults>,
    /// Keys this version does not know, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One stream's results, as one side counted them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResults {
    /// The stream's id (see [`stream_id`](crate::codec::stream_id)).
    #[serde(deserialize_with = "number::int")]
    pub id: i64,
    /// Bytes sent (a sending stream, omitted seconds left out) or received.
    #[serde(deserialize_with = "number::count")]
    pub bytes: u64,
    /// TCP retransmits of a sending stream; -1 when unknown.
    #[serde(deserialize_with = "number::int")]
    pub retransmits: i64,
    /// UDP jitter seen by a receiving stream, seconds.
    #[serde(deserialize_with = "number::float")]
    pub jitter: f64,
    /// UDP datagrams a receiving stream counted lost, omitted seconds included.
    #[serde(deserialize_with = "number::int")]
    pub errors: i64,
    /// Of `errors`, those counted by the end of the omitted seconds (3.14 and
    /// later; 0 without `-O`). A 3.14+ client's loss is `errors` less this:
    /// without it, it reads the loss as 0.
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_errors: Option<i64>,
    /// UDP datagrams sent, or the highest sequence number received, omitted
    /// seconds included.
    #[serde(deserialize_with = "number::int")]
    pub packets: i64,
    /// `packets` at the end of the omitted seconds (3.14 and later; 0 without
    /// `-O`).
    #[serde(default, deserialize_with = "number::opt_int")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_packets: Option<i64>,
    /// Start of the stream's measurement, seconds (always 0).
    #[serde(default, deserialize_with = "number::opt_float")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    /// End of the stream's measurement, seconds from its start.
    #[serde(default, deserialize_with = "number::opt_float")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
    /// Keys this version does not know, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TestResults {
    /// Bytes over all streams.
    pub fn total_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }

    /// The stream with id `id`.
    pub fn stream(&self, id: i64) -> Option<&StreamResults> {
        self.streams.iter().find(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_json, encode_json};

    fn parse(name: &str) -> TestResults {
        let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
        decode_json(text.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[test]
    fn captured_312_results_parse() {
        // The client's results of `-P 3 -w 256K -M 1000 -N -C reno -O 1`.
        let c = parse("results-client-tcp-options.json");
        assert_eq!(c.sender_has_retransmits, 1);
        assert_eq!(c.congestion_used.as_deref(), Some("reno"));
        let ids: Vec<i64> = c.streams.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 3, 4], "iperf3 numbers streams 1, 3, 4, …");
        assert_eq!(c.stream(1).unwrap().bytes, 29_360_128);
        assert_eq!(c.total_bytes(), 29_360_128 + 2 * 27_918_336);
        assert_eq!(c.stream(3).unwrap().start_time, Some(0.0));

        // The server's: 3.12 writes -1 as 18446744073709551615.
        let s = parse("results-server-tcp-options.json");
        assert_eq!(s.sender_has_retransmits, -1);
        assert!(s.streams.iter().all(|st| st.retransmits == -1));
        assert!((s.cpu_util_total - 2.896_122_332_969_247_4).abs() < 1e-12);

        // UDP: the receiver's jitter, losses and highest sequence number.
        let u = parse("results-server-udp.json");
        let st = &u.streams[0];
        assert_eq!((st.bytes, st.errors, st.packets), (1_048_576, 7, 39));
        assert!(st.jitter > 0.0);
        assert_eq!(u.congestion_used, None);
        assert_eq!(parse("results-client-udp.json").streams[0].packets, 39);

        // --bidir: the client's streams 1 (it sent) and 3 (it received).
        let b = parse("results-client-bidir.json");
        assert_eq!(
            (b.streams[0].retransmits, b.streams[1].retransmits),
            (1, -1)
        );
        let b = parse("results-server-bidir.json");
        assert_eq!((b.streams[0].id, b.streams[1].id), (1, 3));

        // --get-server-output against a text server.
        let o = parse("results-server-output.json");
        let text = o.server_output_text.unwrap();
        assert!(text.starts_with("Accepted connection from 127.0.0.1"));
        assert!(text.contains("receiver\n"));
    }

    #[test]
    fn what_iperf3_requires_is_required() {
        let ok = r#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,
            "sender_has_retransmits":0,"streams":[{"id":1,"bytes":10,"retransmits":-1,
            "jitter":0,"errors":0,"packets":0}]}"#;
        let r: TestResults = decode_json(ok.as_bytes()).unwrap();
        assert_eq!(r.streams[0].end_time, None);
        for missing in ["cpu_util_total", "sender_has_retransmits", "streams"] {
            let mut v: Value = serde_json::from_str(ok).unwrap();
            v.as_object_mut().unwrap().remove(missing);
            assert!(
                serde_json::from_value::<TestResults>(v).is_err(),
                "{missing} is required"
            );
        }
        for missing in ["id", "bytes", "retransmits", "jitter", "errors", "packets"] {
            let mut v: Value = serde_json::from_str(ok).unwrap();
            v["streams"][0].as_object_mut().unwrap().remove(missing);
            assert!(
                serde_json::from_value::<TestResults>(v).is_err(),
                "streams[].{missing} is required"
            );
        }
    }

    #[test]
    fn round_trip_keeps_everything() {
        let mut r = parse("results-server-output.json");
        r.extra.insert("a_later_key".into(), 0.into());
        r.streams[0].omitted_errors = Some(2);
        r.streams[0].omitted_packets = Some(40);
        let f = encode_json(&r).unwrap();
        let back: TestResults = decode_json(&f[4..]).unwrap();
        assert_eq!(back, r);
        // -1 goes out as -1, which iperf3 reads as -1.
        let v: Value = serde_json::from_slice(&f[4..]).unwrap();
        assert_eq!(v["sender_has_retransmits"], -1);
    }
}
