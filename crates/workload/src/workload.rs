use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::mix::{parse_mix, MixEntry, TransactionSizes};
use crate::profile::{FlowopKind, Profile};
use crate::{Bytes, WorkloadError};

/// Largest request, response or stream message accepted (64 MiB).
const MAX_MESSAGE: u64 = 64 * 1024 * 1024;

/// Which way a stream's payload flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamDirection {
    /// Client writes, server reads (`str-read` in uperf's naming: the server reads).
    Up,
    /// Server writes, client reads (`str-write`: the server writes).
    Down,
    /// Both write and read at once.
    Bidir,
}

/// The direction of payload as every result states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// A request from client to server and a response back.
    RoundTrip,
    /// Payload flows from client to server.
    ClientToServer,
    /// Payload flows from server to client.
    ServerToClient,
    /// Payload flows both ways at once.
    Bidirectional,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::RoundTrip => "round_trip",
            Direction::ClientToServer => "client_to_server",
            Direction::ServerToClient => "server_to_client",
            Direction::Bidirectional => "bidirectional",
        })
    }
}

/// What one user does, over and over, for the length of a test.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// Request/response on one persistent connection per user (`rr1c-REQxRESP`).
    Rr {
        /// Request payload, client to server.
        request: Bytes,
        /// Response payload, server to client.
        response: Bytes,
    },
    /// A new connection per transaction: connect, request, response, close (`crr-REQxRESP`).
    Crr {
        /// Request payload, client to server.
        request: Bytes,
        /// Response payload, server to client.
        response: Bytes,
    },
    /// Request/response on one persistent connection per user, each transaction's
    /// sizes drawn from a weighted mix (`mix:200x200*1,200x8k*3`).
    Mix {
        /// The kinds of transaction and their weights.
        entries: Vec<MixEntry>,
    },
    /// A continuous stream of messages; each message is one transaction.
    Stream {
        /// Size of one message.
        message: Bytes,
        /// Which way the messages flow.
        direction: StreamDirection,
    },
    /// A uperf profile (`linkperf run --profile FILE`), variables substituted:
    /// its groups' users run its transactions' flowops; the server runs the
    /// opposite ones.
    Profile {
        /// The profile.
        profile: Box<Profile>,
    },
}

/// Stream messages smaller than this many bytes are most likely a size
/// whose unit was dropped (`str-readx30` for `str-readx30k`): a stream of
/// them measures the cost of a system call per message, not bulk transfer.
pub const SMALL_STREAM_MESSAGE: u64 = 64;

impl Workload {
    /// Why this workload may not be what was meant, when it is a stream of
    /// messages under [`SMALL_STREAM_MESSAGE`] bytes (a size without a unit is
    /// bytes: `str-readx30` streams 30-byte messages). `None` otherwise.
    pub fn small_stream_warning(&self) -> Option<String> {
        let Workload::Stream { message, .. } = self else {
            return None;
        };
        (message.0 < SMALL_STREAM_MESSAGE).then(|| {
            format!(
                "{} streams {}-byte messages (a size without a unit is bytes: {}k would be {} KiB); \
                 messages under {SMALL_STREAM_MESSAGE} bytes measure the cost of each write, not bulk transfer",
                self.name(),
                message.0,
                message.0,
                message.0
            )
        })
    }

    /// The canonical name, in the study's spelling: `rr1c-200x1000`, `str-readx30k`,
    /// `str-writex30k`, `str-bidirx30k`, `crr-1x1`.
    pub fn name(&self) -> String {
        match self {
            Workload::Rr { request, response } => format!("rr1c-{request}x{response}"),
            Workload::Crr { request, response } => format!("crr-{request}x{response}"),
            Workload::Mix { entries } => {
                let parts: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
                format!("mix-{}", parts.join(","))
            }
            Workload::Stream { message, direction } => match direction {
                StreamDirection::Up => format!("str-readx{message}"),
                StreamDirection::Down => format!("str-writex{message}"),
                StreamDirection::Bidir => format!("str-bidirx{message}"),
            },
            Workload::Profile { profile } => format!("profile-{}", profile.name),
        }
    }

