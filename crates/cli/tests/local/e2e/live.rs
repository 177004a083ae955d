//! Live intervals: `--interval` and `--json-stream` while a test runs.

use super::*;

// ---------------------------------------------------------------------------
// Live intervals: `--interval` and `--json-stream`.
// ---------------------------------------------------------------------------

/// The interval lines of some output: `(warmup, start, end)` of each.
fn interval_lines(output: &str) -> Vec<(bool, f64, f64)> {
    output
        .lines()
        .filter(|l| l.contains(" s  sent "))
        .map(|l| {
            let warmup = l.starts_with("warmup");
            let range = l
                .trim_start_matches("warmup")
                .split_whitespace()
                .next()
                .unwrap_or_else(|| panic!("no time in {l:?}"));
            let (a, b) = range.split_once('-').unwrap_or_else(|| panic!("{l:?}"));
            (warmup, a.parse().expect(l), b.parse().expect(l))
        })
        .collect()
}

/// Each line of a JSON stream: `(event, data)`.
fn stream_events(lines: &str) -> Vec<(String, Value)> {
    lines
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
            let obj = v.as_object().expect("an object per line");
            assert_eq!(obj.len(), 2, "event and data only: {l}");
            (text(&v, "/event").to_string(), v["data"].clone())
        })
        .collect()
}

/// What a stream must be: a start, its intervals (the warm-up's first,
/// marked), then the end, which is the results document's run; the
/// window's intervals are the client's intervals of the run, count for
/// count. The window's interval events.
fn check_stream(events: &[(String, Value)], doc: &Value) -> Vec<Value> {
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    let start = &events[0].1;
    assert_eq!(text(start, "/schema"), "linkperf/stream/v1");
    assert_eq!(text(start, "/test"), text(doc, "/tests/0/name"));
    assert_eq!(start["workload"], doc["tests"][0]["workload"]);
    assert_eq!(start["config"], doc["tests"][0]["config"]);
    assert_eq!(start["spec"], doc["tests"][0]["spec"]);
    let run = at(doc, "/tests/0/runs/0");
    assert_eq!(&events[events.len() - 1].1, run, "the end is the saved run");
    let intervals: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "interval")
        .map(|(_, d)| d)
        .collect();
    let warm = intervals.iter().take_while(|d| d["warmup"] == true).count();
    let window: Vec<Value> = intervals[warm..].iter().map(|d| (*d).clone()).collect();
    assert!(
        window.iter().all(|d| d["warmup"] == false),
        "the warm-up's seconds come first: {intervals:?}"
    );
    for d in &intervals[..warm] {
        assert!(
            num(d, "/start_s") < 0.0,
            "a warm-up second before the window: {d}"
        );
    }
    let client = at(run, "/client/intervals").as_array().unwrap();
    assert_eq!(window.len(), client.len(), "{window:?}\n{client:?}");
    for (k, (d, c)) in window.iter().zip(client).enumerate() {
        for f in [
            "/start_s",
            "/length_s",
            "/tx_bytes",
            "/rx_bytes",
            "/transactions",
        ] {
            assert_eq!(d.pointer(f), c.pointer(f), "second {k}{f}: {d} vs {c}");
        }
    }
    window
}

