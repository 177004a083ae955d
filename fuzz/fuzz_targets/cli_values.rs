//! Values typed on command lines and in suite files: workloads (with mixes),
//! sizes, CPU lists, protocols and rates (a lab link's, and `compare --capacity`). A value or an error; what parses
//! prints in a form that parses back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_workload::{BitsPerSecond, Bytes, CpuList, Protocol, Workload};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(w) = s.parse::<Workload>() {
        let shown = w.to_string();
        assert_eq!(
            shown.parse::<Workload>().as_ref().ok(),
            Some(&w),
            "{s:?} -> {shown:?}"
        );
        let _ = w.largest_message();
        let _ = w.transaction_sizes();
    }
    if let Ok(b) = s.parse::<Bytes>() {
        assert_eq!(b.to_string().parse::<Bytes>().ok(), Some(b), "{s:?}");
    }
    if let Ok(c) = s.parse::<CpuList>() {
        assert_eq!(
            c.to_string().parse::<CpuList>().ok(),
            Some(c.clone()),
            "{s:?}"
        );
    }
    if let Ok(p) = s.parse::<Protocol>() {
        assert_eq!(p.to_string().parse::<Protocol>().ok(), Some(p), "{s:?}");
    }
    if let Ok(r) = s.parse::<BitsPerSecond>() {
        assert_eq!(
            r.to_string().parse::<BitsPerSecond>().ok(),
            Some(r),
            "{s:?}"
        );
    }
    if let Ok(c) = linkperf_report::parse_capacity(s) {
        assert!(c.0 > 0, "{s:?}");
    }
});
