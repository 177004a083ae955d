//! The exporters, one per file, behind one trait.

mod csv;
mod exporter;
mod html;
mod html_environment;
mod html_open_loop;
mod html_tables;
mod json;
mod markdown;

pub use self::csv::CsvExporter;
pub use self::exporter::Exporter;
pub use self::html::HtmlExporter;
pub use self::json::JsonExporter;
pub use self::markdown::MarkdownExporter;
pub(crate) use html::{esc, outcome_class, verdict_class};

pub(crate) use html_tables::placement as describe_placement;
