//! The lexer: tags, end tags and text, comments and declarations skipped.

use std::borrow::Cow;

use super::values::shown;

/// A start tag: `<name attr=value ...>` or `<name ... />`.
pub(super) struct Tag<'a> {
    pub(super) name: &'a str,
    /// Attribute names as written, values with XML entities decoded.
    pub(super) attrs: Vec<(&'a str, Cow<'a, str>)>,
    pub(super) self_closing: bool,
    pub(super) line: u32,
}

pub(super) enum Token<'a> {
    Start(Tag<'a>),
    End { name: &'a str, line: u32 },
    Text { text: &'a str, line: u32 },
    Eof,
}

pub(super) struct LexError {
    pub(super) line: u32,
    pub(super) message: String,
}

fn lex_err(line: u32, message: String) -> LexError {
    LexError { line, message }
}

/// A forward-only cursor over the text; `pos` is always on a char boundary.
pub(super) struct Lexer<'a> {
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
    /// A lexer at the start of `text`, on line 1.
    pub(super) fn new(text: &'a str) -> Self {
        Lexer {
            text,
            pos: 0,
            line: 1,
        }
    }

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

    pub(super) fn next_token(&mut self) -> Result<Token<'a>, LexError> {
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
