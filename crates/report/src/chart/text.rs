//! The charts' text, laid out from the font's own metrics: each glyph's pen
//! position is the sum of the advance widths (and kerning) before it, and its
//! outline is drawn where its side bearing puts it.
//!
//! plotters' ab_glyph text drawing places every glyph's ink at the pen
//! position, dropping its left side bearing, and truncates the pen to whole
//! pixels: glyphs with a wide bearing move left, the ones with a narrow one
//! look detached ("throughpu t"). It also measures text at a different size
//! than its SVG backend writes it. [`TextBackend`] takes both jobs over for
//! any backend: it measures with the layout below, and on bitmaps it draws
//! with it too; the SVG backend keeps writing `<text>` for the viewer to draw.

use ab_glyph::{point, Font, FontRef, GlyphId, PxScale, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// plotters' text size is a line height of 1.24 em: its SVG backend writes
/// the `font-size` of a text as its size divided by this.
const SIZE_PER_EM: f32 = 1.24;

/// Where the baseline of a text anchored at its top lies below the anchor, in
/// em: what plotters' SVG backend writes (`dy="0.76em"`).
const TOP_BASELINE_EM: f32 = 0.76;

/// One line of text laid out at a size: each glyph and its pen position.
#[derive(Debug, Clone)]
pub(super) struct Line {
    /// The glyphs and their pen positions (pixels from the line's start).
    glyphs: Vec<(GlyphId, f32)>,
    /// The sum of the advances and kerning: where a following text would start.
    advance: f32,
    /// The font scale of the size.
    scale: PxScale,
    /// One em, pixels.
    em: f32,
}

impl Line {
    /// Lays `text` out at plotters' text size `size` (a line height, 1.24 em).
    pub(super) fn new(font: &FontRef<'_>, size: f64, text: &str) -> Line {
        let em = size as f32 / SIZE_PER_EM;
        let scale = scale_of(font, em);
        let scaled = font.as_scaled(scale);
        let mut glyphs = Vec::with_capacity(text.len());
        let mut pen = 0.0f32;
        let mut previous = None;
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = previous {
                pen += scaled.kern(p, id);
            }
            glyphs.push((id, pen));
            pen += scaled.h_advance(id);
            previous = Some(id);
        }
        Line {
            glyphs,
            advance: pen,
            scale,
            em,
        }
    }

    /// The box plotters lays the text out in: its advance wide, one em high.
    pub(super) fn size(&self) -> (u32, u32) {
        (self.advance.ceil() as u32, self.em.round() as u32)
    }
}

/// The ab_glyph scale (ascent to descent, pixels) at which one em is `em` pixels.
fn scale_of(font: &FontRef<'_>, em: f32) -> PxScale {
    let height = font.height_unscaled();
    let units_per_em = font.units_per_em().unwrap_or(height);
    PxScale::from(em * height / units_per_em)
}

/// The height of a lowercase `x` (one ex), pixels, at `line`'s size; half
/// an em if the font has no `x`.
fn ex(font: &FontRef<'_>, line: &Line) -> f32 {
    let id = font.glyph_id('x');
    font.outline(id)
        .map(|o| o.bounds.max.y * line.em / font.units_per_em().unwrap_or(1.0))
        .filter(|h| *h > 0.0)
        .unwrap_or(line.em / 2.0)
}

/// Every pixel of `line` drawn with its anchor at the origin: its offset from
/// the anchor before any rotation, and how much of it the glyphs cover (0..=1).
fn coverage(font: &FontRef<'_>, line: &Line, h: HPos, v: VPos) -> Vec<(i32, i32, f32)> {
    let x0 = match h {
        HPos::Left => 0.0,
        HPos::Center => -line.advance / 2.0,
        HPos::Right => -line.advance,
    };
    // The same vertical placement as plotters' SVG backend, so that a chart's
    // PNG and SVG put their text in the same places.
    let baseline = match v {
        VPos::Top => TOP_BASELINE_EM * line.em,
        VPos::Center => ex(font, line) / 2.0,
        VPos::Bottom => -ex(font, line) / 2.0,
    };
    let mut pixels = Vec::new();
    for &(id, pen) in &line.glyphs {
        let glyph = id.with_scale_and_position(line.scale, point(x0 + pen, baseline));
        let Some(outline) = font.outline_glyph(glyph) else {
            continue; // a space
        };
        let bounds = outline.px_bounds();
        let (left, top) = (bounds.min.x as i32, bounds.min.y as i32);
        outline.draw(|x, y, c| {
            if c > 0.0 {
                pixels.push((left + x as i32, top + y as i32, c.min(1.0)));
            }
        });
    }
    pixels
}

/// A drawing backend whose text is measured, and on bitmaps drawn, from the
/// chart font's metrics ([`Line`]); everything else is `inner`'s.
pub(super) struct TextBackend<B> {
    inner: B,
    font: FontRef<'static>,
    /// Whether this backend draws text's pixels itself (bitmaps) or leaves
    /// text to `inner` (SVG, which the viewer renders).
    draws_text: bool,
}

impl<B: DrawingBackend> TextBackend<B> {
    /// For a bitmap: text measured and drawn glyph by glyph.
    pub(super) fn drawing(inner: B, font: FontRef<'static>) -> Self {
        TextBackend {
            inner,
            font,
            draws_text: true,
        }
    }

    /// For a vector backend that writes text as text: measured only.
    pub(super) fn measuring(inner: B, font: FontRef<'static>) -> Self {
        TextBackend {
            inner,
            font,
            draws_text: false,
        }
    }
}

