//! Suite files and command-line values come from outside: any text gives a
//! value or an error, never a panic. (The cargo-fuzz targets in fuzz/ search far
//! longer; these bounded properties run with every `cargo test`.)

use crate::{parse_suite, Bytes, CpuList, Protocol, Workload};
use proptest::prelude::*;

/// Text shaped like a suite file: known keys, values of every kind.
fn suite_like() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("name"),
        Just("repeat"),
        Just("duration"),
        Just("warmup"),
        Just("workload"),
        Just("workloads"),
        Just("users"),
        Just("protocol"),
        Just("protocols"),
        Just("threads"),
        Just("affinity"),
        Just("sndbuf"),
        Just("udp_timeout"),
    ];
    let value = prop_oneof![
        "-?[0-9]{1,12}",
        "\"[a-z0-9:x*,.-]{0,24}\"",
        "\"[0-9]{1,4}(ms|s|m|h)\"",
        "\\[(-?[0-9]{1,6}|\"[a-z0-9:x-]{0,12}\")(, ?(-?[0-9]{1,6}|\"[a-z0-9:x-]{0,12}\")){0,3}\\]",
        Just("true".to_string()),
        Just("{}".to_string()),
    ];
    let line = (key, value).prop_map(|(k, v)| format!("{k} = {v}"));
    let header = prop_oneof![Just("[[matrix]]"), Just("[[test]]"), Just("[settings]")];
    proptest::collection::vec(
        prop_oneof![3 => line, 1 => header.prop_map(str::to_string)],
        0..12,
    )
    .prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_a_suite_or_an_error(text in "\\PC{0,200}") {
        if let Err(e) = parse_suite(&text, "prop.toml") {
            prop_assert!(e.to_string().contains("prop.toml"), "{e}");
        }
    }

    #[test]
    fn suite_like_text_is_a_suite_or_an_error(text in suite_like()) {
        match parse_suite(&text, "prop.toml") {
            Ok(suite) => {
                for t in &suite.tests {
                    prop_assert!(t.spec.validate().is_ok(), "{}", t.name());
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("prop.toml"), "{e}"),
        }
    }

    #[test]
    fn any_value_text_parses_or_errs(s in "\\PC{0,40}") {
        let _ = s.parse::<Workload>();
        let _ = s.parse::<Bytes>();
        let _ = s.parse::<CpuList>();
        let _ = s.parse::<Protocol>();
    }

    #[test]
    fn workload_like_text_round_trips_when_it_parses(
        s in "(rr|crr|stream-up|stream-down|stream-bidir|mix|rr1c|str-readx|str-writex)[:-]?[0-9]{1,6}[kmg]?(x[0-9]{1,6}[kmg]?)?(\\*[0-9]{1,3})?(,[0-9]{1,4}x[0-9]{1,4}\\*[0-9])?"
    ) {
        if let Ok(w) = s.parse::<Workload>() {
            prop_assert_eq!(w.to_string().parse::<Workload>().ok(), Some(w));
        }
    }
}
