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

use std::borrow::Cow;
use std::time::Duration;

use thiserror::Error;

use super::check::{MAX_TIME, MAX_WNDSZ, MAX_XFER};
use super::model::{
    Endpoint, Flowop, FlowopKind, Group, Limit, Profile, ProfileProtocol, Rate, Size, Transaction,
    Xfer,
};
use crate::MAX_USERS;

/// Longest profile text read (and longest attribute value once variables
/// are substituted): 1 MiB.
const MAX_TEXT: usize = 1024 * 1024;

/// How many characters of a value from the file an error message repeats.
const SHOWN_CHARS: usize = 40;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Why a profile was refused: where, in which element, and what to change.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, <{element}>: {message}")]
pub struct ProfileError {
    /// The 1-based line of the `<` of the element at fault.
    pub line: u32,
    /// The element at fault: `profile`, `group`, `transaction` or `flowop`
    /// (`profile` for errors about the file as a whole).
    pub element: String,
    /// What was wrong and what to do about it.
    pub message: String,
}

fn err(line: u32, element: &str, message: String) -> ProfileError {
    ProfileError {
        line,
        element: element.to_string(),
        message,
    }
}

/// Reads a uperf profile. `text` is the file's content; `var` gives the value
/// of each `$name` (or `${name}`) the file uses in attribute values and flowop
/// options (usually the environment, then `--var name=value`).
///
/// The whole profile is checked: it comes back complete, or not at all, with
/// an error naming the line and element at fault.
pub fn parse_profile(
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Profile, ProfileError> {
    if text.len() > MAX_TEXT {
        return Err(err(
            1,
            "profile",
            format!(
                "the profile is {} bytes long; profiles are limited to 1 MiB",
                text.len()
            ),
        ));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lexer = Lexer {
        text,
        pos: 0,
        line: 1,
    };
    let mut builder = Builder {
        var,
        state: State::Before,
        name: String::new(),
        profile_line: 1,
        groups: Vec::new(),
        group: None,
        transaction: None,
        flowop_line: 1,
    };
    loop {
        let token = lexer
            .next_token()
            .map_err(|e| err(e.line, builder.context(), e.message))?;
        match token {
            Token::Eof => {
                let profile = builder.finish()?;
                // What the options' own ranges cannot see (the users of all
                // groups together); the server runs the same check.
                return match profile.check() {
                    Ok(()) => Ok(profile),
                    Err(e) => Err(err(e.line, "profile", e.message)),
                };
            }
            Token::Start(tag) => builder.start(&tag)?,
            Token::End { name, line } => builder.end(name, line)?,
            Token::Text { text, line } => builder.text(text, line)?,
        }
    }
}

/// At most [`SHOWN_CHARS`] characters of `s`, for an error message.
fn shown(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => Cow::Owned(format!("{}...", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

// ---------------------------------------------------------------------------
// The lexer: tags, end tags and text, comments and declarations skipped.

/// A start tag: `<name attr=value ...>` or `<name ... />`.
struct Tag<'a> {
    name: &'a str,
    /// Attribute names as written, values with XML entities decoded.
    attrs: Vec<(&'a str, Cow<'a, str>)>,
    self_closing: bool,
    line: u32,
}

enum Token<'a> {
    Start(Tag<'a>),
    End { name: &'a str, line: u32 },
    Text { text: &'a str, line: u32 },
    Eof,
}

struct LexError {
    line: u32,
    message: String,
}

fn lex_err(line: u32, message: String) -> LexError {
    LexError { line, message }
}

/// A forward-only cursor over the text; `pos` is always on a char boundary.
struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    line: u32,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.')
}

fn count_lines(s: &str) -> u32 {
    let n = s.bytes().filter(|&b| b == b'\n').count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl<'a> Lexer<'a> {
    fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    /// Moves `n` bytes on (`n` must end on a char boundary), counting lines.
    fn advance(&mut self, n: usize) {
        let rest = self.rest();
        let n = n.min(rest.len());
        self.line = self.line.saturating_add(count_lines(&rest[..n]));
        self.pos += n;
    }

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        let n = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        self.advance(n);
    }

    fn name(&mut self) -> &'a str {
        let rest = self.rest();
        let n = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        self.advance(n);
        &rest[..n]
    }

    fn next_token(&mut self) -> Result<Token<'a>, LexError> {
        loop {
            let rest = self.rest();
            let line = self.line;
            if rest.is_empty() {
                return Ok(Token::Eof);
            }
            if let Some(after) = rest.strip_prefix("<!--") {
                match after.find("-->") {
                    Some(i) => {
                        self.advance(4 + i + 3);
                        continue;
                    }
                    None => {
                        return Err(lex_err(
                            line,
                            "this comment is not closed: end it with -->".into(),
                        ))
                    }
                }
            }
            if let Some(after) = rest.strip_prefix("<?") {
                match after.find("?>") {
                    Some(i) => {
                        self.advance(2 + i + 2);
                        continue;
                    }
                    None => {
                        return Err(lex_err(
                            line,
                            "this <?...> declaration is not closed: end it with ?>".into(),
                        ))
                    }
                }
            }
            if rest.starts_with("<!") {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '>')
                    .unwrap_or(rest.len());
                return Err(lex_err(
                    line,
                    format!(
                        "{} is not supported in a profile: it holds elements, <!-- comments --> and the <?xml ...?> declaration only",
                        shown(&rest[..end])
                    ),
                ));
            }
            if rest.starts_with("</") {
                self.advance(2);
                let name = self.name();
                if name.is_empty() {
                    return Err(lex_err(
                        line,
                        "`</` must be followed by the name of the element it closes".into(),
                    ));
                }
                self.skip_whitespace();
                if !self.rest().starts_with('>') {
                    return Err(lex_err(
                        line,
                        format!("</{}> is not closed: end it with >", shown(name)),
                    ));
                }
                self.advance(1);
                return Ok(Token::End { name, line });
            }
            if rest.starts_with('<') {
                return self.start_tag(line).map(Token::Start);
            }
            let end = rest.find('<').unwrap_or(rest.len());
            let text = &rest[..end];
            // The line of the first character that is not whitespace.
            let lead = text
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(text.len());
            let text_line = line.saturating_add(count_lines(&text[..lead]));
            self.advance(end);
            return Ok(Token::Text {
                text,
                line: text_line,
            });
        }
    }

    fn start_tag(&mut self, line: u32) -> Result<Tag<'a>, LexError> {
        self.advance(1);
        let name = self.name();
        if name.is_empty() {
            return Err(lex_err(
                line,
                "`<` must start an element such as <flowop ...> (write &lt; for a literal <)"
                    .into(),
            ));
        }
        let mut attrs = Vec::new();
        loop {
            self.skip_whitespace();
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Err(lex_err(
                    line,
                    format!("<{}> is not closed: end it with > or />", shown(name)),
                ));
            };
            if rest.starts_with("/>") {
                self.advance(2);
                return Ok(Tag {
                    name,
                    attrs,
                    self_closing: true,
                    line,
                });
            }
            if c == '>' {
                self.advance(1);
                return Ok(Tag {
                    name,
                    attrs,
                    self_closing: false,
                    line,
                });
            }
            let attr = self.name();
            if attr.is_empty() {
                return Err(lex_err(
                    line,
                    format!(
                        "unexpected {c:?} in <{}>: attributes are written name=\"value\"",
                        shown(name)
                    ),
                ));
            }
            self.skip_whitespace();
            if !self.rest().starts_with('=') {
                return Err(lex_err(
                    line,
                    format!(
                        "attribute {a} of <{}> has no value: write {a}=\"...\"",
                        shown(name),
                        a = shown(attr)
                    ),
                ));
            }
            self.advance(1);
            self.skip_whitespace();
            let rest = self.rest();
            let raw = match rest.chars().next() {
                Some(q @ ('"' | '\'')) => match rest[1..].find(q) {
                    Some(i) => {
                        let raw = &rest[1..1 + i];
                        self.advance(i + 2);
                        raw
                    }
                    None => {
                        return Err(lex_err(
                            line,
                            format!(
                                "the value of {} is not closed: end it with {q}",
                                shown(attr)
                            ),
                        ))
                    }
                },
                _ => {
                    let mut end = rest.len();
                    for (i, c) in rest.char_indices() {
                        if c.is_whitespace() || c == '>' || rest[i..].starts_with("/>") {
                            end = i;
                            break;
                        }
                    }
                    if end == 0 {
                        return Err(lex_err(
                            line,
                            format!(
                                "attribute {a} of <{}> has no value: write {a}=\"...\"",
                                shown(name),
                                a = shown(attr)
                            ),
                        ));
                    }
                    self.advance(end);
                    &rest[..end]
                }
            };
            attrs.push((attr, decode_entities(raw)));
        }
    }
}

/// Decodes `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&apos;` and `&#N;` / `&#xN;`;
/// any other `&` is kept as written.
fn decode_entities(raw: &str) -> Cow<'_, str> {
    if !raw.contains('&') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        // Entities are short: look for the `;` within a few bytes only.
        let semi = rest.bytes().take(12).position(|b| b == b';');
        match semi.and_then(|s| entity(&rest[1..s]).map(|c| (c, s))) {
            Some((c, s)) => {
                out.push(c);
                rest = &rest[s + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let code = name.strip_prefix('#')?;
            let n = match code.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => code.parse().ok()?,
            };
            char::from_u32(n)
        }
    }
}

// ---------------------------------------------------------------------------
// Variables.

