//! Charts, drawn with plotters as SVG and PNG: per workload the study's figure
//! (grouped bars of the three relative differences against users), with
//! several candidates their throughput differences side by side, an
//! overview of every test, the absolute throughput and transaction time
//! against users (one line per results file, logarithmic when they span
//! more than 30 times, with the links' capacities), the per-second
//! throughput of every test as small multiples, and for open-loop tests
//! the transaction time's percentiles against the offered load.

mod absolute;
mod axis;
mod draw;
mod draw_load;
mod draw_panels;
mod font;
mod load;
mod relative;
mod spec;
#[cfg(test)]
mod test_support;
mod text;
mod timeseries;

pub use axis::{ValueUnit, LOG_RATIO};
pub use font::font_status;
pub use load::{KneeMark, LoadChart, LoadSeries, Percentile, Shortfall};
pub use relative::{ClippedBar, CLIP_PCT};
pub use spec::{
    charts, BarChart, BarSeries, CapacityLine, Chart, ChartKind, LineChart, LinePoint, LineSeries,
    Panel, PanelChart, Purpose, RunLine,
};
