//! The font the charts' text is laid out (and, in PNGs, drawn) with:
//! DejaVu Sans, embedded in the binary (`crates/report/fonts/`, its licence
//! beside it), or a TrueType file named by `$LINKPERF_FONT`. It is registered
//! with plotters' ab_glyph backend as `sans-serif` and laid out glyph by glyph
//! in `text.rs`. No fontconfig, no system library and no font file on the
//! host are involved, so charts draw the same on a headless server, in a
//! container holding nothing but the binary, and on a desktop.

use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::style::{register_font, FontStyle};

use crate::ReportError;

/// Environment variable naming a `.ttf` file to use instead of the embedded font.
pub const FONT_VARIABLE: &str = "LINKPERF_FONT";

/// DejaVu Sans 2.37 (Bitstream Vera licence, DejaVu changes in the public
/// domain: `fonts/DejaVuSans-LICENSE.txt`).
static EMBEDDED: &[u8] = include_bytes!("../../fonts/DejaVuSans.ttf");
/// How [`font_status`] names the embedded font.
const EMBEDDED_NAME: &str = "DejaVu Sans 2.37 (embedded)";

/// The font registered for this process and where it came from, or why none.
static FONT: OnceLock<Result<(String, FontRef<'static>), String>> = OnceLock::new();

/// Where the charts' font comes from (the `$LINKPERF_FONT` file, or the
/// embedded DejaVu Sans), registering it on first call; an error when
/// `$LINKPERF_FONT` names a file that is not a usable TrueType font.
pub fn font_status() -> Result<String, ReportError> {
    chart_font_and_source().map(|(source, _)| source)
}

/// The font the charts' text is measured and drawn with (see `text.rs`).
pub(super) fn chart_font() -> Result<FontRef<'static>, ReportError> {
    chart_font_and_source().map(|(_, font)| font)
}

fn chart_font_and_source() -> Result<(String, FontRef<'static>), ReportError> {
    FONT.get_or_init(load)
        .clone()
        .map_err(|looked| ReportError::NoFont { looked })
}

fn load() -> Result<(String, FontRef<'static>), String> {
    let (source, bytes): (String, &'static [u8]) = match std::env::var_os(FONT_VARIABLE) {
        Some(path) => {
            let shown = std::path::Path::new(&path).display().to_string();
            let bytes = std::fs::read(&path).map_err(|e| format!("{shown} ({e})"))?;
            // plotters keeps registered fonts for the life of the process.
            (shown, Box::leak(bytes.into_boxed_slice()))
        }
        None => (EMBEDDED_NAME.to_string(), EMBEDDED),
    };
    let font = FontRef::try_from_slice(bytes)
        .map_err(|e| format!("{source} (not a TrueType font: {e})"))?;
    register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| format!("{source} (plotters refused it)"))?;
    Ok((source, font))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_is_a_truetype_font_with_latin_glyphs() {
        use ab_glyph::Font;
        let font = FontRef::try_from_slice(EMBEDDED).expect("DejaVu Sans parses");
        for c in "linkperf 0123456789 µs % × →".chars() {
            assert_ne!(font.glyph_id(c).0, 0, "a glyph for {c:?}");
        }
    }
}
