//! A UDP stream's figures, from its receivers' accounting and its senders'
//! counts: datagrams received, lost, out of order, duplicated, the loss rate
//! and RFC 3550 interarrival jitter, per direction and over the run, and each
//! sender's pace beside the one it was asked for. Pure functions.

use serde::{Deserialize, Serialize};

use linkperf_measured::{DatagramCounts, Interval, SideReport};
use linkperf_workload::{StreamDirection, TestSpec, Workload, UNPACED};

/// A sender whose users' mean rate over the window fell short of the rate
/// asked by more than this share did not keep its pace. Datagrams are whole,
/// and a window's edges fall between them: at 1 Mbit/s and 1400-byte
/// datagrams a 1 s window holds 89.3 of them, 89 or 90 counted, 0.4 % apart;
/// 2 % leaves room for that and the pacer's wake-ups at the edges.
pub const PACE_TOLERANCE: f64 = 0.02;

/// One direction of a UDP stream: what its senders sent and what its
/// receivers made of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UdpDirection {
    /// Datagrams the senders sent in their window.
    pub sent: u64,
    /// Datagrams the receivers received in their window (new ones: in
    /// sequence, or late within the reorder window).
    pub received: u64,
    /// Sequence numbers the window's arrivals accounted for (RFC 3550's
    /// "expected").
    pub expected: u64,
    /// `expected − received`: lost (by sequence gaps, net of late arrivals).
    pub lost: u64,
    /// Datagrams that came after one with a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams received twice or more (counted once).
    pub duplicates: u64,
    /// Datagrams too far behind to tell (left counted lost).
    pub late: u64,
    /// `lost / expected`, 0 to 1 (0 when nothing was expected).
    pub loss_rate: f64,
    /// The receiving flows' interarrival jitter at the window's close,
    /// averaged over them, µs (`None`: nothing arrived).
    pub jitter_us: Option<f64>,
    /// Payload bits per second each sending user achieved, on average over
    /// the users, over the sender's window.
    pub sent_bits_per_s: f64,
    /// Whether the senders kept the pace asked (within [`PACE_TOLERANCE`]);
    /// `None` without a pace (`--rate 0`).
    pub kept_pace: Option<bool>,
}

/// A UDP stream run's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UdpStream {
    /// The pace each user was asked to send at, payload bits per second; 0:
    /// none, as fast as the socket takes.
    pub rate_bits_per_s: f64,
    /// Client to server, when it carried the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_to_server: Option<UdpDirection>,
    /// Server to client, when it carried the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_to_client: Option<UdpDirection>,
    /// Datagrams lost over every direction, as a share of those expected.
    pub loss_rate: f64,
    /// The receiving flows' jitter, averaged over every direction's, µs.
    #[serde(default)]
    pub jitter_us: Option<f64>,
}

impl UdpStream {
    /// The directions the stream ran, `("client to server", ...)` first.
    pub fn directions(&self) -> Vec<(&'static str, &UdpDirection)> {
        [
            ("client to server", self.client_to_server.as_ref()),
            ("server to client", self.server_to_client.as_ref()),
        ]
        .into_iter()
        .filter_map(|(n, d)| d.map(|d| (n, d)))
        .collect()
    }

    /// Datagrams lost and expected, over every direction.
    pub fn lost_of_expected(&self) -> (u64, u64) {
        self.directions()
            .iter()
            .fold((0, 0), |(l, e), (_, d)| (l + d.lost, e + d.expected))
    }
}

