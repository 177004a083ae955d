//! The live stream of one test (`run --json-stream`, schema
//! `linkperf/stream/v1`): JSON lines, each
//! `{"event": "start" | "interval" | "error" | "end", "data": {...}}`, in the
//! shape of iperf3's `--json-stream`. A start, an interval per second (the
//! warm-up's marked), an error if the run failed or was aborted, and the end
//! with the run as the results document holds it. Documented for tool
//! writers in `docs/results-schema.md`; the same rules of versioning hold.

use linkperf_records::{Interval, LatencySummary};
use linkperf_workload::TestSpec;
use serde::{Deserialize, Serialize};

use crate::{Loss, Run, RunStatus, TestConfig, WorkloadInfo};

/// The stream's schema, in its start event.
pub const STREAM_SCHEMA: &str = "linkperf/stream/v1";

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The test is about to run: what it is and how it is set up.
    Start(Box<StreamStart>),
    /// One second of the test, as the client counted it.
    Interval(Box<StreamInterval>),
    /// The run failed or was aborted.
    Error(StreamError),
    /// The run, as in the results document (`tests[].runs[]`).
    End(Box<Run>),
}

/// The start event's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamStart {
    /// [`STREAM_SCHEMA`].
    pub schema: String,
    /// Version of the linkperf that wrote the stream.
    pub linkperf_version: String,
    /// The configuration's label, as in the results document.
    pub label: String,
    /// When the test started (RFC 3339 UTC).
    pub started: String,
    /// The test's name, as in the results document.
    pub test: String,
    /// The workload, as the results document's `tests[].workload`.
    pub workload: WorkloadInfo,
    /// The setup, as the results document's `tests[].config`.
    pub config: TestConfig,
    /// The exact specification, as the results document's `tests[].spec`.
    pub spec: TestSpec,
    /// The command that ran it, one argument per element.
    pub command_line: Vec<String>,
}

impl StreamStart {
    /// The start of `spec`'s run, set up as `config`.
    pub fn new(
        label: String,
        command_line: Vec<String>,
        started: String,
        spec: &TestSpec,
        config: TestConfig,
    ) -> Self {
        StreamStart {
            schema: STREAM_SCHEMA.to_string(),
            linkperf_version: env!("CARGO_PKG_VERSION").to_string(),
            label,
            started,
            test: spec.name(),
            workload: WorkloadInfo::from_spec(spec),
            config,
            spec: spec.clone(),
            command_line,
        }
    }
}

/// An interval event's data: one second of traffic as the client counted it
/// (both directions at the client: `tx` what it wrote, `rx` what it read, as
/// in the run's `client.intervals`, not at each direction's receiver as in
/// the run's `intervals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Seconds since the window opened; negative in the warm-up.
    pub start_s: f64,
    /// Length, seconds.
    pub length_s: f64,
    /// A second of the warm-up, in no figure of the run.
    pub warmup: bool,
    /// Payload bytes the client wrote.
    pub tx_bytes: u64,
    /// Payload bytes the client read.
    pub rx_bytes: u64,
    /// Transactions the client completed (messages, for streams).
    pub transactions: u64,
    /// Failed or lost transactions.
    pub errors: u64,
    /// `tx_bytes / length_s`.
    pub tx_bytes_per_s: f64,
    /// `rx_bytes / length_s`.
    pub rx_bytes_per_s: f64,
    /// `transactions / length_s`.
    pub transactions_per_s: f64,
    /// The second's transaction times, µs; `null` when none was recorded.
    pub transaction_time_us: Option<LatencySummary>,
    /// TCP segments the client's connections retransmitted; `null` when not
    /// read (not TCP).
    pub retransmits: Option<u64>,
    /// UDP request/response: the second's lost transactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// UDP streams the client receives (stream-down, stream-bidir): new
    /// datagrams it received in the second, as in its `client.intervals`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<u64>,
    /// UDP streams the client receives: sequence numbers the second's
    /// arrivals accounted for (RFC 3550's "expected").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u64>,
    /// UDP streams the client receives: the second's datagrams lost on
    /// their way to it, `(expected − datagrams) / expected`, as the run's
    /// intervals' `loss_rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_rate: Option<f64>,
    /// UDP streams the client receives: its flows' jitter at their last
    /// datagram of the second, averaged, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_us: Option<f64>,
}

impl StreamInterval {
    /// The second `i`, with its errors, transaction times and retransmits;
    /// its loss when `udp_rr` (every error of a UDP request/response
    /// transaction is a loss, as in the run's `loss`); the datagrams of a
    /// UDP stream the client received, their loss rate and jitter, when `i`
    /// has them.
    pub fn new(
        i: &Interval,
        warmup: bool,
        errors: u64,
        transaction_time_us: Option<LatencySummary>,
        retransmits: Option<u64>,
        udp_rr: bool,
    ) -> Self {
        let per_s = |n: u64| crate::derive::rate(n as f64, i.length_s);
        let (loss_rate, _) = crate::udp::interval_udp(&[i]);
        StreamInterval {
            start_s: i.start_s,
            length_s: i.length_s,
            warmup,
            tx_bytes: i.tx_bytes,
            rx_bytes: i.rx_bytes,
            transactions: i.transactions,
            errors,
            tx_bytes_per_s: per_s(i.tx_bytes),
            rx_bytes_per_s: per_s(i.rx_bytes),
            transactions_per_s: per_s(i.transactions),
            transaction_time_us,
            retransmits,
            loss: udp_rr.then(|| Loss::of(errors, i.transactions)),
            datagrams: i.datagrams,
            expected: i.expected,
            loss_rate,
            jitter_us: i.jitter_us,
        }
    }
}

