//! Drawing a [`LoadChart`]: transaction time against offered load, both
//! axes logarithmic; a line per file and percentile (the file's colour;
//! p50 thin, p99 thick, p99.9 dashed), each file's knee a vertical dashed
//! line, a shortfall a hollow marker at the achieved rate joined to its
//! offered rate's p99.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{ValueAxis, ValueUnit};
use super::draw::{colour, frame, y_area, DrawResult, Key, Swatch};
use super::draw::{AXIS_DESC_SIZE, LABEL_SIZE, MARGIN, SMALL_LABEL_SIZE, Y_AREA};
use super::load::{LoadChart, Percentile};

/// Grey of the legend's line styles (lighter than the base's lines).
const STYLE_GREY: RGBColor = RGBColor(140, 140, 140);

/// A percentile's line: its width, whether dashed, and its markers' size.
fn style(p: Percentile) -> (u32, bool, u32) {
    match p {
        Percentile::P50 => (2, false, 4),
        Percentile::P99 => (4, false, 6),
        Percentile::P999 => (2, true, 5),
    }
}

fn keys(l: &LoadChart) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    let mut files: Vec<&str> = Vec::new();
    for s in &l.series {
        if !files.contains(&s.file.as_str()) {
            files.push(&s.file);
            keys.push(Key {
                label: s.file.clone(),
                swatch: Swatch::Line(colour(&s.colour)),
            });
        }
    }
    for (p, how) in [
        (Percentile::P50, "thin"),
        (Percentile::P99, "thick"),
        (Percentile::P999, "dashed"),
    ] {
        let (width, dashed, _) = style(p);
        keys.push(Key {
            label: format!("{}: {how}", p.label()),
            swatch: Swatch::Stroke {
                colour: STYLE_GREY,
                width,
                dashed,
            },
        });
    }
    if !l.shortfalls.is_empty() {
        keys.push(Key {
            label: "achieved where short of offered (at its p99)".into(),
            swatch: Swatch::Ring(STYLE_GREY),
        });
    }
    keys
}

pub(super) fn load<DB: DrawingBackend>(
    title: &str,
    l: &LoadChart,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    let mut xs: Vec<f64> = Vec::new();
    let mut ys: Vec<f64> = Vec::new();
    for s in &l.series {
        for &(x, y) in &s.points {
            xs.push(x);
            ys.push(y);
        }
    }
    for s in &l.shortfalls {
        xs.push(s.achieved_per_s);
        ys.push(s.p99_us);
    }
    let x_axis = ValueAxis::fit(&xs, true);
    let y_axis = ValueAxis::fit(&ys, true);
    let area = frame(root, &format!("{title}, log scales"), &keys(l))?;
    let x_fmt = |v: &f64| ValueUnit::TransactionsPerSecond.format(*v);
    let y_fmt = |v: &f64| ValueUnit::Microseconds.format(*v);
    let y_area = y_area(&area, y_axis.ticks().iter().map(&y_fmt), LABEL_SIZE, Y_AREA)?;
    // Room on the right for the last rate's label, centred on the edge.
    let mut ctx = ChartBuilder::on(&area)
        .margin(MARGIN)
        .margin_right(MARGIN + 30)
        .x_label_area_size(75)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x_axis, y_axis)?;
    ctx.configure_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .x_desc(l.x_label.as_str())
        .y_desc(l.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", AXIS_DESC_SIZE))
        .draw()?;

    // The knees, behind the lines.
    for k in &l.knees {
        ctx.plotting_area().draw(&DashedPathElement::new(
            vec![(k.offered_per_s, y_axis.lo), (k.offered_per_s, y_axis.hi)],
            8,
            6,
            colour(&k.colour).stroke_width(2),
        ))?;
    }
    for s in &l.series {
        let c = colour(&s.colour);
        let (width, dashed, marker) = style(s.percentile);
        if dashed {
            ctx.plotting_area().draw(&DashedPathElement::new(
                s.points.clone(),
                10,
                6,
                c.stroke_width(width),
            ))?;
        } else {
            ctx.draw_series(LineSeries::new(
                s.points.iter().copied(),
                c.stroke_width(width),
            ))?;
        }
        match s.percentile {
            Percentile::P999 => ctx.draw_series(
                s.points
                    .iter()
                    .map(|&p| TriangleMarker::new(p, marker, c.filled())),
            )?,
            _ => ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, marker, c.filled())))?,
        };
    }
    // Shortfalls: where the load really was, joined to where it was offered.
    let small = TextStyle::from(("sans-serif", SMALL_LABEL_SIZE).into_font());
    for s in &l.shortfalls {
        let c = colour(&s.colour);
        ctx.plotting_area().draw(&DashedPathElement::new(
            vec![(s.achieved_per_s, s.p99_us), (s.offered_per_s, s.p99_us)],
            4,
            4,
            c.stroke_width(2),
        ))?;
        ctx.draw_series(std::iter::once(Circle::new(
            (s.achieved_per_s, s.p99_us),
            8,
            c.stroke_width(2),
        )))?;
        let (x, y) = ctx.backend_coord(&(s.achieved_per_s, s.p99_us));
        root.draw_text(
            &format!(
                "achieved {}",
                ValueUnit::TransactionsPerSecond.format(s.achieved_per_s)
            ),
            &small.color(&c).pos(Pos::new(HPos::Right, VPos::Center)),
            (x - 12, y),
        )?;
    }
    // The knees' labels at the top, one under the other.
    for (i, k) in l.knees.iter().enumerate() {
        let (x, top) = ctx.backend_coord(&(k.offered_per_s, y_axis.hi));
        let (tw, th) = root.estimate_text_size(&k.label, &small)?;
        let y = top + 6 + i as i32 * (th as i32 + 8);
        root.draw(&Rectangle::new(
            [(x + 3, y - 2), (x + 8 + tw as i32, y + th as i32 + 3)],
            WHITE.mix(0.85).filled(),
        ))?;
        root.draw_text(
            &k.label,
            &small
                .color(&colour(&k.colour))
                .pos(Pos::new(HPos::Left, VPos::Top)),
            (x + 6, y),
        )?;
    }
    Ok(())
}
