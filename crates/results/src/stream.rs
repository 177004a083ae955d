//! The live stream of one test (`run --json-stream`, schema
//! `linkperf/stream/v1`): JSON lines, each
//! `{"event": "start" | "interval" | "error" | "end", "data": {...}}`, in the
//! shape of iperf3's `--json-stream`. A start, an interval per second (the
//! warm-up's marked), an error if the run failed or was aborted, and the end
//! with the run as the results document holds it. Documented for tool
//! writers in `docs/results-schema.md`; the same rules of versioning hold.

use linkperf_measured::{Interval, LatencySummary};
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
///
/// It is the second itself ([`Interval`], its transaction times summarised)
/// and what is derived from it when it is written, in this order:
/// `start_s`, `length_s`, `warmup`, `tx_bytes`, `rx_bytes`, `transactions`,
/// `errors`; the rates `tx_bytes_per_s`, `rx_bytes_per_s`,
/// `transactions_per_s` (each count over `length_s`); `transaction_time_us`
/// (`null` when none was recorded) and `retransmits` (`null` when not read:
/// not TCP); then, where they apply, a UDP request/response's `loss` (every
/// error is a lost transaction, as in the run's `loss`), and a UDP stream
/// the client receives: `datagrams`, `expected`, `loss_rate`
/// (`(expected − datagrams) / expected`, as the run's intervals' one) and
/// `jitter_us`. Read back, the derived figures are computed again from the
/// counts. docs/results-schema.md documents every field.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInterval {
    /// The second.
    pub second: Interval,
    /// UDP request/response: the second's errors are written as its `loss`.
    pub udp_rr: bool,
}

impl StreamInterval {
    /// The event of `second`; with its `loss` when `udp_rr`.
    pub fn of(second: Interval, udp_rr: bool) -> Self {
        StreamInterval { second, udp_rr }
    }

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
        Self::of(
            Interval {
                warmup,
                errors,
                retransmits,
                latency: transaction_time_us,
                ..*i
            },
            udp_rr,
        )
    }

    /// `n` over the second's length.
    fn per_s(&self, n: u64) -> f64 {
        crate::derive::rate(n as f64, self.second.length_s)
    }

    /// A UDP request/response's lost transactions in the second.
    pub fn loss(&self) -> Option<Loss> {
        self.udp_rr
            .then(|| Loss::of(self.second.errors, self.second.transactions))
    }

    /// A UDP stream the client receives: the share of the second's
    /// datagrams lost on their way to it.
    pub fn loss_rate(&self) -> Option<f64> {
        crate::udp::interval_udp(&[&self.second]).0
    }
}

impl Serialize for StreamInterval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let i = &self.second;
        let loss = self.loss();
        let loss_rate = self.loss_rate();
        let optional = [
            loss.is_some(),
            i.datagrams.is_some(),
            i.expected.is_some(),
            loss_rate.is_some(),
            i.jitter_us.is_some(),
        ];
        let fields = 12 + optional.iter().filter(|b| **b).count();
        let mut m = s.serialize_struct("StreamInterval", fields)?;
        m.serialize_field("start_s", &i.start_s)?;
        m.serialize_field("length_s", &i.length_s)?;
        m.serialize_field("warmup", &i.warmup)?;
        m.serialize_field("tx_bytes", &i.tx_bytes)?;
        m.serialize_field("rx_bytes", &i.rx_bytes)?;
        m.serialize_field("transactions", &i.transactions)?;
        m.serialize_field("errors", &i.errors)?;
        m.serialize_field("tx_bytes_per_s", &self.per_s(i.tx_bytes))?;
        m.serialize_field("rx_bytes_per_s", &self.per_s(i.rx_bytes))?;
        m.serialize_field("transactions_per_s", &self.per_s(i.transactions))?;
        m.serialize_field("transaction_time_us", &i.latency)?;
        m.serialize_field("retransmits", &i.retransmits)?;
        if let Some(loss) = &loss {
            m.serialize_field("loss", loss)?;
        }
        if let Some(d) = &i.datagrams {
            m.serialize_field("datagrams", d)?;
        }
        if let Some(e) = &i.expected {
            m.serialize_field("expected", e)?;
        }
        if let Some(r) = &loss_rate {
            m.serialize_field("loss_rate", r)?;
        }
        if let Some(j) = &i.jitter_us {
            m.serialize_field("jitter_us", j)?;
        }
        m.end()
    }
}

/// What an interval event is read back from: its counts (the derived
/// figures are computed again).
#[derive(Deserialize)]
struct CountedSecond {
    start_s: f64,
    length_s: f64,
    warmup: bool,
    tx_bytes: u64,
    rx_bytes: u64,
    transactions: u64,
    errors: u64,
    transaction_time_us: Option<LatencySummary>,
    retransmits: Option<u64>,
    #[serde(default)]
    loss: Option<Loss>,
    #[serde(default)]
    datagrams: Option<u64>,
    #[serde(default)]
    expected: Option<u64>,
    #[serde(default)]
    jitter_us: Option<f64>,
}

impl<'de> Deserialize<'de> for StreamInterval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let c = CountedSecond::deserialize(d)?;
        Ok(StreamInterval::of(
            Interval {
                start_s: c.start_s,
                length_s: c.length_s,
                warmup: c.warmup,
                tx_bytes: c.tx_bytes,
                rx_bytes: c.rx_bytes,
                transactions: c.transactions,
                errors: c.errors,
                retransmits: c.retransmits,
                datagrams: c.datagrams,
                expected: c.expected,
                jitter_us: c.jitter_us,
                jitter_sum: None,
                latency: c.transaction_time_us,
            },
            c.loss.is_some(),
        ))
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
            ..Interval::default()
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
