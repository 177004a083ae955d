//! Data-path headers: the preamble a client sends first on every TCP or Unix
//! data connection, and the header in front of every UDP datagram's payload.
//! All integers are big-endian.

use crate::{DataToken, WireError};

/// The first four bytes of every data connection.
pub const PREAMBLE_MAGIC: [u8; 4] = *b"LPD1";

/// Bytes of a [`Preamble`]: magic (4), token (16), flow id (4), sequence (8).
pub const PREAMBLE_LEN: usize = 32;

/// Bytes of a [`UdpHeader`]: session tag (4), flow id (4), sequence (8),
/// send time (8). Control protocol 4 added the send time (3 had 16 bytes).
pub const UDP_HEADER_LEN: usize = 24;

/// What a client sends first on every TCP or Unix data connection, so the
/// server can match the connection to its session and flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Preamble {
    /// The session's token, from [`ServerMessage::Accepted`](crate::ServerMessage::Accepted).
    pub token: DataToken,
    /// The flow (user) this connection carries.
    pub flow: u32,
    /// The connection's number within its flow (crr opens one per transaction).
    pub seq: u64,
}

impl Preamble {
    /// The 32 bytes to send.
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut out = [0u8; PREAMBLE_LEN];
        out[..4].copy_from_slice(&PREAMBLE_MAGIC);
        out[4..20].copy_from_slice(&self.token.0);
        out[20..24].copy_from_slice(&self.flow.to_be_bytes());
        out[24..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// Reads a received preamble. Only the magic is checked: whether the token
    /// belongs to a session is for the caller to decide.
    pub fn decode(bytes: &[u8; PREAMBLE_LEN]) -> Result<Preamble, WireError> {
        let (magic, rest) = bytes.split_at(4);
        if magic != PREAMBLE_MAGIC {
            return Err(WireError::BadMagic);
        }
        let (token, rest) = rest.split_at(16);
        let (flow, seq) = rest.split_at(4);
        Ok(Preamble {
            token: DataToken(array(token)),
            flow: u32::from_be_bytes(array(flow)),
            seq: u64::from_be_bytes(array(seq)),
        })
    }
}

/// The [`Preamble::seq`] of a profile's TCP connection: the transaction it
/// is opened in, the connection (its place among the group's connection
/// names) and its place among that connection's connects in the
/// transaction, from 1. The server's n-th accept of a connection in a
/// transaction takes the socket numbered n, whatever order the preambles
/// complete in (several sockets of one user arrive at once when the
/// accepting side is slow). Packed into the 64 bits as transaction (16),
/// connection (8), ordinal (40, counted modulo 2^40). Control protocol 6
/// added the ordinal (5 carried the transaction and the connection alone,
/// and paired sockets in the order their preambles completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectSeq {
    /// The transaction, from 0.
    pub txn: u16,
    /// The connection.
    pub conn: u8,
    /// The socket's place among the connection's connects in the
    /// transaction, from 1, modulo 2^40.
    pub ordinal: u64,
}

impl ConnectSeq {
    /// Ordinals are counted modulo `1 << ORDINAL_BITS`.
    pub const ORDINAL_BITS: u32 = 40;

    /// The sequence of socket `ordinal` (taken modulo 2^40) of connection
    /// `conn` in transaction `txn`.
    pub fn new(txn: u16, conn: u8, ordinal: u64) -> ConnectSeq {
        ConnectSeq {
            txn,
            conn,
            ordinal: ordinal & ((1 << Self::ORDINAL_BITS) - 1),
        }
    }

    /// The preamble's `seq`.
    pub fn pack(&self) -> u64 {
        let ordinal = self.ordinal & ((1 << Self::ORDINAL_BITS) - 1);
        (u64::from(self.txn) << 48) | (u64::from(self.conn) << Self::ORDINAL_BITS) | ordinal
    }

