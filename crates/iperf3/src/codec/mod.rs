//! iperf3's control protocol as bytes: states, the cookie, length-prefixed
//! JSON (and the inbox that takes messages from bytes as they arrive), the
//! parameter and result messages, stream numbering, the UDP datagram header
//! and iperf3's error numbers. No sockets, no clocks; every
//! check failure is a [`WireError`](crate::WireError) value.

mod cookie;
mod errno;
mod frame;
mod inbox;
mod number;
mod params;
mod results;
mod state;
mod streams;
mod udp;

pub use cookie::{Cookie, COOKIE_ALPHABET, COOKIE_LEN};
pub use errno::{describe_errno, server_error_bytes, server_error_from_bytes, IErrno};
pub use frame::{decode_json, encode_frame, encode_json, frame_length, LENGTH_PREFIX_LEN};
pub use inbox::{Expect, Inbox, ERROR_NUMBERS_LEN};
pub use params::{TestMode, TestParams, Transport, DEFAULT_TCP_BLKSIZE, DEFAULT_TIME_S};
pub use results::{StreamResults, TestResults};
pub use state::State;
pub use streams::{server_sends, stream_count, stream_id, stream_index};
pub use udp::{
    udp_connect_reply, UdpHeader, LEGACY_UDP_CONNECT_MSG, LEGACY_UDP_CONNECT_REPLY,
    UDP_CONNECT_MSG, UDP_CONNECT_REPLY,
};
