//! The server's results as iperf3 3.21's client reads them. Golden messages of
//! three UDP exchanges of a 3.21 client with a 3.21 server
//! (`tests/fixtures/iperf-3.21/`), a model of how that client derives its UDP
//! figures from its own counts and the server's results (`get_results` and
//! `iperf_print_results` in 3.21's iperf_api.c), checked against what the
//! 3.21 client printed, and linkperf's results for the same counts held
//! against both.
//!
//! Regression: linkperf's server left out `omitted_errors` and
//! `omitted_packets`, and every client from 3.14 on read its UDP loss as 0
//! with `-J`.

use std::time::{Duration, Instant};

use linkperf_engine::{Counters, Schedule};
use linkperf_metrics::ProcessCpu;
use serde_json::Value;

use crate::codec::{decode_json, encode_json, TestParams, TestResults, UdpHeader};
use crate::server::accounting::{Iperf3Tally, Stamp};
use crate::server::data::{DataOutcome, Finish, StreamRecord};
use crate::server::plan::{plan, Limits, TestPlan};
use crate::server::says;

fn fixture(name: &str) -> String {
    let p = format!(
        "{}/tests/fixtures/iperf-3.21/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What the 3.21 client printed under `end` with `-J` (the parts for UDP).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Printed {
    sent_bytes: i64,
    sent_packets: i64,
    received_bytes: i64,
    received_packets: i64,
    received_lost: i64,
    received_lost_percent: f64,
    stream_bytes: i64,
    stream_lost: i64,
    stream_packets: i64,
    stream_lost_percent: f64,
}

impl Printed {
    fn from_end(end: &Value) -> Printed {
        let i = |ptr: &str| {
            end.pointer(ptr)
                .and_then(Value::as_i64)
                .unwrap_or_else(|| panic!("no {ptr}"))
        };
        let f = |ptr: &str| {
            end.pointer(ptr)
                .and_then(Value::as_f64)
                .unwrap_or_else(|| panic!("no {ptr}"))
        };
        Printed {
            sent_bytes: i("/sum_sent/bytes"),
            sent_packets: i("/sum_sent/packets"),
            received_bytes: i("/sum_received/bytes"),
            received_packets: i("/sum_received/packets"),
            received_lost: i("/sum_received/lost_packets"),
            received_lost_percent: f("/sum_received/lost_percent"),
            stream_bytes: i("/udp/bytes"),
            stream_lost: i("/udp/lost_packets"),
            stream_packets: i("/udp/packets"),
            stream_lost_percent: f("/udp/lost_percent"),
        }
    }

    fn assert_matches(&self, other: &Printed, what: &str) {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
        let same = Printed {
            received_lost_percent: self.received_lost_percent,
            stream_lost_percent: self.stream_lost_percent,
            ..*other
        } == *self
            && close(self.received_lost_percent, other.received_lost_percent)
            && close(self.stream_lost_percent, other.stream_lost_percent);
        assert!(same, "{what}:\n  got      {other:?}\n  expected {self:?}");
    }
}

/// One UDP stream of a 3.21 client (a single-stream test), as its
/// `struct iperf_stream` holds it after `get_results`.
#[derive(Debug, Default)]
struct ClientStream {
    sender: bool,
    bytes_sent: i64,
    bytes_received: i64,
    packet_count: i64,
    omitted_packet_count: i64,
    cnt_error: i64,
    omitted_cnt_error: i64,
    peer_packet_count: i64,
    peer_omitted_packet_count: i64,
}

/// 3.21's client: its own stream's counts are what it sent as its results
/// (`send_results` writes them out as they are; its stream did not reorder
/// anything in these captures); then it reads the server's (`get_results`)
/// and prints (`iperf_print_results`, the UDP branch, `-J`). `Err` where
/// 3.21 refuses the server's results (IERECVRESULTS).
fn client_321(own: &Value, server: &Value, sender: bool) -> Result<Printed, &'static str> {
    let own = &own["streams"][0];
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64);
    let mut sp = ClientStream {
        sender,
        packet_count: n(own, "packets").ok_or("own packets")?,
        omitted_packet_count: n(own, "omitted_packets").ok_or("own omitted_packets")?,
        cnt_error: n(own, "errors").ok_or("own errors")?,
        omitted_cnt_error: n(own, "omitted_errors").ok_or("own omitted_errors")?,
        ..ClientStream::default()
    };
    let own_bytes = n(own, "bytes").ok_or("own bytes")?;
    if sender {
        sp.bytes_sent = own_bytes;
    } else {
        sp.bytes_received = own_bytes;
    }

    // get_results: the keys it requires, then both omitted counts or neither.
    let st = server["streams"]
        .as_array()
        .and_then(|a| a.first())
        .ok_or("no streams")?;
    for k in ["id", "bytes", "retransmits", "jitter", "errors", "packets"] {
        if !st.get(k).is_some_and(Value::is_number) {
            return Err("IERECVRESULTS: a required key is missing");
        }
    }
    let omitted = match (n(st, "omitted_errors"), n(st, "omitted_packets")) {
        (Some(e), Some(p)) => Some((e, p)),
        (None, None) => None,
        _ => return Err("IERECVRESULTS: one omitted count without the other"),
    };
    let (errors, packets, bytes) = (
        n(st, "errors").unwrap_or(0),
        n(st, "packets").unwrap_or(0),
        n(st, "bytes").unwrap_or(0),
    );
    if sp.sender {
        sp.cnt_error = errors;
        sp.peer_packet_count = packets;
        sp.bytes_received = bytes;
        match omitted {
            Some((e, p)) => {
                sp.omitted_cnt_error = e;
                sp.peer_omitted_packet_count = p;
            }
            None => {
                // "For backward compatibility": an older server's results.
                sp.peer_omitted_packet_count = sp.omitted_packet_count;
                sp.omitted_cnt_error = if sp.peer_omitted_packet_count > 0 {
                    if sp.cnt_error > 0 {
                        -1
                    } else {
                        0
                    }
                } else {
                    sp.cnt_error
                };
            }
        }
    } else {
        sp.peer_packet_count = packets;
        sp.bytes_sent = bytes;
        sp.peer_omitted_packet_count = omitted.map_or(sp.peer_packet_count, |(_, p)| p);
    }

    // iperf_print_results, UDP, one stream.
    let (sender_packets, sender_omitted, receiver_packets, receiver_omitted) = if sp.sender {
        (
            sp.packet_count,
            sp.omitted_packet_count,
            sp.peer_packet_count,
            sp.peer_omitted_packet_count,
        )
    } else {
        (
            sp.peer_packet_count,
            sp.peer_omitted_packet_count,
            sp.packet_count,
            sp.omitted_packet_count,
        )
    };
    let packet_count = if sender_packets != 0 {
        sender_packets
    } else {
        receiver_packets
    };
    let total_packets = packet_count - sp.omitted_packet_count;
    let mut lost_packets = sp.cnt_error;
    if sp.omitted_cnt_error > -1 {
        lost_packets -= sp.omitted_cnt_error;
    }
    let stream_lost = sp.cnt_error - sp.omitted_cnt_error;
    let stream_lost_percent = if sender_packets - sender_omitted > 0 {
        100.0 * stream_lost as f64 / (sender_packets - sender_omitted) as f64
    } else {
        0.0
    };
    Ok(Printed {
        sent_bytes: sp.bytes_sent,
        sent_packets: sender_packets - sender_omitted,
        received_bytes: sp.bytes_received,
        received_packets: receiver_packets - receiver_omitted,
        received_lost: lost_packets,
        received_lost_percent: if total_packets > 0 {
            100.0 * lost_packets as f64 / total_packets as f64
        } else {
            0.0
        },
        stream_bytes: sp.bytes_sent,
        stream_lost,
        stream_packets: total_packets,
        stream_lost_percent,
    })
}

