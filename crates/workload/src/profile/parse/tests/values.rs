//! The tests of values: numbers, sizes, times, and `$variables`.

use super::*;
use crate::profile::parse::values::{number, time_value};
use crate::size::SizeError;

#[test]
fn numbers_take_binary_suffixes_in_any_case() {
    for (text, n) in [
        ("90", 90),
        ("64k", 65536),
        ("64K", 65536),
        ("64kb", 65536),
        ("64KB", 65536),
        ("64kB", 65536),
        ("1m", 1 << 20),
        ("1MB", 1 << 20),
        ("2g", 2 << 30),
        ("2Gb", 2 << 30),
        ("007", 7),
        (" 5 ", 5),
    ] {
        assert_eq!(number(text).ok(), Some(n), "{text}");
    }
    for bad in [
        "", "k", "kb", "64b", "1.5k", "-1", "+1", "1x", "1 k", "1kk", "１",
    ] {
        assert!(matches!(number(bad), Err(SizeError::NotANumber)), "{bad}");
    }
    for big in ["18446744073709551616", "18014398509481984k", "17179869184g"] {
        assert!(matches!(number(big), Err(SizeError::TooLarge)), "{big}");
    }
    assert_eq!(number("18446744073709551615").ok(), Some(u64::MAX));
}

#[test]
fn an_overflowing_count_is_too_large() {
    let m = flowop_error("<flowop type=nop options=\"count=99999999999999999999\"/>");
    assert!(m.contains("too large"), "{m}");
    let e = error("<profile name=x><group nthreads=1><transaction iterations=99999999999g><flowop type=nop/></transaction></group></profile>");
    assert!(
        e.message.contains("iterations=99999999999g is too large"),
        "{e}"
    );
}

#[test]
fn times_read_uperf_units_with_m_as_milliseconds() {
    for (text, d) in [
        ("30", Duration::from_secs(30)),
        ("30s", Duration::from_secs(30)),
        ("30S", Duration::from_secs(30)),
        ("0.5", Duration::from_millis(500)),
        (".5s", Duration::from_millis(500)),
        ("5.", Duration::from_secs(5)),
        ("10m", Duration::from_millis(10)),
        ("10ms", Duration::from_millis(10)),
        ("1.5ms", Duration::from_micros(1500)),
        ("100u", Duration::from_micros(100)),
        ("100us", Duration::from_micros(100)),
        ("500n", Duration::from_nanos(500)),
        ("500ns", Duration::from_nanos(500)),
        ("1 s", Duration::from_secs(1)),
        ("0.1", Duration::from_millis(100)),
        ("0.000000001", Duration::from_nanos(1)),
        ("1.0000000019999999999999", Duration::new(1, 1)),
    ] {
        assert_eq!(time_value("duration", text), Ok(d), "{text}");
    }
    for (bad, want) in [
        ("-1", "negative"),
        ("-0.5s", "negative"),
        ("", "not a time"),
        ("s", "not a time"),
        ("1h", "not a time"),
        ("1.2.3", "not a time"),
        ("1e3", "not a time"),
        ("0", "longer than zero"),
        ("0.0000000001", "longer than zero"),
        ("99999999999999999999999", "too long"),
        ("999999999999999999999999999999999999999999", "too long"),
    ] {
        let got = time_value("duration", bad);
        assert!(
            got.as_ref().is_err_and(|m| m.contains(want)),
            "{bad}: {got:?}"
        );
    }
}

#[test]
fn random_sizes_are_read_with_spaces_inside() {
    for (text, min, max) in [
        ("size=rand(1,10)", 1, 10),
        ("size=RAND( 1k , 64k )", 1024, 65536),
        ("size=rand(5,5)", 5, 5),
        ("size=rand(1,64m)", 1, 64 << 20),
    ] {
        let f = flowop(&format!("<flowop type=send options=\"{text} count=2\"/>"));
        assert_eq!(
            f.kind,
            FlowopKind::Send(Xfer {
                size: Size::Rand { min, max },
                rsize: None
            }),
            "{text}"
        );
        assert_eq!(f.count, 2);
    }
    for (text, want) in [
        ("size=rand(10,1)", "smallest size comes first"),
        ("size=rand(0,1)", "between 1 and 64m"),
        ("size=rand(1,65m)", "between 1 and 64m"),
        ("size=rand(1)", "two sizes"),
        ("size=rand(1,2,3)", "two sizes"),
        ("size=rand(1,2", "closing )"),
        ("size=rand(a,2)", "a is not a number"),
        ("size=rand(1,99999999999999999999)", "too large"),
        ("size=rnd(1,2)", "not a number"),
    ] {
        let m = flowop_error(&format!("<flowop type=send options=\"{text}\"/>"));
        assert!(m.contains(want), "{text}: {m}");
    }
}