/// Replaces every `$name` and `${name}` in `value` with `var(name)`.
fn substitute<'v>(
    value: &'v str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Cow<'v, str>, String> {
    if !value.contains('$') {
        return Ok(Cow::Borrowed(value));
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, used) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(j) => (&braced[..j], j + 2),
                None => {
                    return Err(format!(
                        "{} is not closed: write ${{name}}",
                        shown(&rest[i..])
                    ))
                }
            },
            None => {
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                (&after[..n], n)
            }
        };
        let valid = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "{} is not a variable: a $ starts a variable name ($name or ${{name}}: letters, digits and _, not starting with a digit)",
                shown(&rest[i..(i + 1 + used).min(rest.len())])
            ));
        }
        let value = var(name).ok_or_else(|| {
            format!(
                "variable ${name} is not set: set it in the environment or with --var {name}=value"
            )
        })?;
        out.push_str(&value);
        if out.len() > MAX_TEXT {
            return Err(
                "the value is longer than 1 MiB once variables are substituted".to_string(),
            );
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

// ---------------------------------------------------------------------------
// Values: numbers, sizes, times, rates.

enum NumberError {
    NotANumber,
    TooLarge,
}

/// Decimal digits with an optional binary suffix: `64`, `64k`, `64KB`, `1m`, `2g`.
fn number(s: &str) -> Result<u64, NumberError> {
    let t = s.trim();
    let b = t.as_bytes();
    let mut end = b.len();
    // `| 0x20` lowers ASCII letters and leaves every non-ASCII byte non-ASCII.
    if end >= 2 && (b[end - 1] | 0x20) == b'b' && matches!(b[end - 2] | 0x20, b'k' | b'm' | b'g') {
        end -= 1;
    }
    let mut mult = 1;
    if end >= 1 {
        let m = match b[end - 1] | 0x20 {
            b'k' => KIB,
            b'm' => MIB,
            b'g' => GIB,
            _ => 1,
        };
        if m != 1 {
            mult = m;
            end -= 1;
        }
    }
    let digits = &b[..end];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(NumberError::NotANumber);
    }
    let mut n: u64 = 0;
    for d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(NumberError::TooLarge)?;
    }
    n.checked_mul(mult).ok_or(NumberError::TooLarge)
}

/// `key=value` read with [`number`], with a message naming both.
fn number_value(key: &str, value: &str) -> Result<u64, String> {
    number(value).map_err(|e| match e {
        NumberError::NotANumber => format!(
            "{key}={} is not a number: write digits with an optional k, m or g suffix (64k is 65536)",
            shown(value)
        ),
        NumberError::TooLarge => format!("{key}={} is too large", shown(value)),
    })
}

/// `key=value`, a number in `min..=max`.
fn number_in(key: &str, value: &str, min: u64, max: u64, max_text: &str) -> Result<u64, String> {
    let n = number_value(key, value)?;
    if n < min || n > max {
        let range = if max == u64::MAX {
            format!("it must be at least {min}")
        } else {
            format!("it must be between {min} and {max_text}")
        };
        return Err(format!("{key}={} is out of range: {range}", shown(value)));
    }
    Ok(n)
}

/// `size=N` or `size=rand(min,max)`, each between 1 byte and 64 MiB.
fn size_value(key: &str, value: &str) -> Result<Size, String> {
    let t = value.trim();
    let is_rand = t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("rand("));
    if !is_rand {
        return number_in(key, t, 1, MAX_XFER, "64m").map(Size::Fixed);
    }
    let whole = shown(t);
    let inner = t[5..].strip_suffix(')').ok_or_else(|| {
        format!("{key}={whole} is missing its closing ): write {key}=rand(min,max)")
    })?;
    let Some((a, b)) = inner.split_once(',').filter(|(_, b)| !b.contains(',')) else {
        return Err(format!(
            "{key}={whole} must give two sizes: write {key}=rand(min,max), such as rand(1k,64k)"
        ));
    };
    let bound = |part: &str| -> Result<u64, String> {
        let n = number(part).map_err(|e| match e {
            NumberError::NotANumber => format!(
                "{key}={whole}: {} is not a number: write digits with an optional k, m or g suffix (64k is 65536)",
                shown(part.trim())
            ),
            NumberError::TooLarge => format!("{key}={whole}: {} is too large", shown(part.trim())),
        })?;
        if n == 0 || n > MAX_XFER {
            return Err(format!(
                "{key}={whole} is out of range: both sizes must be between 1 and 64m"
            ));
        }
        Ok(n)
    };
    let (min, max) = (bound(a)?, bound(b)?);
    if min > max {
        return Err(format!(
            "{key}={whole}: the smallest size comes first: write rand(min,max)"
        ));
    }
    Ok(Size::Rand { min, max })
}

/// A decimal number such as `30`, `0.5` or `.5`, as its integer and
/// fraction digits.
fn decimal(s: &str) -> Option<(&str, &str)> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    Some((int, frac))
}

const TIME_HELP: &str = "write a number and a unit: 30s, 0.5 (seconds), 10ms or 10m (milliseconds, as uperf reads m), 100us or 100u, 500ns or 500n";

/// A time: a number, possibly fractional, with an optional unit (`s`, `m` or
/// `ms` for milliseconds, `u`/`us`, `n`/`ns`; none is seconds). Must be > 0.
fn time_value(key: &str, value: &str) -> Result<Duration, String> {
    let t = value.trim();
    if t.starts_with('-') {
        return Err(format!("{key}={} is negative: {TIME_HELP}", shown(value)));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let unit_nanos: u128 = if unit.is_empty() || unit.eq_ignore_ascii_case("s") {
        NANOS_PER_SEC
    } else if unit.eq_ignore_ascii_case("m") || unit.eq_ignore_ascii_case("ms") {
        1_000_000
    } else if unit.eq_ignore_ascii_case("u") || unit.eq_ignore_ascii_case("us") {
        1_000
    } else if unit.eq_ignore_ascii_case("n") || unit.eq_ignore_ascii_case("ns") {
        1
    } else {
        return Err(format!("{key}={} is not a time: {TIME_HELP}", shown(value)));
    };
    let (int, frac) =
        decimal(num).ok_or_else(|| format!("{key}={} is not a time: {TIME_HELP}", shown(value)))?;
    let too_long = || format!("{key}={} is too long", shown(value));
    let mut whole: u128 = 0;
    for d in int.bytes() {
        whole = whole
            .checked_mul(10)
            .and_then(|w| w.checked_add(u128::from(d - b'0')))
            .ok_or_else(too_long)?;
    }
    // Digits past the 18th of the fraction are below a nanosecond.
    let (mut part, mut scale): (u128, u128) = (0, 1);
    for d in frac.bytes().take(18) {
        part = part * 10 + u128::from(d - b'0');
        scale *= 10;
    }
    let nanos = whole
        .checked_mul(unit_nanos)
        .and_then(|w| w.checked_add(part * unit_nanos / scale))
        .ok_or_else(too_long)?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_long())?;
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| too_long())?;
    let d = Duration::new(secs, sub);
    if d.is_zero() {
        return Err(format!("{key}={} must be longer than zero", shown(value)));
    }
    if d > MAX_TIME {
        return Err(format!(
            "{key}={} is too long: at most 365 days ({}s)",
            shown(value),
            MAX_TIME.as_secs()
        ));
    }
    Ok(d)
}

/// `rate=R`: a positive number, possibly fractional.
fn rate_value(value: &str) -> Result<f64, String> {
    let t = value.trim();
    let bad = || {
        format!(
            "rate={} is not a rate: write the iterations per second of each user, such as 100 or 0.5",
            shown(value)
        )
    };
    decimal(t).ok_or_else(bad)?;
    let r: f64 = t.parse().map_err(|_| bad())?;
    if !r.is_finite() {
        return Err(format!("rate={} is too large", shown(value)));
    }
    if r <= 0.0 {
        return Err(format!("rate={} must be more than zero", shown(value)));
    }
    Ok(r)
}

// ---------------------------------------------------------------------------
// Flowops and their options.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Connect,
    Accept,
    Disconnect,
    Read,
    Write,
    Send,
    Recv,
    Sendfile,
    Think,
    Nop,
}

const TYPES: [(&str, Type); 10] = [
    ("connect", Type::Connect),
    ("accept", Type::Accept),
    ("disconnect", Type::Disconnect),
    ("read", Type::Read),
    ("write", Type::Write),
    ("send", Type::Send),
    ("recv", Type::Recv),
    ("sendfile", Type::Sendfile),
    ("think", Type::Think),
    ("nop", Type::Nop),
];

const TYPE_LIST: &str =
    "connect, accept, disconnect, read, write, send, recv, sendfile, think or nop";

/// Which flowops an option applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Any,
    Data,
    Think,
    Endpoint,
}

impl Class {
    fn flowops(self) -> &'static str {
        match self {
            Class::Any => "every flowop",
            Class::Data => "read, write, send, recv and sendfile flowops",
            Class::Think => "think flowops",
            Class::Endpoint => "connect and accept flowops",
        }
    }
}

