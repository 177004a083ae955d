//! The builder: the profile's structure, one token at a time; and
//! `parse_profile`, which feeds it the lexer's tokens.

use thiserror::Error;

use super::lexer::{Lexer, Tag, Token};
use super::options::{build_flowop, TYPES, TYPE_LIST};
use super::values::{number_in, rate_value, shown, substitute, time_value, MAX_TEXT};
use crate::profile::model::{Group, Limit, Profile, Rate, Transaction};
use crate::MAX_USERS;

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
    /// The variable that is not set, if that is what was wrong: the
    /// caller says where it can be set (its flag, its file's key).
    pub unset_variable: Option<String>,
}

/// What linkperf accepts of a profile but does not do as uperf would (an
/// option it ignores, a flowop it runs as another): where, and what.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, <{element}>: {message}")]
pub struct ProfileWarning {
    /// The 1-based line of the element.
    pub line: u32,
    /// The element: `transaction` or `flowop`.
    pub element: String,
    /// What is ignored or done differently, and why.
    pub message: String,
}

fn err(line: u32, element: &str, message: String) -> ProfileError {
    ProfileError {
        line,
        element: element.to_string(),
        message,
        unset_variable: None,
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
    parse_profile_warned(text, var).map(|(p, _)| p)
}

/// [`parse_profile`], with the warnings: what the profile asks that linkperf
/// accepts but ignores or does differently from uperf, each naming it.
pub fn parse_profile_warned(
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(Profile, Vec<ProfileWarning>), ProfileError> {
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
    let mut lexer = Lexer::new(text);
    let mut builder = Builder {
        var,
        state: State::Before,
        name: String::new(),
        profile_line: 1,
        groups: Vec::new(),
        group: None,
        transaction: None,
        flowop_line: 1,
        warnings: Vec::new(),
    };
    loop {
        let token = lexer
            .next_token()
            .map_err(|e| err(e.line, builder.context(), e.message))?;
        match token {
            Token::Eof => {
                let warnings = std::mem::take(&mut builder.warnings);
                let profile = builder.finish()?;
                // What the options' own ranges cannot see (the users of all
                // groups together); the server runs the same check.
                return match profile.check() {
                    Ok(()) => Ok((profile, warnings)),
                    Err(e) => Err(err(e.line, "profile", e.message)),
                };
            }
            Token::Start(tag) => builder.start(&tag)?,
            Token::End { name, line } => builder.end(name, line)?,
            Token::Text { text, line } => builder.text(text, line)?,
        }
    }
}

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
    warnings: Vec<ProfileWarning>,
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
            let value = substitute(value, self.var).map_err(|e| ProfileError {
                unset_variable: e.unset,
                ..err(tag.line, element, e.message)
            })?;
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
            // iterations=0 runs the transaction no times, as in uperf.
            (Some(n), None) => {
                Limit::Iterations(number_in("iterations", &n, 0, u64::MAX, "").map_err(fail)?)
            }
            (None, Some(t)) => Limit::Duration(time_value("duration", &t).map_err(fail)?),
            (None, None) => Limit::Iterations(1),
        };
        let rate = match rate {
            Some(r) => Some(Rate(rate_value(&r).map_err(fail)?)),
            None => None,
        };
        // uperf paces only a timed transaction; on iterations= it ignores rate=.
        let rate = match (limit, rate) {
            (Limit::Iterations(_), Some(r)) => {
                self.warnings.push(ProfileWarning {
                    line,
                    element: "transaction".into(),
                    message: format!(
                        "rate={} has no effect on a transaction of iterations= (uperf paces \
                         only a transaction of duration=): ignored",
                        r.0
                    ),
                });
                None
            }
            (_, r) => r,
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
        let (flowop, warnings) =
            build_flowop(ty, options.as_deref().unwrap_or(""), line).map_err(fail)?;
        self.warnings
            .extend(warnings.into_iter().map(|message| ProfileWarning {
                line,
                element: "flowop".into(),
                message,
            }));
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
