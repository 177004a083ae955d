//! Charts, drawn with plotters as SVG and PNG: per workload the study's figure
//! (grouped bars of the three relative differences against users), an overview
//! of every test, and the absolute throughput and transaction time against
//! users, one line per results file.

mod draw;
mod font;
mod spec;
mod text;

pub use font::font_status;
pub use spec::{charts, BarChart, BarSeries, Chart, ChartKind, LineChart, LinePoint, LineSeries};
