//! The lexer's tests: quoting, comments and declarations, line numbers, markup errors, entities.

use super::*;

#[test]
fn unquoted_and_single_quoted_values_are_read() {
    let p = parse(
        "<profile name='x'>\n<group nthreads=2>\n<transaction iterations=5>\n<flowop type=write options='size=1k'/>\n<flowop type=disconnect/>\n</transaction>\n</group>\n</profile>",
    )
    .unwrap();
    assert_eq!(p.name, "x");
    assert_eq!(p.groups[0].users, 2);
    let t = &p.groups[0].transactions[0];
    assert_eq!(t.limit, Limit::Iterations(5));
    assert_eq!(t.flowops[0].kind, FlowopKind::Write(fixed(1024)));
    assert_eq!(t.flowops[1].kind, FlowopKind::Disconnect);
}

#[test]
fn comments_and_the_declaration_are_allowed_anywhere() {
    let p = parse(
        "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- a -->\n<profile name=x><!-- b <group> -->\n<group nthreads=1><!----><transaction>\n<!-- c\n\n -->\n<flowop type=nop/></transaction></group><?pi x?></profile>\n<!-- after -->\n",
    )
    .unwrap();
    let g = &p.groups[0];
    assert_eq!(g.line, 4);
    assert_eq!(g.transactions[0].flowops[0].line, 8);
}

#[test]
fn lines_after_a_multi_line_tag_are_counted() {
    let p = parse(
        "<profile\nname=x>\n<group\nnthreads=1\n>\n<transaction\niterations=1>\n<flowop type=nop options=\"\n\n\"/>\n<flowop type=nop/>\n</transaction></group></profile>",
    )
    .unwrap();
    let g = &p.groups[0];
    assert_eq!((g.line, g.transactions[0].line), (3, 6));
    let f = &g.transactions[0].flowops;
    assert_eq!((f[0].line, f[1].line), (8, 11));
}

#[test]
fn malformed_markup_is_refused_with_its_line() {
    let cases = [
        ("<!-- never closed", "comment is not closed"),
        ("<?xml never closed", "not closed"),
        ("<!DOCTYPE profile>", "<!DOCTYPE"),
        ("<![CDATA[x]]>", "not supported"),
        ("< profile>", "`<` must start an element"),
        ("<profile name=\"x>", "not closed"),
        ("<profile name='x", "not closed"),
        ("<profile name", "has no value"),
        ("<profile name=>", "has no value"),
        ("<profile name=x", "not closed"),
        ("<profile \"x\">", "unexpected"),
        ("</ profile>", "`</` must be followed"),
        ("</profile x>", "not closed"),
    ];
    for (text, want) in cases {
        let e = error(&format!("\n\n{text}"));
        assert_eq!(e.line, 3, "{text}: {e}");
        assert!(e.message.contains(want), "{text}: {e}");
    }
}

#[test]
fn entities_in_values_are_decoded() {
    let f = flowop("<flowop type=connect options=\"remotehost=a&amp;b&#x41;&#66;&lt;&gt;&quot;&apos;&bogus; cc=&\"/>");
    let FlowopKind::Connect(e) = f.kind else {
        panic!("{f:?}")
    };
    assert_eq!(e.remotehost.as_deref(), Some("a&bAB<>\"'&bogus;"));
    assert_eq!(e.cc.as_deref(), Some("&"));
}
