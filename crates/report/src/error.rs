use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Why a report could not be made or written. Messages read after "failed to …".
#[derive(Debug, Error)]
pub enum ReportError {
    /// A link capacity given as text could not be read.
    #[error("read capacity {input:?}: {reason}")]
    Capacity {
        /// The text given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No font file was found to lay out the charts' text.
    #[error("draw charts: the font LINKPERF_FONT names cannot be used: {looked}; unset it to use the embedded DejaVu Sans")]
    NoFont {
        /// The file and why it cannot be used.
        looked: String,
    },
    /// plotters could not draw a chart.
    #[error("draw chart {chart}: {detail}")]
    Chart {
        /// The chart's file name, without extension.
        chart: String,
        /// What plotters said.
        detail: String,
    },
    /// A chart's bitmap could not be encoded as PNG.
    #[error("encode chart {chart} as PNG: {detail}")]
    Png {
        /// The chart's file name, without extension.
        chart: String,
        /// What the encoder said.
        detail: String,
    },
    /// The report could not be turned into JSON.
    #[error("encode the report as JSON: {0}")]
    Json(serde_json::Error),
    /// Creating the output directory or writing a file in it failed.
    #[error("write {path}: {error}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said (part of the message, not a separate cause).
        error: io::Error,
    },
}
