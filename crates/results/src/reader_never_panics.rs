//! Results files come from others (compare and report read them): any text
//! gives a document or an error naming the file, never a panic. (The cargo-fuzz
//! target in fuzz/ searches far longer; these bounded properties run with every
//! `cargo test`.)

use crate::ResultsDocument;
use proptest::prelude::*;

/// JSON-ish text around the document's real keys.
fn document_like() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("schema"),
        Just("label"),
        Just("tests"),
        Just("runs"),
        Just("name"),
        Just("status"),
        Just("throughput"),
        Just("environment"),
        Just("suite"),
        Just("command_line"),
    ];
    let scalar = prop_oneof![
        Just("\"linkperf/results/v1\"".to_string()),
        Just("\"linkperf/results/v2\"".to_string()),
        "-?[0-9]{1,20}(\\.[0-9]{1,4})?(e[0-9]{1,3})?",
        "\"[a-z0-9 /-]{0,16}\"",
        Just("null".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("true".to_string()),
    ];
    proptest::collection::vec((key, scalar), 0..8).prop_map(|fields| {
        let body: Vec<String> = fields
            .into_iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!("{{{}}}", body.join(","))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_a_document_or_an_error_naming_the_file(text in "\\PC{0,300}") {
        if let Err(e) = ResultsDocument::from_json(&text, "prop.json") {
            prop_assert!(e.to_string().contains("prop.json"), "{e}");
        }
    }

    #[test]
    fn document_like_text_is_a_document_or_an_error_naming_the_file(text in document_like()) {
        if let Err(e) = ResultsDocument::from_json(&text, "prop.json") {
            prop_assert!(e.to_string().contains("prop.json"), "{e}");
        }
    }

    #[test]
    fn any_prefix_of_a_document_is_refused_as_such(cut in 1usize..200) {
        let doc = ResultsDocument::new("label".into(), vec!["linkperf".into(), "run".into()]);
        let json = serde_json::to_string_pretty(&doc).unwrap();
        let cut = cut.min(json.len() - 1);
        let Some(prefix) = json.get(..cut) else { return Ok(()); };
        let e = ResultsDocument::from_json(prefix, "cut.json").unwrap_err().to_string();
        prop_assert!(e.contains("cut.json"), "{e}");
    }
}
