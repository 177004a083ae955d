//! Drawing a [`Chart`] with plotters, once for any backend: SVG text, or an
//! RGB bitmap encoded as PNG.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

use super::axis::{ValueAxis, ValueUnit};
use super::font::chart_font;
use super::spec::{BarChart, Chart, ChartKind, LineChart};
use super::text::TextBackend;
use crate::ReportError;

/// Font sizes, pixels: readable on a 1200 px page.
pub(super) const TITLE_SIZE: u32 = 28;
pub(super) const AXIS_DESC_SIZE: u32 = 20;
pub(super) const LABEL_SIZE: u32 = 19;
pub(super) const SMALL_LABEL_SIZE: u32 = 16;
const LEGEND_SIZE: u32 = 19;

impl Chart {
    /// The chart as an SVG document.
    pub fn svg(&self) -> Result<String, ReportError> {
        let font = chart_font()?;
        let mut out = String::new();
        {
            let svg = SVGBackend::with_string(&mut out, (self.width, self.height));
            let root = TextBackend::measuring(svg, font).into_drawing_area();
            draw(self, &root).map_err(|e| self.error(e))?;
            root.present().map_err(|e| self.error(e))?;
        }
        Ok(out)
    }

    /// The chart as a PNG image.
    pub fn png(&self) -> Result<Vec<u8>, ReportError> {
        let font = chart_font()?;
        let (w, h) = (self.width as usize, self.height as usize);
        let mut rgb = vec![0u8; w * h * 3];
        {
            let bitmap = BitMapBackend::with_buffer(&mut rgb, (self.width, self.height));
            let root = TextBackend::drawing(bitmap, font).into_drawing_area();
            draw(self, &root).map_err(|e| self.error(e))?;
            root.present().map_err(|e| self.error(e))?;
        }
        let mut png_bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut png_bytes, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let png_error = |e: png::EncodingError| ReportError::Png {
            chart: self.name.clone(),
            detail: e.to_string(),
        };
        let mut writer = encoder.write_header().map_err(png_error)?;
        writer.write_image_data(&rgb).map_err(png_error)?;
        writer.finish().map_err(png_error)?;
        Ok(png_bytes)
    }

    fn error(&self, e: impl std::fmt::Display) -> ReportError {
        ReportError::Chart {
            chart: self.name.clone(),
            detail: e.to_string(),
        }
    }
}

pub(super) type DrawResult<DB> =
    Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Font sizes of the small multiples, pixels.
pub(super) const PANEL_TITLE_SIZE: u32 = 19;
pub(super) const PANEL_LABEL_SIZE: u32 = 15;
/// Font size of a clipped bar's value, pixels.
const CLIP_LABEL_SIZE: u32 = 16;

/// Smallest width of the area left of the plot for the Y labels and
/// description, pixels; wider when the tick labels are.
pub(super) const Y_AREA: u32 = 100;
/// Margin around the plot, pixels.
pub(super) const MARGIN: u32 = 18;
/// Height of one legend row, pixels.
const LEGEND_ROW: u32 = 28;

fn draw<DB: DrawingBackend>(chart: &Chart, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    match &chart.kind {
        ChartKind::Bars(b) => bars(&chart.title, b, root),
        ChartKind::Lines(l) => lines(&chart.title, l, root),
        ChartKind::Panels(p) => super::draw_panels::panels(&chart.title, p, root),
        ChartKind::Load(l) => super::draw_load::load(&chart.title, l, root),
    }
}

/// How a legend entry is marked.
pub(super) enum Swatch {
    /// A filled box (bars).
    Fill(RGBAColor),
    /// A line (lines).
    Line(RGBColor),
    /// A line of the given width, dashed or not.
    Stroke {
        /// Its colour.
        colour: RGBColor,
        /// Its width, pixels.
        width: u32,
        /// Whether it is dashed.
        dashed: bool,
    },
    /// A hollow circle (a marker).
    Ring(RGBColor),
    /// Nothing: a note.
    None,
}

