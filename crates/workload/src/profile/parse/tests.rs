//! The reader's tests, through `parse_profile`: the shared helpers and the
//! tests of the whole reader here, the tests of each part in tests/.

use std::time::Duration;

use proptest::prelude::*;

use super::values::MAX_TEXT;
use super::*;
use crate::profile::model::{
    Endpoint, Flowop, FlowopKind, Group, Limit, Profile, ProfileProtocol, Rate, Size, Transaction,
    Xfer,
};

mod builder;
mod lexer;
mod options;
mod values;

fn no_vars(_: &str) -> Option<String> {
    None
}

fn parse(text: &str) -> Result<Profile, ProfileError> {
    parse_profile(text, &no_vars)
}

fn parse_with(text: &str, vars: &[(&str, &str)]) -> Result<Profile, ProfileError> {
    let lookup = |name: &str| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    parse_profile(text, &lookup)
}

fn error(text: &str) -> ProfileError {
    match parse(text) {
        Ok(p) => panic!("expected an error, got {p:?}"),
        Err(e) => e,
    }
}

/// A profile around `body`, which starts on line 4.
fn wrap(body: &str) -> String {
    format!(
        "<profile name=\"t\">\n<group nthreads=\"1\">\n<transaction iterations=\"1\">\n{body}\n</transaction>\n</group>\n</profile>\n"
    )
}

