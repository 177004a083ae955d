//! What the client makes of the server's answers before a test runs: any
//! frame (the server's refusals become the client's errors), the offer of
//! a test or a profile (the endpoints it must hold, the host it must be on),
//! and the confirmation of its start. No socket: the client's driver
//! receives and acts.

use std::time::{Duration, Instant};

use linkperf_measured::Environment;
use linkperf_protocol::{decode_server, ErrorCode, ServerMessage};
use linkperf_workload::{Placement, PlacementPolicy, Protocol};

use crate::proto::heard::{Heard, Received};
use crate::SessionError;

/// A server's message, its errors as the client's.
pub(crate) fn answer(frame: &[u8]) -> Result<ServerMessage, SessionError> {
    match decode_server(frame)? {
        ServerMessage::Error {
            code: ErrorCode::AuthFailed,
            ..
        } => Err(SessionError::AuthFailed),
        ServerMessage::Error {
            code,
            message,
            limit,
        } => Err(SessionError::Refused {
            code: code.to_string(),
            message,
            limit,
        }),
        m => Ok(m),
    }
}

/// An answer awaited: what it is called and until when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Awaited {
    what: &'static str,
    pub(crate) timeout: Duration,
    pub(crate) until: Instant,
}

impl Awaited {
    /// `what` awaited from `now` for `timeout`.
    pub(crate) fn new(what: &'static str, timeout: Duration, now: Instant) -> Self {
        Awaited {
            what,
            timeout,
            until: now + timeout,
        }
    }

    /// The server's message, an error, or `None` to go on waiting.
    pub(crate) fn answer(
        &self,
        heard: Heard,
        now: Instant,
    ) -> Option<Result<ServerMessage, SessionError>> {
        let what = self.what;
        Some(match heard.got {
            Ok(Received::Frame(f)) => answer(&f),
            Ok(Received::Timeout) if now < self.until => return None,
            Ok(Received::Timeout) => Err(SessionError::Control(format!(
                "no {what} from the server within {:?}",
                self.timeout
            ))),
            Ok(Received::Closed) => Err(SessionError::Control(format!(
                "the server {} before {what}",
                heard.how
            ))),
            Err(e) => Err(SessionError::Control(e.to_string())),
        })
    }
}

/// What the server offered for a test or a profile: its data endpoints,
/// the token they take, and its host.
#[derive(Debug)]
pub(crate) struct Offer {
    /// TCP or UDP request/response ports, one per server worker.
    pub data_ports: Vec<u16>,
    /// Abstract Unix socket names, one per server worker.
    pub unix_names: Vec<String>,
    /// A profile's UDP ports, one per server worker.
    pub udp_ports: Vec<u16>,
    /// The token every data connection presents.
    pub token: linkperf_protocol::DataToken,
    /// The server's host.
    pub environment: Environment,
}

/// The data endpoints a test or a profile connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoints {
    /// TCP or UDP ports (a test over either, or a profile).
    Ports,
    /// Abstract Unix socket names (a test over Unix sockets).
    UnixNames,
}

impl Endpoints {
    /// The endpoints a test over `protocol` connects to.
    pub(crate) fn of(protocol: Protocol) -> Self {
        match protocol {
            Protocol::Unix => Endpoints::UnixNames,
            Protocol::Tcp | Protocol::Udp => Endpoints::Ports,
        }
    }
}

impl Offer {
    /// Whether the offer holds at least one of the endpoints `wanted`.
    pub(crate) fn holds(&self, wanted: Endpoints) -> bool {
        match wanted {
            Endpoints::Ports => !self.data_ports.is_empty(),
            Endpoints::UnixNames => !self.unix_names.is_empty(),
        }
    }
}

/// The server's answer to a test or a profile: `accepted`, or what it
/// said instead.
pub(crate) fn offer(answer: ServerMessage) -> Result<Offer, SessionError> {
    match answer {
        ServerMessage::Accepted {
            data_ports,
            unix_names,
            udp_ports,
            token,
            environment,
        } => Ok(Offer {
            data_ports,
            unix_names,
            udp_ports,
            token,
            environment,
        }),
        other => Err(SessionError::Control(format!(
            "expected accepted, got {}",
            other.kind()
        ))),
    }
}