/// One legend entry.
pub(super) struct Key {
    pub(super) label: String,
    pub(super) swatch: Swatch,
}

/// Draws the title and, below it, the legend in rows (outside the plot, so
/// it never hides a bar or a point); returns the area left for the plot.
pub(super) fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    keys: &[Key],
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let body = root
        .margin(10, 0, 0, 0)
        .titled(title, ("sans-serif", TITLE_SIZE))?;
    let font = TextStyle::from(("sans-serif", LEGEND_SIZE).into_font());
    let (width, _) = body.dim_in_pixel();
    let left = (Y_AREA + MARGIN) as i32;
    // Lay the entries out left to right, wrapping at the right edge.
    let mut rows: Vec<Vec<(i32, &Key)>> = vec![Vec::new()];
    let mut x = left;
    for k in keys {
        let (tw, _) = body.estimate_text_size(&k.label, &font)?;
        let swatch = if matches!(k.swatch, Swatch::None) {
            0
        } else {
            30
        };
        let w = swatch + tw as i32 + 28;
        if x + w > width as i32 - MARGIN as i32 && x > left {
            rows.push(Vec::new());
            x = left;
        }
        rows.last_mut().expect("never empty").push((x, k));
        x += w;
    }
    let (legend, plot) = body.split_vertically(rows.len() as u32 * LEGEND_ROW + 6);
    for (r, row) in rows.iter().enumerate() {
        let y = r as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        for (x, k) in row {
            let text_x = match k.swatch {
                Swatch::Fill(c) => {
                    legend.draw(&Rectangle::new([(*x, y - 8), (*x + 20, y + 8)], c.filled()))?;
                    *x + 30
                }
                Swatch::Line(c) => {
                    let line = PathElement::new(vec![(*x, y), (*x + 24, y)], c.stroke_width(3));
                    legend.draw(&line)?;
                    *x + 30
                }
                Swatch::Stroke {
                    colour,
                    width,
                    dashed,
                } => {
                    let style = colour.stroke_width(width);
                    if dashed {
                        legend.draw(&DashedPathElement::new(
                            vec![(*x, y), (*x + 24, y)],
                            6,
                            4,
                            style,
                        ))?;
                    } else {
                        legend.draw(&PathElement::new(vec![(*x, y), (*x + 24, y)], style))?;
                    }
                    *x + 30
                }
                Swatch::Ring(c) => {
                    legend.draw(&Circle::new((*x + 12, y), 6, c.stroke_width(2)))?;
                    *x + 30
                }
                Swatch::None => *x,
            };
            let style = font.pos(Pos::new(HPos::Left, VPos::Center));
            legend.draw_text(&k.label, &style, (text_x, y))?;
        }
    }
    Ok(plot)
}

/// `#rrggbb` as a colour (grey if malformed).
pub(super) fn colour(hex: &str) -> RGBColor {
    let byte = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|s| u8::from_str_radix(s, 16).ok())
            .unwrap_or(128)
    };
    RGBColor(byte(1), byte(3), byte(5))
}

/// The width of the area left of a plot whose Y tick labels are `labels`:
/// the longest label, and room for the axis description standing on end.
pub(super) fn y_area<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: impl IntoIterator<Item = String>,
    size: u32,
    least: u32,
) -> Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let style = TextStyle::from(("sans-serif", size).into_font());
    let mut widest = 0;
    for l in labels {
        widest = widest.max(area.estimate_text_size(&l, &style)?.0);
    }
    Ok((widest + 45).max(least))
}

/// An X axis of categories: category `i` is centred at `i`, the axis runs
/// from half a category before the first to half after the last, and the
/// tick marks (bold key points) are the categories' centres.
struct Categories {
    n: usize,
}

impl Ranged for Categories {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (lo, hi) = (-0.5, self.n as f64 - 0.5);
        let pixels = f64::from(limit.1 - limit.0);
        limit.0 + ((value - lo) / (hi - lo) * pixels).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            (0..self.n).map(|i| i as f64).collect()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.n as f64 - 0.5
    }
}

