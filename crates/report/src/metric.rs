//! The metrics a comparison covers, where each is read from a run, and which
//! way is better.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use linkperf_results::Run;

use crate::units::{Scale, Unit};

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// More is better: throughput, efficiency.
    Higher,
    /// Less is better: transaction time, CPU per transaction.
    Lower,
}

/// Whose CPU decides the efficiency verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuSide {
    /// The client's host.
    Client,
    /// The server's host (the default: where the studies measured).
    #[default]
    Server,
}

impl FromStr for CpuSide {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "client" => Ok(CpuSide::Client),
            "server" => Ok(CpuSide::Server),
            other => Err(format!("unknown CPU side {other:?}: say client or server")),
        }
    }
}

impl fmt::Display for CpuSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuSide::Client => "client",
            CpuSide::Server => "server",
        })
    }
}

/// A figure of a run that a comparison covers. Serialised as its dotted path
/// in a run (the key of `summary.metrics` in the results document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Metric {
    /// Payload bytes per second, both directions.
    #[serde(rename = "throughput.bytes_per_s")]
    Throughput,
    /// Transactions per second.
    #[serde(rename = "throughput.transactions_per_s")]
    TransactionRate,
    /// Mean transaction time, µs.
    #[serde(rename = "transaction_time_us.mean")]
    TimeMean,
    /// 99th percentile of transaction time, µs.
    #[serde(rename = "transaction_time_us.p99")]
    TimeP99,
    /// Payload bytes per client process CPU-second.
    #[serde(rename = "efficiency.client_bytes_per_cpu_s")]
    ClientEfficiency,
    /// Payload bytes per server process CPU-second.
    #[serde(rename = "efficiency.server_bytes_per_cpu_s")]
    ServerEfficiency,
    /// Payload bytes per busy CPU-second of the client's host.
    #[serde(rename = "efficiency.client_bytes_per_system_cpu_s")]
    ClientSystemEfficiency,
    /// Payload bytes per busy CPU-second of the server's host.
    #[serde(rename = "efficiency.server_bytes_per_system_cpu_s")]
    ServerSystemEfficiency,
    /// Client process CPU-µs per transaction.
    #[serde(rename = "efficiency.client_cpu_us_per_txn")]
    ClientCpuPerTxn,
    /// Server process CPU-µs per transaction.
    #[serde(rename = "efficiency.server_cpu_us_per_txn")]
    ServerCpuPerTxn,
    /// Busy CPU-µs of the client's host per transaction.
    #[serde(rename = "efficiency.client_system_cpu_us_per_txn")]
    ClientSystemCpuPerTxn,
    /// Busy CPU-µs of the server's host per transaction.
    #[serde(rename = "efficiency.server_system_cpu_us_per_txn")]
    ServerSystemCpuPerTxn,
    /// Payload bytes per busy second of the client's pinned CPUs.
    #[serde(rename = "efficiency.client_bytes_per_pinned_cpu_s")]
    ClientPinnedEfficiency,
    /// Payload bytes per busy second of the server's pinned CPUs.
    #[serde(rename = "efficiency.server_bytes_per_pinned_cpu_s")]
    ServerPinnedEfficiency,
    /// Busy CPU-µs of the client's pinned CPUs per transaction.
    #[serde(rename = "efficiency.client_pinned_cpu_us_per_txn")]
    ClientPinnedCpuPerTxn,
    /// Busy CPU-µs of the server's pinned CPUs per transaction.
    #[serde(rename = "efficiency.server_pinned_cpu_us_per_txn")]
    ServerPinnedCpuPerTxn,
    /// UDP: a stream's datagrams lost / expected at their receivers, or a
    /// request/response test's transactions lost (unanswered within the timeout).
    #[serde(rename = "udp.loss_rate")]
    LossRate,
    /// UDP streams: RFC 3550 interarrival jitter, µs.
    #[serde(rename = "udp.jitter_us")]
    Jitter,
    /// Median transaction time, µs: open-loop runs only (timed from each
    /// transaction's due time).
    #[serde(rename = "transaction_time_us.p50")]
    TimeP50,
    /// 99.9th percentile of transaction time, µs: open-loop runs only.
    #[serde(rename = "transaction_time_us.p999")]
    TimeP999,
}