/// Placement `same` shares CPUs between the sides, which only one host
/// has: against a server on another host (its kernel's boot id, from its
/// environment, is not `here`, this host's) it is refused before any data
/// flows. A side whose boot id is unknown is given the benefit of the doubt.
pub(crate) fn same_needs_one_host(
    server: &Placement,
    server_env: &Environment,
    here: Option<&str>,
) -> Result<(), SessionError> {
    let (Some(theirs), Some(ours)) = (&server_env.boot_id, here) else {
        return Ok(());
    };
    if server.policy == PlacementPolicy::Same && theirs != ours {
        return Err(SessionError::SameOnTwoHosts {
            server_host: server_env.hostname.clone(),
        });
    }
    Ok(())
}

/// The server's answer to `start`: `started`, or what it said instead.
pub(crate) fn started(answer: ServerMessage) -> Result<(), SessionError> {
    match answer {
        ServerMessage::Started => Ok(()),
        other => Err(SessionError::Control(format!(
            "expected started, got {}",
            other.kind()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_protocol::{encode_server, DataToken};

    fn frame(m: &ServerMessage) -> Vec<u8> {
        encode_server(m)[4..].to_vec()
    }

    #[test]
    fn the_servers_refusals_become_the_clients_errors_and_a_bad_frame_is_an_error() {
        let refused = ServerMessage::Error {
            code: ErrorCode::Limit,
            message: "too many users".into(),
            limit: None,
        };
        match answer(&frame(&refused)) {
            Err(SessionError::Refused { code, message, .. }) => {
                assert_eq!(
                    (code.as_str(), message.as_str()),
                    ("limit", "too many users")
                )
            }
            other => panic!("{other:?}"),
        }
        let auth = ServerMessage::Error {
            code: ErrorCode::AuthFailed,
            message: "authentication failed".into(),
            limit: None,
        };
        assert!(matches!(
            answer(&frame(&auth)),
            Err(SessionError::AuthFailed)
        ));
        assert!(answer(b"{not json").is_err());
        assert!(matches!(
            answer(&frame(&ServerMessage::Started)),
            Ok(ServerMessage::Started)
        ));
    }

    #[test]
    fn same_placement_is_refused_against_another_host_only() {
        let same = Placement {
            policy: PlacementPolicy::Same,
            ..Placement::with_threads(1)
        };
        let split = Placement {
            policy: PlacementPolicy::Split,
            ..same.clone()
        };
        let host = |name: &str, boot: Option<&str>| Environment {
            hostname: name.into(),
            boot_id: boot.map(str::to_string),
            ..Environment::default()
        };
        let (here, elsewhere) = (host("near", Some("boot-a")), host("far", Some("boot-b")));
        let ours = Some("boot-a");
        assert!(same_needs_one_host(&same, &here, ours).is_ok());
        assert!(same_needs_one_host(&split, &elsewhere, ours).is_ok());
        // A side that does not say where it runs is given the benefit of the doubt.
        assert!(same_needs_one_host(&same, &host("?", None), ours).is_ok());
        assert!(same_needs_one_host(&same, &elsewhere, None).is_ok());
        let e = same_needs_one_host(&same, &elsewhere, ours)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("another host (far)") && e.contains("placement `split`"),
            "{e}"
        );
    }

    #[test]
    fn an_offer_is_taken_from_accepted_and_a_start_from_started_only() {
        let accepted = ServerMessage::Accepted {
            data_ports: vec![5201, 5202],
            unix_names: vec![],
            udp_ports: vec![5301],
            token: DataToken([7; 16]),
            environment: Environment::default(),
        };
        let o = offer(accepted).unwrap();
        assert_eq!((o.data_ports, o.udp_ports), (vec![5201, 5202], vec![5301]));
        assert_eq!(o.token, DataToken([7; 16]));
        let e = offer(ServerMessage::Started).unwrap_err();
        assert_eq!(
            e.to_string(),
            SessionError::Control("expected accepted, got started".into()).to_string()
        );
        assert!(started(ServerMessage::Started).is_ok());
        let e = started(ServerMessage::TxnEnded {
            txn: 0,
            written: vec![],
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("expected started, got txn_ended"),
            "{e}"
        );
    }
}