/// The first flowop of a profile around `body`.
fn flowop(body: &str) -> Flowop {
    let p = parse(&wrap(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
    p.groups[0].transactions[0].flowops[0].clone()
}

/// The error for a profile around `body`: it must be about the flowop on line 4.
fn flowop_error(body: &str) -> String {
    let e = error(&wrap(body));
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"), "{e}");
    e.message
}

fn tcp() -> Endpoint {
    Endpoint {
        remotehost: None,
        protocol: ProfileProtocol::Tcp,
        port: None,
        wndsz: None,
        nodelay: false,
        cc: None,
    }
}

fn fixed(size: u64) -> Xfer {
    Xfer {
        size: Size::Fixed(size),
        rsize: None,
    }
}

fn op(kind: FlowopKind, count: u64, line: u32) -> Flowop {
    Flowop {
        kind,
        count,
        conn: None,
        timeout: None,
        canfail: false,
        line,
    }
}

const NETPERF: &str = r#"<?xml version="1.0"?>
<!-- request/response like netperf's TCP_RR -->
<profile name="netperf">
  <group nthreads="$nthr">
    <transaction iterations="1">
      <flowop type="connect" options="remotehost=$h protocol=tcp wndsz=50k tcp_nodelay"/>
    </transaction>
    <transaction duration="30s">
      <flowop type="write" options="count=160 size=90"/>
      <flowop type="read" options="size=90"/>
    </transaction>
    <transaction iterations="1">
      <flowop type="disconnect" />
    </transaction>
  </group>
</profile>
"#;

#[test]
fn the_netperf_example_reads_as_the_model() {
    let p = parse_with(NETPERF, &[("nthr", "8"), ("h", "10.0.0.2")]).unwrap();
    let expected = Profile {
        name: "netperf".into(),
        groups: vec![Group {
            users: 8,
            line: 4,
            number: 0,
            transactions: vec![
                Transaction {
                    limit: Limit::Iterations(1),
                    rate: None,
                    line: 5,
                    flowops: vec![op(
                        FlowopKind::Connect(Endpoint {
                            remotehost: Some("10.0.0.2".into()),
                            wndsz: Some(50 * 1024),
                            nodelay: true,
                            ..tcp()
                        }),
                        1,
                        6,
                    )],
                },
                Transaction {
                    limit: Limit::Duration(Duration::from_secs(30)),
                    rate: None,
                    line: 8,
                    flowops: vec![
                        op(FlowopKind::Write(fixed(90)), 160, 9),
                        op(FlowopKind::Read(fixed(90)), 1, 10),
                    ],
                },
                Transaction {
                    limit: Limit::Iterations(1),
                    rate: None,
                    line: 12,
                    flowops: vec![op(FlowopKind::Disconnect, 1, 13)],
                },
            ],
        }],
    };
    assert_eq!(p, expected);
}

#[test]
fn a_large_profile_is_read_in_linear_time() {
    let flowops = "<flowop type=write options=\"size=1 count=2\"/>\n".repeat(20_000);
    let text = wrap(&flowops);
    assert!(text.len() < MAX_TEXT);
    let start = std::time::Instant::now();
    let p = parse(&text).unwrap();
    assert_eq!(p.groups[0].transactions[0].flowops.len(), 20_000);
    assert_eq!(p.groups[0].transactions[0].flowops[19_999].line, 4 + 19_999);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn hostile_inputs_fail_quickly_without_panicking() {
    let inputs = [
        "<a>".repeat(300_000),
        "<profile name=x ".to_string() + &"a=1 ".repeat(200_000),
        "<profile name=x name=y".to_string() + &" name=z".repeat(100_000),
        "<!--".repeat(200_000),
        "<".repeat(MAX_TEXT),
        "&".repeat(MAX_TEXT),
        format!("<profile name=\"{}\">", "$".repeat(500_000)),
        format!("<profile name=\"{}\">", "${".repeat(400_000)),
        format!("<profile name=\"{}\">", "&#".repeat(400_000)),
        wrap(&format!(
            "<flowop type=nop options=\"{}\"/>",
            "(".repeat(500_000)
        )),
        wrap(&format!(
            "<flowop type=write options=\"size=rand({})\"/>",
            "9".repeat(500_000)
        )),
        wrap(&format!(
            "<flowop type=think options=\"duration={}\"/>",
            "9".repeat(500_000)
        )),
        wrap(&format!("<transaction rate={}>", "9".repeat(500_000))),
        "é<profile name=é>\u{10ffff}".repeat(1000),
    ];
    let start = std::time::Instant::now();
    for text in &inputs {
        let text = text.get(..MAX_TEXT).unwrap_or(text);
        assert!(parse(text).is_err());
    }
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn multibyte_characters_never_split() {
    for text in [
        "<profile name=\"é\"><group nthreads=\"１\">",
        "<profile name=é/>",
        "<profile name=\"x\"><group nthreads=1><transaction><flowop type=\"ré\"/>",
        "<profile name=\"x\"><group nthreads=1><transaction><flowop type=nop options=\"conn=€ size=€ 宇=1\"/>",
        "<profile name=\"x\"><group nthreads=1><transaction duration=\"5€\">",
        "<prof€ile>",
        "<profile name=x>ü</profile>",
        &format!("<profile name=\"{}\">", "é".repeat(100)),
    ] {
        assert!(parse(text).is_err(), "{text}");
    }
    let e = error(&format!(
        "<profile name=x><group nthreads=\"{}\">",
        "é".repeat(100)
    ));
    assert!(
        e.message.ends_with(
            "is not a number: write digits with an optional k, m or g suffix (64k is 65536)"
        ),
        "{e}"
    );
    assert!(e.message.contains("..."), "{e}");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = parse(&text);
    }

    #[test]
    fn xml_like_text_never_panics(text in "[<>/=\"' \n!?$-{}()a-zA-Z0-9_&;#é]{0,400}") {
        let _ = parse_with(&text, &[("a", "1"), ("x", "<\"'$")]);
    }

    #[test]
    fn flowop_options_never_panic(options in "[a-z_=(), 0-9.$\\-kmgsuné]{0,80}") {
        for ty in ["connect", "write", "think", "nop"] {
            let _ = parse(&wrap(&format!("<flowop type={ty} options=\"{options}\"/>")));
        }
    }

    #[test]
    fn cutting_a_valid_profile_anywhere_never_panics(cut in 0usize..600) {
        let text = NETPERF;
        let mut cut = cut.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let _ = parse_with(&text[..cut], &[("nthr", "1"), ("h", "h")]);
    }
}