/// Output into a pipe shows no lines unless asked; asked, one per second
/// of the warm-up and of the window, then the table.
#[test]
fn run_prints_a_line_per_second_when_asked() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let base = [
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "1500ms",
    ];
    let (code, out, err, doc) = run_json(&[&base[..], &["--interval", "1s"]].concat());
    assert_eq!(code, 0, "{out}\n{err}");
    let lines = interval_lines(&out);
    assert_eq!(
        lines,
        [
            (true, 0.0, 1.0),
            (true, 1.0, 1.5),
            (false, 0.0, 1.0),
            (false, 1.0, 2.0),
            (false, 2.0, 3.0)
        ],
        "{out}"
    );
    for l in out.lines().filter(|l| l.contains(" s  sent ")) {
        for figure in ["received ", " txn/s", "mean ", "p99 ", "retr "] {
            assert!(l.contains(figure), "{figure:?} in {l:?}");
        }
    }
    // Then the table, as always.
    let table = out.find("rr1c-1x1--2  (tcp").expect("the table");
    assert!(out.rfind(" s  sent ").unwrap() < table, "{out}");
    assert_eq!(
        at(&doc, "/tests/0/runs/0/client/intervals")
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Two seconds a line; standard output is not a terminal: none by default.
    let short = [
        "run",
        "--server",
        &addr,
        "--duration",
        "2s",
        "--warmup",
        "200ms",
    ];
    let (code, out, err) = run(&[&short[..], &["--interval", "2"]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        interval_lines(&out),
        [(true, 0.0, 0.2), (false, 0.0, 2.0)],
        "{out}"
    );
    let (code, out, err) = run(&short);
    assert_eq!(code, 0, "{err}");
    assert!(interval_lines(&out).is_empty(), "{out}");
}

/// `--json-stream -`: standard output is JSON lines only, the end is the
/// results document's run, and the lines and the table go to standard
/// error.
#[test]
fn json_stream_to_stdout_is_the_run_as_it_runs() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (code, out, err, doc) = run_json(&[
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--interval",
        "1s",
        "--json-stream",
        "-",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = stream_events(&out);
    let window = check_stream(&events, &doc);
    assert_eq!(window.len(), 2);
    let warm: Vec<&Value> = events
        .iter()
        .filter(|(e, d)| e == "interval" && d["warmup"] == true)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(warm.len(), 1, "{warm:?}");
    assert_eq!(
        (num(warm[0], "/start_s"), num(warm[0], "/length_s")),
        (-0.5, 0.5)
    );
    for d in &window {
        // Request/response over TCP: each second's own transaction times, no loss.
        assert_eq!(
            int(d, "/transaction_time_us/count"),
            int(d, "/transactions"),
            "{d}"
        );
        assert!(d.get("loss").is_none(), "{d}");
    }
    // Retransmits are read once a second (a worker held up past a second
    // reads them for the later one only).
    assert!(
        window.iter().any(|d| d["retransmits"].is_u64()),
        "{window:?}"
    );
    // The people's text is on standard error.
    assert_eq!(interval_lines(&err).len(), 3, "{err}");
    assert!(err.contains("rr1c-1x1--2  (tcp"), "the table: {err}");
}

/// One second counted by the client's workers is one value: the stream's
/// interval event, the document's `client.intervals`, the run's
/// `intervals` (each direction from its receiver: here the client's reads
/// and transactions) and the report's per-second samples (what its
/// time-series chart draws) say the same of it, and the rates beside it are
/// its counts over its length. Request/response over TCP, and a UDP stream
/// the client receives (its datagrams, loss and jitter too).
#[test]
fn a_second_is_the_same_in_the_stream_the_document_and_the_report() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    for (workload, protocol, extra) in [
        ("rr1c-200x1000", "tcp", &[][..]),
        ("stream-down:1400", "udp", &["--rate", "5m"][..]),
    ] {
        let (code, out, err, doc) = run_json(
            &[
                &[
                    "run",
                    "--server",
                    &addr,
                    "--workload",
                    workload,
                    "--protocol",
                    protocol,
                    "--users",
                    "2",
                    "--duration",
                    "2s",
                    "--warmup",
                    "500ms",
                    "--json-stream",
                    "-",
                ][..],
                extra,
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{workload}: {out}\n{err}");
        let events = stream_events(&out);
        let window = check_stream(&events, &doc);
        assert_eq!(window.len(), 2, "{workload}: {window:?}");
        let run = at(&doc, "/tests/0/runs/0");
        let client = at(run, "/client/intervals").as_array().unwrap();
        let samples = at(run, "/intervals").as_array().unwrap();
        assert_eq!(samples.len(), window.len(), "{workload}: {samples:?}");
        let parsed: linkperf_results::ResultsDocument =
            serde_json::from_value(doc.clone()).expect("the document reads back");
        let figures = linkperf_report::FileFigures::over(&parsed, "doc", true);
        let (_, report) = &figures.tests[0].intervals[0];
        assert_eq!(report.len(), window.len(), "{workload}");
        for (k, d) in window.iter().enumerate() {
            // Every figure the document keeps of the second, as the stream said it.
            let c = client[k].as_object().unwrap();
            for (key, v) in c {
                assert_eq!(
                    d.get(key),
                    Some(v),
                    "{workload} second {k} {key}: {d} vs {c:?}"
                );
            }
            let length = num(d, "/length_s");
            assert!(length > 0.0, "{d}");
            for (count, rate) in [
                ("/tx_bytes", "/tx_bytes_per_s"),
                ("/rx_bytes", "/rx_bytes_per_s"),
                ("/transactions", "/transactions_per_s"),
            ] {
                assert_eq!(num(d, rate), int(d, count) as f64 / length, "{rate}: {d}");
            }
            // The run's sample of the second, and the report's.
            let s = &samples[k];
            for f in ["/start_s", "/length_s", "/rx_bytes", "/transactions"] {
                assert_eq!(
                    s.pointer(f),
                    d.pointer(f),
                    "{workload} second {k}{f}: {s} vs {d}"
                );
            }
            assert_eq!(num(s, "/transactions_per_s"), num(d, "/transactions_per_s"));
            let r = &report[k];
            assert_eq!(
                (r.second.start_s, r.second.length_s),
                (num(d, "/start_s"), length)
            );
            assert_eq!(
                (r.second.rx_bytes, r.second.transactions),
                (int(d, "/rx_bytes"), int(d, "/transactions"))
            );
            assert_eq!(r.transactions_per_s(), num(d, "/transactions_per_s"));
            assert_eq!(r.bytes_per_s(), num(s, "/bytes_per_s"));
            if protocol == "udp" {
                // The client is the stream's only receiver: its second's
                // loss and jitter are the run's.
                assert_eq!(
                    s.pointer("/loss_rate"),
                    d.pointer("/loss_rate"),
                    "{s} vs {d}"
                );
                assert_eq!(
                    s.pointer("/jitter_us"),
                    d.pointer("/jitter_us"),
                    "{s} vs {d}"
                );
                assert_eq!(r.loss_rate, Some(num(d, "/loss_rate")));
                assert_eq!(r.second.jitter_us, d["jitter_us"].as_f64());
                assert!(int(d, "/datagrams") > 0, "{d}");
            } else {
                assert_eq!(
                    int(d, "/transaction_time_us/count"),
                    int(d, "/transactions"),
                    "{d}"
                );
            }
        }
    }
}

/// `--json-stream FILE`: the stream in the file, the table on standard
/// output. UDP: each second says what it lost.
#[test]
fn json_stream_to_a_file() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("stream.jsonl");
    let (code, out, err, doc) = run_json(&[
        "run",
        "--quiet",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--json-stream",
        stream.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("rr1c-1x1--2--udp  (udp"), "{out}");
    assert!(!out.contains("\"event\""), "{out}");
    let events = stream_events(&std::fs::read_to_string(&stream).unwrap());
    let window = check_stream(&events, &doc);
    let lost: u64 = window.iter().map(|d| int(d, "/loss/lost")).sum();
    assert_eq!(lost, int(&doc, "/tests/0/runs/0/client/errors"));
    for d in &window {
        assert_eq!(int(d, "/loss/answered"), int(d, "/transactions"), "{d}");
        assert!(d["retransmits"].is_null(), "no TCP: {d}");
    }
}

/// A UDP stream the client receives: each second's line says what was lost
/// on the way to it and the jitter, each interval event carries its
/// datagrams (the warm-up's too), the window's are the client's intervals of
/// the run, count for count, and add up to the run's count of that
/// direction; the end carries the run's UDP figures. An upload's lines say
/// nothing of loss: the server counts it.
#[test]
fn a_udp_stream_shows_each_seconds_loss_live() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let (code, out, err, doc) = run_json(&[
        "run",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "stream-bidir:1400",
        "--rate",
        "5m",
        "--users",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--interval",
        "1s",
        "--json-stream",
        "-",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = stream_events(&out);
    let window = check_stream(&events, &doc);
    assert_eq!(window.len(), 2);
    let r = at(&doc, "/tests/0/runs/0");
    let client = at(r, "/client/intervals").as_array().unwrap();
    for (k, (d, c)) in window.iter().zip(client).enumerate() {
        for f in ["/datagrams", "/expected", "/jitter_us"] {
            assert_eq!(d.pointer(f), c.pointer(f), "second {k}{f}: {d} vs {c}");
        }
        let (got, expected) = (int(d, "/datagrams"), int(d, "/expected"));
        assert!(got > 0, "second {k} received datagrams: {d}");
        let lost = expected.saturating_sub(got) as f64 / expected as f64;
        assert_eq!(num(d, "/loss_rate"), lost, "{d}");
        assert!(d.get("loss").is_none(), "no transactions: {d}");
    }
    // The window's seconds add up to the run's count of the server's
    // datagrams at the client.
    let down = udp_direction(r, "server_to_client");
    for (f, total) in [("/datagrams", "/received"), ("/expected", "/expected")] {
        let sum: u64 = window.iter().map(|d| int(d, f)).sum();
        assert_eq!(sum, int(down, total), "{f}: {window:?}\n{down}");
    }
    // The warm-up's second is shown with its datagrams too.
    let warm: Vec<&Value> = events
        .iter()
        .filter(|(e, d)| e == "interval" && d["warmup"] == true)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(warm.len(), 1, "{warm:?}");
    assert!(int(warm[0], "/expected") > 0, "{}", warm[0]);
    // The end is the run, its UDP figures with it.
    let end = &events.last().unwrap().1;
    assert!(end["udp"]["client_to_server"].is_object(), "{end}");
    assert!(end["udp"]["server_to_client"].is_object(), "{end}");
    assert!(
        end["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["loss_rate"].is_number()),
        "{end}"
    );
    // The lines for people, on standard error: loss and jitter each second.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" s  sent ")).collect();
    assert_eq!(lines.len(), 3, "{err}");
    for l in &lines {
        assert!(l.contains("  lost ") && l.contains("  jitter "), "{l:?}");
    }

    // An upload: the client receives nothing, its lines say nothing of loss.
    let (code, out, err) = run(&[
        "run",
        "--server",
        &addr,
        "--protocol",
        "udp",
        "--workload",
        "stream-up:1400",
        "--rate",
        "5m",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--interval",
        "1s",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" s  sent ")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert!(!l.contains("lost"), "{l:?}");
    }
}

/// Ctrl-C in the window: the run is aborted and keeps the seconds that ran,
/// the last one cut to its real length; nothing after it, on either side,
/// in the stream or in the file.
#[test]
fn ctrl_c_keeps_the_seconds_that_ran_without_padding() {
    let _g = shared();
    let server = Server::start(&[]);
    let addr = server.addr();
    let client = util::Client::spawn(&[
        "run",
        "--server",
        &addr,
        "--users",
        "2",
        "--duration",
        "60s",
        "--warmup",
        "200ms",
    ]);
    // Two seconds of the window are over.
    let seen = 2;
    let window_seconds = |out: &str| {
        out.lines()
            .filter(|l| l.contains("\"warmup\":false"))
            .count()
    };
    client.wait_until_stdout("a second interval event", Duration::from_secs(60), |out| {
        window_seconds(out) >= seen
    });
    client.signal("-INT");
    let (status, out, err, doc) = client.finish(Duration::from_secs(60));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(status.code(), Some(1), "interrupted: {err}");

    let r = at(&doc, "/tests/0/runs/0");
    assert_eq!(text(r, "/status"), "aborted", "{r}");
    let client = at(r, "/client/intervals").as_array().unwrap();
    // The interrupt lands a moment after the second second's event: one
    // more second, and part of another, may have run (a busy host delays).
    assert!(
        (seen..=seen + 4).contains(&client.len()),
        "the seconds that ran, not the 60 of the window: {client:?}"
    );
    let (last, whole) = client.split_last().unwrap();
    for (k, i) in whole.iter().enumerate() {
        assert_eq!(num(i, "/start_s"), k as f64);
        assert_eq!(num(i, "/length_s"), 1.0, "{i}");
    }
    let cut = num(last, "/length_s");
    assert!(
        cut > 0.0 && cut <= 1.0,
        "the last second as long as it ran: {last}"
    );
    let sum: u64 = client.iter().map(|i| int(i, "/transactions")).sum();
    assert_eq!(sum, int(r, "/client/transactions"));
    assert_eq!(at(r, "/intervals").as_array().unwrap().len(), client.len());
    // Issue 35: the window the run reports is the one its intervals cover,
    // in the file and in the table.
    let end = num(last, "/start_s") + cut;
    let window = num(r, "/client/window_s");
    assert!(
        (window - end).abs() < 1e-6,
        "window {window} s, intervals end at {end} s"
    );
    let said: f64 = err
        .lines()
        .find_map(|l| {
            l.split_once(" s window after ")?
                .0
                .rsplit_once(", ")?
                .1
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no window in the table: {err}"));
    assert!(
        (said - end).abs() <= 0.051,
        "the table says {said} s, the intervals end at {end} s"
    );
    // Said once, and nothing failed because the window was cut: the CPU was
    // taken at the stop, not at the window's planned close.
    let reasons: Vec<&str> = at(r, "/status_reasons")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        reasons.iter().filter(|w| w.contains("interrupted")).count(),
        1,
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|w| w.starts_with("cpu_window")),
        "{reasons:?}"
    );
    let cpu_window = at(r, "/checks")
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cpu_window")
        .unwrap();
    assert_eq!(cpu_window["status"], "not_applicable", "{cpu_window}");
    // The server, told a moment later (once the client has collected its
    // side), stopped counting too.
    let server_iv = at(r, "/server/intervals").as_array().unwrap();
    assert!(
        (client.len()..=client.len() + 3).contains(&server_iv.len()),
        "{server_iv:?}"
    );

    let events = stream_events(&lines.join("\n"));
    check_stream(&events, &doc);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(&names[names.len() - 2..], ["error", "end"], "{names:?}");
    let error = &events[events.len() - 2].1;
    assert_eq!(text(error, "/status"), "aborted");
}
