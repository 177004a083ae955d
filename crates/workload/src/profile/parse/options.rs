//! Flowops and their options.

use std::time::Duration;

use super::values::{number_in, shown, size_value, time_value};
use crate::profile::check::{MAX_WNDSZ, MAX_XFER};
use crate::profile::model::{Endpoint, Flowop, FlowopKind, ProfileProtocol, Size, Xfer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
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

pub(super) const TYPES: [(&str, Type); 10] = [
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

pub(super) const TYPE_LIST: &str =
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
pub(super) fn build_flowop(ty: Type, text: &str, line: u32) -> Result<Flowop, String> {
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
