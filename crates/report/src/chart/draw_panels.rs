//! Drawing small multiples ([`PanelChart`]): the title and the files'
//! legend once, then a grid of panels, each a test with its own axes.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axis::ValueAxis;
use super::draw::{colour, frame, y_area, DrawResult, Key, Swatch};
use super::draw::{PANEL_LABEL_SIZE, PANEL_TITLE_SIZE};
use super::spec::{Panel, PanelChart};

pub(super) fn panels<DB: DrawingBackend>(
    title: &str,
    p: &PanelChart,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    let keys: Vec<Key> = p
        .files
        .iter()
        .map(|(label, c)| Key {
            label: label.clone(),
            swatch: Swatch::Line(colour(c)),
        })
        .chain(std::iter::once(Key {
            label: "one line per ok run".into(),
            swatch: Swatch::None,
        }))
        .collect();
    let area = frame(root, title, &keys)?;
    let columns = p.columns.max(1) as usize;
    let rows = p.panels.len().div_ceil(columns).max(1);
    let cells = area.split_evenly((rows, columns));
    for (cell, panel) in cells.iter().zip(&p.panels) {
        one(cell, panel, p)?;
    }
    Ok(())
}

/// A readable number of seconds: `0`, `1.5`, `10`.
fn seconds(v: f64) -> String {
    let s = format!("{v:.1}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn one<DB: DrawingBackend>(
    cell: &DrawingArea<DB, Shift>,
    panel: &Panel,
    p: &PanelChart,
) -> DrawResult<DB> {
    let values: Vec<f64> = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|pt| pt.1))
        .collect();
    let axis = ValueAxis::fit(&values, panel.log_y);
    let end = panel
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|pt| pt.0))
        .fold(0.0f64, f64::max);
    let time = ValueAxis::linear(0.0, (end + 0.5).max(1.0));
    let unit = p.unit;
    let y_fmt = |v: &f64| unit.format(*v);
    let y_area = y_area(cell, axis.ticks().iter().map(&y_fmt), PANEL_LABEL_SIZE, 60)?;
    let caption = if panel.log_y {
        format!("{} (log scale)", panel.title)
    } else {
        panel.title.clone()
    };
    let mut ctx = ChartBuilder::on(cell)
        .caption(caption, ("sans-serif", PANEL_TITLE_SIZE))
        .margin(10)
        .x_label_area_size(48)
        .y_label_area_size(y_area - 20)
        .build_cartesian_2d(time, axis)?;
    let x_fmt = |v: &f64| seconds(*v);
    ctx.configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(220, 220, 220))
        .x_desc(p.x_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", PANEL_LABEL_SIZE))
        .axis_desc_style(("sans-serif", PANEL_LABEL_SIZE))
        .draw()?;
    for l in &panel.lines {
        let c = colour(&l.colour);
        ctx.draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))?;
        ctx.draw_series(
            l.points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, c.filled())),
        )?;
    }
    Ok(())
}
