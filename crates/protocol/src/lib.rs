//! linkperf's wire formats. This crate only parses and emits bytes: no sockets,
//! clocks or threads.
//!
//! - the control connection: length-prefixed frames ([`encode_frame`],
//!   [`FrameDecoder`]) carrying JSON messages ([`ClientMessage`],
//!   [`ServerMessage`]);
//! - data connections: the [`Preamble`] a client sends first on every TCP or
//!   Unix data connection (a profile's TCP connection numbers itself in it
//!   with a [`ConnectSeq`]);
//! - UDP: the [`UdpHeader`] in front of every datagram's payload.
//!
//! Everything decoded from a peer is checked; a failed check is a [`WireError`].
#![warn(missing_docs)]

mod control;
mod data;
mod error;
mod frame;
#[cfg(test)]
mod golden;

pub use control::{
    decode_client, decode_server, encode_client, encode_server, ClientMessage, DataToken,
    DelegatedOutcome, ErrorCode, LimitInfo, LimitKind, ServerMessage, PROTOCOL_VERSION,
};
pub use data::{ConnectSeq, Preamble, UdpHeader, PREAMBLE_LEN, PREAMBLE_MAGIC, UDP_HEADER_LEN};
pub use error::WireError;
pub use frame::{encode_frame, FrameDecoder, DEFAULT_MAX_FRAME};
