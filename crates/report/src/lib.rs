//! linkperf's comparisons and reports: what two or more results documents say
//! about the configurations they measured, in the form the studies used.
//!
//! A [`Report`] is built from results documents only (never from engine state):
//! for one file ([`Report::single`]) the absolute figures of every test; for a
//! base and one or more candidates ([`Report::comparison`]) also, per test matched
//! by name, the relative difference of every metric with the sign convention of
//! the product brief (positive = the candidate is better), whether the difference
//! is larger than the noise ([`judge`]), a verdict per test from its three
//! headline metrics ([`Verdict`]) and the summary sentence ("hs is better in 33 of
//! 45 tests, about the same in 2, worse in 10"). Per workload it finds the
//! break-even user count ([`break_even`]) and, per results file, where throughput
//! saturates ([`saturation`]); it points out unstable tests and environments that
//! differ in more than the compared thing ([`Consistency`]). Open-loop tests
//! (offered at a rate) are grouped per workload, protocol and user count
//! instead ([`OpenLoopGroup`]): their transaction time against the offered
//! rate, and the knee where the p99 leaves twice its value at the lowest
//! rate ([`knee`]); they pair only with the tests offered the same rate.
//!
//! The exporters ([`Exporter`]: [`CsvExporter`], [`MarkdownExporter`],
//! [`JsonExporter`], [`HtmlExporter`]) and the charts ([`Chart`], drawn with
//! plotters as SVG and PNG) read the report. [`write_report`] writes all of them
//! into a directory. The methods and their constants are documented for users in
//! `docs/reports.md`.
#![warn(missing_docs)]

mod breakeven;
mod chart;
mod compare;
mod consistency;
mod error;
mod export;
mod figures;
mod health;
mod knee;
mod mesh_page;
pub mod mesh_report;
mod metric;
mod open_loop;
mod output;
mod report;
mod saturation;
mod significance;
mod sufficiency;
pub mod units;

pub use breakeven::{break_even, BreakEven, BreakEvenPoint};
pub use chart::{
    charts, font_status, BarChart, BarSeries, CapacityLine, Chart, ChartKind, ClippedBar, KneeMark,
    LineChart, LinePoint, LineSeries, LoadChart, LoadSeries, Panel, PanelChart, Percentile,
    Purpose, RunLine, Shortfall, ValueUnit, CLIP_PCT, LOG_RATIO,
};
pub use compare::{
    compare_tests, CandidateComparison, MetricComparison, MissingMetric, NotCompared,
    TestComparison, Verdict, VerdictCounts,
};
pub use consistency::{Consistency, EnvDifference, FlaggedTest};
pub use error::ReportError;
pub use export::{CsvExporter, Exporter, HtmlExporter, JsonExporter, MarkdownExporter};
pub use figures::{FileFigures, LinkFigures, OfferedFigures, TestFigures, WorkloadKey};
pub use health::{
    health, Health, Reference, LOOPBACK_MIN_STREAM_BITS_PER_S, LOOPBACK_MIN_TRANSACTIONS_PER_S,
};
pub use knee::{knee, Knee, LoadPoint, KNEE_P99_FACTOR};
pub use mesh_report::{ClassComparison, MeshReport};
pub use metric::{Better, Column, CpuSide, Metric};
pub use open_loop::{LoadCurve, OpenLoopGroup};
pub use output::{write_mesh_report, write_report, MeshWritten, Written};
pub use report::{
    CapacityOrigin, FileInfo, Options, Report, Source, SufficiencyNote, WorkloadReport,
    REPORT_SCHEMA,
};
pub use saturation::{
    saturation, Saturation, SaturationCause, SaturationPoint, CAPACITY_MARGIN,
    SATURATION_THROUGHPUT_GROWTH, SATURATION_TIME_GROWTH,
};
pub use significance::{
    judge, relative_difference, Judgement, Method, Outcome, DEFAULT_THRESHOLD_PCT,
    SIGNIFICANCE_LEVEL,
};
pub use sufficiency::{sufficiency, Sufficiency, SufficiencyPoint, DROP_SHARE, WIRE_SHARE};
pub use units::parse_capacity;

#[cfg(test)]
mod testdata;
#[cfg(test)]
mod tests;