impl Type {
    fn name(self) -> &'static str {
        TYPES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("flowop", |(n, _)| n)
    }

    fn class(self) -> Class {
        match self {
            Type::Connect | Type::Accept => Class::Endpoint,
            Type::Read | Type::Write | Type::Send | Type::Recv | Type::Sendfile => Class::Data,
            Type::Think => Class::Think,
            Type::Disconnect | Type::Nop => Class::Any,
        }
    }

    fn takes(self, class: Class) -> bool {
        class == Class::Any || class == self.class()
    }

    /// The options this type takes, for messages.
    fn option_list(self) -> String {
        OPTIONS
            .iter()
            .filter(|o| self.takes(o.class))
            .map(|o| o.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Size,
    Rsize,
    Count,
    Conn,
    Timeout,
    Canfail,
    Duration,
    Busy,
    Idle,
    Remotehost,
    Protocol,
    Port,
    Wndsz,
    TcpNodelay,
    Cc,
}

struct OptionSpec {
    name: &'static str,
    key: Key,
    /// A bare flag (`canfail`) rather than `key=value`.
    flag: bool,
    class: Class,
}

const fn opt(name: &'static str, key: Key, flag: bool, class: Class) -> OptionSpec {
    OptionSpec {
        name,
        key,
        flag,
        class,
    }
}

const OPTIONS: [OptionSpec; 15] = [
    opt("size", Key::Size, false, Class::Data),
    opt("rsize", Key::Rsize, false, Class::Data),
    opt("count", Key::Count, false, Class::Any),
    opt("conn", Key::Conn, false, Class::Any),
    opt("timeout", Key::Timeout, false, Class::Any),
    opt("canfail", Key::Canfail, true, Class::Any),
    opt("duration", Key::Duration, false, Class::Think),
    opt("busy", Key::Busy, true, Class::Think),
    opt("idle", Key::Idle, true, Class::Think),
    opt("remotehost", Key::Remotehost, false, Class::Endpoint),
    opt("protocol", Key::Protocol, false, Class::Endpoint),
    opt("port", Key::Port, false, Class::Endpoint),
    opt("wndsz", Key::Wndsz, false, Class::Endpoint),
    opt("tcp_nodelay", Key::TcpNodelay, true, Class::Endpoint),
    opt("cc", Key::Cc, false, Class::Endpoint),
];

/// The options of one flowop, as given.
#[derive(Default)]
struct Options {
    size: Option<Size>,
    rsize: Option<u64>,
    count: Option<u64>,
    conn: Option<String>,
    timeout: Option<Duration>,
    canfail: bool,
    duration: Option<Duration>,
    busy: bool,
    idle: bool,
    remotehost: Option<String>,
    protocol: Option<ProfileProtocol>,
    port: Option<u16>,
    wndsz: Option<u64>,
    nodelay: bool,
    cc: Option<String>,
}

/// Splits options at whitespace, except inside parentheses
/// (`size=rand(1k, 64k)` is one option).
fn option_tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0u32;
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() && depth == 0 {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
            continue;
        }
        if start.is_none() {
            start = Some(i);
        }
        if c == '(' {
            depth = depth.saturating_add(1);
        } else if c == ')' {
            depth = depth.saturating_sub(1);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

fn protocol_value(value: &str) -> Result<ProfileProtocol, String> {
    let t = value.trim();
    if t.eq_ignore_ascii_case("tcp") {
        Ok(ProfileProtocol::Tcp)
    } else if t.eq_ignore_ascii_case("udp") {
        Ok(ProfileProtocol::Udp)
    } else if ["sctp", "ssl", "rds", "vsock", "udapl"]
        .iter()
        .any(|p| p.eq_ignore_ascii_case(t))
    {
        Err(format!(
            "protocol={t} is not supported: linkperf carries tcp and udp"
        ))
    } else {
        Err(format!(
            "unknown protocol={}: linkperf carries tcp and udp",
            shown(t)
        ))
    }
}

fn port_value(value: &str) -> Result<u16, String> {
    let t = value.trim();
    let port = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        t.parse::<u16>().ok().filter(|&p| p != 0)
    } else {
        None
    };
    port.ok_or_else(|| {
        format!(
            "port={} is not a port: give a number between 1 and 65535",
            shown(value)
        )
    })
}

fn read_options(ty: Type, text: &str) -> Result<Options, String> {
    let mut o = Options::default();
    let mut seen = [false; OPTIONS.len()];
    for token in option_tokens(text) {
        let (key, value) = match token.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (token, None),
        };
        let Some(i) = OPTIONS
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(key))
        else {
            return Err(format!(
                "unknown option {}: a {} flowop takes {}",
                shown(key),
                ty.name(),
                ty.option_list()
            ));
        };
        let spec = &OPTIONS[i];
        let name = spec.name;
        if !ty.takes(spec.class) {
            return Err(format!(
                "option {name} applies only to {}; a {} flowop takes {}",
                spec.class.flowops(),
                ty.name(),
                ty.option_list()
            ));
        }
        if seen[i] {
            return Err(format!("option {name} is given twice"));
        }
        seen[i] = true;
        let value = match (spec.flag, value) {
            (true, None) => "",
            (true, Some(_)) => {
                return Err(format!(
                    "option {name} is a flag and takes no value: write {name} alone"
                ))
            }
            (false, Some(v)) if !v.trim().is_empty() => v,
            (false, _) => return Err(format!("option {name} needs a value: write {name}=...")),
        };
        match spec.key {
            Key::Size => o.size = Some(size_value(name, value)?),
            Key::Rsize => o.rsize = Some(number_in(name, value, 1, MAX_XFER, "64m")?),
            Key::Count => o.count = Some(number_in(name, value, 1, u64::MAX, "")?),
            Key::Conn => o.conn = Some(value.to_string()),
            Key::Timeout => o.timeout = Some(time_value(name, value)?),
            Key::Canfail => o.canfail = true,
            Key::Duration => o.duration = Some(time_value(name, value)?),
            Key::Busy => o.busy = true,
            Key::Idle => o.idle = true,
            Key::Remotehost => o.remotehost = Some(value.to_string()),
            Key::Protocol => o.protocol = Some(protocol_value(value)?),
            Key::Port => o.port = Some(port_value(value)?),
            Key::Wndsz => o.wndsz = Some(number_in(name, value, 1, MAX_WNDSZ, "1g")?),
            Key::TcpNodelay => o.nodelay = true,
            Key::Cc => o.cc = Some(value.to_string()),
        }
    }
    Ok(o)
}

/// A flowop of type `ty` from its options text (variables already substituted).
fn build_flowop(ty: Type, text: &str, line: u32) -> Result<Flowop, String> {
    let mut o = read_options(ty, text)?;
    let endpoint = |o: &mut Options| Endpoint {
        remotehost: o.remotehost.take(),
        protocol: o.protocol.unwrap_or(ProfileProtocol::Tcp),
        port: o.port,
        wndsz: o.wndsz,
        nodelay: o.nodelay,
        cc: o.cc.take(),
    };
    let xfer = |o: &Options| -> Result<Xfer, String> {
        let size = o.size.ok_or_else(|| {
            format!(
                "a {} flowop needs size=N (or size=rand(min,max))",
                ty.name()
            )
        })?;
        Ok(Xfer {
            size,
            rsize: o.rsize,
        })
    };
    let kind = match ty {
        Type::Connect => FlowopKind::Connect(endpoint(&mut o)),
        Type::Accept => FlowopKind::Accept(endpoint(&mut o)),
        Type::Disconnect => FlowopKind::Disconnect,
        Type::Read => FlowopKind::Read(xfer(&o)?),
        Type::Write => FlowopKind::Write(xfer(&o)?),
        Type::Send => FlowopKind::Send(xfer(&o)?),
        Type::Recv => FlowopKind::Recv(xfer(&o)?),
        Type::Sendfile => FlowopKind::Sendfile(xfer(&o)?),
        Type::Think => {
            if o.busy && o.idle {
                return Err(
                    "busy and idle contradict each other: give one (idle is the default)"
                        .to_string(),
                );
            }
            let duration = o.duration.ok_or_else(|| {
                "a think flowop needs duration=T (such as duration=10ms)".to_string()
            })?;
            FlowopKind::Think {
                duration,
                busy: o.busy,
            }
        }
        Type::Nop => FlowopKind::Nop,
    };
    Ok(Flowop {
        kind,
        count: o.count.unwrap_or(1),
        conn: o.conn,
        timeout: o.timeout,
        canfail: o.canfail,
        line,
    })
}

// ---------------------------------------------------------------------------
// The builder: the profile's structure, one token at a time.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before `<profile>`.
    Before,
    /// In `<profile>`, outside any group.
    Profile,
    /// In a `<group>`, outside any transaction.
    Group,
    /// In a `<transaction>`.
    Transaction,
    /// Between `<flowop ...>` and `</flowop>`.
    Flowop,
    /// After `</profile>`.
    After,
}

struct Builder<'v> {
    var: &'v dyn Fn(&str) -> Option<String>,
    state: State,
    name: String,
    profile_line: u32,
    groups: Vec<Group>,
    group: Option<Group>,
    transaction: Option<Transaction>,
    flowop_line: u32,
}

