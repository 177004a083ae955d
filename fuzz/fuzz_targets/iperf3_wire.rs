//! iperf3 on the wire, from whatever a stock (or hostile) iperf3 client or
//! server sends: the cookie, the state byte, the JSON length prefix, the
//! parameter and result messages and the server's plan for the parameters,
//! the UDP connect datagram and data header. Never a panic; what decodes
//! encodes back to what was read.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use linkperf_iperf3::server::plan::{plan, Limits};
use linkperf_iperf3::codec::{
    decode_json, describe_errno, encode_json, frame_length, server_error_from_bytes,
    udp_connect_reply, Cookie, State, TestParams, TestResults, UdpHeader, LENGTH_PREFIX_LEN,
};

fuzz_target!(|data: &[u8]| {
    // The first byte is a knob: a state byte, and the server's limits.
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    if let Ok(s) = State::from_byte(knob) {
        assert_eq!(s.to_byte(), knob);
    }
    if let Ok(c) = Cookie::parse(rest) {
        assert!(Cookie::parse(c.as_bytes()).is_ok_and(|d| d == c));
    }
    if let Some(p) = rest.first_chunk::<LENGTH_PREFIX_LEN>() {
        if let Ok(n) = frame_length(*p, 1 << 20) {
            assert!(n <= 1 << 20);
        }
    }
    if let Some(b) = rest.first_chunk::<8>() {
        let (i_errno, _) = server_error_from_bytes(*b);
        let _ = describe_errno(i_errno);
    }
    let _ = udp_connect_reply(rest);
    for wide in [false, true] {
        if let Ok(h) = UdpHeader::decode(rest, wide) {
            let mut out = [0u8; 16];
            h.encode(wide, &mut out).expect("room for the header");
            let n = UdpHeader::len(wide);
            assert_eq!(&out[..n], &rest[..n]);
        }
    }
    if let Ok(params) = decode_json::<TestParams>(rest) {
        let limits = Limits {
            max_duration: Duration::from_secs(u64::from(knob) + 1),
            max_streams: u32::from(knob),
        };
        if let Ok(p) = plan(&params, &limits) {
            assert!(p.streams() >= 1);
        }
        let _ = (params.bytes_limit(), params.blocks_limit(), params.rate());
        let framed = encode_json(&params).expect("parameters encode");
        let again: TestParams = decode_json(&framed[LENGTH_PREFIX_LEN..]).expect("and decode");
        assert_eq!(
            encode_json(&again).expect("encode again"),
            framed,
            "a round trip keeps the message"
        );
    }
    if let Ok(r) = decode_json::<TestResults>(rest) {
        let _ = r.total_bytes();
        let _ = r.stream(i64::from(knob));
    }
});