impl Metric {
    /// Every metric, in the order of the report's tables.
    pub const ALL: [Metric; 20] = [
        Metric::Throughput,
        Metric::TransactionRate,
        Metric::TimeMean,
        Metric::TimeP99,
        Metric::ClientEfficiency,
        Metric::ServerEfficiency,
        Metric::ClientSystemEfficiency,
        Metric::ServerSystemEfficiency,
        Metric::ClientCpuPerTxn,
        Metric::ServerCpuPerTxn,
        Metric::ClientSystemCpuPerTxn,
        Metric::ServerSystemCpuPerTxn,
        Metric::ClientPinnedEfficiency,
        Metric::ServerPinnedEfficiency,
        Metric::ClientPinnedCpuPerTxn,
        Metric::ServerPinnedCpuPerTxn,
        Metric::LossRate,
        Metric::Jitter,
        Metric::TimeP50,
        Metric::TimeP999,
    ];

    /// Whether the metric is read from open-loop runs only: the median and
    /// the 99.9th percentile of the transaction time, the figures a
    /// latency-against-load comparison is about. A closed-loop run has them
    /// too, but a closed-loop comparison keeps to its mean and p99, so
    /// that its reports stay as they were.
    pub fn open_loop_only(self) -> bool {
        matches!(self, Metric::TimeP50 | Metric::TimeP999)
    }

    /// The three metrics a verdict is made of: throughput, mean transaction
    /// time, and system-wide CPU efficiency of `side`.
    pub fn headline(side: CpuSide) -> [Metric; 3] {
        [
            Metric::Throughput,
            Metric::TimeMean,
            match side {
                CpuSide::Client => Metric::ClientSystemEfficiency,
                CpuSide::Server => Metric::ServerSystemEfficiency,
            },
        ]
    }

