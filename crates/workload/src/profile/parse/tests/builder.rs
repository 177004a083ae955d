//! The builder's tests: the profile's structure and the errors naming its elements.

use super::*;

#[test]
fn errors_display_line_element_and_message() {
    let e = ProfileError {
        line: 7,
        element: "flowop".into(),
        message: "size is missing".into(),
        unset_variable: None,
    };
    assert_eq!(e.to_string(), "line 7, <flowop>: size is missing");
}

#[test]
fn a_missing_end_transaction_is_closed_by_the_next_transaction_or_end_group() {
    let p = parse(
        "<profile name=x>\n<group nthreads=1>\n<transaction iterations=1>\n<flowop type=connect/>\n<transaction duration=1s>\n<flowop type=nop/>\n</group>\n</profile>",
    )
    .unwrap();
    let ts = &p.groups[0].transactions;
    assert_eq!(ts.len(), 2);
    assert_eq!((ts[0].line, ts[1].line), (3, 5));
    assert_eq!(ts[1].flowops[0].kind, FlowopKind::Nop);
}

#[test]
fn a_stray_end_transaction_is_ignored() {
    let p = parse(
        "<profile name=x><group nthreads=1><transaction><flowop type=nop/></transaction></transaction>\n</group></transaction></profile>",
    )
    .unwrap();
    assert_eq!(p.groups[0].transactions.len(), 1);
}

#[test]
fn element_attribute_and_type_names_are_read_in_any_case() {
    let p = parse(
        "<PROFILE Name=x><Group NTHREADS=3><TRANSACTION Iterations=2><FLOWOP TYPE=\"Write\" OPTIONS=\"SIZE=64K Count=2\"></FLOWOP><flowop type=THINK options=\"duration=1ms BUSY\"/></Transaction></GROUP></Profile>",
    )
    .unwrap();
    let t = &p.groups[0].transactions[0];
    assert_eq!(p.groups[0].users, 3);
    assert_eq!(t.flowops[0].kind, FlowopKind::Write(fixed(65536)));
    assert_eq!(t.flowops[0].count, 2);
    assert_eq!(
        t.flowops[1].kind,
        FlowopKind::Think {
            duration: Duration::from_millis(1),
            busy: true
        }
    );
}

#[test]
fn a_flowop_may_be_closed_with_an_end_tag() {
    let f = flowop("<flowop type=\"read\" options=\"size=10\">  <!-- x -->\n </flowop>");
    assert_eq!(f.kind, FlowopKind::Read(fixed(10)));
    assert_eq!(f.line, 4);
}

#[test]
fn several_groups_keep_their_order_and_nprocs_counts_users() {
    let p = parse(
        "<profile name=x>\n<group nprocs=4><transaction><flowop type=nop/></transaction></group>\n<group nthreads=1k><transaction><flowop type=accept/></transaction></group>\n</profile>",
    )
    .unwrap();
    assert_eq!(p.groups.len(), 2);
    assert_eq!((p.groups[0].users, p.groups[1].users), (4, 1024));
    assert_eq!((p.groups[0].line, p.groups[1].line), (2, 3));
    assert_eq!(
        p.groups[1].transactions[0].flowops[0].kind,
        FlowopKind::Accept(tcp())
    );
}

#[test]
fn group_users_must_be_given_once_and_in_range() {
    let cases = [
        ("nthreads=1 nprocs=1", "not both"),
        ("", "needs nthreads=N"),
        ("nthreads=0", "between 1 and 100000"),
        ("nprocs=100001", "between 1 and 100000"),
        ("nthreads=abc", "nthreads=abc is not a number"),
        ("nthreads=1 nthreads=2", "given twice"),
        ("nthreads=1 users=2", "unknown attribute users"),
    ];
    for (attrs, want) in cases {
        let e = error(&format!(
            "<profile name=x>\n\n<group {attrs}>\n<transaction><flowop type=nop/></transaction></group></profile>"
        ));
        assert_eq!((e.line, e.element.as_str()), (3, "group"), "{attrs}: {e}");
        assert!(e.message.contains(want), "{attrs}: {e}");
    }
    let p = parse("<profile name=x><group nthreads=100000><transaction><flowop type=nop/></transaction></group></profile>").unwrap();
    assert_eq!(p.users(), 100_000);
}

