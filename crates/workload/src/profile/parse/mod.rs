//! The lenient reader of uperf's XML profile language.
//!
//! uperf reads profiles leniently, and real profiles rely on it: unquoted
//! attribute values (`<group nthreads=2>`), names in any case, a missing
//! `</transaction>`, a stray extra `</transaction>`. This reader accepts those
//! forms and refuses everything it does not understand (unknown elements,
//! attributes and flowop options) with the line and element at fault, so a
//! profile never runs differently from what its author wrote.
//!
//! The reader is a single forward pass over the text (no recursion, no
//! rescanning), so hostile input costs time in proportion to its length, and
//! the text is capped at 1 MiB.

mod builder;
mod lexer;
mod options;
mod values;

pub use builder::{parse_profile, ProfileError};

#[cfg(test)]
mod tests;