    /// Reads a preamble's `seq`.
    pub fn unpack(seq: u64) -> ConnectSeq {
        ConnectSeq {
            txn: (seq >> 48) as u16,
            conn: (seq >> Self::ORDINAL_BITS) as u8,
            ordinal: seq & ((1 << Self::ORDINAL_BITS) - 1),
        }
    }
}

/// The header in front of every UDP datagram's payload.
///
/// A datagram of the header alone (no payload) is a registration: a client
/// sends one for each UDP stream flow (and each UDP connection of a profile)
/// before any data, so that the server knows where to send, and the server
/// answers it with the same header. Every data datagram carries at least one
/// payload byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHeader {
    /// The session's tag, [`DataToken::session_tag`].
    pub tag: u32,
    /// The flow (user) the datagram belongs to.
    pub flow: u32,
    /// The transaction's (request/response) or the datagram's (streams)
    /// sequence number within its flow, from 0.
    pub seq: u64,
    /// When the sender sent it: nanoseconds on the sender's clock, from an
    /// origin of its choosing that stays the same for the flow (only the
    /// differences between a flow's datagrams mean anything: the receiver's
    /// jitter). 0 where the sender does not say (request/response). A
    /// profile's UDP registration (a header alone) carries here its
    /// socket's ordinal among the connects of its user and connection,
    /// from 1, so that the server's n-th accept takes the n-th socket.
    pub sent_ns: u64,
}

