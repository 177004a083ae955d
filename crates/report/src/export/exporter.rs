//! The trait every exporter implements.

use crate::{Report, ReportError};

/// Turns a [`Report`] into one output format.
pub trait Exporter {
    /// The format's name, as `--format` takes it: `md`, `csv`, `json`, `html`.
    fn name(&self) -> &'static str;

    /// The file name the format is written to in a report directory, for a
    /// comparison or for a one-file report.
    fn file_name(&self, comparison: bool) -> &'static str;

    /// The report in this format.
    fn render(&self, report: &Report) -> Result<String, ReportError>;
}
