//! The plain comparison table `linkperf lab run` prints when `linkperf
//! compare` is not available: throughput and transactions per second of every
//! test, one column per configuration; and, for `--pairs N`, every test's
//! figures per pair and together. Text only, from results documents.

use std::fmt::Write as _;

use linkperf_results::{ResultsDocument, RunStatus};

/// Mean over the ok runs of a test, of one throughput figure.
fn mean_of(
    doc: &ResultsDocument,
    test: &str,
    f: fn(&linkperf_results::Throughput) -> f64,
) -> Option<f64> {
    let t = doc.find_test(test)?;
    let xs: Vec<f64> = t
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Ok)
        .filter_map(|r| r.throughput.as_ref().map(f))
        .collect();
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Throughput (payload Gbit/s) and transactions per second of every test, one
/// column per configuration, the first being the base.
pub fn throughput_table(docs: &[(String, ResultsDocument)]) -> String {
    let mut tests: Vec<String> = Vec::new();
    for (_, d) in docs {
        for t in &d.tests {
            if !tests.contains(&t.name) {
                tests.push(t.name.clone());
            }
        }
    }
    let w = tests.iter().map(String::len).max().unwrap_or(4).max(4);
    let cols: Vec<usize> = docs.iter().map(|(n, _)| n.len().max(12)).collect();
    let mut s = String::new();
    type Figure = fn(&linkperf_results::Throughput) -> f64;
    type Format = fn(f64) -> String;
    let sections: [(&str, Figure, Format); 2] = [
        (
            "throughput, payload Gbit/s",
            |t| t.bytes_per_s,
            |b| format!("{:.3}", b * 8.0 / 1e9),
        ),
        (
            "transactions per second",
            |t| t.transactions_per_s,
            |x| format!("{x:.0}"),
        ),
    ];
    for (title, figure, fmt) in sections {
        let _ = writeln!(
            s,
            "linkperf lab: {title} (mean of ok runs; base {})",
            docs.first().map_or("", |(n, _)| n.as_str())
        );
        let _ = write!(s, "{:<w$}", "test");
        for ((n, _), c) in docs.iter().zip(&cols) {
            let _ = write!(s, "  {n:>c$}");
        }
        s.push('\n');
        for t in &tests {
            let _ = write!(s, "{t:<w$}");
            for ((_, d), c) in docs.iter().zip(&cols) {
                let cell = mean_of(d, t, figure).map_or_else(|| "-".to_string(), fmt);
                let _ = write!(s, "  {cell:>c$}");
            }
            s.push('\n');
        }
        s.push('\n');
    }
    s
}

/// Payload Gbit/s and transactions per second of every test, one line per
/// pair (`pairs[k]` is pair k+1's document) and one for the pairs together
/// (`together`, their aggregate).
pub fn pairs_table(name: &str, together: &ResultsDocument, pairs: &[ResultsDocument]) -> String {
    let w = together
        .tests
        .iter()
        .chain(pairs.iter().flat_map(|p| &p.tests))
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let rows: Vec<(String, &ResultsDocument)> = pairs
        .iter()
        .enumerate()
        .map(|(k, d)| (format!("pair {}", k + 1), d))
        .chain(std::iter::once(("together".to_string(), together)))
        .collect();
    let who = rows.iter().map(|(r, _)| r.len()).max().unwrap_or(8);
    let mut s = format!(
        "linkperf lab: {name}, {} pairs through one link (mean of ok runs)\n",
        pairs.len()
    );
    let _ = writeln!(
        s,
        "{:<w$}  {:<who$}  {:>8}  {:>14}",
        "test", "", "Gbit/s", "transactions/s"
    );
    // The aggregate's tests are the pairs' in the same order, named after
    // all their users together (`--2` for two pairs of 1 user).
    for (i, t) in together.tests.iter().enumerate() {
        let per_pair = pairs
            .first()
            .and_then(|p| p.tests.get(i))
            .map_or(t.name.as_str(), |p| p.name.as_str());
        for (row, d) in &rows {
            let test = if std::ptr::eq(*d, together) {
                t.name.as_str()
            } else {
                per_pair
            };
            let gbit = mean_of(d, test, |x| x.bytes_per_s)
                .map_or_else(|| "-".to_string(), |b| format!("{:.3}", b * 8.0 / 1e9));
            let tps = mean_of(d, test, |x| x.transactions_per_s)
                .map_or_else(|| "-".to_string(), |x| format!("{x:.0}"));
            let _ = writeln!(s, "{test:<w$}  {row:<who$}  {gbit:>8}  {tps:>14}");
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use linkperf_results::{failed_run, TestConfig};
    use linkperf_workload::{Placement, Protocol, TestSpec};

    use super::*;

    fn doc(label: &str, gbit: f64, tps: f64) -> ResultsDocument {
        let mut d = ResultsDocument::new(label.into(), Vec::new());
        let spec = TestSpec::new(
            "str-writex30k".parse().unwrap(),
            Protocol::Tcp,
            1,
            Duration::from_secs(1),
        );
        let cfg = TestConfig::from_spec(
            &spec,
            "s".into(),
            Placement::with_threads(1),
            Placement::with_threads(1),
        );
        for _ in 0..2 {
            let mut r = failed_run(1, String::new(), RunStatus::Ok, String::new());
            r.throughput = Some(linkperf_results::Throughput {
                bytes_per_s: gbit * 1e9 / 8.0,
                tx_bytes_per_s: 0.0,
                rx_bytes_per_s: gbit * 1e9 / 8.0,
                transactions_per_s: tps,
                counted_at: linkperf_results::CountedAt::receivers(),
            });
            d.push_run(&spec, cfg.clone(), r);
        }
        d.push_run(
            &spec,
            cfg,
            failed_run(3, String::new(), RunStatus::Failed, "x".into()),
        );
        d
    }

    #[test]
    fn the_pairs_table_has_a_line_per_pair_and_one_for_them_together() {
        let t = pairs_table(
            "veth-1g",
            &doc("veth-1g", 0.95, 3900.0),
            &[
                doc("veth-1g-pair1", 0.5, 2000.0),
                doc("veth-1g-pair2", 0.45, 1900.0),
            ],
        );
        assert_eq!(
            t,
            [
                "linkperf lab: veth-1g, 2 pairs through one link (mean of ok runs)",
                "test                          Gbit/s  transactions/s",
                "str-writex30k--1  pair 1       0.500            2000",
                "str-writex30k--1  pair 2       0.450            1900",
                "str-writex30k--1  together     0.950            3900",
                "",
                "",
            ]
            .join("\n")
        );
        // A pair without the test (it failed to start) shows a dash.
        let t = pairs_table(
            "x",
            &doc("x", 1.0, 1.0),
            &[ResultsDocument::new("x-pair1".into(), Vec::new())],
        );
        assert!(
            t.contains("str-writex30k--1  pair 1           -               -\n"),
            "{t}"
        );
    }

    #[test]
    fn the_plain_table_has_a_column_per_configuration() {
        let t = throughput_table(&[
            ("veth".into(), doc("veth", 8.0, 32000.0)),
            ("veth-1g".into(), doc("veth-1g", 0.95, 3900.0)),
        ]);
        assert_eq!(
            t,
            [
                "linkperf lab: throughput, payload Gbit/s (mean of ok runs; base veth)",
                "test                      veth       veth-1g",
                "str-writex30k--1         8.000         0.950",
                "",
                "linkperf lab: transactions per second (mean of ok runs; base veth)",
                "test                      veth       veth-1g",
                "str-writex30k--1         32000          3900",
                "",
                "",
            ]
            .join("\n")
        );
    }
}
