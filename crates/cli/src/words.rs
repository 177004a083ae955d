//! A session's and a test's errors in the CLI's words: where the library says which
//! setting to change, the CLI names its flag.

use linkperf_session::SessionError;
use linkperf_workload::WorkloadError;

/// `e` in words, naming the flags that change what it points to.
pub fn session_error(e: &SessionError) -> String {
    match e {
        SessionError::Refused { limit: Some(l), .. } => {
            format!("{e} (the server's {})", crate::serve::limit_flag(l.kind))
        }
        SessionError::NotLinkperf {
            addr, iperf3: true, ..
        } => format!("{e}: to test against an iperf3 server, use --iperf3-server {addr}"),
        SessionError::Connect { addr, source }
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            format!("{e}: is `linkperf serve` running on {addr}?")
        }
        SessionError::AuthRequired => "run the test: the server requires authentication: give \
             --auth-key FILE (or set LINKPERF_AUTH_KEY_FILE) with the server's pre-shared key"
            .into(),
        SessionError::AuthFailed => "run the test: authentication failed: the server does not \
             accept this client's key (--auth-key must name a file holding the same key as the \
             server's)"
            .into(),
        SessionError::SameOnTwoHosts { server_host } => format!(
            "--placement same shares CPUs between client and server, but the server runs on \
             another host ({server_host}): use --placement split (each side takes its own \
             host's CPUs) or free"
        ),
        _ => e.to_string(),
    }
}

/// A test's settings refused, naming the flags that set them.
pub fn workload_error(e: &WorkloadError) -> String {
    match e {
        WorkloadError::RateNotUdpStream { workload, protocol } => format!(
            "--rate paces UDP streams (stream-up, stream-down, stream-bidir over --protocol \
             udp); {workload} over {protocol} is not one"
        ),
        WorkloadError::TcpOptions(protocol) => {
            format!("--cc and --mss are TCP options; protocol is {protocol}")
        }
        _ => e.to_string(),
    }
}

/// An error and its causes, `: `-joined as `{:#}` prints them, each
/// session or workload error in the CLI's words.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut words = Vec::new();
    let mut chain = e.chain();
    while let Some(c) = chain.next() {
        if let Some(s) = c.downcast_ref::<SessionError>() {
            words.push(session_error(s));
            // A connection's error already says its cause (the OS's words),
            // which is also its source: said once, before the hint.
            if matches!(s, SessionError::Connect { .. }) {
                chain.next();
            }
        } else if let Some(w) = c.downcast_ref::<WorkloadError>() {
            words.push(workload_error(w));
        } else {
            words.push(c.to_string());
        }
    }
    words.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_errors_name_the_flags_and_the_rest_reads_as_before() {
        let e = anyhow::Error::from(SessionError::AuthRequired).context("run 1");
        let words = error_chain(&e);
        assert!(words.starts_with("run 1: run the test: "), "{words}");
        assert!(words.contains("--auth-key FILE"), "{words}");
        let e = anyhow::Error::from(SessionError::SameOnTwoHosts {
            server_host: "far".into(),
        });
        assert!(error_chain(&e).contains("use --placement split"));
        let e = anyhow::Error::from(SessionError::NotLinkperf {
            addr: "h:5201".into(),
            what: "this port speaks iperf3, not linkperf".into(),
            iperf3: true,
        });
        assert!(error_chain(&e).ends_with(
            "this port speaks iperf3, not linkperf: to test against an iperf3 server, \
             use --iperf3-server h:5201"
        ));
        let e = anyhow::Error::from(WorkloadError::TcpOptions(linkperf_workload::Protocol::Udp));
        assert_eq!(
            error_chain(&e),
            "--cc and --mss are TCP options; protocol is udp"
        );
        let e = anyhow::Error::from(WorkloadError::RateNotUdpStream {
            workload: "rr1c-1x1".into(),
            protocol: linkperf_workload::Protocol::Udp,
        });
        assert!(error_chain(&e).starts_with("--rate paces UDP streams"));
        let refused = |kind| {
            error_chain(&anyhow::Error::from(SessionError::Connect {
                addr: "127.0.0.1:7411".into(),
                source: std::io::Error::from(kind),
            }))
        };
        assert!(refused(std::io::ErrorKind::ConnectionRefused)
            .ends_with(": is `linkperf serve` running on 127.0.0.1:7411?"));
        // Only a refusal says so: a timeout is not "nothing listening".
        assert!(!refused(std::io::ErrorKind::TimedOut).contains("`linkperf serve`"));
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&plain), format!("{plain:#}"));
    }
}