/// The error event's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamError {
    /// `failed` or `aborted`.
    pub status: RunStatus,
    /// Why, as the run's `error`.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_are_tagged_lines_of_event_and_data() {
        let i = Interval {
            start_s: -1.0,
            length_s: 0.5,
            tx_bytes: 100,
            rx_bytes: 300,
            transactions: 10,
            ..Interval::default()
        };
        let e = StreamEvent::Interval(Box::new(StreamInterval::new(&i, true, 2, None, None, true)));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "interval");
        let d = &v["data"];
        assert_eq!(d["warmup"], true);
        assert_eq!(d["start_s"], -1.0);
        assert_eq!(d["tx_bytes_per_s"], 200.0);
        assert_eq!(d["rx_bytes_per_s"], 600.0);
        assert_eq!(d["transactions_per_s"], 20.0);
        assert_eq!(d["transaction_time_us"], serde_json::Value::Null);
        assert_eq!(d["retransmits"], serde_json::Value::Null);
        assert_eq!(d["loss"]["lost"], 2);
        assert_eq!(d["loss"]["answered"], 10);
        let back: StreamEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);

        let tcp = StreamInterval::new(&i, false, 0, None, Some(3), false);
        let v = serde_json::to_value(StreamEvent::Interval(Box::new(tcp))).unwrap();
        assert!(v["data"].get("loss").is_none(), "loss is for UDP: {v}");
        assert_eq!(v["data"]["retransmits"], 3);
        for key in ["datagrams", "expected", "loss_rate", "jitter_us"] {
            assert!(
                v["data"].get(key).is_none(),
                "{key} is for UDP streams: {v}"
            );
        }

        // A second of a UDP stream the client received: its datagrams, the
        // share lost on their way, their jitter.
        let down = Interval {
            datagrams: Some(95),
            expected: Some(100),
            jitter_us: Some(12.5),
            ..i
        };
        let e = StreamEvent::Interval(Box::new(StreamInterval::new(
            &down, false, 0, None, None, false,
        )));
        let v = serde_json::to_value(&e).unwrap();
        let d = &v["data"];
        assert_eq!(
            (d["datagrams"].as_u64(), d["expected"].as_u64()),
            (Some(95), Some(100))
        );
        assert_eq!(d["loss_rate"], 0.05);
        assert_eq!(d["jitter_us"], 12.5);
        assert!(d.get("loss").is_none(), "no transactions lost: {v}");
        assert_eq!(serde_json::from_value::<StreamEvent>(v).unwrap(), e);

        let spec = TestSpec::new(
            "rr1c-1x1".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            2,
            Duration::from_secs(3),
        );
        let config = TestConfig::from_spec(
            &spec,
            "embedded".into(),
            linkperf_workload::Placement::with_threads(1),
            linkperf_workload::Placement::with_threads(1),
        );
        let start = StreamStart::new(
            "lab".into(),
            vec!["linkperf".into()],
            "2024-05-01T10:00:00Z".into(),
            &spec,
            config,
        );
        let v = serde_json::to_value(StreamEvent::Start(Box::new(start))).unwrap();
        assert_eq!(v["event"], "start");
        assert_eq!(v["data"]["schema"], STREAM_SCHEMA);
        assert_eq!(v["data"]["test"], "rr1c-1x1--2");
        assert_eq!(v["data"]["workload"]["users"], 2);
        assert_eq!(v["data"]["config"]["server"], "embedded");

        let err = StreamEvent::Error(StreamError {
            status: RunStatus::Aborted,
            error: "interrupted".into(),
        });
        assert_eq!(
            serde_json::to_string(&err).unwrap(),
            r#"{"event":"error","data":{"status":"aborted","error":"interrupted"}}"#
        );
    }

    #[test]
    fn the_schema_page_documents_every_field() {
        let page = include_str!("../../../docs/results-schema.md");
        let at = page
            .find("## The live stream: `linkperf/stream/v1`")
            .expect("the stream's section");
        let section = &page[at..];
        let i = Interval {
            start_s: 0.0,
            length_s: 1.0,
            tx_bytes: 1,
            rx_bytes: 1,
            transactions: 1,
            datagrams: Some(1),
            expected: Some(1),
            jitter_us: Some(1.0),
        };
        let interval = StreamInterval::new(&i, false, 0, None, None, true);
        let spec = TestSpec::new(
            "rr1c-1x1".parse().unwrap(),
            linkperf_workload::Protocol::Tcp,
            1,
            Duration::from_secs(1),
        );
        let placement = linkperf_workload::Placement::with_threads(1);
        let config = TestConfig::from_spec(&spec, String::new(), placement.clone(), placement);
        let start = StreamStart::new(String::new(), Vec::new(), String::new(), &spec, config);
        let error = StreamError {
            status: RunStatus::Failed,
            error: String::new(),
        };
        for data in [
            serde_json::to_value(interval).unwrap(),
            serde_json::to_value(start).unwrap(),
            serde_json::to_value(error).unwrap(),
        ] {
            for key in data.as_object().unwrap().keys() {
                assert!(
                    section.contains(&format!("`{key}`")),
                    "{key} is not in the stream's section of docs/results-schema.md"
                );
            }
        }
    }
}
