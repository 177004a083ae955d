//! Helpers of the chart tests: finding a chart, reading a drawn SVG.

use super::Chart;

/// The chart named `name`.
pub(crate) fn chart<'a>(charts: &'a [Chart], name: &str) -> &'a Chart {
    charts
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no chart {name}"))
}

/// A numeric attribute of an SVG element.
pub(crate) fn attr(n: roxmltree::Node<'_, '_>, a: &str) -> f64 {
    n.attribute(a)
        .unwrap_or_else(|| panic!("{a} missing"))
        .parse()
        .unwrap()
}

/// Every text of a drawn SVG, trimmed.
pub(crate) fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}