    /// The metric's dotted path in a run, e.g. `throughput.bytes_per_s`.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput.bytes_per_s",
            Metric::TransactionRate => "throughput.transactions_per_s",
            Metric::TimeMean => "transaction_time_us.mean",
            Metric::TimeP99 => "transaction_time_us.p99",
            Metric::ClientEfficiency => "efficiency.client_bytes_per_cpu_s",
            Metric::ServerEfficiency => "efficiency.server_bytes_per_cpu_s",
            Metric::ClientSystemEfficiency => "efficiency.client_bytes_per_system_cpu_s",
            Metric::ServerSystemEfficiency => "efficiency.server_bytes_per_system_cpu_s",
            Metric::ClientCpuPerTxn => "efficiency.client_cpu_us_per_txn",
            Metric::ServerCpuPerTxn => "efficiency.server_cpu_us_per_txn",
            Metric::ClientSystemCpuPerTxn => "efficiency.client_system_cpu_us_per_txn",
            Metric::ServerSystemCpuPerTxn => "efficiency.server_system_cpu_us_per_txn",
            Metric::ClientPinnedEfficiency => "efficiency.client_bytes_per_pinned_cpu_s",
            Metric::ServerPinnedEfficiency => "efficiency.server_bytes_per_pinned_cpu_s",
            Metric::ClientPinnedCpuPerTxn => "efficiency.client_pinned_cpu_us_per_txn",
            Metric::ServerPinnedCpuPerTxn => "efficiency.server_pinned_cpu_us_per_txn",
            Metric::LossRate => "udp.loss_rate",
            Metric::Jitter => "udp.jitter_us",
            Metric::TimeP50 => "transaction_time_us.p50",
            Metric::TimeP999 => "transaction_time_us.p999",
        }
    }

    /// A short name for tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::TransactionRate => "transactions/s",
            Metric::TimeMean => "mean transaction time",
            Metric::TimeP99 => "p99 transaction time",
            Metric::ClientEfficiency => "client CPU efficiency (process)",
            Metric::ServerEfficiency => "server CPU efficiency (process)",
            Metric::ClientSystemEfficiency => "client CPU efficiency (system-wide)",
            Metric::ServerSystemEfficiency => "server CPU efficiency (system-wide)",
            Metric::ClientCpuPerTxn => "client CPU per transaction (process)",
            Metric::ServerCpuPerTxn => "server CPU per transaction (process)",
            Metric::ClientSystemCpuPerTxn => "client CPU per transaction (system-wide)",
            Metric::ServerSystemCpuPerTxn => "server CPU per transaction (system-wide)",
            Metric::ClientPinnedEfficiency => "client CPU efficiency (its CPUs)",
            Metric::ServerPinnedEfficiency => "server CPU efficiency (its CPUs)",
            Metric::ClientPinnedCpuPerTxn => "client CPU per transaction (its CPUs)",
            Metric::ServerPinnedCpuPerTxn => "server CPU per transaction (its CPUs)",
            Metric::LossRate => "UDP loss",
            Metric::Jitter => "UDP jitter",
            Metric::TimeP50 => "p50 transaction time",
            Metric::TimeP999 => "p99.9 transaction time",
        }
    }

    /// The unit of the metric's values as the results document holds them.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Throughput => "bytes/s",
            Metric::TransactionRate => "1/s",
            Metric::TimeMean
            | Metric::TimeP99
            | Metric::Jitter
            | Metric::TimeP50
            | Metric::TimeP999 => "µs",
            Metric::LossRate => "share",
            Metric::ClientEfficiency
            | Metric::ServerEfficiency
            | Metric::ClientSystemEfficiency
            | Metric::ServerSystemEfficiency
            | Metric::ClientPinnedEfficiency
            | Metric::ServerPinnedEfficiency => "bytes/CPU-s",
            Metric::ClientCpuPerTxn
            | Metric::ServerCpuPerTxn
            | Metric::ClientSystemCpuPerTxn
            | Metric::ServerSystemCpuPerTxn
            | Metric::ClientPinnedCpuPerTxn
            | Metric::ServerPinnedCpuPerTxn => "CPU-µs/transaction",
        }
    }

    /// Which way the metric is better.
    pub fn better(self) -> Better {
        match self {
            Metric::Throughput
            | Metric::TransactionRate
            | Metric::ClientEfficiency
            | Metric::ServerEfficiency
            | Metric::ClientSystemEfficiency
            | Metric::ServerSystemEfficiency
            | Metric::ClientPinnedEfficiency
            | Metric::ServerPinnedEfficiency => Better::Higher,
            Metric::TimeMean
            | Metric::TimeP99
            | Metric::ClientCpuPerTxn
            | Metric::ServerCpuPerTxn
            | Metric::ClientSystemCpuPerTxn
            | Metric::ServerSystemCpuPerTxn
            | Metric::ClientPinnedCpuPerTxn
            | Metric::ServerPinnedCpuPerTxn => Better::Lower,
            Metric::LossRate | Metric::Jitter => Better::Lower,
            Metric::TimeP50 | Metric::TimeP999 => Better::Lower,
        }
    }

    /// The metric's value in `run`, if the run has it (an `ok` run has every
    /// throughput figure; transaction times, CPU and efficiency may be absent).
    pub fn value(self, run: &Run) -> Option<f64> {
        let e = run.efficiency;
        let v = match self {
            Metric::Throughput => run.throughput.map(|t| t.bytes_per_s),
            Metric::TransactionRate => run.throughput.map(|t| t.transactions_per_s),
            Metric::TimeMean => run.transaction_time_us.map(|l| l.mean),
            Metric::TimeP99 => run.transaction_time_us.map(|l| l.p99),
            Metric::ClientEfficiency => e.and_then(|e| e.client_bytes_per_cpu_s),
            Metric::ServerEfficiency => e.and_then(|e| e.server_bytes_per_cpu_s),
            Metric::ClientSystemEfficiency => e.and_then(|e| e.client_bytes_per_system_cpu_s),
            Metric::ServerSystemEfficiency => e.and_then(|e| e.server_bytes_per_system_cpu_s),
            Metric::ClientCpuPerTxn => e.and_then(|e| e.client_cpu_us_per_txn),
            Metric::ServerCpuPerTxn => e.and_then(|e| e.server_cpu_us_per_txn),
            Metric::ClientSystemCpuPerTxn => e.and_then(|e| e.client_system_cpu_us_per_txn),
            Metric::ServerSystemCpuPerTxn => e.and_then(|e| e.server_system_cpu_us_per_txn),
            Metric::ClientPinnedEfficiency => e.and_then(|e| e.client_bytes_per_pinned_cpu_s),
            Metric::ServerPinnedEfficiency => e.and_then(|e| e.server_bytes_per_pinned_cpu_s),
            Metric::ClientPinnedCpuPerTxn => e.and_then(|e| e.client_pinned_cpu_us_per_txn),
            Metric::ServerPinnedCpuPerTxn => e.and_then(|e| e.server_pinned_cpu_us_per_txn),
            // A stream's datagrams, or a request/response test's transactions.
            Metric::LossRate => run.udp.map(|u| u.loss_rate).or(run.loss.map(|l| l.rate)),
            Metric::Jitter => run.udp.and_then(|u| u.jitter_us),
            Metric::TimeP50 | Metric::TimeP999 if run.open_loop.is_none() => None,
            Metric::TimeP50 => run.transaction_time_us.map(|l| l.p50),
            Metric::TimeP999 => run.transaction_time_us.map(|l| l.p999),
        };
        v.filter(|x| x.is_finite())
    }

    /// A value of the metric for people: `9.41 Gbit/s`, `23.4 µs`.
    pub fn format(self, value: f64) -> String {
        match self {
            Metric::Throughput => crate::units::rate(value),
            Metric::TransactionRate => crate::units::per_s(value),
            Metric::TimeMean
            | Metric::TimeP99
            | Metric::Jitter
            | Metric::TimeP50
            | Metric::TimeP999 => crate::units::time_us(value),
            Metric::LossRate => format!("{:.2} %", value * 100.0),
            Metric::ClientEfficiency
            | Metric::ServerEfficiency
            | Metric::ClientSystemEfficiency
            | Metric::ServerSystemEfficiency
            | Metric::ClientPinnedEfficiency
            | Metric::ServerPinnedEfficiency => crate::units::per_cpu_s(value),
            Metric::ClientCpuPerTxn
            | Metric::ServerCpuPerTxn
            | Metric::ClientSystemCpuPerTxn
            | Metric::ServerSystemCpuPerTxn
            | Metric::ClientPinnedCpuPerTxn
            | Metric::ServerPinnedCpuPerTxn => format!("{value:.2} CPU-µs"),
        }
    }
}

