//! Writing a report into a directory: `index.html`, one SVG and one PNG per
//! chart, and the CSV, Markdown and JSON exports.

use std::fs;
use std::path::{Path, PathBuf};

use crate::{
    charts, font_status, CsvExporter, Exporter, HtmlExporter, JsonExporter, MarkdownExporter,
    Report, ReportError,
};

/// What [`write_report`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// What could not be done but did not stop the rest (charts without a font).
    pub warnings: Vec<String>,
}

/// Writes the report into `dir` (created if missing): `index.html`, a `.svg`
/// and a `.png` per chart, and `comparison.{csv,md,json}` (`report.*` for a
/// one-file report). Without a font for the charts' text, the charts are left
/// out (the HTML says so) and a warning is returned; everything else is
/// written.
pub fn write_report(report: &Report, dir: &Path) -> Result<Written, ReportError> {
    fs::create_dir_all(dir).map_err(|error| ReportError::Write {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut written = Written::default();
    let mut put = |name: &str, bytes: &[u8]| -> Result<(), ReportError> {
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|error| ReportError::Write {
            path: path.clone(),
            error,
        })?;
        written.files.push(path);
        Ok(())
    };
    let comparison = report.is_comparison();
    let exporters: [&dyn Exporter; 4] = [
        &HtmlExporter,
        &CsvExporter,
        &MarkdownExporter,
        &JsonExporter,
    ];
    for e in exporters {
        put(e.file_name(comparison), e.render(report)?.as_bytes())?;
    }
    let mut warnings = Vec::new();
    match font_status() {
        Ok(_) => {
            for chart in charts(report) {
                put(&format!("{}.svg", chart.name), chart.svg()?.as_bytes())?;
                put(&format!("{}.png", chart.name), &chart.png()?)?;
            }
        }
        Err(e) => warnings.push(format!("charts not drawn: failed to {e}")),
    }
    written.warnings = warnings;
    Ok(written)
}

/// What [`write_mesh_report`] wrote, and the report in words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeshWritten {
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// What could not be done but did not stop the rest.
    pub warnings: Vec<String>,
    /// The report in a few lines ([`crate::MeshReport::text`]).
    pub text: String,
}

/// Writes a mesh's report into `dir`: `index.html` (heatmaps, slowest pairs,
/// per-node totals, the class comparisons' summaries), `mesh-report.json`,
/// `summary.txt`, and each class comparison's full report (as
/// [`write_report`] writes it) in a sub-directory.
pub fn write_mesh_report(
    doc: &linkperf_results::ResultsDocument,
    dir: &Path,
) -> Result<MeshWritten, ReportError> {
    let report = crate::MeshReport::of(doc, crate::Options::default());
    fs::create_dir_all(dir).map_err(|error| ReportError::Write {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut written = MeshWritten {
        text: report.text(),
        ..MeshWritten::default()
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| ReportError::Write {
        path: dir.join("mesh-report.json"),
        error: std::io::Error::other(e),
    })?;
    for (name, bytes) in [
        (
            "index.html",
            crate::mesh_page::mesh_page(&report).into_bytes(),
        ),
        ("mesh-report.json", json.into_bytes()),
        ("summary.txt", written.text.clone().into_bytes()),
    ] {
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|error| ReportError::Write {
            path: path.clone(),
            error,
        })?;
        written.files.push(path);
    }
    for c in &report.comparisons {
        let w = write_report(&c.report, &dir.join(&c.dir))?;
        written.files.extend(w.files);
        written.warnings.extend(w.warnings);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{small, small_report};
    use crate::{Options, Source};

    #[test]
    fn a_comparison_directory_has_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        let w = write_report(&small_report(), &out).unwrap();
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "comparison.csv",
                "comparison.json",
                "comparison.md",
                "index.html",
                "overview-hs.png",
                "overview-hs.svg",
                "relative-hs-rr1c-1x1.png",
                "relative-hs-rr1c-1x1.svg",
                "throughput-rr1c-1x1.png",
                "throughput-rr1c-1x1.svg",
                "timeseries-rr1c-1x1.png",
                "timeseries-rr1c-1x1.svg",
                "transaction-time-rr1c-1x1.png",
                "transaction-time-rr1c-1x1.svg",
            ]
        );
        assert_eq!(w.files.len(), names.len());
    }

    #[test]
    fn a_one_file_report_has_absolute_charts_only() {
        let (osa, _) = small();
        let r = Report::single(Source::new("osa.json", &osa), Options::default());
        let dir = tempfile::tempdir().unwrap();
        write_report(&r, dir.path()).unwrap();
        for name in [
            "index.html",
            "report.csv",
            "report.md",
            "report.json",
            "throughput-rr1c-1x1.svg",
            "transaction-time-rr1c-1x1.png",
        ] {
            assert!(dir.path().join(name).is_file(), "{name}");
        }
        assert!(!dir.path().join("comparison.csv").exists());
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("relative")
        }));
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let e = write_report(&small_report(), &file.join("sub")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("write {}", file.join("sub").display())),
            "{e}"
        );
    }
}