    /// The direction of payload.
    pub fn direction(&self) -> Direction {
        match self {
            Workload::Rr { .. } | Workload::Crr { .. } | Workload::Mix { .. } => {
                Direction::RoundTrip
            }
            Workload::Stream { direction, .. } => match direction {
                StreamDirection::Up => Direction::ClientToServer,
                StreamDirection::Down => Direction::ServerToClient,
                StreamDirection::Bidir => Direction::Bidirectional,
            },
            Workload::Profile { profile } => {
                let (writes, reads) = profile_directions(profile);
                match (writes, reads) {
                    (true, false) => Direction::ClientToServer,
                    (false, true) => Direction::ServerToClient,
                    _ => Direction::RoundTrip,
                }
            }
        }
    }

    /// True for request/response kinds (rr, crr).
    pub fn is_request_response(&self) -> bool {
        matches!(
            self,
            Workload::Rr { .. } | Workload::Crr { .. } | Workload::Mix { .. }
        )
    }

    /// The sizes of each transaction, for request/response kinds.
    pub fn transaction_sizes(&self) -> Option<TransactionSizes> {
        match self {
            Workload::Rr { request, response } | Workload::Crr { request, response } => {
                Some(TransactionSizes::Fixed {
                    request: request.0,
                    response: response.0,
                })
            }
            Workload::Mix { entries } => Some(TransactionSizes::Mix(entries.clone().into())),
            Workload::Stream { .. } | Workload::Profile { .. } => None,
        }
    }