impl Builder<'_> {
    /// The element errors found here are about.
    fn context(&self) -> &'static str {
        match self.state {
            State::Before | State::Profile | State::After => "profile",
            State::Group => "group",
            State::Transaction => "transaction",
            State::Flowop => "flowop",
        }
    }

    fn group_line(&self) -> u32 {
        self.group.as_ref().map_or(self.profile_line, |g| g.line)
    }

    /// The known attributes of `tag`, variables substituted; an unknown or
    /// repeated attribute is an error.
    fn attrs<const N: usize>(
        &self,
        tag: &Tag<'_>,
        element: &'static str,
        known: [&'static str; N],
    ) -> Result<[Option<String>; N], ProfileError> {
        let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
        for (name, value) in &tag.attrs {
            let Some(i) = known.iter().position(|k| k.eq_ignore_ascii_case(name)) else {
                return Err(err(
                    tag.line,
                    element,
                    format!(
                        "unknown attribute {}: <{element}> takes {}",
                        shown(name),
                        known.join(", ")
                    ),
                ));
            };
            if out[i].is_some() {
                return Err(err(
                    tag.line,
                    element,
                    format!("attribute {} is given twice", known[i]),
                ));
            }
            let value = substitute(value, self.var).map_err(|m| err(tag.line, element, m))?;
            out[i] = Some(value.into_owned());
        }
        Ok(out)
    }

    fn start(&mut self, tag: &Tag<'_>) -> Result<(), ProfileError> {
        let name = tag.name.to_ascii_lowercase();
        let line = tag.line;
        match name.as_str() {
            "profile" => self.start_profile(tag),
            "group" => match self.state {
                State::Profile => self.start_group(tag),
                State::Group | State::Transaction => Err(err(
                    self.group_line(),
                    "group",
                    format!(
                        "this <group> is not closed (another <group> starts at line {line}): end it with </group>"
                    ),
                )),
                _ => Err(self.misplaced(line, "group", "inside <profile>")),
            },
            "transaction" => match self.state {
                State::Group => self.start_transaction(tag),
                // A missing </transaction>: the next one closes it.
                State::Transaction => {
                    self.close_transaction()?;
                    self.start_transaction(tag)
                }
                _ => Err(self.misplaced(line, "transaction", "inside a <group>")),
            },
            "flowop" => match self.state {
                State::Transaction => self.start_flowop(tag),
                _ => Err(self.misplaced(line, "flowop", "inside a <transaction>")),
            },
            _ => Err(self.unknown_element(&format!("<{}>", shown(tag.name)), line)),
        }
    }

    /// An element where it does not belong (`place` is where it does).
    fn misplaced(&self, line: u32, element: &str, place: &str) -> ProfileError {
        match self.state {
            State::Flowop => self.flowop_not_closed(line),
            State::After => err(
                line,
                "profile",
                format!("<{element}> comes after </profile>: a file holds one <profile>, with everything inside it"),
            ),
            _ => err(
                line,
                element,
                format!("<{element}> must be {place}"),
            ),
        }
    }

    fn flowop_not_closed(&self, line: u32) -> ProfileError {
        err(
            self.flowop_line,
            "flowop",
            format!(
                "this <flowop> is not closed (the next element is at line {line}): end it with /> or </flowop>"
            ),
        )
    }

    fn unknown_element(&self, shown_tag: &str, line: u32) -> ProfileError {
        if self.state == State::Flowop {
            return self.flowop_not_closed(line);
        }
        let holds = match self.state {
            State::Before | State::After => "a file holds one <profile>",
            State::Profile => "a <profile> holds <group> elements",
            State::Group => "a <group> holds <transaction> elements",
            State::Transaction | State::Flowop => "a <transaction> holds <flowop> elements",
        };
        err(
            line,
            self.context(),
            format!("unknown element {shown_tag}: {holds}"),
        )
    }

    fn start_profile(&mut self, tag: &Tag<'_>) -> Result<(), ProfileError> {
        let line = tag.line;
        match self.state {
            State::Before => {}
            State::Flowop => return Err(self.flowop_not_closed(line)),
            _ => {
                return Err(err(
                    line,
                    "profile",
                    format!(
                        "a second <profile>: a file holds one <profile> (the first is at line {})",
                        self.profile_line
                    ),
                ))
            }
        }
        let [name] = self.attrs(tag, "profile", ["name"])?;
        let name = name.map(|n| n.trim().to_string()).unwrap_or_default();
        if name.is_empty() {
            return Err(err(
                line,
                "profile",
                "a <profile> needs a name: write <profile name=\"...\">".into(),
            ));
        }
        self.name = name;
        self.profile_line = line;
        self.state = State::Profile;
        if tag.self_closing {
            self.close_profile()?;
        }
        Ok(())
    }

    fn start_group(&mut self, tag: &Tag<'_>) -> Result<(), ProfileError> {
        let line = tag.line;
        let fail = |m: String| err(line, "group", m);
        let [nthreads, nprocs] = self.attrs(tag, "group", ["nthreads", "nprocs"])?;
        let (key, value) =
            match (nthreads, nprocs) {
                (Some(v), None) => ("nthreads", v),
                (None, Some(v)) => ("nprocs", v),
                (Some(_), Some(_)) => return Err(fail(
                    "a <group> takes nthreads or nprocs, not both: both give the number of users"
                        .into(),
                )),
                (None, None) => return Err(fail(
                    "a <group> needs nthreads=N (or nprocs=N): how many users run its transactions"
                        .into(),
                )),
            };
        let users = number_in(key, &value, 1, u64::from(MAX_USERS), &MAX_USERS.to_string())
            .map_err(fail)?;
        self.group = Some(Group {
            users: u32::try_from(users).unwrap_or(MAX_USERS),
            transactions: Vec::new(),
            line,
            number: u32::try_from(self.groups.len()).unwrap_or(u32::MAX),
        });
        self.state = State::Group;
        if tag.self_closing {
            self.close_group()?;
        }
        Ok(())
    }

    fn start_transaction(&mut self, tag: &Tag<'_>) -> Result<(), ProfileError> {
        let line = tag.line;
        let fail = |m: String| err(line, "transaction", m);
        let [iterations, duration, rate] =
            self.attrs(tag, "transaction", ["iterations", "duration", "rate"])?;
        let limit = match (iterations, duration) {
            (Some(_), Some(_)) => {
                return Err(fail(
                    "a <transaction> takes iterations or duration, not both".into(),
                ))
            }
            (Some(n), None) => {
                Limit::Iterations(number_in("iterations", &n, 1, u64::MAX, "").map_err(fail)?)
            }
            (None, Some(t)) => Limit::Duration(time_value("duration", &t).map_err(fail)?),
            (None, None) => Limit::Iterations(1),
        };
        let rate = match rate {
            Some(r) => Some(Rate(rate_value(&r).map_err(fail)?)),
            None => None,
        };
        self.transaction = Some(Transaction {
            limit,
            rate,
            flowops: Vec::new(),
            line,
        });
        self.state = State::Transaction;
        if tag.self_closing {
            self.close_transaction()?;
        }
        Ok(())
    }

    fn start_flowop(&mut self, tag: &Tag<'_>) -> Result<(), ProfileError> {
        let line = tag.line;
        let fail = |m: String| err(line, "flowop", m);
        let [ty, options] = self.attrs(tag, "flowop", ["type", "options"])?;
        let ty = ty.ok_or_else(|| {
            fail(format!(
                "a <flowop> needs a type: write type=\"...\", one of {TYPE_LIST}"
            ))
        })?;
        let t = ty.trim();
        let ty = TYPES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(t))
            .map(|&(_, ty)| ty)
            .ok_or_else(|| fail(format!("unknown flowop type {}: use {TYPE_LIST}", shown(t))))?;
        let flowop = build_flowop(ty, options.as_deref().unwrap_or(""), line).map_err(fail)?;
        if let Some(t) = self.transaction.as_mut() {
            t.flowops.push(flowop);
        }
        if !tag.self_closing {
            self.flowop_line = line;
            self.state = State::Flowop;
        }
        Ok(())
    }

    fn close_transaction(&mut self) -> Result<(), ProfileError> {
        if let Some(t) = self.transaction.take() {
            if t.flowops.is_empty() {
                return Err(err(
                    t.line,
                    "transaction",
                    "a <transaction> needs at least one <flowop>".into(),
                ));
            }
            if let Some(g) = self.group.as_mut() {
                g.transactions.push(t);
            }
        }
        self.state = State::Group;
        Ok(())
    }

    fn close_group(&mut self) -> Result<(), ProfileError> {
        if let Some(g) = self.group.take() {
            if g.transactions.is_empty() {
                return Err(err(
                    g.line,
                    "group",
                    "a <group> needs at least one <transaction>".into(),
                ));
            }
            self.groups.push(g);
        }
        self.state = State::Profile;
        Ok(())
    }

    fn close_profile(&mut self) -> Result<(), ProfileError> {
        if self.groups.is_empty() {
            return Err(err(
                self.profile_line,
                "profile",
                "a <profile> needs at least one <group>".into(),
            ));
        }
        self.state = State::After;
        Ok(())
    }

    fn end(&mut self, name: &str, line: u32) -> Result<(), ProfileError> {
        let lower = name.to_ascii_lowercase();
        if self.state == State::Flowop {
            if lower == "flowop" {
                self.state = State::Transaction;
                return Ok(());
            }
            return Err(self.flowop_not_closed(line));
        }
        let stray = |element: &str| {
            err(
                line,
                element,
                format!("</{element}> closes no open <{element}>"),
            )
        };
        match (lower.as_str(), self.state) {
            (_, State::After) => Err(err(
                line,
                "profile",
                format!(
                    "</{}> comes after </profile>: a file holds one <profile>, with everything inside it",
                    shown(name)
                ),
            )),
            ("transaction", State::Transaction) => self.close_transaction(),
            // A stray extra </transaction>, as real profiles have.
            ("transaction", State::Profile | State::Group) => Ok(()),
            ("group", State::Transaction) => {
                self.close_transaction()?;
                self.close_group()
            }
            ("group", State::Group) => self.close_group(),
            ("profile", State::Profile) => self.close_profile(),
            ("profile", State::Group | State::Transaction) => Err(err(
                self.group_line(),
                "group",
                format!(
                    "this <group> is not closed (</profile> is at line {line}): end it with </group>"
                ),
            )),
            ("transaction" | "group" | "profile" | "flowop", _) => Err(stray(&lower)),
            _ => Err(self.unknown_element(&format!("</{}>", shown(name)), line)),
        }
    }

    fn text(&self, text: &str, line: u32) -> Result<(), ProfileError> {
        let t = text.trim();
        if t.is_empty() {
            return Ok(());
        }
        let message = match self.state {
            State::Before | State::After => format!(
                "unexpected text {:?} outside <profile>: a file holds one <profile> and comments",
                shown(t)
            ),
            _ => format!(
                "unexpected text {:?}: a profile holds elements only (flowop settings go in options=\"...\")",
                shown(t)
            ),
        };
        Err(err(line, self.context(), message))
    }

    fn finish(self) -> Result<Profile, ProfileError> {
        match self.state {
            State::After => Ok(Profile {
                name: self.name,
                groups: self.groups,
            }),
            State::Before => Err(err(
                1,
                "profile",
                "no <profile> in the file: a profile file holds <profile name=\"...\"> with <group> elements inside".into(),
            )),
            State::Profile => Err(err(
                self.profile_line,
                "profile",
                "this <profile> is not closed: end the file with </profile>".into(),
            )),
            State::Group | State::Transaction => Err(err(
                self.group_line(),
                "group",
                "this <group> is not closed: end it with </group>".into(),
            )),
            State::Flowop => Err(err(
                self.flowop_line,
                "flowop",
                "this <flowop> is not closed: end it with /> or </flowop>".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn no_vars(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> Result<Profile, ProfileError> {
        parse_profile(text, &no_vars)
    }

    fn parse_with(text: &str, vars: &[(&str, &str)]) -> Result<Profile, ProfileError> {
        let lookup = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        parse_profile(text, &lookup)
    }

    fn error(text: &str) -> ProfileError {
        match parse(text) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => e,
        }
    }

    /// A profile around `body`, which starts on line 4.
    fn wrap(body: &str) -> String {
        format!(
            "<profile name=\"t\">\n<group nthreads=\"1\">\n<transaction iterations=\"1\">\n{body}\n</transaction>\n</group>\n</profile>\n"
        )
    }

    /// The first flowop of a profile around `body`.
    fn flowop(body: &str) -> Flowop {
        let p = parse(&wrap(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
        p.groups[0].transactions[0].flowops[0].clone()
    }

    /// The error for a profile around `body`: it must be about the flowop on line 4.
    fn flowop_error(body: &str) -> String {
        let e = error(&wrap(body));
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"), "{e}");
        e.message
    }

    fn tcp() -> Endpoint {
        Endpoint {
            remotehost: None,
            protocol: ProfileProtocol::Tcp,
            port: None,
            wndsz: None,
            nodelay: false,
            cc: None,
        }
    }

    fn fixed(size: u64) -> Xfer {
        Xfer {
            size: Size::Fixed(size),
            rsize: None,
        }
    }

    fn op(kind: FlowopKind, count: u64, line: u32) -> Flowop {
        Flowop {
            kind,
            count,
            conn: None,
            timeout: None,
            canfail: false,
            line,
        }
    }

    const NETPERF: &str = r#"<?xml version="1.0"?>
<!-- request/response like netperf's TCP_RR -->
<profile name="netperf">
  <group nthreads="$nthr">
    <transaction iterations="1">
      <flowop type="connect" options="remotehost=$h protocol=tcp wndsz=50k tcp_nodelay"/>
    </transaction>
    <transaction duration="30s">
      <flowop type="write" options="count=160 size=90"/>
      <flowop type="read" options="size=90"/>
    </transaction>
    <transaction iterations="1">
      <flowop type="disconnect" />
    </transaction>
  </group>
</profile>
"#;

    #[test]
    fn the_netperf_example_reads_as_the_model() {
        let p = parse_with(NETPERF, &[("nthr", "8"), ("h", "10.0.0.2")]).unwrap();
        let expected = Profile {
            name: "netperf".into(),
            groups: vec![Group {
                users: 8,
                line: 4,
                number: 0,
                transactions: vec![
                    Transaction {
                        limit: Limit::Iterations(1),
                        rate: None,
                        line: 5,
                        flowops: vec![op(
                            FlowopKind::Connect(Endpoint {
                                remotehost: Some("10.0.0.2".into()),
                                wndsz: Some(50 * 1024),
                                nodelay: true,
                                ..tcp()
                            }),
                            1,
                            6,
                        )],
                    },
                    Transaction {
                        limit: Limit::Duration(Duration::from_secs(30)),
                        rate: None,
                        line: 8,
                        flowops: vec![
                            op(FlowopKind::Write(fixed(90)), 160, 9),
                            op(FlowopKind::Read(fixed(90)), 1, 10),
                        ],
                    },
                    Transaction {
                        limit: Limit::Iterations(1),
                        rate: None,
                        line: 12,
                        flowops: vec![op(FlowopKind::Disconnect, 1, 13)],
                    },
                ],
            }],
        };
        assert_eq!(p, expected);
    }

    #[test]
    fn errors_display_line_element_and_message() {
        let e = ProfileError {
            line: 7,
            element: "flowop".into(),
            message: "size is missing".into(),
        };
        assert_eq!(e.to_string(), "line 7, <flowop>: size is missing");
    }

    #[test]
    fn unquoted_and_single_quoted_values_are_read() {
        let p = parse(
            "<profile name='x'>\n<group nthreads=2>\n<transaction iterations=5>\n<flowop type=write options='size=1k'/>\n<flowop type=disconnect/>\n</transaction>\n</group>\n</profile>",
        )
        .unwrap();
        assert_eq!(p.name, "x");
        assert_eq!(p.groups[0].users, 2);
        let t = &p.groups[0].transactions[0];
        assert_eq!(t.limit, Limit::Iterations(5));
        assert_eq!(t.flowops[0].kind, FlowopKind::Write(fixed(1024)));
        assert_eq!(t.flowops[1].kind, FlowopKind::Disconnect);
    }

    #[test]
    fn a_missing_end_transaction_is_closed_by_the_next_transaction_or_end_group() {
        let p = parse(
            "<profile name=x>\n<group nthreads=1>\n<transaction iterations=1>\n<flowop type=connect/>\n<transaction duration=1s>\n<flowop type=nop/>\n</group>\n</profile>",
        )
        .unwrap();
        let ts = &p.groups[0].transactions;
        assert_eq!(ts.len(), 2);
        assert_eq!((ts[0].line, ts[1].line), (3, 5));
        assert_eq!(ts[1].flowops[0].kind, FlowopKind::Nop);
    }

    #[test]
    fn a_stray_end_transaction_is_ignored() {
        let p = parse(
            "<profile name=x><group nthreads=1><transaction><flowop type=nop/></transaction></transaction>\n</group></transaction></profile>",
        )
        .unwrap();
        assert_eq!(p.groups[0].transactions.len(), 1);
    }

    #[test]
    fn element_attribute_and_type_names_are_read_in_any_case() {
        let p = parse(
            "<PROFILE Name=x><Group NTHREADS=3><TRANSACTION Iterations=2><FLOWOP TYPE=\"Write\" OPTIONS=\"SIZE=64K Count=2\"></FLOWOP><flowop type=THINK options=\"duration=1ms BUSY\"/></Transaction></GROUP></Profile>",
        )
        .unwrap();
        let t = &p.groups[0].transactions[0];
        assert_eq!(p.groups[0].users, 3);
        assert_eq!(t.flowops[0].kind, FlowopKind::Write(fixed(65536)));
        assert_eq!(t.flowops[0].count, 2);
        assert_eq!(
            t.flowops[1].kind,
            FlowopKind::Think {
                duration: Duration::from_millis(1),
                busy: true
            }
        );
    }

    #[test]
    fn a_flowop_may_be_closed_with_an_end_tag() {
        let f = flowop("<flowop type=\"read\" options=\"size=10\">  <!-- x -->\n </flowop>");
        assert_eq!(f.kind, FlowopKind::Read(fixed(10)));
        assert_eq!(f.line, 4);
    }

    #[test]
    fn comments_and_the_declaration_are_allowed_anywhere() {
        let p = parse(
            "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- a -->\n<profile name=x><!-- b <group> -->\n<group nthreads=1><!----><transaction>\n<!-- c\n\n -->\n<flowop type=nop/></transaction></group><?pi x?></profile>\n<!-- after -->\n",
        )
        .unwrap();
        let g = &p.groups[0];
        assert_eq!(g.line, 4);
        assert_eq!(g.transactions[0].flowops[0].line, 8);
    }

    #[test]
    fn options_may_span_lines_and_tabs() {
        let f = flowop(
            "<flowop type=\"connect\"\n  options=\"remotehost=h\n\tprotocol=udp   port=5001\r\n wndsz=1m cc=bbr\"/>",
        );
        assert_eq!(
            f.kind,
            FlowopKind::Connect(Endpoint {
                remotehost: Some("h".into()),
                protocol: ProfileProtocol::Udp,
                port: Some(5001),
                wndsz: Some(1024 * 1024),
                cc: Some("bbr".into()),
                ..tcp()
            })
        );
        assert_eq!(f.line, 4);
    }

    #[test]
    fn lines_after_a_multi_line_tag_are_counted() {
        let p = parse(
            "<profile\nname=x>\n<group\nnthreads=1\n>\n<transaction\niterations=1>\n<flowop type=nop options=\"\n\n\"/>\n<flowop type=nop/>\n</transaction></group></profile>",
        )
        .unwrap();
        let g = &p.groups[0];
        assert_eq!((g.line, g.transactions[0].line), (3, 6));
        let f = &g.transactions[0].flowops;
        assert_eq!((f[0].line, f[1].line), (8, 11));
    }

    #[test]
    fn several_groups_keep_their_order_and_nprocs_counts_users() {
        let p = parse(
            "<profile name=x>\n<group nprocs=4><transaction><flowop type=nop/></transaction></group>\n<group nthreads=1k><transaction><flowop type=accept/></transaction></group>\n</profile>",
        )
        .unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_eq!((p.groups[0].users, p.groups[1].users), (4, 1024));
        assert_eq!((p.groups[0].line, p.groups[1].line), (2, 3));
        assert_eq!(
            p.groups[1].transactions[0].flowops[0].kind,
            FlowopKind::Accept(tcp())
        );
    }

    #[test]
    fn group_users_must_be_given_once_and_in_range() {
        let cases = [
            ("nthreads=1 nprocs=1", "not both"),
            ("", "needs nthreads=N"),
            ("nthreads=0", "between 1 and 100000"),
            ("nprocs=100001", "between 1 and 100000"),
            ("nthreads=abc", "nthreads=abc is not a number"),
            ("nthreads=1 nthreads=2", "given twice"),
            ("nthreads=1 users=2", "unknown attribute users"),
        ];
        for (attrs, want) in cases {
            let e = error(&format!(
                "<profile name=x>\n\n<group {attrs}>\n<transaction><flowop type=nop/></transaction></group></profile>"
            ));
            assert_eq!((e.line, e.element.as_str()), (3, "group"), "{attrs}: {e}");
            assert!(e.message.contains(want), "{attrs}: {e}");
        }
        let p = parse("<profile name=x><group nthreads=100000><transaction><flowop type=nop/></transaction></group></profile>").unwrap();
        assert_eq!(p.users(), 100_000);
    }

    #[test]
    fn transactions_default_to_one_iteration_and_take_a_rate() {
        let p = parse(
            "<profile name=x><group nthreads=1><transaction rate=0.5><flowop type=nop/></transaction><transaction iterations=2k rate=100 duration=  ><flowop type=nop/></transaction></group></profile>",
        );
        // `duration=  >` has no value.
        assert!(p.is_err());
        let p = parse(
            "<profile name=x><group nthreads=1><transaction rate=0.5><flowop type=nop/></transaction><transaction iterations=2k rate=100><flowop type=nop/></transaction><transaction duration=0.25><flowop type=nop/></transaction></group></profile>",
        )
        .unwrap();
        let ts = &p.groups[0].transactions;
        assert_eq!(
            (ts[0].limit, ts[0].rate),
            (Limit::Iterations(1), Some(Rate(0.5)))
        );
        assert_eq!(
            (ts[1].limit, ts[1].rate),
            (Limit::Iterations(2048), Some(Rate(100.0)))
        );
        assert_eq!(ts[2].limit, Limit::Duration(Duration::from_millis(250)));
    }

    #[test]
    fn transaction_limits_and_rates_are_checked() {
        let cases = [
            ("iterations=1 duration=1s", "not both"),
            ("iterations=0", "at least 1"),
            ("duration=0", "longer than zero"),
            ("duration=-1s", "negative"),
            ("duration=soon", "not a time"),
            ("rate=0", "more than zero"),
            ("rate=-2", "not a rate"),
            ("rate=fast", "not a rate"),
            ("rate=1e3", "not a rate"),
            ("nthreads=1", "unknown attribute nthreads"),
        ];
        for (attrs, want) in cases {
            let e = error(&format!(
                "<profile name=x>\n<group nthreads=1>\n\n<transaction {attrs}><flowop type=nop/></transaction></group></profile>"
            ));
            assert_eq!(
                (e.line, e.element.as_str()),
                (4, "transaction"),
                "{attrs}: {e}"
            );
            assert!(e.message.contains(want), "{attrs}: {e}");
        }
    }

    #[test]
    fn empty_transactions_groups_and_profiles_are_refused() {
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n</transaction>\n</group></profile>");
        assert_eq!((e.line, e.element.as_str()), (3, "transaction"));
        assert!(e.message.contains("at least one <flowop>"), "{e}");
        let e = error(
            "<profile name=x>\n<group nthreads=1>\n<transaction iterations=1/>\n</group></profile>",
        );
        assert_eq!((e.line, e.element.as_str()), (3, "transaction"));
        let e = error("<profile name=x>\n<group nthreads=1>\n</group></profile>");
        assert_eq!((e.line, e.element.as_str()), (2, "group"));
        assert!(e.message.contains("at least one <transaction>"), "{e}");
        let e = error("<profile name=x>\n<group nthreads=1/>\n</profile>");
        assert_eq!((e.line, e.element.as_str()), (2, "group"));
        let e = error("\n<profile name=x>\n</profile>");
        assert_eq!((e.line, e.element.as_str()), (2, "profile"));
        assert!(e.message.contains("at least one <group>"), "{e}");
        let e = error("<profile name=x/>");
        assert_eq!((e.line, e.element.as_str()), (1, "profile"));
    }

    #[test]
    fn the_profile_needs_a_name_and_must_be_alone() {
        let body = "<group nthreads=1><transaction><flowop type=nop/></transaction></group>";
        for attrs in ["", "name=\"\"", "name='  '"] {
            let e = error(&format!("\n<profile {attrs}>{body}</profile>"));
            assert_eq!((e.line, e.element.as_str()), (2, "profile"), "{e}");
            assert!(e.message.contains("needs a name"), "{e}");
        }
        let e = error(&format!(
            "<profile name=x>{body}</profile>\n<profile name=y>{body}</profile>"
        ));
        assert_eq!((e.line, e.element.as_str()), (2, "profile"));
        assert!(e.message.contains("one <profile>"), "{e}");
        let e = error(&format!(
            "<profile name=x>{body}</profile>\n<group nthreads=1>"
        ));
        assert_eq!((e.line, e.element.as_str()), (2, "profile"));
        assert!(e.message.contains("after </profile>"), "{e}");
        let e = error(&format!("<profile name=x>{body}</profile>\n\n</group>"));
        assert_eq!((e.line, e.element.as_str()), (3, "profile"));
        let e = error(&format!("<profile name=x>{body}</profile>\ntrailing"));
        assert_eq!((e.line, e.element.as_str()), (2, "profile"));
        assert!(e.message.contains("trailing"), "{e}");
        let e = error(&format!("leading\n<profile name=x>{body}</profile>"));
        assert_eq!((e.line, e.element.as_str()), (1, "profile"));
        let e = error(&format!("<profile name=x title=y>{body}</profile>"));
        assert!(e.message.contains("unknown attribute title"), "{e}");
    }

    #[test]
    fn a_file_without_a_profile_is_refused() {
        for text in ["", "   \n", "<?xml version=\"1.0\"?>\n<!-- nothing -->\n"] {
            let e = error(text);
            assert_eq!((e.line, e.element.as_str()), (1, "profile"), "{e}");
            assert!(e.message.contains("no <profile>"), "{e}");
        }
    }

    #[test]
    fn elements_out_of_place_are_refused_with_their_line() {
        let e = error("<group nthreads=1>");
        assert_eq!((e.line, e.element.as_str()), (1, "group"));
        assert!(e.message.contains("inside <profile>"), "{e}");
        let e = error("<profile name=x>\n<transaction>");
        assert_eq!((e.line, e.element.as_str()), (2, "transaction"));
        let e = error("<profile name=x>\n<group nthreads=1>\n<flowop type=nop/>");
        assert_eq!((e.line, e.element.as_str()), (3, "flowop"));
        assert!(e.message.contains("inside a <transaction>"), "{e}");
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n<group nthreads=1>");
        assert_eq!((e.line, e.element.as_str()), (2, "group"));
        assert!(e.message.contains("line 5"), "{e}");
    }

    #[test]
    fn unclosed_elements_name_the_element_left_open() {
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n</transaction>\n</group>\n");
        assert_eq!((e.line, e.element.as_str()), (1, "profile"));
        assert!(e.message.contains("</profile>"), "{e}");
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n</transaction>\n</profile>");
        assert_eq!((e.line, e.element.as_str()), (2, "group"));
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n");
        assert_eq!((e.line, e.element.as_str()), (2, "group"));
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>\n<flowop type=nop/>");
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
        assert!(e.message.contains("</flowop>"), "{e}");
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>\n</transaction>");
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>");
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
        let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n</flowop>");
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
        assert!(e.message.contains("closes no open"), "{e}");
    }

    #[test]
    fn unknown_elements_and_attributes_are_named() {
        let e = error(&wrap("<flowop type=nop/>\n<sleep ms=1/>"));
        assert_eq!((e.line, e.element.as_str()), (5, "transaction"));
        assert!(e.message.contains("unknown element <sleep>"), "{e}");
        let e = error("<profile name=x>\n<group nthreads=1>\n</thing>");
        assert_eq!((e.line, e.element.as_str()), (3, "group"));
        assert!(e.message.contains("</thing>"), "{e}");
        let e = error("<Profiles>");
        assert_eq!((e.line, e.element.as_str()), (1, "profile"));
        assert!(e.message.contains("<Profiles>"), "{e}");
        let m = flowop_error("<flowop type=nop opts=\"x\"/>");
        assert!(m.contains("unknown attribute opts"), "{m}");
        let m = flowop_error("<flowop type=nop type=read/>");
        assert!(m.contains("given twice"), "{m}");
    }

    #[test]
    fn text_between_elements_is_refused() {
        let e = error(&wrap("<flowop type=nop/>\n\n  size=90"));
        assert_eq!((e.line, e.element.as_str()), (6, "transaction"));
        assert!(e.message.contains("size=90"), "{e}");
        let e = error(&wrap("<flowop type=nop>x</flowop>"));
        assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
    }

    #[test]
    fn malformed_markup_is_refused_with_its_line() {
        let cases = [
            ("<!-- never closed", "comment is not closed"),
            ("<?xml never closed", "not closed"),
            ("<!DOCTYPE profile>", "<!DOCTYPE"),
            ("<![CDATA[x]]>", "not supported"),
            ("< profile>", "`<` must start an element"),
            ("<profile name=\"x>", "not closed"),
            ("<profile name='x", "not closed"),
            ("<profile name", "has no value"),
            ("<profile name=>", "has no value"),
            ("<profile name=x", "not closed"),
            ("<profile \"x\">", "unexpected"),
            ("</ profile>", "`</` must be followed"),
            ("</profile x>", "not closed"),
        ];
        for (text, want) in cases {
            let e = error(&format!("\n\n{text}"));
            assert_eq!(e.line, 3, "{text}: {e}");
            assert!(e.message.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn entities_in_values_are_decoded() {
        let f = flowop("<flowop type=connect options=\"remotehost=a&amp;b&#x41;&#66;&lt;&gt;&quot;&apos;&bogus; cc=&\"/>");
        let FlowopKind::Connect(e) = f.kind else {
            panic!("{f:?}")
        };
        assert_eq!(e.remotehost.as_deref(), Some("a&bAB<>\"'&bogus;"));
        assert_eq!(e.cc.as_deref(), Some("&"));
    }

    #[test]
    fn every_flowop_type_is_read() {
        let cases = [
            ("connect", "", FlowopKind::Connect(tcp())),
            ("accept", "", FlowopKind::Accept(tcp())),
            ("disconnect", "", FlowopKind::Disconnect),
            ("read", "size=1", FlowopKind::Read(fixed(1))),
            ("write", "size=2", FlowopKind::Write(fixed(2))),
            ("send", "size=3", FlowopKind::Send(fixed(3))),
            ("recv", "size=4", FlowopKind::Recv(fixed(4))),
            ("sendfile", "size=5", FlowopKind::Sendfile(fixed(5))),
            (
                "think",
                "duration=5",
                FlowopKind::Think {
                    duration: Duration::from_secs(5),
                    busy: false,
                },
            ),
            ("nop", "", FlowopKind::Nop),
        ];
        for (ty, options, kind) in cases {
            let f = flowop(&format!("<flowop type=\"{ty}\" options=\"{options}\"/>"));
            assert_eq!(f, op(kind, 1, 4), "{ty}");
            assert_eq!(f.kind.name(), ty);
        }
        // No options attribute at all.
        assert_eq!(flowop("<flowop type=nop/>").kind, FlowopKind::Nop);
    }

    #[test]
    fn an_unknown_or_missing_flowop_type_is_named() {
        let m = flowop_error("<flowop type=\"sleep\"/>");
        assert!(m.contains("unknown flowop type sleep"), "{m}");
        assert!(m.contains("connect, accept"), "{m}");
        let m = flowop_error("<flowop options=\"size=1\"/>");
        assert!(m.contains("needs a type"), "{m}");
    }

    #[test]
    fn data_flowops_need_a_size_and_others_refuse_one() {
        for ty in ["read", "write", "send", "recv", "sendfile"] {
            let m = flowop_error(&format!("<flowop type={ty} options=\"count=2\"/>"));
            assert!(m.contains(&format!("a {ty} flowop needs size=N")), "{m}");
        }
        for ty in ["connect", "accept", "disconnect", "think", "nop"] {
            let m = flowop_error(&format!(
                "<flowop type={ty} options=\"size=10 duration=1\"/>"
            ));
            assert!(m.contains("option size applies only to read, write"), "{m}");
        }
        let m = flowop_error("<flowop type=nop options=\"rsize=10\"/>");
        assert!(m.contains("option rsize applies only"), "{m}");
    }

    #[test]
    fn common_options_apply_to_every_flowop() {
        let f = flowop("<flowop type=write options=\"size=100 rsize=10 count=1k conn=c1 timeout=500ms canfail\"/>");
        assert_eq!(
            f,
            Flowop {
                kind: FlowopKind::Write(Xfer {
                    size: Size::Fixed(100),
                    rsize: Some(10),
                }),
                count: 1024,
                conn: Some("c1".into()),
                timeout: Some(Duration::from_millis(500)),
                canfail: true,
                line: 4,
            }
        );
        let f = flowop("<flowop type=disconnect options=\"conn=2 count=3 CANFAIL\"/>");
        assert_eq!(
            (f.conn.as_deref(), f.count, f.canfail),
            (Some("2"), 3, true)
        );
    }

    #[test]
    fn option_values_are_checked() {
        let cases = [
            ("write", "size=0", "between 1 and 64m"),
            ("write", "size=64m", ""),
            ("write", "size=65m", "between 1 and 64m"),
            ("write", "size=ten", "size=ten is not a number"),
            ("write", "size=1 rsize=0", "rsize=0 is out of range"),
            (
                "write",
                "size=1 count=0",
                "count=0 is out of range: it must be at least 1",
            ),
            ("write", "size=1 count=x", "not a number"),
            ("write", "size=1 timeout=0", "longer than zero"),
            ("write", "size=1 timeout=-1", "negative"),
            ("write", "size=1 conn=", "needs a value"),
            ("write", "size", "needs a value: write size=..."),
            (
                "write",
                "size=1 canfail=yes",
                "is a flag and takes no value",
            ),
            ("write", "size=1 size=2", "option size is given twice"),
            ("think", "", "needs duration=T"),
            ("think", "duration=1 busy idle", "busy and idle contradict"),
            ("think", "duration=0ms", "longer than zero"),
            ("connect", "port=0", "between 1 and 65535"),
            ("connect", "port=65536", "between 1 and 65535"),
            ("connect", "port=1k", "between 1 and 65535"),
            ("connect", "wndsz=0", "wndsz=0 is out of range"),
            ("connect", "wndsz=2g", "between 1 and 1g"),
            ("connect", "remotehost=", "needs a value"),
            ("accept", "protocol=", "needs a value"),
        ];
        for (ty, options, want) in cases {
            let text = wrap(&format!("<flowop type={ty} options=\"{options}\"/>"));
            match parse(&text) {
                Ok(p) if want.is_empty() => assert_eq!(p.groups.len(), 1),
                Ok(p) => panic!("{ty} {options}: expected an error, got {p:?}"),
                Err(e) => {
                    assert!(!want.is_empty(), "{ty} {options}: {e}");
                    assert_eq!((e.line, e.element.as_str()), (4, "flowop"), "{e}");
                    assert!(e.message.contains(want), "{ty} {options}: {e}");
                }
            }
        }
    }

    #[test]
    fn an_unknown_option_is_named_with_the_options_the_type_takes() {
        let m = flowop_error("<flowop type=write options=\"size=1 nodelay=1\"/>");
        assert!(m.starts_with("unknown option nodelay:"), "{m}");
        assert!(
            m.contains("size, rsize, count, conn, timeout, canfail"),
            "{m}"
        );
        let m = flowop_error("<flowop type=nop options=\"dir=/tmp\"/>");
        assert!(m.contains("unknown option dir"), "{m}");
    }

    #[test]
    fn connect_options_are_read_and_refused_elsewhere() {
        let f = flowop("<flowop type=accept options=\"protocol=UDP port=65535 cc=cubic tcp_nodelay wndsz=256KB\"/>");
        assert_eq!(
            f.kind,
            FlowopKind::Accept(Endpoint {
                remotehost: None,
                protocol: ProfileProtocol::Udp,
                port: Some(65535),
                wndsz: Some(256 * 1024),
                nodelay: true,
                cc: Some("cubic".into()),
            })
        );
        for option in [
            "remotehost=h",
            "protocol=tcp",
            "port=1",
            "wndsz=1k",
            "tcp_nodelay",
            "cc=bbr",
        ] {
            let m = flowop_error(&format!("<flowop type=write options=\"size=1 {option}\"/>"));
            assert!(
                m.contains("applies only to connect and accept flowops"),
                "{m}"
            );
        }
        let m = flowop_error("<flowop type=connect options=\"duration=1\"/>");
        assert!(m.contains("applies only to think flowops"), "{m}");
    }

    #[test]
    fn unsupported_protocols_are_named() {
        for p in ["sctp", "ssl", "rds", "vsock", "udapl"] {
            let m = flowop_error(&format!("<flowop type=connect options=\"protocol={p}\"/>"));
            assert_eq!(
                m,
                format!("protocol={p} is not supported: linkperf carries tcp and udp")
            );
        }
        let m = flowop_error("<flowop type=connect options=\"protocol=quic\"/>");
        assert!(m.contains("unknown protocol=quic"), "{m}");
        assert!(m.contains("tcp and udp"), "{m}");
    }

    #[test]
    fn numbers_take_binary_suffixes_in_any_case() {
        for (text, n) in [
            ("90", 90),
            ("64k", 65536),
            ("64K", 65536),
            ("64kb", 65536),
            ("64KB", 65536),
            ("64kB", 65536),
            ("1m", 1 << 20),
            ("1MB", 1 << 20),
            ("2g", 2 << 30),
            ("2Gb", 2 << 30),
            ("007", 7),
            (" 5 ", 5),
        ] {
            assert_eq!(number(text).ok(), Some(n), "{text}");
        }
        for bad in [
            "", "k", "kb", "64b", "1.5k", "-1", "+1", "1x", "1 k", "1kk", "１",
        ] {
            assert!(matches!(number(bad), Err(NumberError::NotANumber)), "{bad}");
        }
        for big in ["18446744073709551616", "18014398509481984k", "17179869184g"] {
            assert!(matches!(number(big), Err(NumberError::TooLarge)), "{big}");
        }
        assert_eq!(number("18446744073709551615").ok(), Some(u64::MAX));
    }

    #[test]
    fn an_overflowing_count_is_too_large() {
        let m = flowop_error("<flowop type=nop options=\"count=99999999999999999999\"/>");
        assert!(m.contains("too large"), "{m}");
        let e = error("<profile name=x><group nthreads=1><transaction iterations=99999999999g><flowop type=nop/></transaction></group></profile>");
        assert!(
            e.message.contains("iterations=99999999999g is too large"),
            "{e}"
        );
    }

    #[test]
    fn times_read_uperf_units_with_m_as_milliseconds() {
        for (text, d) in [
            ("30", Duration::from_secs(30)),
            ("30s", Duration::from_secs(30)),
            ("30S", Duration::from_secs(30)),
            ("0.5", Duration::from_millis(500)),
            (".5s", Duration::from_millis(500)),
            ("5.", Duration::from_secs(5)),
            ("10m", Duration::from_millis(10)),
            ("10ms", Duration::from_millis(10)),
            ("1.5ms", Duration::from_micros(1500)),
            ("100u", Duration::from_micros(100)),
            ("100us", Duration::from_micros(100)),
            ("500n", Duration::from_nanos(500)),
            ("500ns", Duration::from_nanos(500)),
            ("1 s", Duration::from_secs(1)),
            ("0.1", Duration::from_millis(100)),
            ("0.000000001", Duration::from_nanos(1)),
            ("1.0000000019999999999999", Duration::new(1, 1)),
        ] {
            assert_eq!(time_value("duration", text), Ok(d), "{text}");
        }
        for (bad, want) in [
            ("-1", "negative"),
            ("-0.5s", "negative"),
            ("", "not a time"),
            ("s", "not a time"),
            ("1h", "not a time"),
            ("1.2.3", "not a time"),
            ("1e3", "not a time"),
            ("0", "longer than zero"),
            ("0.0000000001", "longer than zero"),
            ("99999999999999999999999", "too long"),
            ("999999999999999999999999999999999999999999", "too long"),
        ] {
            let got = time_value("duration", bad);
            assert!(
                got.as_ref().is_err_and(|m| m.contains(want)),
                "{bad}: {got:?}"
            );
        }
    }

    #[test]
    fn think_takes_a_duration_and_busy_or_idle() {
        let f = flowop("<flowop type=think options=\"duration=10m idle\"/>");
        assert_eq!(
            f.kind,
            FlowopKind::Think {
                duration: Duration::from_millis(10),
                busy: false
            }
        );
        let f = flowop("<flowop type=think options=\"busy duration=2us\"/>");
        assert_eq!(
            f.kind,
            FlowopKind::Think {
                duration: Duration::from_micros(2),
                busy: true
            }
        );
    }

    #[test]
    fn random_sizes_are_read_with_spaces_inside() {
        for (text, min, max) in [
            ("size=rand(1,10)", 1, 10),
            ("size=RAND( 1k , 64k )", 1024, 65536),
            ("size=rand(5,5)", 5, 5),
            ("size=rand(1,64m)", 1, 64 << 20),
        ] {
            let f = flowop(&format!("<flowop type=send options=\"{text} count=2\"/>"));
            assert_eq!(
                f.kind,
                FlowopKind::Send(Xfer {
                    size: Size::Rand { min, max },
                    rsize: None
                }),
                "{text}"
            );
            assert_eq!(f.count, 2);
        }
        for (text, want) in [
            ("size=rand(10,1)", "smallest size comes first"),
            ("size=rand(0,1)", "between 1 and 64m"),
            ("size=rand(1,65m)", "between 1 and 64m"),
            ("size=rand(1)", "two sizes"),
            ("size=rand(1,2,3)", "two sizes"),
            ("size=rand(1,2", "closing )"),
            ("size=rand(a,2)", "a is not a number"),
            ("size=rand(1,99999999999999999999)", "too large"),
            ("size=rnd(1,2)", "not a number"),
        ] {
            let m = flowop_error(&format!("<flowop type=send options=\"{text}\"/>"));
            assert!(m.contains(want), "{text}: {m}");
        }
    }

    #[test]
    fn variables_are_substituted_everywhere() {
        let text = "<profile name=\"$name-${suffix}\">\n<group nthreads=$n>\n<transaction duration=\"${secs}s\" rate=$rate>\n<flowop type=$ty options=\"size=${sz}k count=$n$n conn=c_$n\"/>\n</transaction></group></profile>";
        let vars = [
            ("name", "rr"),
            ("suffix", "x"),
            ("n", "2"),
            ("secs", "3"),
            ("rate", "1.5"),
            ("ty", "write"),
            ("sz", "4"),
        ];
        let p = parse_with(text, &vars).unwrap();
        assert_eq!(p.name, "rr-x");
        assert_eq!(p.groups[0].users, 2);
        let t = &p.groups[0].transactions[0];
        assert_eq!(t.limit, Limit::Duration(Duration::from_secs(3)));
        assert_eq!(t.rate, Some(Rate(1.5)));
        let f = &t.flowops[0];
        assert_eq!(f.kind, FlowopKind::Write(fixed(4096)));
        assert_eq!((f.count, f.conn.as_deref()), (22, Some("c_2")));
    }

    #[test]
    fn a_variable_may_hold_several_options() {
        let p = parse_with(
            &wrap("<flowop type=connect options=\"$opts\"/>"),
            &[("opts", "remotehost=h protocol=udp")],
        )
        .unwrap();
        let f = &p.groups[0].transactions[0].flowops[0];
        assert_eq!(
            f.kind,
            FlowopKind::Connect(Endpoint {
                remotehost: Some("h".into()),
                protocol: ProfileProtocol::Udp,
                ..tcp()
            })
        );
    }

    #[test]
    fn an_unset_variable_is_named_in_the_error() {
        let e = parse_with(NETPERF, &[("nthr", "1")]).unwrap_err();
        assert_eq!(
            e,
            ProfileError {
                line: 6,
                element: "flowop".into(),
                message: "variable $h is not set: set it in the environment or with --var h=value"
                    .into(),
            }
        );
        let e = parse_with(NETPERF, &[("h", "x")]).unwrap_err();
        assert_eq!((e.line, e.element.as_str()), (4, "group"));
        assert!(e.message.starts_with("variable $nthr is not set"), "{e}");
        let e = parse(&wrap("<flowop type=nop options=\"conn=${braced_1}\"/>")).unwrap_err();
        assert!(
            e.message.starts_with("variable $braced_1 is not set"),
            "{e}"
        );
    }

    #[test]
    fn a_dollar_without_a_variable_name_is_refused() {
        for bad in ["$", "$1", "${}", "${a b}", "${x", "$-", "$é"] {
            let m = flowop_error(&format!("<flowop type=nop options=\"conn={bad}\"/>"));
            assert!(
                m.contains("is not a variable") || m.contains("is not closed"),
                "{bad}: {m}"
            );
        }
    }

    #[test]
    fn variable_values_are_not_substituted_again() {
        let p = parse_with(
            &wrap("<flowop type=nop options=\"conn=$a\"/>"),
            &[("a", "$b")],
        )
        .unwrap();
        assert_eq!(
            p.groups[0].transactions[0].flowops[0].conn.as_deref(),
            Some("$b")
        );
    }

    #[test]
    fn values_that_grow_past_a_mebibyte_are_refused() {
        let big = "x".repeat(600 * 1024);
        let e = parse_with(
            &wrap("<flowop type=nop options=\"conn=$a$a\"/>"),
            &[("a", &big)],
        )
        .unwrap_err();
        assert!(e.message.contains("longer than 1 MiB"), "{e}");
    }

    #[test]
    fn profiles_over_a_mebibyte_are_refused() {
        let mut text = wrap("<flowop type=nop/>");
        text.push_str(&" ".repeat(MAX_TEXT));
        let e = error(&text);
        assert_eq!((e.line, e.element.as_str()), (1, "profile"));
        assert!(e.message.contains("limited to 1 MiB"), "{e}");
    }

    #[test]
    fn a_large_profile_is_read_in_linear_time() {
        let flowops = "<flowop type=write options=\"size=1 count=2\"/>\n".repeat(20_000);
        let text = wrap(&flowops);
        assert!(text.len() < MAX_TEXT);
        let start = std::time::Instant::now();
        let p = parse(&text).unwrap();
        assert_eq!(p.groups[0].transactions[0].flowops.len(), 20_000);
        assert_eq!(p.groups[0].transactions[0].flowops[19_999].line, 4 + 19_999);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn hostile_inputs_fail_quickly_without_panicking() {
        let inputs = [
            "<a>".repeat(300_000),
            "<profile name=x ".to_string() + &"a=1 ".repeat(200_000),
            "<profile name=x name=y".to_string() + &" name=z".repeat(100_000),
            "<!--".repeat(200_000),
            "<".repeat(MAX_TEXT),
            "&".repeat(MAX_TEXT),
            format!("<profile name=\"{}\">", "$".repeat(500_000)),
            format!("<profile name=\"{}\">", "${".repeat(400_000)),
            format!("<profile name=\"{}\">", "&#".repeat(400_000)),
            wrap(&format!(
                "<flowop type=nop options=\"{}\"/>",
                "(".repeat(500_000)
            )),
            wrap(&format!(
                "<flowop type=write options=\"size=rand({})\"/>",
                "9".repeat(500_000)
            )),
            wrap(&format!(
                "<flowop type=think options=\"duration={}\"/>",
                "9".repeat(500_000)
            )),
            wrap(&format!("<transaction rate={}>", "9".repeat(500_000))),
            "é<profile name=é>\u{10ffff}".repeat(1000),
        ];
        let start = std::time::Instant::now();
        for text in &inputs {
            let text = text.get(..MAX_TEXT).unwrap_or(text);
            assert!(parse(text).is_err());
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn multibyte_characters_never_split() {
        for text in [
            "<profile name=\"é\"><group nthreads=\"１\">",
            "<profile name=é/>",
            "<profile name=\"x\"><group nthreads=1><transaction><flowop type=\"ré\"/>",
            "<profile name=\"x\"><group nthreads=1><transaction><flowop type=nop options=\"conn=€ size=€ 宇=1\"/>",
            "<profile name=\"x\"><group nthreads=1><transaction duration=\"5€\">",
            "<prof€ile>",
            "<profile name=x>ü</profile>",
            &format!("<profile name=\"{}\">", "é".repeat(100)),
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
        let e = error(&format!(
            "<profile name=x><group nthreads=\"{}\">",
            "é".repeat(100)
        ));
        assert!(
            e.message.ends_with(
                "is not a number: write digits with an optional k, m or g suffix (64k is 65536)"
            ),
            "{e}"
        );
        assert!(e.message.contains("..."), "{e}");
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        #[test]
        fn xml_like_text_never_panics(text in "[<>/=\"' \n!?$-{}()a-zA-Z0-9_&;#é]{0,400}") {
            let _ = parse_with(&text, &[("a", "1"), ("x", "<\"'$")]);
        }

        #[test]
        fn flowop_options_never_panic(options in "[a-z_=(), 0-9.$\\-kmgsuné]{0,80}") {
            for ty in ["connect", "write", "think", "nop"] {
                let _ = parse(&wrap(&format!("<flowop type={ty} options=\"{options}\"/>")));
            }
        }

        #[test]
        fn cutting_a_valid_profile_anywhere_never_panics(cut in 0usize..600) {
            let text = NETPERF;
            let mut cut = cut.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let _ = parse_with(&text[..cut], &[("nthr", "1"), ("h", "h")]);
        }
    }
}
