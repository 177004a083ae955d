//! Lab configurations from outside: `--file` configuration files (TOML) and
//! configuration specs on the command line (`veth,mtu=9000,rate=10gbit`). A
//! catalog or configuration, or an error; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_lab::Catalog;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(catalog) = Catalog::with_file(text, "fuzz.toml") {
        for c in catalog.configs() {
            let _ = c.summary();
        }
    }
    if let Ok(c) = Catalog::builtin().resolve(text) {
        let _ = c.summary();
    }
});
