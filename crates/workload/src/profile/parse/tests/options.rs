//! The tests of flowop types and their options.

use super::*;

#[test]
fn options_may_span_lines_and_tabs() {
    let f = flowop(
        "<flowop type=\"connect\"\n  options=\"remotehost=h\n\tprotocol=udp   port=5001\r\n wndsz=1m cc=bbr\"/>",
    );
    assert_eq!(
        f.kind,
        FlowopKind::Connect(Endpoint {
            remotehost: Some("h".into()),
            protocol: ProfileProtocol::Udp,
            port: Some(5001),
            wndsz: Some(1024 * 1024),
            cc: Some("bbr".into()),
            ..tcp()
        })
    );
    assert_eq!(f.line, 4);
}

#[test]
fn every_flowop_type_is_read() {
    let cases = [
        ("connect", "", FlowopKind::Connect(tcp())),
        ("accept", "", FlowopKind::Accept(tcp())),
        ("disconnect", "", FlowopKind::Disconnect),
        ("read", "size=1", FlowopKind::Read(fixed(1))),
        ("write", "size=2", FlowopKind::Write(fixed(2))),
        ("send", "size=3", FlowopKind::Send(fixed(3))),
        ("recv", "size=4", FlowopKind::Recv(fixed(4))),
        ("sendfile", "size=5", FlowopKind::Sendfile(fixed(5))),
        (
            "think",
            "duration=5",
            FlowopKind::Think {
                duration: Duration::from_secs(5),
                busy: false,
            },
        ),
        ("nop", "", FlowopKind::Nop),
    ];
    for (ty, options, kind) in cases {
        let f = flowop(&format!("<flowop type=\"{ty}\" options=\"{options}\"/>"));
        assert_eq!(f, op(kind, 1, 4), "{ty}");
        assert_eq!(f.kind.name(), ty);
    }
    // No options attribute at all.
    assert_eq!(flowop("<flowop type=nop/>").kind, FlowopKind::Nop);
}

#[test]
fn an_unknown_or_missing_flowop_type_is_named() {
    let m = flowop_error("<flowop type=\"sleep\"/>");
    assert!(m.contains("unknown flowop type sleep"), "{m}");
    assert!(m.contains("connect, accept"), "{m}");
    let m = flowop_error("<flowop options=\"size=1\"/>");
    assert!(m.contains("needs a type"), "{m}");
}

#[test]
fn data_flowops_need_a_size_and_others_refuse_one() {
    for ty in ["read", "write", "send", "recv", "sendfile"] {
        let m = flowop_error(&format!("<flowop type={ty} options=\"count=2\"/>"));
        assert!(m.contains(&format!("a {ty} flowop needs size=N")), "{m}");
    }
    for ty in ["connect", "accept", "disconnect", "think", "nop"] {
        let m = flowop_error(&format!(
            "<flowop type={ty} options=\"size=10 duration=1\"/>"
        ));
        assert!(m.contains("option size applies only to read, write"), "{m}");
    }
    let m = flowop_error("<flowop type=nop options=\"rsize=10\"/>");
    assert!(m.contains("option rsize applies only"), "{m}");
}

#[test]
fn common_options_apply_to_every_flowop() {
    let f = flowop(
        "<flowop type=write options=\"size=100 rsize=10 count=1k conn=c1 timeout=500ms canfail\"/>",
    );
    assert_eq!(
        f,
        Flowop {
            kind: FlowopKind::Write(Xfer {
                size: Size::Fixed(100),
                rsize: Some(10),
            }),
            count: 1024,
            conn: Some("c1".into()),
            timeout: Some(Duration::from_millis(500)),
            canfail: true,
            line: 4,
        }
    );
    let f = flowop("<flowop type=disconnect options=\"conn=2 count=3 CANFAIL\"/>");
    assert_eq!(
        (f.conn.as_deref(), f.count, f.canfail),
        (Some("2"), 3, true)
    );
}