impl<B: DrawingBackend> DrawingBackend for TextBackend<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        if !self.draws_text {
            return self.inner.draw_text(text, style, pos);
        }
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let line = Line::new(&self.font, style.size(), text);
        let anchor = style.anchor();
        let transform = style.transform();
        let (width, height) = self.inner.get_size();
        for (x, y, c) in coverage(&self.font, &line, anchor.h_pos, anchor.v_pos) {
            let (dx, dy) = transform.transform(x, y);
            let (x, y) = (pos.0 + dx, pos.1 + dy);
            if x < 0 || y < 0 || x >= width as i32 || y >= height as i32 {
                continue;
            }
            self.inner.draw_pixel((x, y), color.mix(f64::from(c)))?;
        }
        Ok(())
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        Ok(Line::new(&self.font, style.size(), text).size())
    }
}

#[cfg(test)]
mod tests {
    use plotters::prelude::*;
    use plotters::style::text_anchor::Pos;

    use super::*;

    /// One em, pixels: large, so that a misplaced bearing is many pixels.
    const EM: f32 = 100.0;

    /// `text` drawn black on white at one em of [`EM`] pixels, left and top
    /// anchored at (10, 10): the columns that have ink.
    fn inked_columns(font: &FontRef<'static>, text: &str) -> Vec<bool> {
        let (w, h) = (1400u32, 200u32);
        let mut rgb = vec![255u8; (w * h * 3) as usize];
        {
            let bitmap = BitMapBackend::with_buffer(&mut rgb, (w, h));
            let root = TextBackend::drawing(bitmap, font.clone()).into_drawing_area();
            let size = f64::from(EM * SIZE_PER_EM);
            let style = TextStyle::from(("sans-serif", size).into_font())
                .pos(Pos::new(HPos::Left, VPos::Top));
            root.draw_text(text, &style, (10, 10)).unwrap();
            root.present().unwrap();
        }
        (0..w as usize)
            .map(|x| (0..h as usize).any(|y| rgb[(y * w as usize + x) * 3] < 128))
            .collect()
    }

    /// The columns the glyphs ink from the font's tables alone: each glyph's
    /// pen position (the advance widths and kerning before it) plus its
    /// outline's extent, pixels; glyphs whose ink meets are one span.
    fn ink_from_metrics(font: &FontRef<'static>, text: &str, left: f32) -> Vec<(f32, f32)> {
        let per_unit = EM / font.units_per_em().unwrap();
        let mut pen = left;
        let mut previous = None;
        let mut ink = Vec::new();
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                pen += font.kern_unscaled(p, id) * per_unit;
            }
            if let Some(o) = font.outline(id) {
                ink.push((
                    pen + o.bounds.min.x * per_unit,
                    pen + o.bounds.max.x * per_unit,
                ));
            }
            pen += font.h_advance_unscaled(id) * per_unit;
            previous = Some(id);
        }
        let mut spans: Vec<(f32, f32)> = Vec::new();
        for (lo, hi) in ink {
            match spans.last_mut() {
                // Less than two pixels apart: anti-aliasing joins them.
                Some(last) if lo - last.1 < 2.0 => last.1 = last.1.max(hi),
                _ => spans.push((lo, hi)),
            }
        }
        spans
    }

    /// Runs of consecutive inked columns, as (first, last).
    fn runs(columns: &[bool]) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (x, &inked) in columns.iter().enumerate() {
            match out.last_mut() {
                Some(r) if inked && r.1 + 1 == x => r.1 = x,
                _ if inked => out.push((x, x)),
                _ => {}
            }
        }
        out
    }

    /// The words the charts spaced wrongly: every glyph's ink lies where the
    /// font's advance widths, kerning and side bearings put it, within the
    /// pixel of anti-aliasing at each edge.
    #[test]
    fn glyphs_are_drawn_where_their_advances_and_bearings_put_them() {
        crate::font_status().expect("the embedded font");
        let font = super::super::font::chart_font().unwrap();
        for text in ["throughput", "str-readx30k", "positive"] {
            let expected = ink_from_metrics(&font, text, 10.0);
            let drawn = runs(&inked_columns(&font, text));
            assert_eq!(
                drawn.len(),
                expected.len(),
                "{text}: {drawn:?} vs {expected:?}"
            );
            for ((from, to), (lo, hi)) in drawn.iter().zip(&expected) {
                let near = |px: usize, at: f32| (px as f32 - at).abs() <= 1.5;
                assert!(
                    near(*from, *lo) && near(*to + 1, *hi),
                    "{text}: ink over columns {from}..={to}, the font's metrics say {lo:.1}..{hi:.1} \
                     (all: {drawn:?} vs {expected:?})"
                );
            }
        }
    }

    #[test]
    fn a_line_is_as_wide_as_its_advances_and_one_em_high() {
        crate::font_status().expect("the embedded font");
        let font = super::super::font::chart_font().unwrap();
        let per_unit = EM / font.units_per_em().unwrap();
        let ids: Vec<GlyphId> = "throughput".chars().map(|c| font.glyph_id(c)).collect();
        let advances: f32 = ids
            .iter()
            .map(|&id| font.h_advance_unscaled(id))
            .sum::<f32>()
            + ids
                .windows(2)
                .map(|p| font.kern_unscaled(p[0], p[1]))
                .sum::<f32>();
        let line = Line::new(&font, f64::from(EM * SIZE_PER_EM), "throughput");
        let (w, h) = line.size();
        assert_eq!(w, (advances * per_unit).ceil() as u32);
        assert_eq!(h, EM as u32);
    }
}
