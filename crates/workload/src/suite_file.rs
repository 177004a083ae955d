//! Suite files: a TOML description of workloads × users × protocols with
//! per-test settings, read from text (the caller reads the file) and checked
//! completely before anything runs. The format is documented in `docs/suites.md`.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::suite::Location;
use crate::{
    Arrival, BitsPerSecond, Bytes, CpuList, OfferedLoad, Protocol, SocketOptions, Suite,
    SuiteError, SuiteTest, TestOverrides, TestSpec, TransactionsPerSecond, Workload, WorkloadError,
    MAX_USERS,
};

/// Measurement window of a test whose file sets none (as `linkperf run`).
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A share TOML may give as a number or as text: `max_loss = 0.5` or `"0.5%"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FloatOrText {
    Float(f64),
    Text(String),
}

/// A value TOML may give as a number or as text: `sndbuf = 262144` or `"256k"`,
/// `affinity = 2` or `"0-3"`, `duration = 10` or `"10s"`.
#[derive(Debug)]
enum NumberOrText {
    Number(i64),
    Text(String),
}

impl NumberOrText {
    fn text(&self) -> String {
        match self {
            NumberOrText::Number(n) => n.to_string(),
            NumberOrText::Text(s) => s.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for NumberOrText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NumberOrText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(NumberOrText::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(NumberOrText::Number)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(NumberOrText::Text(v.to_string()))
            }
            // `duration = 2.5`: the key's own parser judges the text.
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(NumberOrText::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The per-test setting keys, as one table gives them (any may be absent).
#[derive(Debug, Clone, Copy)]
struct Settings<'a> {
    duration: Option<&'a Spanned<NumberOrText>>,
    warmup: Option<&'a Spanned<NumberOrText>>,
    threads: Option<&'a Spanned<u32>>,
    server_threads: Option<&'a Spanned<u32>>,
    affinity: Option<&'a Spanned<NumberOrText>>,
    server_affinity: Option<&'a Spanned<NumberOrText>>,
    busy_poll: Option<bool>,
    nodelay: Option<bool>,
    sndbuf: Option<&'a Spanned<NumberOrText>>,
    rcvbuf: Option<&'a Spanned<NumberOrText>>,
    cc: Option<&'a Spanned<String>>,
    mss: Option<&'a Spanned<u32>>,
    udp_timeout: Option<&'a Spanned<NumberOrText>>,
    rate: Option<&'a Spanned<NumberOrText>>,
    arrival: Option<&'a Spanned<String>>,
    max_outstanding: Option<&'a Spanned<u32>>,
}

/// Declares a table that takes the per-test setting keys besides its own, so
/// that the list of settings is written once for the file, `[[matrix]]` and `[[test]]`.
macro_rules! table_with_settings {
    ($(#[$meta:meta])* struct $name:ident { $($field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            $($field: $ty,)*
            duration: Option<Spanned<NumberOrText>>,
            warmup: Option<Spanned<NumberOrText>>,
            threads: Option<Spanned<u32>>,
            server_threads: Option<Spanned<u32>>,
            affinity: Option<Spanned<NumberOrText>>,
            server_affinity: Option<Spanned<NumberOrText>>,
            busy_poll: Option<bool>,
            nodelay: Option<bool>,
            sndbuf: Option<Spanned<NumberOrText>>,
            rcvbuf: Option<Spanned<NumberOrText>>,
            cc: Option<Spanned<String>>,
            mss: Option<Spanned<u32>>,
            udp_timeout: Option<Spanned<NumberOrText>>,
            rate: Option<Spanned<NumberOrText>>,
            arrival: Option<Spanned<String>>,
            max_outstanding: Option<Spanned<u32>>,
        }

        impl $name {
            fn settings(&self) -> Settings<'_> {
                Settings {
                    duration: self.duration.as_ref(),
                    warmup: self.warmup.as_ref(),
                    threads: self.threads.as_ref(),
                    server_threads: self.server_threads.as_ref(),
                    affinity: self.affinity.as_ref(),
                    server_affinity: self.server_affinity.as_ref(),
                    busy_poll: self.busy_poll,
                    nodelay: self.nodelay,
                    sndbuf: self.sndbuf.as_ref(),
                    rcvbuf: self.rcvbuf.as_ref(),
                    cc: self.cc.as_ref(),
                    mss: self.mss.as_ref(),
                    udp_timeout: self.udp_timeout.as_ref(),
                    rate: self.rate.as_ref(),
                    arrival: self.arrival.as_ref(),
                    max_outstanding: self.max_outstanding.as_ref(),
                }
            }
        }
    };
}

table_with_settings! {
    /// The whole file; its settings are the defaults of every test.
    struct RawSuite {
        name: Option<Spanned<String>>,
        description: Option<String>,
        repeat: Option<Spanned<u32>>,
        retry_suspect: Option<Spanned<u32>>,
        max_loss: Option<Spanned<FloatOrText>>,
        matrix: Option<Vec<Spanned<RawMatrix>>>,
        test: Option<Vec<Spanned<RawTest>>>,
        profile: Option<Vec<Spanned<RawProfile>>>,
    }
}

/// `[[profile]]`: a uperf profile file (relative to the suite file) and its
/// variables; the profile's own transactions set its users and its time, so
/// only worker placement may be set beside it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    file: Spanned<String>,
    vars: Option<HashMap<String, String>>,
    threads: Option<Spanned<u32>>,
    server_threads: Option<Spanned<u32>>,
    affinity: Option<Spanned<NumberOrText>>,
    server_affinity: Option<Spanned<NumberOrText>>,
    busy_poll: Option<bool>,
}

impl RawProfile {
    fn settings(&self) -> Settings<'_> {
        Settings {
            duration: None,
            warmup: None,
            threads: self.threads.as_ref(),
            server_threads: self.server_threads.as_ref(),
            affinity: self.affinity.as_ref(),
            server_affinity: self.server_affinity.as_ref(),
            busy_poll: self.busy_poll,
            nodelay: None,
            sndbuf: None,
            rcvbuf: None,
            cc: None,
            mss: None,
            udp_timeout: None,
            rate: None,
            arrival: None,
            max_outstanding: None,
        }
    }
}

table_with_settings! {
    /// `[[matrix]]`: every workload × every protocol × every user count.
    struct RawMatrix {
        workloads: Spanned<Vec<Spanned<String>>>,
        users: Spanned<Vec<Spanned<u32>>>,
        protocols: Option<Spanned<Vec<Spanned<String>>>>,
        offered: Option<Spanned<Vec<Spanned<NumberOrText>>>>,
    }
}

table_with_settings! {
    /// `[[test]]`: one test.
    struct RawTest {
        workload: Spanned<String>,
        users: Spanned<u32>,
        protocol: Option<Spanned<String>>,
        offered: Option<Spanned<NumberOrText>>,
    }
}

/// Reads a suite file: `text` is its content, `origin` its name for messages
/// (usually the path). Every test is expanded and checked before this returns:
/// a suite comes back whole, or not at all.
pub fn parse_suite(text: &str, origin: &str) -> Result<Suite, SuiteError> {
    let raw: RawSuite = toml::from_str(text).map_err(|e| SuiteError::Toml {
        at: match e.span() {
            Some(span) => Location::at(origin, text, span.start),
            None => Location::unplaced(origin),
        },
        message: e.message().trim().to_string(),
    })?;
    let file = FileCtx { origin, text };

    let name = match &raw.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(file.value(n.span(), "name must not be empty".into()))
        }
        Some(n) => n.get_ref().trim().to_string(),
        None => default_name(origin),
    };
    let repeat = match &raw.repeat {
        Some(r) if *r.get_ref() == 0 => {
            return Err(file.value(r.span(), "repeat must be at least 1".into()))
        }
        Some(r) => *r.get_ref(),
        None => 1,
    };

    // Tables in the order the file gives them, matrices and tests mixed.
    let mut tables: Vec<(Range<usize>, Table<'_>)> = Vec::new();
    for m in raw.matrix.iter().flatten() {
        tables.push((m.span(), Table::Matrix(m.get_ref())));
    }
    for t in raw.test.iter().flatten() {
        tables.push((t.span(), Table::Test(t.get_ref())));
    }
    for p in raw.profile.iter().flatten() {
        tables.push((p.span(), Table::Profile(p.get_ref())));
    }
    tables.sort_by_key(|(span, _)| span.start);

    let defaults = raw.settings();
    // The file's defaults are checked even where no table uses them.
    file.resolve(&[defaults])?;
    let mut placed = Vec::new();
    for (index, (span, table)) in tables.iter().enumerate() {
        let layers = [table.settings(), defaults];
        let settings = file.resolve(&layers)?;
        if let Table::Profile(p) = table {
            let spec = file.profile(p)?;
            let span = p.file.span();
            placed.push(Placed {
                test: SuiteTest {
                    spec,
                    overrides: settings.overrides.clone(),
                },
                table: index,
                table_span: span.clone(),
                parts: [span.clone(), span.clone(), span],
            });
            continue;
        }
        for (workload, protocol, users, offered, parts) in file.expand(table)? {
            let test = settings.test(workload, protocol, users, offered);
            test.spec.validate().map_err(|source| SuiteError::Test {
                at: file.location(span.clone()),
                test: test.name(),
                source,
            })?;
            placed.push(Placed {
                test,
                table: index,
                table_span: span.clone(),
                parts,
            });
        }
    }
    if placed.is_empty() {
        return Err(SuiteError::NoTests {
            origin: origin.to_string(),
        });
    }
    file.check_unique(&placed)?;

    let max_loss = match &raw.max_loss {
        None => None,
        Some(v) => {
            let text = match v.get_ref() {
                FloatOrText::Float(n) => n.to_string(),
                FloatOrText::Text(t) => t.clone(),
            };
            Some(
                crate::parse_percent(&text)
                    .map_err(|e| file.value(v.span(), format!("max_loss: {e}")))?,
            )
        }
    };
    Ok(Suite {
        name,
        description: raw.description.unwrap_or_default().trim().to_string(),
        repeat,
        retry_suspect: raw.retry_suspect.as_ref().map(|r| *r.get_ref()),
        max_loss,
        tests: placed.into_iter().map(|p| p.test).collect(),
    })
}

/// A suite without a `name` is named after its file: `studies/osa.toml` → `osa`.
fn default_name(origin: &str) -> String {
    Path::new(origin)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("suite")
        .to_string()
}

enum Table<'a> {
    Matrix(&'a RawMatrix),
    Test(&'a RawTest),
    Profile(&'a RawProfile),
}

impl Table<'_> {
    fn settings(&self) -> Settings<'_> {
        match self {
            Table::Matrix(m) => m.settings(),
            Table::Test(t) => t.settings(),
            Table::Profile(p) => p.settings(),
        }
    }
}

/// One expanded test and where it came from.
struct Placed {
    test: SuiteTest,
    /// Index of its table in file order.
    table: usize,
    table_span: Range<usize>,
    /// Where its workload, users and protocol are written.
    parts: [Range<usize>; 3],
}

/// A test's workload, protocol, users, offered load (open loop), and where
/// the first three are written.
type Cell = (
    Workload,
    Protocol,
    u32,
    Option<TransactionsPerSecond>,
    [Range<usize>; 3],
);

/// The settings of one table after the file's defaults, as values; `None`
/// keeps [`TestSpec::new`]'s default.
struct Resolved {
    duration: Duration,
    warmup: Option<Duration>,
    udp_timeout: Option<Duration>,
    rate: Option<BitsPerSecond>,
    arrival: Arrival,
    max_outstanding: u32,
    socket: SocketOptions,
    overrides: TestOverrides,
}

impl Resolved {
    fn test(
        &self,
        workload: Workload,
        protocol: Protocol,
        users: u32,
        offered: Option<TransactionsPerSecond>,
    ) -> SuiteTest {
        let mut spec = TestSpec::new(workload, protocol, users, self.duration);
        // An arrival or an outstanding count set for a file or a matrix
        // applies to its open-loop tests only.
        spec.offered = offered.map(|rate| OfferedLoad {
            rate,
            arrival: self.arrival,
            max_outstanding: self.max_outstanding,
        });
        if let Some(w) = self.warmup {
            spec.warmup = w;
        }
        if let Some(t) = self.udp_timeout {
            spec.udp_timeout = t;
        }
        // A rate set for a file or a matrix paces its UDP streams only; each
        // of them records the pace it ran at (the default when none is set).
        spec.rate = spec
            .stream_rate()
            .map(|default| self.rate.unwrap_or(default));
        spec.socket = self.socket.clone();
        if protocol != Protocol::Tcp {
            // TCP options set for a file or a matrix apply to its TCP tests only.
            spec.socket.cc = None;
            spec.socket.mss = None;
        }
        SuiteTest {
            spec,
            overrides: self.overrides.clone(),
        }
    }
}

/// The file being read, to turn spans into locations.
struct FileCtx<'a> {
    origin: &'a str,
    text: &'a str,
}

/// The first layer (table, then file) that sets a key.
fn first<'a, T: ?Sized>(
    layers: &[Settings<'a>],
    key: impl Fn(&Settings<'a>) -> Option<&'a T>,
) -> Option<&'a T> {
    layers.iter().find_map(key)
}

impl FileCtx<'_> {
    fn location(&self, span: Range<usize>) -> Location {
        Location::at(self.origin, self.text, span.start)
    }

    fn value(&self, span: Range<usize>, message: String) -> SuiteError {
        SuiteError::Value {
            at: self.location(span),
            message,
        }
    }

    /// A duration key: `"30s"`, `"500ms"`, or a number of seconds (`10` or `"10"`).
    fn duration(
        &self,
        value: Option<&Spanned<NumberOrText>>,
        key: &str,
    ) -> Result<Option<Duration>, SuiteError> {
        let Some(v) = value else { return Ok(None) };
        let text = v.get_ref().text();
        let d = crate::parse_duration(&text)
            .map_err(|e| self.value(v.span(), format!("invalid {key} '{text}': {e}")))?;
        if d > crate::MAX_TEST_TIME {
            return Err(self.value(
                v.span(),
                format!("{key} '{text}' is longer than a test may last (7 days)"),
            ));
        }
        Ok(Some(d))
    }

    fn positive_duration(
        &self,
        value: Option<&Spanned<NumberOrText>>,
        key: &str,
    ) -> Result<Option<Duration>, SuiteError> {
        let d = self.duration(value, key)?;
        match (d, value) {
            (Some(d), Some(v)) if d.is_zero() => {
                Err(self.value(v.span(), format!("{key} must be longer than zero")))
            }
            _ => Ok(d),
        }
    }

    fn at_least_one(
        &self,
        value: Option<&Spanned<u32>>,
        key: &str,
    ) -> Result<Option<u32>, SuiteError> {
        match value {
            Some(v) if *v.get_ref() == 0 => {
                Err(self.value(v.span(), format!("{key} must be at least 1")))
            }
            Some(v) => Ok(Some(*v.get_ref())),
            None => Ok(None),
        }
    }

    /// An offered rate: `"50k"`, or a number of transactions per second.
    fn offered(&self, v: &Spanned<NumberOrText>) -> Result<TransactionsPerSecond, SuiteError> {
        crate::parse_offered(&v.get_ref().text()).map_err(|e| self.value(v.span(), e.to_string()))
    }

    /// A UDP stream's pace: `"100m"` (as iperf3's -b), or a number of bits per second.
    fn rate(
        &self,
        value: Option<&Spanned<NumberOrText>>,
    ) -> Result<Option<BitsPerSecond>, SuiteError> {
        let Some(v) = value else { return Ok(None) };
        crate::parse_udp_rate(&v.get_ref().text())
            .map(Some)
            .map_err(|e| self.value(v.span(), e.to_string()))
    }

    fn cpus(&self, value: Option<&Spanned<NumberOrText>>) -> Result<Option<CpuList>, SuiteError> {
        let Some(v) = value else { return Ok(None) };
        CpuList::from_str(&v.get_ref().text())
            .map(Some)
            .map_err(|e| self.value(v.span(), e.to_string()))
    }

    fn buffer(
        &self,
        value: Option<&Spanned<NumberOrText>>,
        key: &str,
    ) -> Result<Option<u32>, SuiteError> {
        let Some(v) = value else { return Ok(None) };
        let text = v.get_ref().text();
        let bytes = Bytes::from_str(&text)
            .map_err(|e| self.value(v.span(), format!("invalid {key}: {e}")))?;
        u32::try_from(bytes.0)
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| {
                self.value(
                    v.span(),
                    format!("{key} {text} must be between 1 byte and 4 GiB"),
                )
            })
    }

    /// Reads the settings of one table, each key from the first layer that sets it.
    fn resolve(&self, layers: &[Settings<'_>]) -> Result<Resolved, SuiteError> {
        let cc = match first(layers, |s| s.cc) {
            Some(c) if c.get_ref().trim().is_empty() => {
                return Err(self.value(
                    c.span(),
                    "cc must name a congestion control algorithm".into(),
                ))
            }
            c => c.map(|c| c.get_ref().trim().to_string()),
        };
        Ok(Resolved {
            duration: self
                .positive_duration(first(layers, |s| s.duration), "duration")?
                .unwrap_or(DEFAULT_DURATION),
            warmup: self.duration(first(layers, |s| s.warmup), "warmup")?,
            udp_timeout: self.positive_duration(first(layers, |s| s.udp_timeout), "udp_timeout")?,
            rate: self.rate(first(layers, |s| s.rate))?,
            arrival: match first(layers, |s| s.arrival) {
                None => Arrival::default(),
                Some(a) => a
                    .get_ref()
                    .parse()
                    .map_err(|e: WorkloadError| self.value(a.span(), e.to_string()))?,
            },
            max_outstanding: self
                .at_least_one(first(layers, |s| s.max_outstanding), "max_outstanding")?
                .unwrap_or(1),
            socket: SocketOptions {
                nodelay: layers.iter().find_map(|s| s.nodelay),
                sndbuf: self.buffer(first(layers, |s| s.sndbuf), "sndbuf")?,
                rcvbuf: self.buffer(first(layers, |s| s.rcvbuf), "rcvbuf")?,
                cc,
                mss: self.at_least_one(first(layers, |s| s.mss), "mss")?,
            },
            overrides: TestOverrides {
                threads: self.at_least_one(first(layers, |s| s.threads), "threads")?,
                server_threads: self
                    .at_least_one(first(layers, |s| s.server_threads), "server_threads")?,
                affinity: self.cpus(first(layers, |s| s.affinity))?,
                server_affinity: self.cpus(first(layers, |s| s.server_affinity))?,
                busy_poll: layers.iter().find_map(|s| s.busy_poll),
            },
        })
    }

    fn workload(&self, v: &Spanned<String>) -> Result<Workload, SuiteError> {
        Workload::from_str(v.get_ref()).map_err(|e| self.value(v.span(), e.to_string()))
    }

    fn protocol(&self, v: &Spanned<String>) -> Result<Protocol, SuiteError> {
        Protocol::from_str(v.get_ref()).map_err(|e| self.value(v.span(), e.to_string()))
    }

    fn users(&self, v: &Spanned<u32>) -> Result<u32, SuiteError> {
        let n = *v.get_ref();
        if n == 0 || n > MAX_USERS {
            return Err(self.value(
                v.span(),
                format!("users must be between 1 and {MAX_USERS}, got {n}"),
            ));
        }
        Ok(n)
    }

    fn non_empty<'v, T>(
        &self,
        list: &'v Spanned<Vec<T>>,
        key: &str,
    ) -> Result<&'v [T], SuiteError> {
        if list.get_ref().is_empty() {
            return Err(self.value(
                list.span(),
                format!("{key} is empty: a matrix needs at least one"),
            ));
        }
        Ok(list.get_ref())
    }

    /// The tests of one table: workload-major, then protocol, then users
    /// (all user counts of the first workload over the first protocol first).
    /// Reads a `[[profile]]`'s file (relative to the suite file) with its
    /// variables, then the environment's; it must name at most one host
    /// (the suite's server runs it).
    fn profile(&self, p: &RawProfile) -> Result<TestSpec, SuiteError> {
        let span = p.file.span();
        let path = Path::new(self.origin)
            .parent()
            .unwrap_or(Path::new(""))
            .join(p.file.get_ref());
        let vars: Vec<(String, String)> = p
            .vars
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let profile = crate::profile::load_profile(&path, &vars).map_err(|e| {
            let hint = e
                .unset_variable()
                .map(|v| format!(" or in this [[profile]]'s vars ({v} = \"...\")"))
                .unwrap_or_default();
            self.value(span.clone(), format!("{e}{hint}"))
        })?;
        let in_file = |e: crate::profile::ProfileError| {
            self.value(span.clone(), format!("{}: {e}", path.display()))
        };
        crate::profile::check_runnable(&profile).map_err(in_file)?;
        let hosts = crate::profile::split_by_host(&profile).map_err(in_file)?;
        if hosts.len() > 1 {
            return Err(self.value(
                span,
                format!(
                    "{}: the profile names {} remote hosts; a suite runs each test on its one \
                     server (run the profile on its own instead)",
                    path.display(),
                    hosts.len()
                ),
            ));
        }
        let spec = crate::profile::profile_spec(profile);
        spec.validate()
            .map_err(|e| self.value(span, format!("{}: {e}", path.display())))?;
        Ok(spec)
    }

    fn expand(&self, table: &Table<'_>) -> Result<Vec<Cell>, SuiteError> {
        match table {
            Table::Profile(_) => Ok(Vec::new()),
            Table::Test(t) => {
                let workload = self.workload(&t.workload)?;
                let users = self.users(&t.users)?;
                let (protocol, pspan) = match &t.protocol {
                    Some(p) => (self.protocol(p)?, p.span()),
                    None => (Protocol::Tcp, t.workload.span()),
                };
                // A test that sets a TCP option itself must be a TCP test.
                if protocol != Protocol::Tcp {
                    let cc = t.cc.as_ref().map(|v| ("cc", v.span()));
                    let mss = t.mss.as_ref().map(|v| ("mss", v.span()));
                    if let Some((key, span)) = cc.or(mss) {
                        return Err(self.value(
                            span,
                            format!("{key} is a TCP option and this test's protocol is {protocol}"),
                        ));
                    }
                }
                let offered = t.offered.as_ref().map(|o| self.offered(o)).transpose()?;
                Ok(vec![(
                    workload,
                    protocol,
                    users,
                    offered,
                    [t.workload.span(), t.users.span(), pspan],
                )])
            }
            Table::Matrix(m) => {
                let workloads = self
                    .non_empty(&m.workloads, "workloads")?
                    .iter()
                    .map(|w| Ok((self.workload(w)?, w.span())))
                    .collect::<Result<Vec<_>, SuiteError>>()?;
                let users = self
                    .non_empty(&m.users, "users")?
                    .iter()
                    .map(|u| Ok((self.users(u)?, u.span())))
                    .collect::<Result<Vec<_>, SuiteError>>()?;
                let protocols = match &m.protocols {
                    Some(list) => self
                        .non_empty(list, "protocols")?
                        .iter()
                        .map(|p| Ok((self.protocol(p)?, p.span())))
                        .collect::<Result<Vec<_>, SuiteError>>()?,
                    None => vec![(Protocol::Tcp, m.workloads.span())],
                };
                // Open loop: each rate of the list a test of its own (a
                // sweep: the latency-versus-load curve).
                let offered: Vec<Option<TransactionsPerSecond>> = match &m.offered {
                    None => vec![None],
                    Some(list) => self
                        .non_empty(list, "offered")?
                        .iter()
                        .map(|o| self.offered(o).map(Some))
                        .collect::<Result<_, SuiteError>>()?,
                };
                let mut cells = Vec::new();
                for (w, wspan) in &workloads {
                    for (p, pspan) in &protocols {
                        for (u, uspan) in &users {
                            for o in &offered {
                                cells.push((
                                    w.clone(),
                                    *p,
                                    *u,
                                    *o,
                                    [wspan.clone(), uspan.clone(), pspan.clone()],
                                ));
                            }
                        }
                    }
                }
                Ok(cells)
            }
        }
    }

    /// Refuses two tests with the same name, naming where each is defined: the
    /// two tables, or within one matrix the two entries that collide.
    fn check_unique(&self, placed: &[Placed]) -> Result<(), SuiteError> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, p) in placed.iter().enumerate() {
            let name = p.test.name();
            let Some(&j) = seen.get(&name) else {
                seen.insert(name, i);
                continue;
            };
            let q = &placed[j];
            let (first, second) = if q.table == p.table {
                let k = (0..3).find(|&k| q.parts[k] != p.parts[k]).unwrap_or(0);
                (q.parts[k].clone(), p.parts[k].clone())
            } else {
                (q.table_span.clone(), p.table_span.clone())
            };
            let describe = |span: Range<usize>| {
                let at = self.location(span);
                match at.position {
                    Some((line, column)) => format!("line {line}, column {column}"),
                    None => at.origin,
                }
            };
            return Err(SuiteError::DuplicateTest {
                origin: self.origin.to_string(),
                name,
                first: describe(first),
                second: describe(second),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../examples/suite.toml");

    fn err(text: &str) -> String {
        parse_suite(text, "study.toml").unwrap_err().to_string()
    }

    /// Asserts the error names the file and the line, and says `what`.
    fn assert_err(text: &str, line: usize, what: &str) {
        let e = err(text);
        assert!(
            e.starts_with(&format!("study.toml, line {line},")),
            "wrong place: {e}"
        );
        assert!(e.contains(what), "'{what}' not in: {e}");
    }

    #[test]
    fn the_example_parses() {
        let s = parse_suite(EXAMPLE, "examples/suite.toml").unwrap();
        assert_eq!(s.name, "hipersockets-vs-osa-short");
        assert!(!s.description.is_empty());
        assert_eq!(s.repeat, 3);
        let names: Vec<String> = s.tests.iter().map(SuiteTest::name).collect();
        assert_eq!(
            names,
            [
                "rr1c-1x1--1",
                "rr1c-1x1--10",
                "rr1c-1x1--50",
                "rr1c-200x1000--1",
                "rr1c-200x1000--10",
                "rr1c-200x1000--50",
                "mix-200x200*1,200x8k*3--40--udp",
                "mix-200x200*1,200x8k*3--40",
                "str-readx30k--5",
                "str-writex30k--5",
            ]
        );
        let rr = &s.tests[0];
        assert_eq!(rr.spec.duration, Duration::from_secs(5));
        assert_eq!(rr.spec.warmup, Duration::from_secs(1));
        let mix = &s.tests[6];
        assert_eq!(mix.spec.duration, Duration::from_secs(10), "file default");
        assert_eq!(mix.spec.udp_timeout, Duration::from_millis(100));
        let read = &s.tests[8];
        assert_eq!(read.spec.socket.sndbuf, Some(256 * 1024));
        assert_eq!(read.spec.socket.rcvbuf, Some(256 * 1024));
        assert_eq!(read.spec.socket.cc.as_deref(), Some("cubic"));
        assert_eq!(read.overrides.threads, Some(2));
        assert_eq!(read.overrides.server_threads, Some(2));
        assert_eq!(read.overrides.affinity, Some(CpuList(vec![0, 1])));
        assert_eq!(read.overrides.server_affinity, Some(CpuList(vec![2, 3])));
        assert_eq!(read.overrides.busy_poll, Some(false));
        assert_eq!(read.spec.socket.nodelay, None);
        assert_eq!(s.tests[9].spec.socket.sndbuf, None);
        assert_eq!(s.tests[9].spec.socket.mss, Some(1400));
        assert_eq!(s.tests[9].spec.socket.nodelay, Some(true));
        assert_eq!(s.tests[9].spec.duration, Duration::from_millis(7500));
    }

    #[test]
    fn tcp_options_apply_to_tcp_tests_only() {
        let s = parse_suite(
            "cc = \"bbr\"\nmss = 1200\n[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1]\nprotocols = [\"udp\", \"tcp\"]\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(
            (
                s.tests[0].spec.socket.cc.as_deref(),
                s.tests[0].spec.socket.mss
            ),
            (None, None)
        );
        assert_eq!(
            (
                s.tests[1].spec.socket.cc.as_deref(),
                s.tests[1].spec.socket.mss
            ),
            (Some("bbr"), Some(1200))
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nprotocol = \"udp\"\nmss = 1000\n",
            5,
            "mss is a TCP option and this test's protocol is udp",
        );
    }

    #[test]
    fn every_key_is_read_at_every_level() {
        let s = parse_suite(
            r#"
name = " all "
description = " every key "
repeat = 2
duration = "3s"
warmup = "0s"
threads = 4
server_threads = 5
affinity = 1
server_affinity = "2-3"
busy_poll = true
nodelay = false
sndbuf = 65536
rcvbuf = "1m"
cc = "bbr"
mss = 1200
udp_timeout = "1s"

[[test]]
workload = "rr:10x20"
users = 3
protocol = "TCP"
threads = 8
"#,
            "x.toml",
        )
        .unwrap();
        assert_eq!(
            (s.name.as_str(), s.description.as_str(), s.repeat),
            ("all", "every key", 2)
        );
        let t = &s.tests[0];
        assert_eq!(t.name(), "rr1c-10x20--3");
        assert_eq!(t.spec.duration, Duration::from_secs(3));
        assert_eq!(t.spec.warmup, Duration::ZERO);
        assert_eq!(t.spec.udp_timeout, Duration::from_secs(1));
        assert_eq!(
            t.spec.socket,
            SocketOptions {
                nodelay: Some(false),
                sndbuf: Some(65536),
                rcvbuf: Some(1 << 20),
                cc: Some("bbr".into()),
                mss: Some(1200),
            }
        );
        assert_eq!(
            t.overrides,
            TestOverrides {
                threads: Some(8),
                server_threads: Some(5),
                affinity: Some(CpuList(vec![1])),
                server_affinity: Some(CpuList(vec![2, 3])),
                busy_poll: Some(true),
            }
        );
    }

    #[test]
    fn defaults_name_repeat_and_timing() {
        let s = parse_suite(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
            "dir/my-study.toml",
        )
        .unwrap();
        assert_eq!(s.name, "my-study");
        assert_eq!(s.description, "");
        assert_eq!(s.repeat, 1);
        let t = &s.tests[0];
        assert_eq!(
            t.spec,
            TestSpec::new(
                "rr1c-1x1".parse().unwrap(),
                Protocol::Tcp,
                1,
                DEFAULT_DURATION
            )
        );
        assert_eq!(t.overrides, TestOverrides::default());
    }

    #[test]
    fn tables_run_in_file_order() {
        let s = parse_suite(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 7\n\n\
             [[matrix]]\nworkloads = [\"str-readx30k\", \"rr:1x1\"]\nusers = [2, 1]\nprotocols = [\"tcp\", \"unix\"]\n\n\
             [[test]]\nworkload = \"crr:1x1\"\nusers = 1\n",
            "o.toml",
        )
        .unwrap();
        let names: Vec<String> = s.tests.iter().map(SuiteTest::name).collect();
        assert_eq!(
            names,
            [
                "rr1c-1x1--7",
                "str-readx30k--2",
                "str-readx30k--1",
                "str-readx30k--2--unix",
                "str-readx30k--1--unix",
                "rr1c-1x1--2",
                "rr1c-1x1--1",
                "rr1c-1x1--2--unix",
                "rr1c-1x1--1--unix",
                "crr-1x1--1",
            ]
        );
    }

    #[test]
    fn unknown_key_names_its_line() {
        assert_err(
            "name = \"x\"\n\n[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1]\nthread = 2\n",
            6,
            "unknown field `thread`",
        );
        assert_err("nmae = \"x\"\n", 1, "unknown field `nmae`");
    }

    #[test]
    fn bad_workload_in_an_array_names_its_own_line() {
        assert_err(
            "[[matrix]]\nworkloads = [\n  \"rr1c-1x1\",\n  \"rr1c-200x1000\",\n  \"tcp_rr\",\n]\nusers = [1]\n",
            5,
            "unknown workload 'tcp_rr'",
        );
        let e = err("[[matrix]]\nworkloads = [\"rr1c-1x1\", \"rr:0x1\"]\nusers = [1]\n");
        assert!(e.starts_with("study.toml, line 2, column 26:"), "{e}");
    }

    #[test]
    fn a_matrix_of_offered_rates_sweeps_the_load_each_rate_a_test() {
        let suite = parse_suite(
            "arrival = \"fixed\"\n[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [4]\n\
             offered = [\"1k\", 5000, \"20k\"]\nmax_outstanding = 8\n\n\
             [[test]]\nworkload = \"rr:1x1\"\nusers = 2\n",
            "sweep.toml",
        )
        .unwrap();
        let names: Vec<String> = suite.tests.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "rr1c-1x1--4--1k/s",
                "rr1c-1x1--4--5k/s",
                "rr1c-1x1--4--20k/s",
                "rr1c-1x1--2"
            ]
        );
        let load = suite.tests[1].spec.offered.unwrap();
        assert_eq!((load.arrival, load.max_outstanding), (Arrival::Fixed, 8));
        assert_eq!(
            suite.tests[3].spec.offered, None,
            "closed loop where none is offered"
        );
        assert_err(
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1]\noffered = [\"1k\",\n  \"0\"]\n",
            5,
            "offered rate '0'",
        );
        let e = err("[[test]]\nworkload = \"str-readx30k\"\nusers = 1\noffered = \"1k\"\n");
        assert!(
            e.contains("request/response on persistent connections"),
            "{e}"
        );
    }

    #[test]
    fn zero_users_names_its_line() {
        assert_err(
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1,\n  0]\n",
            4,
            "users must be between 1 and",
        );
        assert_err(
            "\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 0\n",
            4,
            "users must be between 1 and",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = -3\n",
            3,
            "expected u32",
        );
    }

    #[test]
    fn empty_lists_name_their_line() {
        assert_err(
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = []\n",
            3,
            "users is empty",
        );
        assert_err(
            "[[matrix]]\nworkloads = []\nusers = [1]\n",
            2,
            "workloads is empty",
        );
        assert_err(
            "[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1]\nprotocols = []\n",
            4,
            "protocols is empty",
        );
    }

    #[test]
    fn a_file_without_tests_is_refused() {
        for text in ["name = \"x\"\nduration = \"5s\"\n", "", "matrix = []\n"] {
            let e = parse_suite(text, "study.toml").unwrap_err();
            assert!(matches!(e, SuiteError::NoTests { .. }), "{e}");
            assert_eq!(
                e.to_string(),
                "study.toml: the suite has no tests: add a [[matrix]] or a [[test]] table"
            );
        }
    }

    #[test]
    fn crr_over_udp_names_the_table() {
        let e = parse_suite(
            "name = \"x\"\n\n[[matrix]]\nworkloads = [\"rr1c-1x1\", \"crr:1x1\"]\nusers = [1]\nprotocols = [\"udp\"]\n",
            "study.toml",
        )
        .unwrap_err();
        assert!(matches!(e, SuiteError::Test { .. }));
        let e = e.to_string();
        assert!(
            e.starts_with("study.toml, line 3, column 1: test crr-1x1--1--udp cannot run"),
            "{e}"
        );
        assert!(e.contains("cannot run over udp"), "{e}");
    }

    #[test]
    fn udp_streams_take_a_rate() {
        let s = parse_suite(
            "rate = \"10m\"\n[[matrix]]\nworkloads = [\"stream-up:1400\", \"rr1c-1x1\"]\nusers = [1, 4]\nprotocols = [\"udp\", \"tcp\"]\n\n\
             [[test]]\nworkload = \"stream-bidir:1k\"\nusers = 2\nprotocol = \"udp\"\nrate = 0\n\n\
             [[test]]\nworkload = \"stream-down:1k\"\nusers = 1\nprotocol = \"udp\"\nrate = 200000000\n",
            "study.toml",
        )
        .unwrap();
        let names: Vec<String> = s.tests.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "str-readx1400@10m--1--udp",
                "str-readx1400@10m--4--udp",
                "str-readx1400--1",
                "str-readx1400--4",
                "rr1c-1x1--1--udp",
                "rr1c-1x1--4--udp",
                "rr1c-1x1--1",
                "rr1c-1x1--4",
                "str-bidirx1k@max--2--udp",
                "str-writex1k@200m--1--udp",
            ]
        );
        assert_eq!(s.tests[0].spec.rate, Some(BitsPerSecond(10_000_000)));
        assert_eq!(s.tests[2].spec.rate, None, "a TCP stream is not paced");
        assert_eq!(s.tests[4].spec.rate, None);
        let s = parse_suite(
            "[[test]]\nworkload = \"stream-up:1k\"\nusers = 1\nprotocol = \"udp\"\n",
            "study.toml",
        )
        .unwrap();
        assert_eq!(
            s.tests[0].spec.rate,
            Some(crate::DEFAULT_UDP_RATE),
            "recorded"
        );
        let e = err("[[test]]\nworkload = \"stream-up:1k\"\nusers = 1\nprotocol = \"udp\"\nrate = \"fast\"\n");
        assert!(
            e.starts_with("study.toml, line 5, column 8: rate 'fast': no number"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_names_name_both_places() {
        let e = err("[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n\n[[matrix]]\nworkloads = [\"rr:1x1\"]\nusers = [1]\n");
        assert_eq!(
            e,
            "study.toml: test rr1c-1x1--1 is defined twice, at line 1, column 1 and at line 5, column 1: \
             test names must be unique within a suite"
        );
        let e = err("[[matrix]]\nworkloads = [\"rr1c-1x1\"]\nusers = [1,\n  10,\n  1]\n");
        assert!(
            e.contains(
                "rr1c-1x1--1 is defined twice, at line 3, column 10 and at line 5, column 3"
            ),
            "{e}"
        );
        let e = err("[[matrix]]\nworkloads = [\n  \"rr1c-1x1\",\n  \"rr:1x1\",\n]\nusers = [1]\n");
        assert!(
            e.contains("at line 3, column 3 and at line 4, column 3"),
            "{e}"
        );
    }

    #[test]
    fn bad_durations_name_their_line() {
        assert_err(
            "duration = \"10 parsecs\"\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
            1,
            "invalid duration '10 parsecs'",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nwarmup = \"1x\"\n",
            4,
            "invalid warmup",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nduration = \"0s\"\n",
            4,
            "duration must be longer than zero",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n\nduration = \"ten\"\n",
            5,
            "invalid duration 'ten'",
        );
        assert_err(
            "udp_timeout = \"0ms\"\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
            1,
            "udp_timeout must be longer than zero",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nwarmup = \"8days\"\n",
            4,
            "warmup '8days' is longer than a test may last (7 days)",
        );
    }

    #[test]
    fn a_bare_number_of_seconds_is_a_duration() {
        for (value, d) in [
            ("10", Duration::from_secs(10)),
            ("\"10\"", Duration::from_secs(10)),
            ("2.5", Duration::from_millis(2500)),
            ("\"0.5\"", Duration::from_millis(500)),
        ] {
            let s = parse_suite(
                &format!("duration = {value}\nwarmup = 0\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n"),
                "x.toml",
            )
            .unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(s.tests[0].spec.duration, d, "{value}");
            assert_eq!(s.tests[0].spec.warmup, Duration::ZERO, "{value}");
        }
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nudp_timeout = -1\n",
            4,
            "invalid udp_timeout '-1'",
        );
    }

    /// Regression (found by the suite_toml fuzz target): a duration of
    /// 4.1e18 seconds parsed, and the suite's time estimate (the dry run,
    /// the progress bar's ETA) panicked summing it.
    #[test]
    fn a_duration_past_any_clock_is_refused_not_summed() {
        // The fuzzer's input: leading zeros, then 4.1e18 seconds.
        let huge = format!("{}4099276460824344802s", "0".repeat(84));
        assert_err(
            &format!(
                "[[matrix]]\nworkloads = [\"rr1c-1x1\", \"rr1c-200x1000\"]\nusers = [1, 10]\nduration = \"{huge}\"\n"
            ),
            4,
            "is longer than a test may last",
        );
        let s = parse_suite(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nduration = \"7days\"\n",
            "s.toml",
        )
        .unwrap();
        assert!(s.estimated_time(u32::MAX) >= Duration::from_secs(7 * 24 * 3600));
    }

    #[test]
    fn bad_sizes_name_their_line() {
        assert_err(
            "sndbuf = \"1.5m\"\n",
            1,
            "invalid sndbuf: invalid size '1.5m'",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nsndbuf = \"12q\"\n",
            4,
            "invalid sndbuf: invalid size '12q'",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nrcvbuf = \"8g\"\n",
            4,
            "rcvbuf 8g must be between 1 byte and 4 GiB",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nrcvbuf = 0\n",
            4,
            "must be between 1 byte",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x30q\"\nusers = 1\n",
            2,
            "invalid size '30q'",
        );
    }

    #[test]
    fn other_bad_values_name_their_line() {
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nprotocol = \"sctp\"\n",
            4,
            "unknown protocol 'sctp'",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\naffinity = \"3-1\"\n",
            4,
            "invalid CPU list '3-1'",
        );
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nthreads = 0\n",
            4,
            "threads must be at least 1",
        );
        assert_err(
            "repeat = 0\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
            1,
            "repeat must be at least 1",
        );
        assert_err(
            "name = \"  \"\n[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\n",
            1,
            "name must not be empty",
        );
        assert_err("[[test]]\nusers = 1\n", 1, "missing field `workload`");
        assert_err(
            "[[test]]\nworkload = \"rr1c-1x1\"\nusers = 1\nbusy_poll = \"yes\"\n",
            4,
            "expected a boolean",
        );
        assert_err(
            "name = \"x\"\n[matrix]\nworkloads = [\"rr1c-1x1\"]\n",
            2,
            "expected a sequence",
        );
        assert_err("name = \"x\n", 1, "");
    }
}
