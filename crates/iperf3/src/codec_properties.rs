//! Properties of the codec module: whatever a peer sends, reading it gives a
//! value or an error, never a panic; what linkperf writes reads back the same.

use crate::codec::{
    decode_json, encode_frame, encode_json, frame_length, stream_id, stream_index,
    udp_connect_reply, Cookie, State, TestParams, TestResults, UdpHeader,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_bytes_read_as_values_or_errors(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Cookie::parse(&bytes);
        let _ = decode_json::<TestParams>(&bytes);
        let _ = decode_json::<TestResults>(&bytes);
        let _ = UdpHeader::decode(&bytes, false);
        let _ = UdpHeader::decode(&bytes, true);
        let _ = udp_connect_reply(&bytes);
        if let Some(b) = bytes.first() {
            let _ = State::from_byte(*b);
        }
        if bytes.len() >= 4 {
            let prefix = [bytes[0], bytes[1], bytes[2], bytes[3]];
            if let Ok(n) = frame_length(prefix, 4096) {
                prop_assert!(n <= 4096);
            }
        }
    }

    #[test]
    fn json_shaped_garbage_is_an_error_value(
        key in "[a-zA-Z_]{1,12}",
        value in prop_oneof![
            Just("null".to_string()), Just("true".to_string()), Just("\"x\"".to_string()),
            Just("[1,2]".to_string()), Just("{}".to_string()), Just("-1".to_string()),
            Just("1e308".to_string()), Just("18446744073709551615".to_string()),
        ],
    ) {
        let text = format!("{{\"{key}\":{value},\"time\":1}}");
        let _ = decode_json::<TestParams>(text.as_bytes());
        let text = format!(
            "{{\"cpu_util_total\":1,\"cpu_util_user\":0,\"cpu_util_system\":1,\
             \"sender_has_retransmits\":{value},\"streams\":[{{\"id\":1,\"bytes\":{value},\
             \"retransmits\":-1,\"jitter\":0,\"errors\":0,\"packets\":0,\"{key}\":{value}}}]}}"
        );
        let _ = decode_json::<TestResults>(text.as_bytes());
    }

    #[test]
    fn frames_and_headers_round_trip(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        sec in any::<u32>(), usec in any::<u32>(), seq in any::<u64>(),
    ) {
        let f = encode_frame(&body).unwrap();
        let n = frame_length([f[0], f[1], f[2], f[3]], usize::MAX).unwrap();
        prop_assert_eq!(&f[4..4 + n], &body[..]);
        let h = UdpHeader { sec, usec, seq };
        let mut out = [0u8; 16];
        h.encode(true, &mut out).unwrap();
        prop_assert_eq!(UdpHeader::decode(&out, true).unwrap(), h);
        h.encode(false, &mut out).unwrap();
        prop_assert_eq!(UdpHeader::decode(&out, false).unwrap().seq, u64::from(seq as u32));
    }

    #[test]
    fn parameters_round_trip(parallel in 1i64..=128, time in 0i64..100_000, len in 1i64..=1 << 20,
                             reverse in any::<bool>(), bidirectional in any::<bool>(),
                             num in any::<u32>(), cc in proptest::option::of("[a-z]{1,15}")) {
        let p = TestParams {
            tcp: true,
            parallel: Some(parallel),
            time: Some(time),
            len: Some(len),
            reverse,
            bidirectional,
            num: Some(u64::from(num)),
            congestion: cc,
            ..TestParams::default()
        };
        let f = encode_json(&p).unwrap();
        prop_assert_eq!(decode_json::<TestParams>(&f[4..]).unwrap(), p);
    }

    #[test]
    fn cookies_from_any_entropy_parse(random in proptest::array::uniform32(any::<u8>()), tail in any::<[u8; 4]>()) {
        let mut r = [0u8; 36];
        r[..32].copy_from_slice(&random);
        r[32..].copy_from_slice(&tail);
        let c = Cookie::from_entropy(&r);
        prop_assert_eq!(Cookie::parse(c.as_bytes()).unwrap(), c);
    }

    #[test]
    fn stream_ids_and_indexes_agree(i in 0usize..100_000) {
        prop_assert_eq!(stream_index(stream_id(i)), Some(i));
    }
}
