//! Why bytes received from a peer were refused.

use thiserror::Error;

/// Why received bytes could not be used. Every check on what a peer sent ends
/// in one of these, never in a panic.
///
/// The messages are lowercase and read after "failed to ...", e.g.
/// "failed to read the server's reply: control frame of 4294967295 bytes
/// exceeds the limit of 1048576 bytes".
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum WireError {
    /// A control frame's length prefix is over the decoder's limit. Seen as soon
    /// as the prefix arrives, before any of the payload is buffered.
    #[error("control frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// Length the prefix announced.
        len: u64,
        /// The decoder's limit.
        max: usize,
    },
    /// A control frame with a zero length prefix: every frame carries a message.
    #[error("empty control frame: every frame must carry a message")]
    EmptyFrame,
    /// A control frame's payload is not JSON, or not a message of this protocol.
    #[error("malformed control message: {0}")]
    Malformed(String),
    /// The peer speaks another version of the control protocol.
    #[error(
        "control protocol version mismatch: this side speaks version {ours}, the peer speaks \
         version {theirs}; the two linkperf builds must speak the same control protocol version"
    )]
    VersionMismatch {
        /// [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION) of this build.
        ours: u32,
        /// The version the peer announced.
        theirs: u32,
    },
    /// A data connection did not start with the linkperf preamble magic.
    #[error("bad data connection preamble: it does not start with the linkperf magic \"LPD1\"")]
    BadMagic,
    /// A UDP datagram too short to hold the linkperf header.
    #[error("truncated datagram: shorter than the 16-byte linkperf udp header")]
    Truncated,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase_and_name_both_versions() {
        let e = WireError::VersionMismatch { ours: 1, theirs: 2 };
        let m = e.to_string();
        assert!(m.contains("version 1") && m.contains("version 2"), "{m}");
        assert!(m.contains("same control protocol version"), "{m}");
        for e in [
            e,
            WireError::FrameTooLarge { len: 5, max: 4 },
            WireError::EmptyFrame,
            WireError::Malformed("x".into()),
            WireError::BadMagic,
            WireError::Truncated,
        ] {
            let m = e.to_string();
            assert!(m.starts_with(|c: char| c.is_ascii_lowercase()), "{m}");
        }
        assert_eq!(
            WireError::FrameTooLarge { len: 5, max: 4 }.to_string(),
            "control frame of 5 bytes exceeds the limit of 4 bytes"
        );
    }
}