/// The category name at axis position `x`.
fn category(categories: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    categories.get(i as usize).cloned().unwrap_or_default()
}

/// Where the values of clipped bars are written: their text and how much
/// room they need beyond the clip, pixels.
struct ClipLabels {
    /// Whether they stand on end (the bars are narrower than the text).
    vertical: bool,
    /// Room each needs beyond the end of its bar, pixels.
    room: u32,
}

fn clip_labels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    b: &BarChart,
    slot_px: f64,
) -> Result<ClipLabels, DrawingAreaErrorKind<DB::ErrorType>> {
    let style = TextStyle::from(("sans-serif", CLIP_LABEL_SIZE).into_font());
    let mut widest = 0u32;
    for c in b.clipped() {
        widest = widest.max(
            area.estimate_text_size(&ValueUnit::Percent.format(c.value), &style)?
                .0,
        );
    }
    let vertical = f64::from(widest) + 4.0 > slot_px;
    Ok(ClipLabels {
        vertical,
        room: if vertical {
            widest + 12
        } else {
            CLIP_LABEL_SIZE + 12
        },
    })
}

/// A bar chart's key: its series, what a pale bar means, its note, and
/// what a cut bar means when one is `clipped`.
fn bar_keys(b: &BarChart, clipped: bool) -> Vec<Key> {
    let mut keys: Vec<Key> = b
        .series
        .iter()
        .map(|s| Key {
            label: s.label.clone(),
            swatch: Swatch::Fill(colour(&s.colour).to_rgba()),
        })
        .collect();
    keys.push(Key {
        label: "pale: within the noise".into(),
        swatch: Swatch::Fill(RGBColor(128, 128, 128).mix(0.35)),
    });
    if let Some(note) = &b.note {
        keys.push(Key {
            label: note.clone(),
            swatch: Swatch::None,
        });
    }
    if clipped {
        keys.push(Key {
            label: format!(
                "bars beyond ±{:.0}% cut (≈), their value written",
                b.clip_pct
            ),
            swatch: Swatch::None,
        });
    }
    keys
}

