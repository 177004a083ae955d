//! Results documents (compare and report read files from others): a document,
//! or an error naming the file; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_results::ResultsDocument;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ResultsDocument::from_json(text, "fuzz.json") {
        Ok(mut doc) => {
            // What was read can be summarised and written back.
            doc.refresh_summaries();
            let _ = doc.find_test("rr1c-1x1--1");
        }
        Err(e) => assert!(e.to_string().contains("fuzz.json"), "{e}"),
    }
});
