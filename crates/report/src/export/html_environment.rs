//! The HTML page's end: the files' environments side by side, with what
//! differs highlighted, and the exact commands that produced each file.

use std::fmt::Write as _;

use linkperf_measured::Environment;

use super::html::{esc, Page};
use super::markdown::shell_words;
use crate::units::capacity;
use crate::{CapacityOrigin, Report};

impl Page<'_> {
    pub(super) fn environments(&mut self) {
        let r = self.report;
        self.w("<section id=\"environments\">\n<h2>Environments</h2>\n<p>Each file's client and server hosts, and how its tests were set up. A highlighted row differs between the files on the same side.</p>\n<div class=\"scroll\"><table class=\"env\">\n<tr><th class=\"text\"></th>");
        for f in &r.files {
            let _ = write!(
                self.out,
                "<th class=\"text\">{} client</th><th class=\"text\">{} server</th>",
                esc(&f.label),
                esc(&f.label)
            );
        }
        self.w("</tr>\n");
        type Field = fn(&Environment) -> String;
        let fields: Vec<(&str, Field)> = vec![
            ("hostname", |e| e.hostname.clone()),
            ("kernel", |e| e.kernel.clone()),
            ("OS", |e| e.os.clone()),
            ("CPU model", |e| e.cpu_model.clone()),
            ("CPU count", |e| e.cpu_count.to_string()),
            ("interface", |e| {
                e.interface.clone().unwrap_or_else(|| "-".into())
            }),
            ("MTU", |e| {
                e.mtu.map_or_else(|| "-".into(), |m| m.to_string())
            }),
            ("congestion control", |e| {
                e.congestion_control.clone().unwrap_or_else(|| "-".into())
            }),
            ("tcp_rmem", |e| {
                e.tcp_rmem.clone().unwrap_or_else(|| "-".into())
            }),
            ("tcp_wmem", |e| {
                e.tcp_wmem.clone().unwrap_or_else(|| "-".into())
            }),
            ("socket SO_SNDBUF", |e| {
                e.socket_sndbuf
                    .map_or_else(|| "-".into(), |b| b.to_string())
            }),
            ("socket SO_RCVBUF", |e| {
                e.socket_rcvbuf
                    .map_or_else(|| "-".into(), |b| b.to_string())
            }),
            ("socket TCP_NODELAY", |e| {
                e.socket_nodelay
                    .map_or_else(|| "-".into(), |on| if on { "on" } else { "off" }.into())
            }),
            ("linkperf version", |e| e.linkperf_version.clone()),
        ];
        for (name, get) in fields {
            let client: Vec<String> = r
                .files
                .iter()
                .map(|f| {
                    f.environment
                        .client
                        .as_ref()
                        .map_or_else(|| "-".into(), get)
                })
                .collect();
            let server: Vec<String> = r
                .files
                .iter()
                .map(|f| {
                    f.environment
                        .server
                        .as_ref()
                        .map_or_else(|| "-".into(), get)
                })
                .collect();
            let differs = |v: &[String]| v.iter().any(|x| *x != v[0]);
            let class = if differs(&client) || differs(&server) {
                " class=\"diff\""
            } else {
                ""
            };
            let _ = write!(self.out, "<tr{class}><td class=\"text\">{}</td>", esc(name));
            for (c, s) in client.iter().zip(&server) {
                let _ = write!(
                    self.out,
                    "<td class=\"text\">{}</td><td class=\"text\">{}</td>",
                    esc(c),
                    esc(s)
                );
            }
            self.w("</tr>\n");
        }
        // File-wide rows: the link, the suite, the test settings (one cell per file).
        let mut rows: Vec<(String, Vec<String>)> = vec![
            (
                "link".into(),
                r.files
                    .iter()
                    .map(|f| match &f.link {
                        Some(l) => match l.capacity_bits_per_s {
                            Some(c) => format!("{} ({})", l.configuration, capacity(c)),
                            None => l.configuration.clone(),
                        },
                        None => "not recorded".into(),
                    })
                    .collect(),
            ),
            (
                "suite".into(),
                r.files
                    .iter()
                    .map(|f| f.suite.clone().unwrap_or_else(|| "-".into()))
                    .collect(),
            ),
            (
                "created".into(),
                r.files.iter().map(|f| f.created.clone()).collect(),
            ),
        ];
        if let Some(first) = r.files.first() {
            for (i, (name, _)) in first.settings.iter().enumerate() {
                rows.push((
                    name.clone(),
                    r.files
                        .iter()
                        .map(|f| f.settings.get(i).map(|s| s.1.clone()).unwrap_or_default())
                        .collect(),
                ));
            }
        }
        for (name, values) in rows {
            let differs = values.iter().any(|v| *v != values[0]) && name != "created";
            let class = if differs { " class=\"diff\"" } else { "" };
            let _ = write!(
                self.out,
                "<tr{class}><td class=\"text\">{}</td>",
                esc(&name)
            );
            for v in values {
                let _ = write!(
                    self.out,
                    "<td class=\"text\" colspan=\"2\">{}</td>",
                    esc(&v)
                );
            }
            self.w("</tr>\n");
        }
        self.w("</table></div>\n</section>\n");
    }

    pub(super) fn commands(&mut self) {
        self.w("<section id=\"commands\">\n<h2>Commands</h2>\n<p>The exact commands that produced each results file, to reproduce it.</p>\n");
        for f in &self.report.files {
            let _ = writeln!(
                self.out,
                "<h3>{} <small>({})</small></h3>\n<pre>{}</pre>",
                esc(&f.label),
                esc(&f.path),
                esc(&shell_words(&f.command_line))
            );
            if let Some(link) = &f.link {
                if !link.commands.is_empty() {
                    let _ = writeln!(
                        self.out,
                        "<p>The link ({}) was set up with:</p>\n<pre>{}</pre>",
                        esc(&link.configuration),
                        esc(&link.commands.join("\n"))
                    );
                }
            }
        }
        self.w("</section>\n");
    }
}

/// The link capacities saturation was judged against: "link capacity 1
/// Gbit/s (command line)" when one was given for every file, else per file.
pub(super) fn capacity_note(r: &Report) -> String {
    let all_given = r
        .files
        .iter()
        .all(|f| f.capacity_origin == Some(CapacityOrigin::AllFiles));
    match r.options.capacity_bits_per_s {
        Some(c) if all_given => {
            return format!("link capacity {} (command line)", capacity(c.as_f64()))
        }
        _ => {}
    }
    if r.files.iter().all(|f| f.capacity_bits_per_s.is_none()) {
        return "link capacity not known (none given, none recorded)".into();
    }
    let each: Vec<String> = r
        .files
        .iter()
        .map(|f| match (f.capacity_bits_per_s, f.capacity_origin) {
            (Some(c), Some(o)) => {
                format!("{} {} ({})", f.label, capacity(c.as_f64()), o.describe())
            }
            _ => format!("{} not known", f.label),
        })
        .collect();
    format!("link capacity: {}", each.join(", "))
}
