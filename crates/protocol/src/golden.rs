//! The wire's contract, checked: a golden file per control message and for
//! the data connections' binary headers (`golden/vN/`, N the protocol
//! version), each decoded and encoded again to the same document, and a
//! digest of each version's files that must never change. A change to what
//! crosses the wire (a field renamed in `workload` or `records`, whose types
//! the messages carry) changes a golden file, and a changed golden file
//! fails here until [`PROTOCOL_VERSION`] is bumped: copy `golden/vN` to
//! `golden/vN+1`, change the copy, and add its digest to [`HISTORY`].
//!
//! A new field that is skipped when empty is invisible to a golden file
//! until one carries it: add it to the files of the next version.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    decode_client, decode_server, encode_client, encode_server, ConnectSeq, DataToken, Preamble,
    UdpHeader, PROTOCOL_VERSION, UDP_HEADER_LEN,
};

/// Each protocol version's golden files, as a SHA-256 digest (hex) of their
/// names and canonical JSON. Never change an entry: add one with a new
/// version.
const HISTORY: &[(u32, &str)] = &[
    (
        5,
        "42fc49ff065a2e479bc7922e630a5219e37daf28087bda937f439c616d592be6",
    ),
    (
        6,
        "a98a50e0cbededb2c7b75cae150f467f948b1ecde9cd5cd3388d34a816079d60",
    ),
    (
        7,
        "e878d54050d89b85b1dd8016b38df7b059d42723a4189c19e1ecca6d4694632d",
    ),
];

/// The client's messages, by their `type` on the wire: a new message needs
/// a name in `ClientMessage::kind` (an exhaustive match) and here, with its
/// golden file.
const CLIENT_KINDS: [&str; 9] = [
    "hello", "auth", "test", "profile", "start", "txn_end", "delegate", "finished", "abort",
];

/// The server's messages, by their `type` on the wire.
const SERVER_KINDS: [&str; 7] = [
    "welcome",
    "accepted",
    "started",
    "txn_ended",
    "results",
    "delegated",
    "error",
];

fn dir(version: u32) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "golden", &format!("v{version}")]
        .iter()
        .collect()
}