/// The UDP stream figures of a run of `spec`, when it is one and its
/// receivers reported.
pub fn udp_stream(
    spec: &TestSpec,
    client: &SideReport,
    server: Option<&SideReport>,
) -> Option<UdpStream> {
    let rate = spec.stream_rate()?;
    let Workload::Stream { direction, .. } = spec.workload else {
        return None;
    };
    let users = f64::from(spec.users.max(1));
    let dir = |sender: &SideReport, receiver: Option<&SideReport>| -> Option<UdpDirection> {
        let sent = sender.udp.unwrap_or_default();
        let got: DatagramCounts = receiver?.udp.unwrap_or_default();
        let sent_bits_per_s = if sender.window_s > 0.0 {
            sender.tx_bytes as f64 * 8.0 / sender.window_s / users
        } else {
            0.0
        };
        let lost = got.lost();
        Some(UdpDirection {
            sent: sent.sent,
            received: got.received,
            expected: got.expected,
            lost,
            out_of_order: got.out_of_order,
            duplicates: got.duplicates,
            late: got.late,
            loss_rate: share(lost, got.expected),
            jitter_us: got.jitter_us,
            sent_bits_per_s,
            kept_pace: (rate != UNPACED)
                .then(|| sent_bits_per_s >= rate.as_f64() * (1.0 - PACE_TOLERANCE)),
        })
    };
    let (up, down) = match direction {
        StreamDirection::Up => (true, false),
        StreamDirection::Down => (false, true),
        StreamDirection::Bidir => (true, true),
    };
    let client_to_server = if up { dir(client, server) } else { None };
    let server_to_client = match (down, server) {
        (true, Some(s)) => dir(s, Some(client)),
        _ => None,
    };
    if client_to_server.is_none() && server_to_client.is_none() {
        return None;
    }
    let mut out = UdpStream {
        rate_bits_per_s: rate.as_f64(),
        client_to_server,
        server_to_client,
        loss_rate: 0.0,
        jitter_us: None,
    };
    let (lost, expected) = out.lost_of_expected();
    out.loss_rate = share(lost, expected);
    let jitters: Vec<f64> = out
        .directions()
        .iter()
        .filter_map(|(_, d)| d.jitter_us)
        .collect();
    out.jitter_us =
        (!jitters.is_empty()).then(|| jitters.iter().sum::<f64>() / jitters.len() as f64);
    Some(out)
}

/// One second's loss rate (RFC 3550's fraction lost: `(expected −
/// received) / expected`, 0 when late arrivals of earlier datagrams make it
/// negative) and jitter, from its receivers' intervals.
pub(crate) fn interval_udp(receivers: &[&Interval]) -> (Option<f64>, Option<f64>) {
    let with: Vec<&&Interval> = receivers.iter().filter(|i| i.expected.is_some()).collect();
    if with.is_empty() {
        return (None, None);
    }
    let expected: u64 = with.iter().filter_map(|i| i.expected).sum();
    let received: u64 = with.iter().filter_map(|i| i.datagrams).sum();
    let jitters: Vec<f64> = with.iter().filter_map(|i| i.jitter_us).collect();
    (
        Some(share(expected.saturating_sub(received), expected)),
        (!jitters.is_empty()).then(|| jitters.iter().sum::<f64>() / jitters.len() as f64),
    )
}