/// One of the captured exchanges: `iperf3 -c 127.0.0.1 -u -b 1G -l 1400 -t 2
/// -w 128K` with the options below, 3.21 on both ends.
struct Exchange {
    /// The fixtures' prefix.
    name: &'static str,
    /// `-R`: the server sends.
    reverse: bool,
}

const EXCHANGES: [Exchange; 3] = [
    Exchange {
        name: "udp",
        reverse: false,
    },
    Exchange {
        name: "udp-omit",
        reverse: false,
    },
    Exchange {
        name: "udp-omit-reverse",
        reverse: true,
    },
];

impl Exchange {
    fn file(&self, part: &str) -> String {
        format!("{}-{part}.json", self.name)
    }

    fn plan(&self) -> TestPlan {
        let p: TestParams = decode_json(fixture(&self.file("params")).as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        let limits = Limits {
            max_duration: Duration::from_secs(3600),
            max_streams: 128,
        };
        plan(&p, &limits).unwrap_or_else(|r| panic!("{}: refused: {}", self.name, r.why))
    }

    fn printed(&self) -> Printed {
        Printed::from_end(&json(&self.file("client-end")))
    }

    /// linkperf's server counting what 3.21's server counted: the same
    /// datagrams through the same counters, the omitted seconds ending
    /// where they ended for it.
    fn linkperf_results(&self) -> Value {
        let plan = self.plan();
        let theirs = &json(&self.file("results-server"))["streams"][0];
        let n = |k: &str| theirs[k].as_u64().unwrap();
        let blk = plan.blksize as u64;
        let t0 = Instant::now();
        let mut counters = Counters::new(false);
        counters.set_schedule(Schedule::new(t0, plan.omit, plan.limit, Duration::ZERO));
        let mut stats = Iperf3Tally::new(&mut counters, 1, self.reverse, true);
        let c = &mut counters;
        if self.reverse {
            // Datagrams sent, then sent after the omitted seconds.
            for seq in 1..=n("packets") {
                if seq == n("omitted_packets") + 1 {
                    stats.omit_over();
                }
                stats.datagram_sent(c, blk, t0, seq > n("omitted_packets"));
            }
        } else {
            // Sequence numbers up to the highest seen at the end of the
            // omitted seconds, then to the highest seen in all, each span
            // with its losses as one gap before its last datagram.
            let spans = [
                (1, n("omitted_packets"), n("omitted_errors"), false),
                (
                    n("omitted_packets") + 1,
                    n("packets"),
                    n("errors") - n("omitted_errors"),
                    true,
                ),
            ];
            for (first, last, lost, counting) in spans {
                if counting && !plan.omit.is_zero() {
                    stats.omit_over();
                }
                if last < first {
                    continue; // no omitted seconds
                }
                for seq in (first..last - lost).chain([last]) {
                    let h = UdpHeader {
                        sec: 0,
                        usec: 0,
                        seq,
                    };
                    let at = Stamp { sec: 0, usec: 1000 };
                    stats.datagram(c, blk, &h, at, t0, counting);
                }
            }
        }
        let out = DataOutcome {
            end: Finish::TestEnd,
            counters,
            records: vec![StreamRecord {
                id: 1,
                sends: self.reverse,
                tally: stats,
                retransmits: None,
            }],
            seconds: 2.0,
            wall_s: 2.0 + plan.omit.as_secs_f64(),
            cpu: ProcessCpu::default(),
            congestion: None,
            errors: Vec::new(),
        };
        let frame = encode_json(&says::results(&plan, &out, None)).unwrap();
        serde_json::from_slice(&frame[4..]).unwrap()
    }
}

#[test]
fn the_model_of_the_321_client_derives_what_it_printed() {
    for x in &EXCHANGES {
        let own = json(&x.file("results-client"));
        let server = json(&x.file("results-server"));
        let got = client_321(&own, &server, !x.reverse).unwrap();
        x.printed()
            .assert_matches(&got, &format!("{}: 3.21 against 3.21", x.name));
    }
}

#[test]
fn a_321_client_s_parameters_and_results_are_read() {
    for x in &EXCHANGES {
        let p = x.plan();
        assert_eq!(
            (p.blksize, p.rate, p.window),
            (1400, Some(1_000_000_000), Some(131_072))
        );
        let r: TestResults = decode_json(fixture(&x.file("results-client")).as_bytes()).unwrap();
        let s = &r.streams[0];
        let raw = &json(&x.file("results-client"))["streams"][0];
        assert_eq!(
            s.omitted_errors,
            raw["omitted_errors"].as_i64(),
            "{}",
            x.name
        );
        assert_eq!(
            s.omitted_packets,
            raw["omitted_packets"].as_i64(),
            "{}",
            x.name
        );
        assert!(s.extra.is_empty(), "{}: {:?}", x.name, s.extra);
    }
}

#[test]
fn linkperf_s_results_carry_every_key_a_321_server_sends() {
    for x in &EXCHANGES {
        let ours = x.linkperf_results();
        let theirs = json(&x.file("results-server"));
        let keys = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&ours), keys(&theirs), "{}: the message's keys", x.name);
        let (o, t) = (&ours["streams"][0], &theirs["streams"][0]);
        assert_eq!(keys(o), keys(t), "{}: a stream's keys", x.name);
        // The counts the client reads. (A 3.21 server sending with -R
        // echoes the client's errors, which the client does not read.)
        let read = if x.reverse {
            &["bytes", "packets", "omitted_packets"][..]
        } else {
            &[
                "bytes",
                "errors",
                "omitted_errors",
                "packets",
                "omitted_packets",
            ][..]
        };
        for k in read {
            assert_eq!(o[k], t[k], "{}: streams[0].{k}", x.name);
        }
    }
}

#[test]
fn a_321_client_derives_the_same_loss_from_linkperf_s_results() {
    for x in &EXCHANGES {
        let own = json(&x.file("results-client"));
        let got = client_321(&own, &x.linkperf_results(), !x.reverse).unwrap();
        x.printed()
            .assert_matches(&got, &format!("{}: 3.21 against linkperf", x.name));
    }
}

#[test]
fn without_the_omitted_counts_a_321_client_reads_no_loss() {
    // What 3.21 made of linkperf's results before they carried the omitted
    // counts: the issue's `lost_packets 0`, with a quarter of the data lost.
    let x = &EXCHANGES[0];
    let mut ours = x.linkperf_results();
    let st = ours["streams"][0].as_object_mut().unwrap();
    st.remove("omitted_errors");
    st.remove("omitted_packets");
    let got = client_321(&json(&x.file("results-client")), &ours, true).unwrap();
    assert_eq!((got.received_lost, got.stream_lost), (0, 0));
    assert!(x.printed().received_lost > 40_000);
    // One without the other is refused.
    ours["streams"][0]["omitted_errors"] = 0.into();
    assert!(client_321(&json(&x.file("results-client")), &ours, true).is_err());
}
