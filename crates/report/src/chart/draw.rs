//! Drawing a [`Chart`] with plotters, once for any backend: SVG text, or an
//! RGB bitmap encoded as PNG.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

use super::font::chart_font;
use super::spec::{BarChart, Chart, ChartKind, LineChart};
use super::text::TextBackend;
use crate::ReportError;

/// Font sizes, pixels: readable on a 1200 px page.
const TITLE_SIZE: u32 = 28;
const AXIS_DESC_SIZE: u32 = 20;
const LABEL_SIZE: u32 = 19;
const SMALL_LABEL_SIZE: u32 = 16;
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

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Width of the area left of the plot for the Y labels and description, pixels.
const Y_AREA: u32 = 100;
/// Margin around the plot, pixels.
const MARGIN: u32 = 18;
/// Height of one legend row, pixels.
const LEGEND_ROW: u32 = 28;

fn draw<DB: DrawingBackend>(chart: &Chart, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    match &chart.kind {
        ChartKind::Bars(b) => bars(&chart.title, b, root),
        ChartKind::Lines(l) => lines(&chart.title, l, root),
    }
}

/// How a legend entry is marked.
enum Swatch {
    /// A filled box (bars).
    Fill(RGBAColor),
    /// A line (lines).
    Line(RGBColor),
    /// Nothing: a note.
    None,
}

/// One legend entry.
struct Key {
    label: String,
    swatch: Swatch,
}

/// Draws the title and, below it, the legend in rows (outside the plot, so
/// it never hides a bar or a point); returns the area left for the plot.
fn frame<DB: DrawingBackend>(
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
                Swatch::None => *x,
            };
            let style = font.pos(Pos::new(HPos::Left, VPos::Center));
            legend.draw_text(&k.label, &style, (text_x, y))?;
        }
    }
    Ok(plot)
}

/// `#rrggbb` as a colour (grey if malformed).
fn colour(hex: &str) -> RGBColor {
    let byte = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|s| u8::from_str_radix(s, 16).ok())
            .unwrap_or(128)
    };
    RGBColor(byte(1), byte(3), byte(5))
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

/// Y axis limits for bars: always containing zero, with a little room.
fn bar_range(b: &BarChart) -> (f64, f64) {
    let values = b
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied());
    let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let span = (hi - lo).max(1.0);
    let pad = span * 0.08;
    (
        if lo < 0.0 { lo - pad } else { 0.0 },
        if hi > 0.0 { hi + pad } else { pad },
    )
}

fn bars<DB: DrawingBackend>(
    title: &str,
    b: &BarChart,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
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
    let area = frame(root, title, &keys)?;
    let n = b.categories.len().max(1);
    let (lo, hi) = bar_range(b);
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
    let mut ctx = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(x_area)
        .y_label_area_size(Y_AREA)
        .build_cartesian_2d(Categories { n }, lo..hi)?;
    let categories = &b.categories;
    let vertical_labels = b.vertical_labels;
    let x_fmt = |x: &f64| {
        if vertical_labels {
            String::new()
        } else {
            category(categories, *x)
        }
    };
    let span = hi - lo;
    let y_fmt = |v: &f64| {
        if span < 10.0 {
            format!("{v:+.1}%")
        } else {
            format!("{v:+.0}%")
        }
    };
    ctx.configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
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

    let k = b.series.len().max(1) as f64;
    let group = 0.8;
    let width = group / k;
    for (si, s) in b.series.iter().enumerate() {
        let c = colour(&s.colour);
        let rects = s.values.iter().enumerate().filter_map(move |(i, v)| {
            let v = (*v)?;
            let x0 = i as f64 - group / 2.0 + si as f64 * width;
            let x1 = x0 + width * 0.9;
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
    let top = points()
        .map(|p| p.ci95.map_or(p.mean, |(_, h)| h.max(p.mean)))
        .fold(0.0f64, f64::max);
    let hi = if top > 0.0 { top * 1.1 } else { 1.0 };
    let title = if points().any(|p| p.ci95.is_some()) {
        format!("{title} (whiskers: 95% confidence interval)")
    } else {
        title.to_string()
    };
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
    let mut ctx = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(75)
        .y_label_area_size(Y_AREA)
        .build_cartesian_2d(Categories { n }, 0.0..hi)?;
    let categories = &l.categories;
    let x_fmt = |x: &f64| category(categories, *x);
    let y_fmt = |v: &f64| {
        if hi < 10.0 {
            format!("{v:.2}")
        } else if hi < 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    };
    ctx.configure_mesh()
        .max_light_lines(1)
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .x_desc(l.x_label.as_str())
        .y_desc(l.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", AXIS_DESC_SIZE))
        .draw()?;

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
                low.max(0.0),
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
    Ok(())
}