#[test]
fn option_values_are_checked() {
    let cases = [
        ("write", "size=0", "between 1 and 64m"),
        ("write", "size=64m", ""),
        ("write", "size=65m", "between 1 and 64m"),
        ("write", "size=ten", "size=ten is not a number"),
        ("write", "size=1 rsize=0", "rsize=0 is out of range"),
        (
            "write",
            "size=1 count=0",
            "count=0 is out of range: it must be at least 1",
        ),
        ("write", "size=1 count=x", "not a number"),
        ("write", "size=1 timeout=0", "longer than zero"),
        ("write", "size=1 timeout=-1", "negative"),
        ("write", "size=1 conn=", "needs a value"),
        ("write", "size", "needs a value: write size=..."),
        (
            "write",
            "size=1 canfail=yes",
            "is a flag and takes no value",
        ),
        ("write", "size=1 size=2", "option size is given twice"),
        ("think", "", "needs duration=T"),
        ("think", "duration=1 busy idle", "busy and idle contradict"),
        ("think", "duration=0ms", "longer than zero"),
        ("connect", "port=0", "between 1 and 65535"),
        ("connect", "port=65536", "between 1 and 65535"),
        ("connect", "port=1k", "between 1 and 65535"),
        ("connect", "wndsz=0", "wndsz=0 is out of range"),
        ("connect", "wndsz=2g", "between 1 and 1g"),
        ("connect", "remotehost=", "needs a value"),
        ("accept", "protocol=", "needs a value"),
    ];
    for (ty, options, want) in cases {
        let text = wrap(&format!("<flowop type={ty} options=\"{options}\"/>"));
        match parse(&text) {
            Ok(p) if want.is_empty() => assert_eq!(p.groups.len(), 1),
            Ok(p) => panic!("{ty} {options}: expected an error, got {p:?}"),
            Err(e) => {
                assert!(!want.is_empty(), "{ty} {options}: {e}");
                assert_eq!((e.line, e.element.as_str()), (4, "flowop"), "{e}");
                assert!(e.message.contains(want), "{ty} {options}: {e}");
            }
        }
    }
}

#[test]
fn an_unknown_option_is_named_with_the_options_the_type_takes() {
    let m = flowop_error("<flowop type=write options=\"size=1 nodelay=1\"/>");
    assert!(m.starts_with("unknown option nodelay:"), "{m}");
    assert!(
        m.contains("size, rsize, count, conn, timeout, canfail"),
        "{m}"
    );
    let m = flowop_error("<flowop type=nop options=\"dir=/tmp\"/>");
    assert!(m.contains("unknown option dir"), "{m}");
}

#[test]
fn connect_options_are_read_and_refused_elsewhere() {
    let f = flowop("<flowop type=accept options=\"protocol=UDP port=65535 cc=cubic tcp_nodelay wndsz=256KB\"/>");
    assert_eq!(
        f.kind,
        FlowopKind::Accept(Endpoint {
            remotehost: None,
            protocol: ProfileProtocol::Udp,
            port: Some(65535),
            wndsz: Some(256 * 1024),
            nodelay: true,
            cc: Some("cubic".into()),
        })
    );
    for option in [
        "remotehost=h",
        "protocol=tcp",
        "port=1",
        "wndsz=1k",
        "tcp_nodelay",
        "cc=bbr",
    ] {
        let m = flowop_error(&format!("<flowop type=write options=\"size=1 {option}\"/>"));
        assert!(
            m.contains("applies only to connect and accept flowops"),
            "{m}"
        );
    }
    let m = flowop_error("<flowop type=connect options=\"duration=1\"/>");
    assert!(m.contains("applies only to think flowops"), "{m}");
}

#[test]
fn unsupported_protocols_are_named() {
    for p in ["sctp", "ssl", "rds", "vsock", "udapl"] {
        let m = flowop_error(&format!("<flowop type=connect options=\"protocol={p}\"/>"));
        assert_eq!(
            m,
            format!("protocol={p} is not supported: linkperf carries tcp and udp")
        );
    }
    let m = flowop_error("<flowop type=connect options=\"protocol=quic\"/>");
    assert!(m.contains("unknown protocol=quic"), "{m}");
    assert!(m.contains("tcp and udp"), "{m}");
}

#[test]
fn think_takes_a_duration_and_busy_or_idle() {
    let f = flowop("<flowop type=think options=\"duration=10m idle\"/>");
    assert_eq!(
        f.kind,
        FlowopKind::Think {
            duration: Duration::from_millis(10),
            busy: false
        }
    );
    let f = flowop("<flowop type=think options=\"busy duration=2us\"/>");
    assert_eq!(
        f.kind,
        FlowopKind::Think {
            duration: Duration::from_micros(2),
            busy: true
        }
    );
}
