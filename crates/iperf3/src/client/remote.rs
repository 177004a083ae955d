//! What a stock iperf3 server reported of a test.

use std::fmt;

use crate::codec::TestResults;

/// The server's own figures, from its results message. iperf3 measures over
/// its whole test (linkperf asks it to omit nothing, so the warmup is in),
/// and reports its process CPU as a share of its wall time, nothing
/// system-wide.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteReport {
    /// Bytes the server received, all streams.
    pub received_bytes: u64,
    /// Bytes the server sent, all streams.
    pub sent_bytes: u64,
    /// Bytes per stream, by iperf3 stream id.
    pub streams: Vec<(i64, u64)>,
    /// The server's test length, seconds.
    pub seconds: f64,
    /// The server process's CPU, percent of its wall time.
    pub cpu_util_total: f64,
    /// User part.
    pub cpu_util_user: f64,
    /// System part.
    pub cpu_util_system: f64,
    /// The congestion control of its streams.
    pub congestion: Option<String>,
}

impl RemoteReport {
    /// The figures of `r`; `sent_by_client(id)` says which streams the client
    /// sent on (the server received on those).
    pub fn from_results(r: &TestResults, sent_by_client: impl Fn(i64) -> bool) -> Self {
        let mut rep = RemoteReport {
            received_bytes: 0,
            sent_bytes: 0,
            streams: Vec::new(),
            seconds: 0.0,
            cpu_util_total: r.cpu_util_total,
            cpu_util_user: r.cpu_util_user,
            cpu_util_system: r.cpu_util_system,
            congestion: r.congestion_used.clone(),
        };
        for s in &r.streams {
            if sent_by_client(s.id) {
                rep.received_bytes += s.bytes;
            } else {
                rep.sent_bytes += s.bytes;
            }
            rep.streams.push((s.id, s.bytes));
            let secs = s.end_time.unwrap_or(0.0) - s.start_time.unwrap_or(0.0);
            rep.seconds = rep.seconds.max(secs);
        }
        rep
    }
}

impl fmt::Display for RemoteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "iperf3 server reported: received {} bytes, sent {} bytes over {} stream{} in {:.3} s; \
             its process CPU {:.2}% of its wall time (user {:.2}%, system {:.2}%)",
            self.received_bytes,
            self.sent_bytes,
            self.streams.len(),
            if self.streams.len() == 1 { "" } else { "s" },
            self.seconds,
            self.cpu_util_total,
            self.cpu_util_user,
            self.cpu_util_system
        )?;
        if let Some(c) = &self.congestion {
            write!(f, "; congestion control {c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_json;

    #[test]
    fn a_312_servers_bidirectional_results() {
        let p = format!(
            "{}/tests/fixtures/results-server-bidir.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r: TestResults = decode_json(std::fs::read(p).unwrap().as_slice()).unwrap();
        // The client sent on stream 1 and received on stream 3.
        let rep = RemoteReport::from_results(&r, |id| id == 1);
        assert_eq!(
            (rep.received_bytes, rep.sent_bytes),
            (36_700_160, 6_553_600)
        );
        assert_eq!(rep.streams, vec![(1, 36_700_160), (3, 6_553_600)]);
        assert!((rep.seconds - 1.013_989).abs() < 1e-9);
        let text = rep.to_string();
        assert!(
            text.contains("received 36700160 bytes, sent 6553600 bytes over 2 streams"),
            "{text}"
        );
        assert!(text.ends_with("congestion control bbr"), "{text}");
    }
}
