//! linkperf's results history: every run of every results document kept in
//! one database (an SQLite file by default, or PostgreSQL for a team),
//! points keyed by configuration label, test, mesh pair, metric and an
//! environment fingerprint, so that a change of hardware starts a new series
//! rather than looking like a regression.
//!
//! On top of the store: change points per series (E-divisive means with a
//! t-test, as Apache Otava finds them; [`changes`]), a gate that says
//! whether a candidate run is a significant regression against its series
//! ([`gate`]), and the latest figures as OpenMetrics text for Prometheus
//! ([`openmetrics`]). Users' documentation: `docs/history.md`.
#![warn(missing_docs)]

pub mod changes;
mod error;
mod fingerprint;
pub mod gate;
pub mod openmetrics;
mod records;
mod series;
pub mod store;

pub use error::HistoryError;
pub use fingerprint::{Fingerprint, HostPrint};
pub use records::{record_of, records_of, started_ms, RunRecord};
pub use series::{short, Latest, Point, SeriesInfo, SeriesKey};
pub use store::{History, ImportSummary, SeriesFilter};

/// Where `linkperf history` keeps the history unless told otherwise.
pub const DEFAULT_DB: &str = "linkperf-history.db";
