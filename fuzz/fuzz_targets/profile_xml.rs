//! uperf profiles (XML): a profile comes back whole, or an error naming a
//! line; never a panic. What parses can be mirrored, split by host,
//! compiled for both ends and turned into a test spec.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_engine::program::compile;
use linkperf_workload::profile::{check_runnable, mirror, parse_profile, profile_spec, split_by_host};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let vars = |name: &str| (name.len() < 4).then(|| "1".to_string());
    match parse_profile(text, &vars) {
        Ok(p) => {
            let _ = check_runnable(&p);
            let _ = split_by_host(&p);
            let _ = compile(&p);
            let _ = compile(&mirror(&p));
            let spec = profile_spec(p);
            let _ = spec.validate();
            let _ = spec.name();
        }
        Err(e) => assert!(e.line >= 1, "an error names a line: {e}"),
    }
});
