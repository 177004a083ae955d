//! The font the charts' text is laid out (and, in PNGs, drawn) with: a
//! TrueType file found at run time, registered with plotters' ab_glyph
//! backend as `sans-serif` and laid out glyph by glyph in `text.rs`. No
//! fontconfig and no system library is involved,
//! so charts draw the same on a headless server as on a desktop.

use std::path::PathBuf;
use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::style::{register_font, FontStyle};

use crate::ReportError;

/// Environment variable naming a `.ttf` file to use instead of the ones below.
pub const FONT_VARIABLE: &str = "LINKPERF_FONT";

/// Where common systems keep a sans-serif TrueType font, in order of preference:
/// DejaVu (Debian's fonts-dejavu-core, Fedora, Arch), Liberation, FreeFont, Noto,
/// then macOS and Windows.
const FONT_FILES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/local/share/fonts/DejaVuSans.ttf",
    "/Library/Fonts/Arial.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// The font registered for this process, or the files looked for.
static FONT: OnceLock<Result<(PathBuf, FontRef<'static>), String>> = OnceLock::new();

/// The font file the charts use, registering it on first call; an error
/// naming the files looked for when none could be loaded.
pub fn font_status() -> Result<PathBuf, ReportError> {
    chart_font_and_path().map(|(path, _)| path)
}

/// The font the charts' text is measured and drawn with (see `text.rs`).
pub(super) fn chart_font() -> Result<FontRef<'static>, ReportError> {
    chart_font_and_path().map(|(_, font)| font)
}

fn chart_font_and_path() -> Result<(PathBuf, FontRef<'static>), ReportError> {
    FONT.get_or_init(load)
        .clone()
        .map_err(|looked| ReportError::NoFont { looked })
}

/// The files to try: `$LINKPERF_FONT` first, then [`FONT_FILES`].
fn candidates() -> Vec<PathBuf> {
    std::env::var_os(FONT_VARIABLE)
        .map(PathBuf::from)
        .into_iter()
        .chain(FONT_FILES.iter().map(PathBuf::from))
        .collect()
}

fn load() -> Result<(PathBuf, FontRef<'static>), String> {
    let files = candidates();
    for path in &files {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let Ok(font) = FontRef::try_from_slice(bytes) else {
            continue;
        };
        if register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
            return Ok((path.clone(), font));
        }
    }
    Err(files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", "))
}
