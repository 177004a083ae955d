//! A server's address as a user writes it: `HOST`, `HOST:PORT`, an IPv6
//! address, `[IPV6]:PORT`. Checked before anything is looked up, so that
//! `127.0.0.1:abc` is called a bad port rather than a host that does not resolve.

use std::net::{IpAddr, Ipv6Addr};

use crate::SessionError;

/// Longest host name DNS allows.
const MAX_HOST_NAME: usize = 253;

/// The host and port of `address`; `default_port` when it names none.
///
/// The host is a name (letters, digits, `-`, `.`, `_`) or an IP address;
/// an IPv6 address with a port is written `[ADDRESS]:PORT`.
pub fn parse_address(address: &str, default_port: u16) -> Result<(String, u16), SessionError> {
    let bad = |why: String| SessionError::Address {
        address: address.to_string(),
        why,
    };
    let a = address.trim();
    if a.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if let Some(rest) = a.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("'[' without its ']'".into()))?;
        inside
            .parse::<Ipv6Addr>()
            .map_err(|_| bad(format!("'{inside}' is not an IPv6 address")))?;
        let port = match after.strip_prefix(':') {
            _ if after.is_empty() => default_port,
            Some(p) => port(p).map_err(bad)?,
            None => return Err(bad(format!("'{after}' after ']' is not :PORT"))),
        };
        return Ok((inside.to_string(), port));
    }
    if a.parse::<IpAddr>().is_ok() {
        return Ok((a.to_string(), default_port));
    }
    let (host, port) = match a.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => {
            return Err(bad(
                "an IPv6 address with a port is written [ADDRESS]:PORT".into()
            ))
        }
        Some((host, p)) => (host, port(p).map_err(bad)?),
        None => (a, default_port),
    };
    let name_ok = !host.is_empty()
        && host.len() <= MAX_HOST_NAME
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !name_ok {
        return Err(bad(format!("'{host}' is not a host name or an IP address")));
    }
    Ok((host.to_string(), port))
}

/// A port number, 1 to 65535.
fn port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("'{p}' is not a port (1 to 65535)")),
    }
}

/// `host:port`, with an IPv6 address in brackets.
pub(crate) fn join(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_ports_and_ipv6() {
        for (a, host, port) in [
            ("127.0.0.1", "127.0.0.1", 7410),
            ("127.0.0.1:9", "127.0.0.1", 9),
            (" server-1.example.org ", "server-1.example.org", 7410),
            ("server_2:8000", "server_2", 8000),
            ("::1", "::1", 7410),
            ("fe80::1:2", "fe80::1:2", 7410),
            ("[::1]", "::1", 7410),
            ("[::1]:9", "::1", 9),
        ] {
            assert_eq!(
                parse_address(a, 7410).unwrap(),
                (host.to_string(), port),
                "{a}"
            );
        }
    }

    #[test]
    fn a_bad_address_says_which_part_is_wrong() {
        for (a, says) in [
            ("127.0.0.1:abc", "'abc' is not a port (1 to 65535)"),
            ("host:0", "'0' is not a port"),
            ("host:65536", "'65536' is not a port"),
            ("host:", "'' is not a port"),
            ("http://host", "'//host' is not a port"),
            ("", "it is empty"),
            ("h1,h2", "'h1,h2' is not a host name or an IP address"),
            ("a b", "is not a host name"),
            (":9", "'' is not a host name"),
            ("fe80::1%eth0", "[ADDRESS]:PORT"),
            ("[::1", "without its ']'"),
            ("[1.2.3.4]:9", "'1.2.3.4' is not an IPv6 address"),
            ("[::1]:x", "'x' is not a port"),
            ("[::1]9", "'9' after ']' is not :PORT"),
        ] {
            let e = parse_address(a, 7410).unwrap_err().to_string();
            assert!(e.contains(says), "{a:?}: {e}");
            assert!(e.contains("is not a server address"), "{a:?}: {e}");
        }
    }

    #[test]
    fn joins_ipv6_in_brackets() {
        assert_eq!(join("::1", 9), "[::1]:9");
        assert_eq!(join("h", 9), "h:9");
    }
}
