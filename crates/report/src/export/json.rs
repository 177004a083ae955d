//! JSON: the whole report, schema `linkperf/report/v1` (see docs/reports.md).

use super::Exporter;
use crate::{Report, ReportError};

/// The report as pretty-printed JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "json"
    }

    fn file_name(&self, comparison: bool) -> &'static str {
        if comparison {
            "comparison.json"
        } else {
            "report.json"
        }
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut s = serde_json::to_string_pretty(report).map_err(ReportError::Json)?;
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::small_report;
    use crate::REPORT_SCHEMA;

    #[test]
    fn the_json_is_a_versioned_document() {
        let json = JsonExporter.render(&small_report()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["schema"], REPORT_SCHEMA);
        assert_eq!(v["options"]["threshold_pct"], 2.0);
        assert_eq!(v["options"]["cpu_side"], "server");
        let c = &v["comparisons"][0];
        assert_eq!(
            c["summary"],
            "hs is better in 1 of 2 tests, about the same in 1, worse in 0."
        );
        assert_eq!(c["counts"]["better"], 1);
        let t = &c["tests"][0];
        assert_eq!(t["verdict"], "better");
        let m = &t["metrics"][0];
        assert_eq!(m["metric"], "throughput.bytes_per_s");
        assert_eq!(m["relative_pct"], 50.0);
        assert_eq!(m["method"], "threshold_only");
        assert_eq!(m["outcome"], "better");
        assert_eq!(
            v["workloads"][0]["break_even"][0]["finding"]["kind"],
            "no_crossing"
        );
        assert_eq!(
            v["figures"][0]["tests"][0]["metrics"]["throughput.bytes_per_s"]["mean"],
            1e6
        );
        assert!(v["figures"][0]["tests"][0].get("values").is_none());
    }
}