#[test]
fn variables_are_substituted_everywhere() {
    let text = "<profile name=\"$name-${suffix}\">\n<group nthreads=$n>\n<transaction duration=\"${secs}s\" rate=$rate>\n<flowop type=$ty options=\"size=${sz}k count=$n$n conn=c_$n\"/>\n</transaction></group></profile>";
    let vars = [
        ("name", "rr"),
        ("suffix", "x"),
        ("n", "2"),
        ("secs", "3"),
        ("rate", "1.5"),
        ("ty", "write"),
        ("sz", "4"),
    ];
    let p = parse_with(text, &vars).unwrap();
    assert_eq!(p.name, "rr-x");
    assert_eq!(p.groups[0].users, 2);
    let t = &p.groups[0].transactions[0];
    assert_eq!(t.limit, Limit::Duration(Duration::from_secs(3)));
    assert_eq!(t.rate, Some(Rate(1.5)));
    let f = &t.flowops[0];
    assert_eq!(f.kind, FlowopKind::Write(fixed(4096)));
    assert_eq!((f.count, f.conn.as_deref()), (22, Some("c_2")));
}

#[test]
fn a_variable_may_hold_several_options() {
    let p = parse_with(
        &wrap("<flowop type=connect options=\"$opts\"/>"),
        &[("opts", "remotehost=h protocol=udp")],
    )
    .unwrap();
    let f = &p.groups[0].transactions[0].flowops[0];
    assert_eq!(
        f.kind,
        FlowopKind::Connect(Endpoint {
            remotehost: Some("h".into()),
            protocol: ProfileProtocol::Udp,
            ..tcp()
        })
    );
}

#[test]
fn an_unset_variable_is_named_in_the_error() {
    let e = parse_with(NETPERF, &[("nthr", "1")]).unwrap_err();
    assert_eq!(
        e,
        ProfileError {
            line: 6,
            element: "flowop".into(),
            message: "variable $h is not set: set it in the environment".into(),
            unset_variable: Some("h".into()),
        }
    );
    let e = parse_with(NETPERF, &[("h", "x")]).unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (4, "group"));
    assert!(e.message.starts_with("variable $nthr is not set"), "{e}");
    let e = parse(&wrap("<flowop type=nop options=\"conn=${braced_1}\"/>")).unwrap_err();
    assert!(
        e.message.starts_with("variable $braced_1 is not set"),
        "{e}"
    );
}

#[test]
fn a_dollar_without_a_variable_name_is_refused() {
    for bad in ["$", "$1", "${}", "${a b}", "${x", "$-", "$é"] {
        let m = flowop_error(&format!("<flowop type=nop options=\"conn={bad}\"/>"));
        assert!(
            m.contains("is not a variable") || m.contains("is not closed"),
            "{bad}: {m}"
        );
    }
}

#[test]
fn variable_values_are_not_substituted_again() {
    let p = parse_with(
        &wrap("<flowop type=nop options=\"conn=$a\"/>"),
        &[("a", "$b")],
    )
    .unwrap();
    assert_eq!(
        p.groups[0].transactions[0].flowops[0].conn.as_deref(),
        Some("$b")
    );
}

#[test]
fn values_that_grow_past_a_mebibyte_are_refused() {
    let big = "x".repeat(600 * 1024);
    let e = parse_with(
        &wrap("<flowop type=nop options=\"conn=$a$a\"/>"),
        &[("a", &big)],
    )
    .unwrap_err();
    assert!(e.message.contains("longer than 1 MiB"), "{e}");
}