    /// The largest single message either side writes, to size buffers.
    pub fn largest_message(&self) -> Bytes {
        match self {
            Workload::Rr { request, response } | Workload::Crr { request, response } => {
                (*request).max(*response)
            }
            Workload::Mix { entries } => entries
                .iter()
                .map(|e| e.request.max(e.response))
                .max()
                .unwrap_or(Bytes(1)),
            Workload::Stream { message, .. } => *message,
            Workload::Profile { profile } => Bytes(
                profile
                    .groups
                    .iter()
                    .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
                    .filter_map(|f| match &f.kind {
                        FlowopKind::Read(x)
                        | FlowopKind::Write(x)
                        | FlowopKind::Send(x)
                        | FlowopKind::Recv(x)
                        | FlowopKind::Sendfile(x) => Some(x.size.max()),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(1),
            ),
        }
    }

    /// Checks every size is within limits.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        match self {
            Workload::Rr { request, response } | Workload::Crr { request, response } => {
                request.check_range("request", 1, MAX_MESSAGE)?;
                response.check_range("response", 1, MAX_MESSAGE)?;
            }
            Workload::Mix { entries } => {
                crate::mix::check_entries(entries)
                    .map_err(|why| WorkloadError::Invalid(format!("invalid mix: {why}")))?;
                for e in entries {
                    e.request.check_range("request", 1, MAX_MESSAGE)?;
                    e.response.check_range("response", 1, MAX_MESSAGE)?;
                }
            }
            Workload::Stream { message, .. } => {
                message.check_range("message", 1, MAX_MESSAGE)?;
            }
            Workload::Profile { profile } => {
                if profile.groups.is_empty() || profile.users() == 0 {
                    return Err(WorkloadError::Invalid(
                        "a profile needs at least one group with users".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether a profile's client writes, and whether it reads.
fn profile_directions(p: &Profile) -> (bool, bool) {
    let mut writes = false;
    let mut reads = false;
    for f in p
        .groups
        .iter()
        .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
    {
        match f.kind {
            FlowopKind::Write(_) | FlowopKind::Send(_) | FlowopKind::Sendfile(_) => writes = true,
            FlowopKind::Read(_) | FlowopKind::Recv(_) => reads = true,
            _ => {}
        }
    }
    (writes, reads)
}

fn pair(s: &str, whole: &str) -> Result<(Bytes, Bytes), WorkloadError> {
    let (a, b) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| WorkloadError::UnknownWorkload(whole.to_string()))?;
    Ok((a.parse()?, b.parse()?))
}

impl FromStr for Workload {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        let unknown = || WorkloadError::UnknownWorkload(t.to_string());
        let w = if let Some(rest) = lower
            .strip_prefix("rr1c-")
            .or_else(|| lower.strip_prefix("rr:"))
        {
            let (request, response) = pair(rest, t)?;
            Workload::Rr { request, response }
        } else if let Some(rest) = lower
            .strip_prefix("mix-")
            .or_else(|| lower.strip_prefix("mix:"))
        {
            Workload::Mix {
                entries: parse_mix(rest, t)?,
            }
        } else if let Some(rest) = lower
            .strip_prefix("crr-")
            .or_else(|| lower.strip_prefix("crr:"))
        {
            let (request, response) = pair(rest, t)?;
            Workload::Crr { request, response }
        } else {
            let (direction, size) = if let Some(r) = lower.strip_prefix("str-readx") {
                (StreamDirection::Up, r)
            } else if let Some(r) = lower.strip_prefix("str-writex") {
                (StreamDirection::Down, r)
            } else if let Some(r) = lower.strip_prefix("str-bidirx") {
                (StreamDirection::Bidir, r)
            } else if let Some(r) = lower.strip_prefix("stream-up:") {
                (StreamDirection::Up, r)
            } else if let Some(r) = lower.strip_prefix("stream-down:") {
                (StreamDirection::Down, r)
            } else if let Some(r) = lower.strip_prefix("stream-bidir:") {
                (StreamDirection::Bidir, r)
            } else {
                return Err(unknown());
            };
            Workload::Stream {
                message: size.parse()?,
                direction,
            }
        };
        w.validate()?;
        Ok(w)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_tiny_messages_is_warned_of() {
        let w: Workload = "str-readx30".parse().unwrap();
        let why = w.small_stream_warning().unwrap();
        assert!(
            why.starts_with("str-readx30 streams 30-byte messages"),
            "{why}"
        );
        assert!(why.contains("30k would be 30 KiB"), "{why}");
        for fine in [
            "str-readx30k",
            "stream-up:64",
            "stream-down:1400",
            "rr1c-1x1",
            "crr:1x1",
        ] {
            let w: Workload = fine.parse().unwrap();
            assert_eq!(w.small_stream_warning(), None, "{fine}");
        }
        let w: Workload = "stream-bidir:63".parse().unwrap();
        assert!(w.small_stream_warning().is_some());
    }

    #[test]
    fn study_names_parse_with_their_meaning() {
        let w: Workload = "rr1c-200x30k".parse().unwrap();
        assert_eq!(
            w,
            Workload::Rr {
                request: Bytes(200),
                response: Bytes(30720)
            }
        );
        let w: Workload = "str-readx30k".parse().unwrap();
        assert_eq!(w.direction(), Direction::ClientToServer);
        let w: Workload = "str-writex30k".parse().unwrap();
        assert_eq!(w.direction(), Direction::ServerToClient);
    }

    #[test]
    fn generic_forms_map_to_canonical_names() {
        for (given, name) in [
            ("rr:200x1000", "rr1c-200x1000"),
            ("rr:1x1", "rr1c-1x1"),
            ("crr:64x1k", "crr-64x1k"),
            ("stream-up:30k", "str-readx30k"),
            ("stream-down:128k", "str-writex128k"),
            ("stream-bidir:1m", "str-bidirx1m"),
            ("mix:200x200*1,200x8k*3", "mix-200x200*1,200x8k*3"),
            ("mix:64x1k", "mix-64x1k*1"),
        ] {
            let w: Workload = given.parse().unwrap();
            assert_eq!(w.name(), name);
            assert_eq!(
                name.parse::<Workload>().unwrap(),
                w,
                "canonical name parses back"
            );
        }
    }

    #[test]
    fn study_names_are_canonical() {
        for n in [
            "rr1c-1x1",
            "rr1c-200x1000",
            "rr1c-200x30k",
            "str-readx30k",
            "str-writex30k",
        ] {
            assert_eq!(n.parse::<Workload>().unwrap().name(), n);
        }
    }

    #[test]
    fn refuses_unknown_and_out_of_range() {
        assert!(matches!(
            "tcp_rr".parse::<Workload>(),
            Err(WorkloadError::UnknownWorkload(_))
        ));
        assert!(matches!(
            "rr:0x1".parse::<Workload>(),
            Err(WorkloadError::SizeRange { .. })
        ));
        assert!(matches!(
            "rr:1".parse::<Workload>(),
            Err(WorkloadError::UnknownWorkload(_))
        ));
        assert!("stream-up:65m".parse::<Workload>().is_err());
    }

    #[test]
    fn serializes_with_kind_tag() {
        let w: Workload = "rr1c-1x1".parse().unwrap();
        let j = serde_json::to_string(&w).unwrap();
        assert_eq!(j, r#"{"kind":"rr","request":1,"response":1}"#);
    }
}