fn read(version: u32, name: &str) -> Value {
    let path = dir(version).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("golden file {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("golden file {}: {e}", path.display()))
}

/// `v` with every object's keys in order, whitespace-free.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = String::from("{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                out.push_str(&canonical(&m[k]));
            }
            out.push('}');
            out
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// The digest of a version's golden files.
fn digest(version: u32) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir(version))
        .unwrap_or_else(|e| panic!("golden directory {}: {e}", dir(version).display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let mut h = Sha256::new();
    for n in &names {
        h.update(n.as_bytes());
        h.update([0]);
        h.update(canonical(&read(version, n)).as_bytes());
        h.update([0]);
    }
    h.finalize().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The payload of a whole frame.
fn payload(frame: &[u8]) -> &[u8] {
    &frame[4..]
}

#[test]
fn every_message_has_a_golden_file_and_comes_back_from_it_unchanged() {
    for kind in CLIENT_KINDS {
        let golden = read(PROTOCOL_VERSION, &format!("client-{kind}.json"));
        let msg = decode_client(golden.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("client-{kind}.json no longer decodes: {e}"));
        assert_eq!(msg.kind(), kind, "client-{kind}.json");
        assert_eq!(golden["type"], kind, "kind() is the type on the wire");
        let again: Value = serde_json::from_slice(payload(&encode_client(&msg))).unwrap();
        assert_eq!(
            canonical(&again),
            canonical(&golden),
            "the wire form of the client's `{kind}` changed: see golden.rs"
        );
    }
    for kind in SERVER_KINDS {
        let golden = read(PROTOCOL_VERSION, &format!("server-{kind}.json"));
        let msg = decode_server(golden.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("server-{kind}.json no longer decodes: {e}"));
        assert_eq!(msg.kind(), kind, "server-{kind}.json");
        assert_eq!(golden["type"], kind, "kind() is the type on the wire");
        let again: Value = serde_json::from_slice(payload(&encode_server(&msg))).unwrap();
        assert_eq!(
            canonical(&again),
            canonical(&golden),
            "the wire form of the server's `{kind}` changed: see golden.rs"
        );
    }
    let names: BTreeSet<String> = std::fs::read_dir(dir(PROTOCOL_VERSION))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let known: BTreeSet<String> = CLIENT_KINDS
        .iter()
        .map(|k| format!("client-{k}.json"))
        .chain(SERVER_KINDS.iter().map(|k| format!("server-{k}.json")))
        .chain(["data.json".to_string()])
        .collect();
    assert_eq!(names, known, "one golden file per message, and data.json");
}

#[test]
fn the_data_connections_headers_match_their_golden_bytes() {
    let g = read(PROTOCOL_VERSION, "data.json");
    let p = &g["preamble"];
    let token: DataToken = serde_json::from_value(p["token"].clone()).unwrap();
    let preamble = Preamble {
        token,
        flow: p["flow"].as_u64().unwrap() as u32,
        seq: p["seq"].as_u64().unwrap(),
    };
    let hex = |b: &[u8]| {
        b.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let bytes = preamble.encode();
    assert_eq!(hex(&bytes), p["bytes"].as_str().unwrap(), "the preamble");
    let c = &g["connect_seq"];
    let seq = ConnectSeq::new(
        c["txn"].as_u64().unwrap() as u16,
        c["conn"].as_u64().unwrap() as u8,
        c["ordinal"].as_u64().unwrap(),
    );
    assert_eq!(
        seq.pack(),
        c["seq"].as_u64().unwrap(),
        "a profile's connect sequence"
    );
    assert_eq!(
        ConnectSeq::unpack(preamble.seq),
        seq,
        "the preamble carries it"
    );
    assert_eq!(Preamble::decode(&bytes).unwrap(), preamble);
    let u = &g["udp_header"];
    let header = UdpHeader {
        tag: u["tag"].as_u64().unwrap() as u32,
        flow: u["flow"].as_u64().unwrap() as u32,
        seq: u["seq"].as_u64().unwrap(),
        sent_ns: u["sent_ns"].as_u64().unwrap(),
    };
    let mut out = [0u8; UDP_HEADER_LEN];
    header.encode(&mut out);
    assert_eq!(hex(&out), u["bytes"].as_str().unwrap(), "the UDP header");
    assert_eq!(UdpHeader::decode(&out).unwrap(), header);
}

#[test]
fn a_changed_golden_file_needs_a_new_protocol_version() {
    let newest = HISTORY.iter().map(|(v, _)| *v).max().unwrap();
    assert_eq!(
        newest, PROTOCOL_VERSION,
        "PROTOCOL_VERSION is {PROTOCOL_VERSION}: add its golden digest to HISTORY"
    );
    for &(version, recorded) in HISTORY {
        let now = digest(version);
        assert_eq!(
            now,
            recorded,
            "the golden files of protocol {version} changed while their version did not: \
             what crosses the wire changed; bump PROTOCOL_VERSION, put the new files in \
             golden/v{} and record their digest ({now}) in HISTORY",
            PROTOCOL_VERSION + 1
        );
    }
}

#[test]
fn the_contract_depends_on_no_operating_system_code() {
    // The crates whose types cross the wire, and theirs, name no crate that
    // reaches into the host: taking measurements is `linkperf-metrics`'s
    // job, moving bytes the engine's.
    const SYSTEM: [&str; 8] = [
        "libc",
        "nix",
        "mio",
        "socket2",
        "netlink-sys",
        "netlink-packet-core",
        "netlink-packet-route",
        "linkperf-metrics",
    ];
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut todo = vec!["protocol".to_string()];
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let path = crates.join(&name).join("Cargo.toml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let manifest: toml::Table = text.parse().unwrap();
        let Some(deps) = manifest.get("dependencies").and_then(|d| d.as_table()) else {
            continue;
        };
        for dep in deps.keys() {
            assert!(
                !SYSTEM.contains(&dep.as_str()),
                "crates/{name} depends on {dep}: the wire's types must stay free of system code"
            );
            if let Some(member) = dep.strip_prefix("linkperf-") {
                todo.push(member.to_string());
            }
        }
    }
    let expected: BTreeSet<String> = ["measured", "protocol", "workload"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(seen, expected, "the crates the contract is made of");
}
