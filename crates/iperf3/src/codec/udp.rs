//! UDP streams. There is no connection: the client sends a 4-byte datagram to
//! the server's port, the server connects a socket to the sender and answers
//! with another 4 bytes. Both are an `int` in the sender's byte order. Every
//! data datagram then starts with the send time (seconds, microseconds) and a
//! sequence number counting from 1, big-endian; 64 bits with
//! `--udp-counters-64bit`, else 32.

use crate::WireError;

/// What a client sends to open a UDP stream (3.x since 3.1x: "9876" on x86).
pub const UDP_CONNECT_MSG: u32 = 0x3637_3839;
/// What the server answers (`"6789"` on x86).
pub const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
/// What older clients sent.
pub const LEGACY_UDP_CONNECT_MSG: u32 = 123_456_789;
/// What older servers answered.
pub const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;

/// The answer to a client's UDP connect datagram, in the byte order the client
/// wrote its message in (the legacy answer to a legacy message). `None` if the
/// datagram is not 4 bytes.
pub fn udp_connect_reply(msg: &[u8]) -> Option<[u8; 4]> {
    let m: [u8; 4] = msg.try_into().ok()?;
    Some(match (u32::from_le_bytes(m), u32::from_be_bytes(m)) {
        (UDP_CONNECT_MSG, _) => UDP_CONNECT_REPLY.to_le_bytes(),
        (_, UDP_CONNECT_MSG) => UDP_CONNECT_REPLY.to_be_bytes(),
        (LEGACY_UDP_CONNECT_MSG, _) => LEGACY_UDP_CONNECT_REPLY.to_le_bytes(),
        (_, LEGACY_UDP_CONNECT_MSG) => LEGACY_UDP_CONNECT_REPLY.to_be_bytes(),
        // Older servers answered anything with anything.
        _ => UDP_CONNECT_REPLY.to_le_bytes(),
    })
}

/// The header of every UDP data datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Send time, seconds.
    pub sec: u32,
    /// Send time, microseconds.
    pub usec: u32,
    /// Sequence number, from 1.
    pub seq: u64,
}

impl UdpHeader {
    /// Bytes of the header: 12, or 16 with 64-bit counters.
    pub fn len(wide: bool) -> usize {
        if wide {
            16
        } else {
            12
        }
    }

    /// Writes the header at the start of `out` (a 32-bit sequence number is
    /// truncated, as iperf3's is).
    pub fn encode(&self, wide: bool, out: &mut [u8]) -> Result<(), WireError> {
        let need = Self::len(wide);
        if out.len() < need {
            return Err(WireError::ShortDatagram {
                len: out.len(),
                need,
            });
        }
        out[..4].copy_from_slice(&self.sec.to_be_bytes());
        out[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if wide {
            out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            out[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
        Ok(())
    }

    /// Reads the header of a received datagram.
    pub fn decode(datagram: &[u8], wide: bool) -> Result<UdpHeader, WireError> {
        let need = Self::len(wide);
        if datagram.len() < need {
            return Err(WireError::ShortDatagram {
                len: datagram.len(),
                need,
            });
        }
        let word = |i: usize| {
            u32::from_be_bytes([
                datagram[i],
                datagram[i + 1],
                datagram[i + 2],
                datagram[i + 3],
            ])
        };
        let seq = if wide {
            (u64::from(word(8)) << 32) | u64::from(word(12))
        } else {
            u64::from(word(8))
        };
        Ok(UdpHeader {
            sec: word(0),
            usec: word(4),
            seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_message_and_reply_are_312s_bytes() {
        // A 3.12 client on x86 wrote 39 38 37 36 and read back 36 37 38 39.
        assert_eq!(
            udp_connect_reply(&[0x39, 0x38, 0x37, 0x36]),
            Some([0x36, 0x37, 0x38, 0x39])
        );
        assert_eq!(UDP_CONNECT_MSG.to_le_bytes(), [0x39, 0x38, 0x37, 0x36]);
        // A big-endian client gets its own order back.
        assert_eq!(
            udp_connect_reply(&[0x36, 0x37, 0x38, 0x39]),
            Some([0x39, 0x38, 0x37, 0x36])
        );
        assert_eq!(
            udp_connect_reply(&LEGACY_UDP_CONNECT_MSG.to_le_bytes()),
            Some(LEGACY_UDP_CONNECT_REPLY.to_le_bytes())
        );
        assert_eq!(
            udp_connect_reply(&LEGACY_UDP_CONNECT_MSG.to_be_bytes()),
            Some(LEGACY_UDP_CONNECT_REPLY.to_be_bytes())
        );
        assert_eq!(udp_connect_reply(b"abc"), None);
        assert_eq!(udp_connect_reply(b"abcde"), None);
    }

    #[test]
    fn the_data_header_is_312s() {
        // The first datagram a 3.12 client sent (strace): sec, usec, sequence 1.
        let captured = [
            0x00, 0x00, 0x0d, 0x6f, 0x00, 0x03, 0x8d, 0x52, 0x00, 0x00, 0x00, 0x01, 0x0f, 0x8c,
        ];
        let h = UdpHeader::decode(&captured, false).unwrap();
        assert_eq!(
            h,
            UdpHeader {
                sec: 0x0d6f,
                usec: 0x0003_8d52,
                seq: 1
            }
        );
        let mut out = [0u8; 12];
        h.encode(false, &mut out).unwrap();
        assert_eq!(out, captured[..12]);

        let wide = UdpHeader {
            sec: 7,
            usec: 999_999,
            seq: 0x0102_0304_0506_0708,
        };
        let mut out = [0u8; 16];
        wide.encode(true, &mut out).unwrap();
        assert_eq!(&out[8..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(UdpHeader::decode(&out, true).unwrap(), wide);
    }

    #[test]
    fn short_datagrams_are_values() {
        assert_eq!(
            UdpHeader::decode(&[0; 11], false),
            Err(WireError::ShortDatagram { len: 11, need: 12 })
        );
        assert!(UdpHeader::decode(&[0; 15], true).is_err());
        let h = UdpHeader {
            sec: 0,
            usec: 0,
            seq: 1,
        };
        assert!(h.encode(true, &mut [0u8; 12]).is_err());
    }
}