impl Metric {
    /// The metric a table of a workload shows in place of this one:
    /// request/response throughput in transactions per second (a 1-byte
    /// exchange moves next to no bits; the two differ by a constant factor
    /// in a workload of fixed sizes, so their relative differences are the
    /// same), everything else as it is.
    pub fn shown_for(self, transactional: bool) -> Metric {
        if self == Metric::Throughput && transactional {
            Metric::TransactionRate
        } else {
            self
        }
    }

    /// How a set of the metric's values (a table's column, a line) is
    /// written: in one unit, chosen from the largest of them.
    pub fn column(self, values: impl IntoIterator<Item = f64>) -> Column {
        let unit = match self {
            Metric::Throughput => Some(Scale::BITS.unit_for(values.into_iter().map(|v| v * 8.0))),
            _ => self.scale().map(|scale| scale.unit_for(values)),
        };
        Column { metric: self, unit }
    }

    /// The scale of the metric's values, when it has units to choose from.
    fn scale(self) -> Option<Scale> {
        match self {
            Metric::Throughput => Some(Scale::BITS),
            Metric::TimeMean
            | Metric::TimeP99
            | Metric::Jitter
            | Metric::TimeP50
            | Metric::TimeP999 => Some(Scale::TIME_US),
            Metric::ClientEfficiency
            | Metric::ServerEfficiency
            | Metric::ClientSystemEfficiency
            | Metric::ServerSystemEfficiency
            | Metric::ClientPinnedEfficiency
            | Metric::ServerPinnedEfficiency => Some(Scale::PER_CPU_S),
            Metric::ClientCpuPerTxn
            | Metric::ServerCpuPerTxn
            | Metric::ClientSystemCpuPerTxn
            | Metric::ServerSystemCpuPerTxn
            | Metric::ClientPinnedCpuPerTxn
            | Metric::ServerPinnedCpuPerTxn => Some(Scale::CPU_US),
            Metric::TransactionRate | Metric::LossRate => None,
        }
    }
}

/// A metric's values written in the one unit of a set of them
/// ([`Metric::column`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    metric: Metric,
    unit: Option<Unit>,
}