fn bars<DB: DrawingBackend>(
    title: &str,
    b: &BarChart,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    let clipped = b.clipped();
    let keys = bar_keys(b, !clipped.is_empty());
    let area = frame(root, title, &keys)?;
    let n = b.categories.len().max(1);
    let k = b.series.len().max(1) as f64;
    let vertical = TextStyle::from(("sans-serif", SMALL_LABEL_SIZE).into_font());
    let x_area = if b.vertical_labels {
        let longest = b
            .categories
            .iter()
            .map(|c| area.estimate_text_size(c, &vertical).map(|(w, _)| w))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .max()
            .unwrap_or(0);
        longest + 60
    } else {
        75
    };
    // The plot's size, to make room for the clipped bars' values.
    let (aw, ah) = area.dim_in_pixel();
    let plot_w = f64::from(aw.saturating_sub(Y_AREA + 2 * MARGIN).max(100));
    let plot_h = f64::from(ah.saturating_sub(x_area + 2 * MARGIN).max(100));
    let group = 0.8;
    let labels = clip_labels(&area, b, plot_w / n as f64 * group / k)?;
    let (lo0, hi0) = b.span();
    let span = (hi0 - lo0).max(1.0);
    let above = clipped.iter().any(|c| c.value > 0.0);
    let below = clipped.iter().any(|c| c.value < 0.0);
    let sides = f64::from(u8::from(above) + u8::from(below));
    let room = f64::from(labels.room);
    // Value units per pixel once the labels' room is taken from the plot.
    let per_px = span / (plot_h - sides * room).max(plot_h / 3.0);
    let pad = |clip: bool| if clip { room * per_px } else { span * 0.08 };
    let lo = if lo0 < 0.0 { lo0 - pad(below) } else { 0.0 };
    let hi = if hi0 > 0.0 {
        hi0 + pad(above)
    } else {
        pad(false)
    };
    let axis = ValueAxis::linear(lo, hi).marked_within(lo0.min(0.0), hi0.max(0.0));
    let mut ctx = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(x_area)
        .y_label_area_size(Y_AREA)
        .build_cartesian_2d(Categories { n }, axis)?;
    let categories = &b.categories;
    let vertical_labels = b.vertical_labels;
    let x_fmt = |x: &f64| {
        if vertical_labels {
            String::new()
        } else {
            category(categories, *x)
        }
    };
    let y_fmt = |v: &f64| ValueUnit::Percent.format(*v);
    ctx.configure_mesh()
        .disable_x_mesh()
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .x_desc(b.x_label.as_str())
        .y_desc(b.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", AXIS_DESC_SIZE))
        .draw()?;
    if vertical_labels {
        // Standing on end, starting just below the axis (plotters centres a
        // rotated axis label on its tick, which puts half of it in the plot).
        let style = vertical
            .transform(FontTransform::Rotate90)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (i, name) in b.categories.iter().enumerate() {
            let (x, y) = ctx.backend_coord(&(i as f64, lo));
            root.draw_text(name, &style, (x, y + 8))?;
        }
    }

    let width = group / k;
    let bar = |si: usize, i: usize| {
        let x0 = i as f64 - group / 2.0 + si as f64 * width;
        (x0, x0 + width * 0.9)
    };
    for (si, s) in b.series.iter().enumerate() {
        let c = colour(&s.colour);
        let rects = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = v.map(|v| v.clamp(-b.clip_pct, b.clip_pct))?;
            let (x0, x1) = bar(si, i);
            let counts = s.counts.get(i).copied().unwrap_or(false);
            let style = if counts {
                c.filled()
            } else {
                c.mix(0.35).filled()
            };
            Some(Rectangle::new([(x0, 0.0), (x1, v)], style))
        });
        ctx.draw_series(rects)?;
    }
    // Clipped bars: a break near the end, and the true value beyond it.
    let text = TextStyle::from(("sans-serif", CLIP_LABEL_SIZE).into_font()).color(&BLACK);
    for c in &clipped {
        let (x0, x1) = bar(c.series, c.category);
        let end = b.clip_pct.copysign(c.value);
        let (px0, py) = ctx.backend_coord(&(x0, end));
        let (px1, _) = ctx.backend_coord(&(x1, end));
        let inward = if c.value > 0.0 { 1 } else { -1 };
        for step in [10, 16] {
            let y = py + inward * step;
            root.draw(&PathElement::new(
                vec![(px0 - 1, y + 3), (px1 + 1, y - 3)],
                WHITE.stroke_width(3),
            ))?;
        }
        let label = ValueUnit::Percent.format(c.value);
        let cx = (px0 + px1) / 2;
        // Standing on end, they read downwards like the overview's test names.
        let (style, at) = match (labels.vertical, c.value > 0.0) {
            (true, true) => (
                text.transform(FontTransform::Rotate90)
                    .pos(Pos::new(HPos::Right, VPos::Center)),
                (cx, py - 6),
            ),
            (true, false) => (
                text.transform(FontTransform::Rotate90)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
                (cx, py + 6),
            ),
            (false, true) => (text.pos(Pos::new(HPos::Center, VPos::Bottom)), (cx, py - 6)),
            (false, false) => (text.pos(Pos::new(HPos::Center, VPos::Top)), (cx, py + 6)),
        };
        root.draw_text(&label, &style, at)?;
    }
    // The zero line.
    ctx.draw_series(std::iter::once(PathElement::new(
        vec![(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
        BLACK.stroke_width(2),
    )))?;
    Ok(())
}

fn lines<DB: DrawingBackend>(
    title: &str,
    l: &LineChart,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    let points = || l.series.iter().flat_map(|s| s.points.iter().flatten());
    let mut values: Vec<f64> = Vec::new();
    for p in points() {
        values.push(p.mean);
        if let Some((lo, hi)) = p.ci95 {
            values.extend([lo, hi]);
        }
    }
    values.extend(l.capacity.iter().map(|c| c.value));
    let axis = ValueAxis::fit(&values, l.log_y);
    let mut title = title.to_string();
    if points().any(|p| p.ci95.is_some()) {
        title.push_str(" (whiskers: 95% confidence interval)");
    }
    if l.log_y {
        title.push_str(", log scale");
    }
    let keys: Vec<Key> = l
        .series
        .iter()
        .map(|s| Key {
            label: s.label.clone(),
            swatch: Swatch::Line(colour(&s.colour)),
        })
        .collect();
    let area = frame(root, &title, &keys)?;
    let n = l.categories.len().max(1);
    let unit = l.unit;
    let y_fmt = |v: &f64| unit.format(*v);
    let y_area = y_area(&area, axis.ticks().iter().map(&y_fmt), LABEL_SIZE, Y_AREA)?;
    let mut ctx = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(75)
        .y_label_area_size(y_area)
        .build_cartesian_2d(Categories { n }, axis)?;
    let categories = &l.categories;
    let x_fmt = |x: &f64| category(categories, *x);
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

    // The capacities: dashed across the plot, behind the lines.
    let right = n as f64 - 0.5;
    for cap in &l.capacity {
        ctx.plotting_area().draw(&DashedPathElement::new(
            vec![(-0.5, cap.value), (right, cap.value)],
            10,
            6,
            colour(&cap.colour).stroke_width(2),
        ))?;
    }

    let k = l.series.len() as f64;
    for (si, s) in l.series.iter().enumerate() {
        let c = colour(&s.colour);
        // Side by side, so that whiskers at one user count do not hide each other.
        let shift = (si as f64 - (k - 1.0) / 2.0) * 0.04;
        let pts: Vec<Option<(f64, f64)>> = s
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| p.map(|p| (i as f64 + shift, p.mean)))
            .collect();
        // A line through each run of measured points.
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for p in &pts {
            match p {
                Some(xy) => segments.last_mut().expect("never empty").push(*xy),
                None => segments.push(Vec::new()),
            }
        }
        for seg in segments.into_iter().filter(|s| !s.is_empty()) {
            ctx.draw_series(LineSeries::new(seg, c.stroke_width(3)))?;
        }
        ctx.draw_series(s.points.iter().enumerate().filter_map(|(i, p)| {
            let p = (*p)?;
            let (low, high) = p.ci95?;
            Some(ErrorBar::new_vertical(
                i as f64 + shift,
                low.max(axis.lo),
                p.mean,
                high,
                c.stroke_width(2),
                14,
            ))
        }))?;
        ctx.draw_series(
            pts.iter()
                .flatten()
                .map(|&(x, y)| Circle::new((x, y), 5, c.filled())),
        )?;
    }
    // Their labels at the right end (below the line when it runs along the
    // top), over the lines on a pale ground so that a whisker behind one
    // does not make it unreadable.
    let label_font = TextStyle::from(("sans-serif", SMALL_LABEL_SIZE).into_font());
    for cap in &l.capacity {
        let c = colour(&cap.colour);
        let (x, y) = ctx.backend_coord(&(right, cap.value));
        let (_, top) = ctx.backend_coord(&(right, axis.hi));
        let (v, dy) = if y - top < 30 {
            (VPos::Top, 5)
        } else {
            (VPos::Bottom, -5)
        };
        let (tw, th) = root.estimate_text_size(&cap.label, &label_font)?;
        let (tw, th) = (tw as i32, th as i32);
        let (y0, y1) = if matches!(v, VPos::Top) {
            (y + dy - 2, y + dy + th + 3)
        } else {
            (y + dy - th - 3, y + dy + 2)
        };
        root.draw(&Rectangle::new(
            [(x - 6 - tw - 3, y0), (x - 3, y1)],
            WHITE.mix(0.85).filled(),
        ))?;
        root.draw_text(
            &cap.label,
            &label_font.color(&c).pos(Pos::new(HPos::Right, v)),
            (x - 6, y + dy),
        )?;
    }
    Ok(())
}
