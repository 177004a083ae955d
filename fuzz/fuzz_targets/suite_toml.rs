//! Suite files (TOML): a suite comes back whole, or an error; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_workload::parse_suite;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(suite) = parse_suite(text, "fuzz.toml") {
        // What parses can be named, fingerprinted and timed.
        for t in &suite.tests {
            let _ = t.name();
        }
        let _ = suite.fingerprint();
        let _ = suite.estimated_time(1);
    } else if let Err(e) = parse_suite(text, "fuzz.toml") {
        let _ = e.to_string();
    }
});