impl Column {
    /// `value` in the column's unit: `0.52 ms` in a column of milliseconds.
    pub fn format(&self, value: f64) -> String {
        match (self.metric, self.unit) {
            (Metric::Throughput, Some(u)) => u.format(value * 8.0),
            (_, Some(u)) => u.format(value),
            (m, None) => m.format(value),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35: a column's figures in one unit, request/response
    /// throughput in transactions per second.
    #[test]
    fn a_column_is_written_in_the_unit_of_its_largest_figure() {
        let c = Metric::TimeP99.column([6877.2, 14_300.0]);
        assert_eq!(c.format(6877.2), "6.88 ms");
        assert_eq!(c.format(0.0), "0 ms");
        // Bytes per second, written in bits.
        let c = Metric::Throughput.column([1e6, 12.5e6]);
        assert_eq!(c.format(1e6), "8.0 Mbit/s");
        assert_eq!(c.format(12.5e6), "100.0 Mbit/s");
        let c = Metric::Throughput.column([125e6, 2e8]);
        assert_eq!(c.format(1e6), "0.01 Gbit/s");
        // Without units to choose from: as the metric writes a figure.
        assert_eq!(
            Metric::TransactionRate.column([1.0, 1e6]).format(1500.0),
            "1500/s"
        );
        assert_eq!(Metric::LossRate.column([0.5]).format(0.01), "1.00 %");
        assert_eq!(Metric::Throughput.shown_for(true), Metric::TransactionRate);
        assert_eq!(Metric::Throughput.shown_for(false), Metric::Throughput);
        assert_eq!(Metric::TimeMean.shown_for(true), Metric::TimeMean);
    }

    #[test]
    fn keys_are_the_results_documents_summary_keys() {
        let page = include_str!("../../../docs/results-schema.md");
        for m in Metric::ALL {
            assert!(page.contains(&format!("`{}`", m.key())), "{m}");
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.key()));
            assert_eq!(serde_json::from_str::<Metric>(&json).unwrap(), m);
        }
    }

    #[test]
    fn efficiency_is_better_higher_and_cpu_per_transaction_lower() {
        for m in Metric::ALL {
            let expected =
                if m.key().contains("bytes_per") || m.key().contains("transactions_per_s") {
                    Better::Higher
                } else {
                    Better::Lower
                };
            assert_eq!(m.better(), expected, "{m}");
        }
    }

    #[test]
    fn less_udp_loss_and_jitter_is_better() {
        use crate::significance::relative_difference;
        for m in [Metric::LossRate, Metric::Jitter] {
            assert_eq!(m.better(), Better::Lower);
        }
        // Base lost 2 %, candidate 1 %: the candidate is 50 % better; 3 %: 50 % worse.
        let close = |x: Option<f64>, y: f64| (x.unwrap() - y).abs() < 1e-9;
        assert!(close(relative_difference(0.02, 0.01, Better::Lower), 50.0));
        assert!(close(relative_difference(0.02, 0.03, Better::Lower), -50.0));
        assert_eq!(Metric::LossRate.format(0.0123), "1.23 %");
        assert_eq!(Metric::Jitter.key(), "udp.jitter_us");
        // Read from a run's udp block; absent from other runs.
        let run: Run = serde_json::from_value(serde_json::json!({
            "run": 1, "started": "", "status": "ok",
            "udp": {"rate_bits_per_s": 1e8, "loss_rate": 0.25, "jitter_us": 12.5}
        }))
        .unwrap();
        assert_eq!(Metric::LossRate.value(&run), Some(0.25));
        assert_eq!(Metric::Jitter.value(&run), Some(12.5));
        let tcp: Run =
            serde_json::from_value(serde_json::json!({"run": 1, "started": "", "status": "ok"}))
                .unwrap();
        assert_eq!(Metric::LossRate.value(&tcp), None);
        // UDP request/response: its lost transactions, as the study's retries.
        let rr: Run = serde_json::from_value(serde_json::json!({
            "run": 1, "started": "", "status": "ok",
            "loss": {"lost": 1, "answered": 3, "rate": 0.25}
        }))
        .unwrap();
        assert_eq!(Metric::LossRate.value(&rr), Some(0.25));
        assert_eq!(Metric::Jitter.value(&rr), None);
    }

    #[test]
    fn the_headline_follows_the_cpu_side() {
        assert_eq!(
            Metric::headline(CpuSide::Server),
            [
                Metric::Throughput,
                Metric::TimeMean,
                Metric::ServerSystemEfficiency
            ]
        );
        assert_eq!(
            Metric::headline(CpuSide::Client)[2],
            Metric::ClientSystemEfficiency
        );
        assert_eq!("client".parse::<CpuSide>(), Ok(CpuSide::Client));
        assert!("both".parse::<CpuSide>().is_err());
    }
}