impl UdpHeader {
    /// Writes the header. To write it at the front of a datagram buffer, pass
    /// `buf.first_chunk_mut::<UDP_HEADER_LEN>()`.
    pub fn encode(&self, out: &mut [u8; UDP_HEADER_LEN]) {
        out[..4].copy_from_slice(&self.tag.to_be_bytes());
        out[4..8].copy_from_slice(&self.flow.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Reads the header at the front of a received datagram; the payload follows
    /// at `UDP_HEADER_LEN`. Whether the tag and flow are known is for the caller.
    pub fn decode(datagram: &[u8]) -> Result<UdpHeader, WireError> {
        let header = datagram
            .first_chunk::<UDP_HEADER_LEN>()
            .ok_or(WireError::Truncated)?;
        let (tag, rest) = header.split_at(4);
        let (flow, rest) = rest.split_at(4);
        let (seq, sent) = rest.split_at(8);
        Ok(UdpHeader {
            tag: u32::from_be_bytes(array(tag)),
            flow: u32::from_be_bytes(array(flow)),
            seq: u64::from_be_bytes(array(seq)),
            sent_ns: u64::from_be_bytes(array(sent)),
        })
    }
}

/// Copies a slice into an array of its length. Every caller passes a slice cut
/// to exactly `N` bytes from a fixed-size array; a shorter one would leave zeros.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = *b;
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn token() -> DataToken {
        DataToken(*b"0123456789abcdef")
    }

    #[test]
    fn a_connect_sequence_packs_its_three_fields_apart() {
        let s = ConnectSeq::new(0x0102, 0x03, 0x04_0506_0708);
        assert_eq!(s.pack(), 0x0102_0304_0506_0708);
        assert_eq!(ConnectSeq::unpack(s.pack()), s);
        // The ordinal is counted modulo 2^40: it never spills into the
        // connection or the transaction.
        let wrapped = ConnectSeq::new(u16::MAX, u8::MAX, (1 << 40) + 5);
        assert_eq!(wrapped.ordinal, 5);
        assert_eq!(ConnectSeq::unpack(wrapped.pack()), wrapped);
        assert_eq!(ConnectSeq::new(1, 2, 0).pack() >> 40, 0x0102);
    }

    #[test]
    fn udp_header_matches_the_workload_budget() {
        assert_eq!(UDP_HEADER_LEN, linkperf_workload::UDP_HEADER_BYTES);
    }

    #[test]
    fn preamble_layout_and_round_trip() {
        let p = Preamble {
            token: token(),
            flow: 0x0102_0304,
            seq: 0x1122_3344_5566_7788,
        };
        let bytes = p.encode();
        assert_eq!(&bytes[..4], b"LPD1");
        assert_eq!(&bytes[4..20], b"0123456789abcdef");
        assert_eq!(bytes[20..24], [1, 2, 3, 4]);
        assert_eq!(
            bytes[24..],
            [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(Preamble::decode(&bytes), Ok(p));
    }

    #[test]
    fn preamble_with_bad_magic_is_refused() {
        let good = Preamble {
            token: token(),
            flow: 1,
            seq: 2,
        }
        .encode();
        for i in 0..4 {
            let mut bad = good;
            bad[i] ^= 0x20;
            assert_eq!(Preamble::decode(&bad), Err(WireError::BadMagic));
        }
        let mut http = [0u8; PREAMBLE_LEN];
        http.copy_from_slice(b"GET / HTTP/1.1\r\nHost: example\r\n\r");
        assert_eq!(Preamble::decode(&http), Err(WireError::BadMagic));
    }

    #[test]
    fn udp_header_layout_and_round_trip() {
        let h = UdpHeader {
            tag: 0xdead_beef,
            flow: 7,
            seq: u64::MAX - 1,
            sent_ns: 0x0102_0304_0506_0708,
        };
        let mut datagram = vec![0xAAu8; 64];
        h.encode(datagram.first_chunk_mut::<UDP_HEADER_LEN>().unwrap());
        assert_eq!(datagram[..8], [0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7]);
        assert_eq!(
            datagram[8..16],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
        );
        assert_eq!(datagram[16..24], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(
            datagram[24..].iter().all(|&b| b == 0xAA),
            "payload untouched"
        );
        assert_eq!(UdpHeader::decode(&datagram), Ok(h));
        assert_eq!(UdpHeader::decode(&datagram[..UDP_HEADER_LEN]), Ok(h));
    }

    #[test]
    fn short_datagrams_are_truncated() {
        let datagram = [0u8; UDP_HEADER_LEN];
        for len in 0..UDP_HEADER_LEN {
            assert_eq!(
                UdpHeader::decode(&datagram[..len]),
                Err(WireError::Truncated),
                "{len}"
            );
        }
    }

    #[test]
    fn udp_tag_is_the_tokens_session_tag() {
        let t = token();
        let h = UdpHeader {
            tag: t.session_tag(),
            flow: 0,
            seq: 0,
            sent_ns: 0,
        };
        let mut bytes = [0u8; UDP_HEADER_LEN];
        h.encode(&mut bytes);
        assert_eq!(bytes[..4], t.0[..4]);
    }

    proptest! {
        #[test]
        fn preamble_round_trips(token in any::<[u8; 16]>(), flow in any::<u32>(), seq in any::<u64>()) {
            let p = Preamble { token: DataToken(token), flow, seq };
            prop_assert_eq!(Preamble::decode(&p.encode()), Ok(p));
        }

        #[test]
        fn udp_header_round_trips(
            tag in any::<u32>(),
            flow in any::<u32>(),
            seq in any::<u64>(),
            sent_ns in any::<u64>(),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let h = UdpHeader { tag, flow, seq, sent_ns };
            let mut datagram = vec![0u8; UDP_HEADER_LEN];
            h.encode(datagram.first_chunk_mut::<UDP_HEADER_LEN>().unwrap());
            datagram.extend_from_slice(&payload);
            prop_assert_eq!(UdpHeader::decode(&datagram), Ok(h));
            prop_assert_eq!(&datagram[UDP_HEADER_LEN..], &payload[..]);
        }

        #[test]
        fn any_preamble_bytes_decode_or_refuse(bytes in any::<[u8; 32]>()) {
            match Preamble::decode(&bytes) {
                Ok(p) => prop_assert_eq!(p.encode(), bytes),
                Err(e) => {
                    prop_assert_eq!(e, WireError::BadMagic);
                    prop_assert_ne!(&bytes[..4], b"LPD1");
                }
            }
        }
    }
}