/// `part / whole`, 0 for nothing.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_measured::{BusyMethod, ProcStatBreakdown, ProcessMethod, SideCpu, Totals};
    use linkperf_workload::{BitsPerSecond, Protocol};

    use super::*;
    use crate::{checks, derive_run, CheckName, CheckStatus, Judge};

    fn spec(w: &str, users: u32, rate: u64) -> TestSpec {
        let mut s = TestSpec::new(
            w.parse().unwrap(),
            Protocol::Udp,
            users,
            Duration::from_secs(2),
        );
        s.rate = Some(BitsPerSecond(rate));
        s
    }

    /// A side of a 2 s window that wrote `tx` payload bytes, with `udp` counts
    /// and per-second `(datagrams, expected, jitter)` samples.
    fn side(tx: u64, udp: DatagramCounts, seconds: &[(u64, u64, f64)]) -> SideReport {
        SideReport {
            window_s: 2.0,
            tx_bytes: tx,
            rx_bytes: 0,
            transactions: 0,
            errors: 0,
            totals: Totals::default(),
            latency: None,
            intervals: seconds
                .iter()
                .enumerate()
                .map(|(i, &(d, e, j))| Interval {
                    start_s: i as f64,
                    length_s: 1.0,
                    datagrams: Some(d),
                    expected: Some(e),
                    jitter_us: Some(j),
                    ..Interval::default()
                })
                .collect(),
            cpu: SideCpu {
                process_s: 1.0,
                process_user_s: 0.5,
                process_system_s: 0.5,
                process_method: ProcessMethod::RusageSelf,
                system_busy_s: 1.0,
                system_busy_method: BusyMethod::ProcStat,
                softirq_s: 0.0,
                proc_stat: ProcStatBreakdown::default(),
                cpus: 2,
                window_s: 2.0,
                opened_late_s: None,
                closed_late_s: None,
            },
            tcp_info: None,
            workers: Vec::new(),
            busy_poll: false,
            connections: 1,
            error_samples: Vec::new(),
            profile: None,
            latency_histogram: None,
            flows: Default::default(),
            udp: Some(udp),
            links: Vec::new(),
            pinned_cpus: Vec::new(),
            open_loop: None,
        }
    }

    fn sent(n: u64) -> DatagramCounts {
        DatagramCounts {
            sent: n,
            ..DatagramCounts::default()
        }
    }

    fn got(received: u64, expected: u64, jitter_us: f64) -> DatagramCounts {
        DatagramCounts {
            received,
            expected,
            out_of_order: 3,
            duplicates: 2,
            jitter_us: Some(jitter_us),
            jitter_flows: 1,
            ..DatagramCounts::default()
        }
    }

    #[test]
    fn an_upload_at_twice_the_path_loses_half() {
        // 2 users asked 200 Mbit/s each over 2 s: 100 MB sent (50 MB a second);
        // half arrived.
        let s = spec("stream-up:1250", 2, 200_000_000);
        let mut client = side(100_000_000, sent(80_000), &[(0, 0, 0.0), (0, 0, 0.0)]);
        for i in &mut client.intervals {
            (i.datagrams, i.expected, i.jitter_us) = (None, None, None);
        }
        let server = side(
            0,
            got(40_000, 80_000, 12.5),
            &[(20_000, 40_000, 10.0), (20_000, 40_000, 15.0)],
        );
        let run = derive_run(1, String::new(), &s, client, Some(server));
        let u = run.udp.unwrap();
        assert_eq!(u.rate_bits_per_s, 2e8);
        assert!(u.server_to_client.is_none());
        let d = u.client_to_server.unwrap();
        assert_eq!(
            (d.sent, d.received, d.expected, d.lost),
            (80_000, 40_000, 80_000, 40_000)
        );
        assert_eq!((d.out_of_order, d.duplicates, d.late), (3, 2, 0));
        assert_eq!(d.loss_rate, 0.5);
        assert_eq!(u.loss_rate, 0.5);
        assert_eq!(d.jitter_us, Some(12.5));
        assert_eq!(d.sent_bits_per_s, 2e8, "per user");
        assert_eq!(d.kept_pace, Some(true));
        assert_eq!(run.intervals[0].loss_rate, Some(0.5));
        assert_eq!(run.intervals[1].second.jitter_us, Some(15.0));
        // Judged only against a bound the user set.
        let mut j = Judge {
            spec: &s,
            interrupted: false,
            hosts: None,
            max_loss: None,
        };
        let c = checks(&run, &j);
        let loss = c.iter().find(|c| c.name == CheckName::UdpLoss).unwrap();
        assert_eq!(loss.status, CheckStatus::Pass);
        assert_eq!(loss.value, Some(0.5));
        assert!(
            loss.detail.starts_with(
                "40000 of 80000 datagrams lost at their receivers (50.00 %); no loss bound set"
            ),
            "{}",
            loss.detail
        );
        j.max_loss = Some(0.01);
        let c = checks(&run, &j);
        let loss = c.iter().find(|c| c.name == CheckName::UdpLoss).unwrap();
        assert_eq!(loss.status, CheckStatus::Fail);
        assert!(
            loss.detail.ends_with("at most 1.00 % allowed)"),
            "{}",
            loss.detail
        );
    }

    #[test]
    fn a_sender_that_falls_short_says_so() {
        // Asked 100 Mbit/s of 1 user, sent 90 Mbit/s for 2 s.
        let s = spec("stream-down:1k", 1, 100_000_000);
        let client = side(0, got(20_000, 20_000, 3.0), &[]);
        let server = side(22_500_000, sent(21_973), &[]);
        let u = derive_run(1, String::new(), &s, client, Some(server))
            .udp
            .unwrap();
        assert!(u.client_to_server.is_none());
        let d = u.server_to_client.unwrap();
        assert_eq!(d.sent_bits_per_s, 9e7);
        assert_eq!(d.kept_pace, Some(false));
        assert_eq!(d.loss_rate, 0.0);
        // Within 2 % it kept it; without a pace there is none to keep.
        let server = side(24_600_000, sent(24_000), &[]);
        let client = side(0, got(1, 1, 3.0), &[]);
        let d = udp_stream(&s, &client, Some(&server))
            .unwrap()
            .server_to_client
            .unwrap();
        assert_eq!(d.kept_pace, Some(true));
        let unpaced = spec("stream-down:1k", 1, 0);
        let d = udp_stream(&unpaced, &client, Some(&server))
            .unwrap()
            .server_to_client
            .unwrap();
        assert_eq!(d.kept_pace, None);
    }

    #[test]
    fn both_ways_add_their_losses_and_average_their_jitter() {
        let s = spec("stream-bidir:1k", 1, 1_000_000);
        let mut client = side(250_000, got(90, 100, 4.0), &[(90, 100, 4.0)]);
        client.udp.as_mut().unwrap().sent = 244;
        let mut server = side(250_000, got(240, 300, 8.0), &[(240, 300, 8.0)]);
        server.udp.as_mut().unwrap().sent = 100;
        let run = derive_run(1, String::new(), &s, client, Some(server));
        let u = run.udp.unwrap();
        assert_eq!(u.client_to_server.unwrap().sent, 244);
        assert_eq!(u.client_to_server.unwrap().lost, 60);
        assert_eq!(u.server_to_client.unwrap().lost, 10);
        assert_eq!(u.lost_of_expected(), (70, 400));
        assert_eq!(u.loss_rate, 70.0 / 400.0);
        assert_eq!(u.jitter_us, Some(6.0));
        assert_eq!(run.intervals[0].loss_rate, Some(70.0 / 400.0));
        assert_eq!(run.intervals[0].second.jitter_us, Some(6.0));
    }

    #[test]
    fn late_arrivals_never_make_a_loss_negative() {
        let i = Interval {
            datagrams: Some(12),
            expected: Some(10),
            ..Interval::default()
        };
        assert_eq!(interval_udp(&[&i]), (Some(0.0), None));
        assert_eq!(interval_udp(&[&Interval::default()]), (None, None));
        assert_eq!(got(12, 10, 1.0).lost(), 0);
    }

    #[test]
    fn tcp_streams_and_udp_rr_have_no_udp_block() {
        let tcp = TestSpec::new(
            "stream-up:1k".parse().unwrap(),
            Protocol::Tcp,
            1,
            Duration::from_secs(2),
        );
        let c = side(1, sent(1), &[]);
        assert_eq!(udp_stream(&tcp, &c, Some(&c)), None);
        let rr = TestSpec::new(
            "rr1c-1x1".parse().unwrap(),
            Protocol::Udp,
            1,
            Duration::from_secs(2),
        );
        assert_eq!(udp_stream(&rr, &c, Some(&c)), None);
        // A stream whose receiver did not report has no figures of it.
        let s = spec("stream-up:1k", 1, 1000);
        assert_eq!(udp_stream(&s, &c, None), None);
    }
}
