//! The data path: the 32-byte preamble of a TCP/Unix data connection and the
//! 24-byte header of a UDP datagram, from whatever bytes a stranger sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_protocol::{Preamble, UdpHeader, PREAMBLE_LEN, UDP_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Some(bytes) = data.first_chunk::<PREAMBLE_LEN>() {
        if let Ok(p) = Preamble::decode(bytes) {
            assert_eq!(&p.encode(), bytes);
        }
    }
    match UdpHeader::decode(data) {
        Ok(h) => {
            let mut out = [0u8; UDP_HEADER_LEN];
            h.encode(&mut out);
            assert_eq!(&out[..], &data[..UDP_HEADER_LEN]);
        }
        Err(_) => assert!(data.len() < UDP_HEADER_LEN),
    }
});