#[test]
fn transactions_default_to_one_iteration_and_rate_paces_only_timed_ones() {
    let p = parse(
        "<profile name=x><group nthreads=1><transaction rate=0.5><flowop type=nop/></transaction><transaction iterations=2k rate=100 duration=  ><flowop type=nop/></transaction></group></profile>",
    );
    // `duration=  >` has no value.
    assert!(p.is_err());
    let p = parse(
        "<profile name=x><group nthreads=1><transaction rate=0.5><flowop type=nop/></transaction><transaction iterations=2k rate=100><flowop type=nop/></transaction><transaction duration=0.25 rate=8><flowop type=nop/></transaction></group></profile>",
    )
    .unwrap();
    let ts = &p.groups[0].transactions;
    // uperf paces a transaction of duration= only; on iterations= rate= is
    // ignored, with a warning (options.rs tests).
    assert_eq!((ts[0].limit, ts[0].rate), (Limit::Iterations(1), None));
    assert_eq!((ts[1].limit, ts[1].rate), (Limit::Iterations(2048), None));
    assert_eq!(
        (ts[2].limit, ts[2].rate),
        (Limit::Duration(Duration::from_millis(250)), Some(Rate(8.0)))
    );
}

#[test]
fn transaction_limits_and_rates_are_checked() {
    let cases = [
        ("iterations=1 duration=1s", "not both"),
        ("duration=0", "longer than zero"),
        ("duration=-1s", "negative"),
        ("duration=soon", "not a time"),
        ("rate=0", "more than zero"),
        ("rate=-2", "not a rate"),
        ("rate=fast", "not a rate"),
        ("rate=1e3", "not a rate"),
        ("nthreads=1", "unknown attribute nthreads"),
    ];
    for (attrs, want) in cases {
        let e = error(&format!(
            "<profile name=x>\n<group nthreads=1>\n\n<transaction {attrs}><flowop type=nop/></transaction></group></profile>"
        ));
        assert_eq!(
            (e.line, e.element.as_str()),
            (4, "transaction"),
            "{attrs}: {e}"
        );
        assert!(e.message.contains(want), "{attrs}: {e}");
    }
}

#[test]
fn empty_transactions_groups_and_profiles_are_refused() {
    let e = error(
        "<profile name=x>\n<group nthreads=1>\n<transaction>\n</transaction>\n</group></profile>",
    );
    assert_eq!((e.line, e.element.as_str()), (3, "transaction"));
    assert!(e.message.contains("at least one <flowop>"), "{e}");
    let e = error(
        "<profile name=x>\n<group nthreads=1>\n<transaction iterations=1/>\n</group></profile>",
    );
    assert_eq!((e.line, e.element.as_str()), (3, "transaction"));
    let e = error("<profile name=x>\n<group nthreads=1>\n</group></profile>");
    assert_eq!((e.line, e.element.as_str()), (2, "group"));
    assert!(e.message.contains("at least one <transaction>"), "{e}");
    let e = error("<profile name=x>\n<group nthreads=1/>\n</profile>");
    assert_eq!((e.line, e.element.as_str()), (2, "group"));
    let e = error("\n<profile name=x>\n</profile>");
    assert_eq!((e.line, e.element.as_str()), (2, "profile"));
    assert!(e.message.contains("at least one <group>"), "{e}");
    let e = error("<profile name=x/>");
    assert_eq!((e.line, e.element.as_str()), (1, "profile"));
}

#[test]
fn the_profile_needs_a_name_and_must_be_alone() {
    let body = "<group nthreads=1><transaction><flowop type=nop/></transaction></group>";
    for attrs in ["", "name=\"\"", "name='  '"] {
        let e = error(&format!("\n<profile {attrs}>{body}</profile>"));
        assert_eq!((e.line, e.element.as_str()), (2, "profile"), "{e}");
        assert!(e.message.contains("needs a name"), "{e}");
    }
    let e = error(&format!(
        "<profile name=x>{body}</profile>\n<profile name=y>{body}</profile>"
    ));
    assert_eq!((e.line, e.element.as_str()), (2, "profile"));
    assert!(e.message.contains("one <profile>"), "{e}");
    let e = error(&format!(
        "<profile name=x>{body}</profile>\n<group nthreads=1>"
    ));
    assert_eq!((e.line, e.element.as_str()), (2, "profile"));
    assert!(e.message.contains("after </profile>"), "{e}");
    let e = error(&format!("<profile name=x>{body}</profile>\n\n</group>"));
    assert_eq!((e.line, e.element.as_str()), (3, "profile"));
    let e = error(&format!("<profile name=x>{body}</profile>\ntrailing"));
    assert_eq!((e.line, e.element.as_str()), (2, "profile"));
    assert!(e.message.contains("trailing"), "{e}");
    let e = error(&format!("leading\n<profile name=x>{body}</profile>"));
    assert_eq!((e.line, e.element.as_str()), (1, "profile"));
    let e = error(&format!("<profile name=x title=y>{body}</profile>"));
    assert!(e.message.contains("unknown attribute title"), "{e}");
}

#[test]
fn a_file_without_a_profile_is_refused() {
    for text in ["", "   \n", "<?xml version=\"1.0\"?>\n<!-- nothing -->\n"] {
        let e = error(text);
        assert_eq!((e.line, e.element.as_str()), (1, "profile"), "{e}");
        assert!(e.message.contains("no <profile>"), "{e}");
    }
}

#[test]
fn elements_out_of_place_are_refused_with_their_line() {
    let e = error("<group nthreads=1>");
    assert_eq!((e.line, e.element.as_str()), (1, "group"));
    assert!(e.message.contains("inside <profile>"), "{e}");
    let e = error("<profile name=x>\n<transaction>");
    assert_eq!((e.line, e.element.as_str()), (2, "transaction"));
    let e = error("<profile name=x>\n<group nthreads=1>\n<flowop type=nop/>");
    assert_eq!((e.line, e.element.as_str()), (3, "flowop"));
    assert!(e.message.contains("inside a <transaction>"), "{e}");
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n<group nthreads=1>");
    assert_eq!((e.line, e.element.as_str()), (2, "group"));
    assert!(e.message.contains("line 5"), "{e}");
}

#[test]
fn unclosed_elements_name_the_element_left_open() {
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n</transaction>\n</group>\n");
    assert_eq!((e.line, e.element.as_str()), (1, "profile"));
    assert!(e.message.contains("</profile>"), "{e}");
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n</transaction>\n</profile>");
    assert_eq!((e.line, e.element.as_str()), (2, "group"));
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop/>\n");
    assert_eq!((e.line, e.element.as_str()), (2, "group"));
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>\n<flowop type=nop/>");
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
    assert!(e.message.contains("</flowop>"), "{e}");
    let e = error(
        "<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>\n</transaction>",
    );
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n<flowop type=nop>");
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
    let e = error("<profile name=x>\n<group nthreads=1>\n<transaction>\n</flowop>");
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
    assert!(e.message.contains("closes no open"), "{e}");
}

#[test]
fn unknown_elements_and_attributes_are_named() {
    let e = error(&wrap("<flowop type=nop/>\n<sleep ms=1/>"));
    assert_eq!((e.line, e.element.as_str()), (5, "transaction"));
    assert!(e.message.contains("unknown element <sleep>"), "{e}");
    let e = error("<profile name=x>\n<group nthreads=1>\n</thing>");
    assert_eq!((e.line, e.element.as_str()), (3, "group"));
    assert!(e.message.contains("</thing>"), "{e}");
    let e = error("<Profiles>");
    assert_eq!((e.line, e.element.as_str()), (1, "profile"));
    assert!(e.message.contains("<Profiles>"), "{e}");
    let m = flowop_error("<flowop type=nop opts=\"x\"/>");
    assert!(m.contains("unknown attribute opts"), "{m}");
    let m = flowop_error("<flowop type=nop type=read/>");
    assert!(m.contains("given twice"), "{m}");
}

#[test]
fn text_between_elements_is_refused() {
    let e = error(&wrap("<flowop type=nop/>\n\n  size=90"));
    assert_eq!((e.line, e.element.as_str()), (6, "transaction"));
    assert!(e.message.contains("size=90"), "{e}");
    let e = error(&wrap("<flowop type=nop>x</flowop>"));
    assert_eq!((e.line, e.element.as_str()), (4, "flowop"));
}

#[test]
fn profiles_over_a_mebibyte_are_refused() {
    let mut text = wrap("<flowop type=nop/>");
    text.push_str(&" ".repeat(MAX_TEXT));
    let e = error(&text);
    assert_eq!((e.line, e.element.as_str()), (1, "profile"));
    assert!(e.message.contains("limited to 1 MiB"), "{e}");
}
