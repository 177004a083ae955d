//! The mesh on loopback: agents (`linkperf serve --auth-key` with an
//! identity in their environment), mutual authentication, delegated tests
//! and who they may be sent to, and `linkperf mesh` end to end. The mesh
//! across namespaces (a bridge and a VXLAN overlay) is in tests/lab_mesh.rs.
//!
//! The control protocol is spoken by hand where a test must see exactly what
//! an agent answers; a plain TCP listener stands for a target that is no
//! agent and records every byte it is sent.

use crate::util;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::control::{expect_error, key_file, Control};
use crate::util::mesh::{one_test_suite, three_agents, Agent, AgentSpec};
use crate::util::{run, shared, text};
use linkperf_measured::AgentIdentity;
use linkperf_protocol::{
    decode_client, ClientMessage, FrameDecoder, ServerMessage, PROTOCOL_VERSION,
};
use linkperf_session::{delegate, AuthKey, DelegateRequest, Target};
use linkperf_workload::{Placement, Protocol, TestSpec};
use serde_json::Value;

const KEY: &str = "the mesh's own key, 32 bytes long";
const OTHER_KEY: &str = "another mesh's key, 32 bytes long";

/// How long an agent may take to answer.
const ANSWER: Duration = Duration::from_secs(10);

/// A 1-user test of `workload` over TCP for `duration` after 100 ms of warmup.
fn spec(workload: &str, duration: Duration) -> TestSpec {
    let mut s = TestSpec::new(workload.parse().unwrap(), Protocol::Tcp, 1, duration);
    s.warmup = Duration::from_millis(100);
    s
}

fn delegate_message(target: &str) -> ClientMessage {
    ClientMessage::Delegate {
        target: target.into(),
        spec: spec("rr1c-1x1", Duration::from_millis(300)),
        client: Placement::with_threads(1),
        server: Placement::with_threads(1),
    }
}

/// Asks the agent at `source` (with `key`) to run a short rr test toward `target`.
fn delegated(source: &str, key: &str, target: &str) -> linkperf_session::Delegated {
    let agent = Target {
        address: source.into(),
        default_port: 0,
        auth_key: Some(AuthKey::from_bytes(key.as_bytes()).unwrap()),
    };
    delegate(
        &agent,
        &DelegateRequest {
            target: target.into(),
            spec: spec("rr1c-1x1", Duration::from_millis(300)),
            client: Placement::with_threads(1),
            server: Placement::with_threads(1),
            cancel: None,
        },
    )
    .expect("the source agent answers")
}

#[test]
fn an_agent_says_who_it_is_and_proves_the_key_before_the_client_does() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let agent = Agent::start(&AgentSpec {
        key: Some(&key),
        node: Some("n1"),
        network: Some("host"),
        zone: Some("z1"),
        ..AgentSpec::default()
    });
    assert!(
        agent.log().contains("agent n1 (host network, zone z1)"),
        "{}",
        agent.log()
    );
    let k = AuthKey::from_bytes(KEY.as_bytes()).unwrap();
    let other = AuthKey::from_bytes(OTHER_KEY.as_bytes()).unwrap();
    let mine: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
    let mut c = Control::connect(agent.addr());
    let ServerMessage::Welcome {
        session,
        challenge,
        proof,
        agent: id,
        ..
    } = c.hello_with(Some(hex(&mine)))
    else {
        unreachable!()
    };
    let proof = proof.expect("a keyed agent answers the client's challenge");
    assert!(k.check_proof(&mine, session, &proof), "the proof holds");
    assert!(
        !other.check_proof(&mine, session, &proof),
        "for this key only"
    );
    assert_eq!(
        id,
        Some(AgentIdentity {
            node: Some("n1".into()),
            network: Some("host".into()),
            zone: Some("z1".into()),
        })
    );
    // The client then proves the key, and the session goes on.
    let response = k.respond(&challenge.unwrap(), session).unwrap();
    c.send(&ClientMessage::Auth { response });
    c.send(&ClientMessage::Abort {
        reason: "only asking".into(),
    });

    // A challenge that is not 64 hex digits is refused, nothing proven.
    let mut c = Control::connect(agent.addr());
    c.send(&ClientMessage::Hello {
        protocol_version: PROTOCOL_VERSION,
        client_version: "mesh-test".into(),
        challenge: Some("xyz".into()),
    });
    let (code, message) = expect_error(c.recv(ANSWER));
    assert_eq!(code, "malformed", "{message}");

    // A daemon with no identity in its environment states none.
    let plain = Agent::start(&AgentSpec::default());
    let mut c = Control::connect(plain.addr());
    let ServerMessage::Welcome { agent, proof, .. } = c.hello_with(None) else {
        unreachable!()
    };
    assert_eq!((agent, proof), (None, None));
}

#[test]
fn a_client_with_a_key_sends_nothing_more_to_a_server_that_cannot_prove_it() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let other = key_file(dir.path(), "other", OTHER_KEY);
    let mine = key_file(dir.path(), "mine", KEY);
    let keyless = Agent::start(&AgentSpec::default());
    let elsewhere = Agent::start(&AgentSpec {
        key: Some(&other),
        ..AgentSpec::default()
    });
    for (agent, why) in [
        (&keyless, "it sent no proof: it holds no key"),
        (
            &elsewhere,
            "its proof does not match this client's key: it holds another key",
        ),
    ] {
        let (code, _, err) = run(&[
            "run",
            "-q",
            "--server",
            agent.addr(),
            "--auth-key",
            mine.to_str().unwrap(),
            "--duration",
            "300ms",
        ]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(why), "{err}");
        assert!(!agent.log().contains("running"), "{}", agent.log());
    }
}

#[test]
fn an_agent_refuses_a_delegated_test_from_a_client_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let keyed = Agent::start(&AgentSpec {
        key: Some(&key),
        ..AgentSpec::default()
    });
    let target = Agent::start(&AgentSpec {
        key: Some(&key),
        ..AgentSpec::default()
    });
    // No answer to the challenge: the delegation is an authentication failure.
    let mut c = Control::connect(keyed.addr());
    c.hello_with(None);
    c.send(&delegate_message(target.addr()));
    let (code, _) = expect_error(c.recv(ANSWER));
    assert_eq!(code, "auth_failed");
    assert!(c.recv(ANSWER).is_none(), "the session ends");
    // A wrong answer: the same.
    let mut c = Control::connect(keyed.addr());
    let ServerMessage::Welcome {
        session, challenge, ..
    } = c.hello_with(None)
    else {
        unreachable!()
    };
    let wrong = AuthKey::from_bytes(OTHER_KEY.as_bytes()).unwrap();
    c.send(&ClientMessage::Auth {
        response: wrong.respond(&challenge.unwrap(), session).unwrap(),
    });
    c.send(&delegate_message(target.addr()));
    let (code, _) = expect_error(c.recv(ANSWER));
    assert_eq!(code, "auth_failed");
    // A daemon without a key takes no delegated test from anyone.
    let keyless = Agent::start(&AgentSpec::default());
    let mut c = Control::connect(keyless.addr());
    c.hello_with(None);
    c.send(&delegate_message(target.addr()));
    let (code, message) = expect_error(c.recv(ANSWER));
    assert_eq!(code, "refused", "{message}");
    assert!(message.contains("this server has no key"), "{message}");
    for a in [&keyed, &keyless, &target] {
        assert!(!a.log().contains("running"), "a test ran: {}", a.log());
    }
}

/// What a plain TCP listener was sent: the bytes of each connection it took.
struct Listener {
    addr: String,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

impl Listener {
    /// A listener that reads each connection to its end, answering its first
    /// bytes with an HTTP error as a web server would.
    fn start() -> Listener {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut got = Vec::new();
            // Bounded: the test makes at most a few connections.
            for _ in 0..16 {
                let Ok((mut s, _)) = l.accept() else { break };
                if stopped.load(Ordering::Acquire) {
                    break;
                }
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut bytes = Vec::new();
                let mut buf = [0u8; 4096];
                let mut answered = false;
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    bytes.extend_from_slice(&buf[..n]);
                    if !answered {
                        answered = true;
                        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
                    }
                }
                got.push(bytes);
            }
            got
        });
        Listener { addr, stop, handle }
    }

    /// Every connection's bytes, once the listener is stopped.
    fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(&self.addr);
        self.handle.join().unwrap()
    }
}

#[test]
fn a_delegated_test_goes_only_to_an_agent_that_proves_the_key() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let other = key_file(dir.path(), "o", OTHER_KEY);
    let source = Agent::start(&AgentSpec {
        key: Some(&key),
        node: Some("n1"),
        ..AgentSpec::default()
    });
    let peer = Agent::start(&AgentSpec {
        key: Some(&key),
        node: Some("n2"),
        network: Some("pod"),
        ..AgentSpec::default()
    });
    let elsewhere = Agent::start(&AgentSpec {
        key: Some(&other),
        ..AgentSpec::default()
    });
    let keyless = Agent::start(&AgentSpec::default());

    // Toward an agent of the same mesh: both sides measured, the target named.
    let d = delegated(source.addr(), KEY, peer.addr());
    let o = &d.outcome;
    assert_eq!(o.error, None, "{o:?}");
    assert!(o.client.as_ref().unwrap().transactions > 0, "{o:?}");
    assert!(o.server.is_some() && o.server_environment.is_some());
    assert_eq!(o.target_agent.as_ref().unwrap().node.as_deref(), Some("n2"));
    assert_eq!(d.source_agent.unwrap().node.as_deref(), Some("n1"));
    assert!(peer.log().contains("running rr1c-1x1--1"), "{}", peer.log());

    // Toward an agent with another key, or none: refused before any data.
    for (target, why) in [
        (&elsewhere, "it holds another key"),
        (&keyless, "it holds no key"),
    ] {
        let d = delegated(source.addr(), KEY, target.addr());
        let e = d.outcome.error.clone().unwrap_or_default();
        assert!(
            e.contains("did not prove it holds this client's key") && e.contains(why),
            "{e}"
        );
        assert!(d.outcome.client.is_none() && d.outcome.server.is_none());
        assert!(!target.log().contains("running"), "{}", target.log());
    }

    // Toward a plain TCP listener: it is sent one hello, and nothing else.
    let listener = Listener::start();
    let d = delegated(source.addr(), KEY, &listener.addr);
    let e = d.outcome.error.clone().unwrap_or_default();
    assert!(e.contains("HTTP"), "the agent says what answered: {e}");
    let got = listener.finish();
    assert_eq!(got.len(), 1, "one connection, no data connection");
    let mut frames = FrameDecoder::default();
    frames.feed(&got[0]);
    let hello = frames.next_frame().unwrap().expect("a whole hello");
    match decode_client(&hello).unwrap() {
        ClientMessage::Hello {
            challenge: Some(c), ..
        } => assert_eq!(c.len(), 64),
        other => panic!("expected a hello with a challenge, got {other:?}"),
    }
    assert_eq!(
        frames.next_frame().unwrap(),
        None,
        "nothing after the hello: {} bytes in all",
        got[0].len()
    );
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The mesh's JSON at `dir/mesh.json`.
fn mesh_json(dir: &std::path::Path) -> Value {
    util::read_doc(&dir.join("mesh.json"))
}

#[test]
fn a_mesh_of_three_agents_runs_every_pair_and_reports() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let (_agents, list) = three_agents(&key);
    let suite = one_test_suite(dir.path(), "rr1c-1x1", "1s");
    let out = dir.path().join("out");
    let (code, stdout, err) = run(&[
        "mesh",
        "--agents",
        &list,
        "--auth-key",
        key.to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    let doc = mesh_json(&out);
    let mesh = &doc["mesh"];
    assert_eq!(text(mesh, "/plan"), "all-pairs");
    let names: Vec<&str> = mesh["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1-host", "n1-pod", "n2"]);
    assert_eq!(mesh["pairs"].as_array().unwrap().len(), 6);
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 6, "one test per pair");
    for t in tests {
        let name = t["name"].as_str().unwrap();
        assert!(name.starts_with("rr1c-1x1--1@"), "{name}");
        let r = &t["runs"][0];
        util::assert_measured(r, name);
        let a = &r["agents"];
        assert_eq!(
            name,
            format!(
                "rr1c-1x1--1@{}->{}",
                text(a, "/source/name"),
                text(a, "/target/name")
            )
        );
        for side in ["source", "target"] {
            assert!(a[side]["environment"]["hostname"].is_string(), "{a}");
            assert!(a[side]["identity"]["node"].is_string(), "{a}");
        }
    }
    let same = tests
        .iter()
        .find(|t| t["name"] == "rr1c-1x1--1@n1-host->n1-pod")
        .unwrap();
    assert_eq!(
        text(&same["runs"][0], "/agents/path_class"),
        "same-node host-pod"
    );
    for f in ["index.html", "mesh-report.json", "summary.txt"] {
        assert!(out.join("report").join(f).is_file(), "report/{f}");
    }
    assert!(stdout.contains("mesh of 3 agents"), "{stdout}");
    // A Job run again continues its mesh: here, nothing is left to run.
    let (code, _, err) = run(&[
        "mesh",
        "--agents",
        &list,
        "--auth-key",
        key.to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume-if-present",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("resuming: 6 runs already done, 0 to run"),
        "{err}"
    );
}

#[test]
fn agents_are_found_by_name_and_every_plan_is_priced_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let agents: Vec<Agent> = [("n1", "host"), ("n1", "pod"), ("n2", "host"), ("n2", "pod")]
        .iter()
        .map(|(node, network)| {
            Agent::start(&AgentSpec {
                key: Some(&key),
                node: Some(node),
                network: Some(network),
                ..AgentSpec::default()
            })
        })
        .collect();
    // Every address of every name (here: localhost, at each agent's port).
    let names = agents
        .iter()
        .map(|a| format!("localhost:{}", a.addr().rsplit(':').next().unwrap()))
        .collect::<Vec<_>>()
        .join(",");
    let out = dir.path().join("out");
    let dry = |plan: &str, concurrency: &str| {
        run(&[
            "mesh",
            "--agents-dns",
            &names,
            "--auth-key",
            key.to_str().unwrap(),
            "--suite",
            "quick",
            "--plan",
            plan,
            "--concurrency",
            concurrency,
            "--out",
            out.to_str().unwrap(),
            "--dry-run",
        ])
    };
    for (plan, pairs) in [
        ("all-pairs", 12),
        ("ring", 4),
        ("one-to-all:n2-pod", 3),
        ("path-classes:1", 6),
        ("random:5", 5),
    ] {
        let (code, stdout, err) = dry(plan, "2");
        assert_eq!(code, 0, "{plan}: {err}");
        assert!(
            stdout.contains(&format!("4 agents, plan {plan}, {pairs} pairs")),
            "{plan}: {stdout}"
        );
        assert!(
            stdout.contains("n2-pod") && stdout.contains("estimated time"),
            "{stdout}"
        );
    }
    // Waiting for the names' addresses to settle: here they are settled.
    let (code, stdout, err) = run(&[
        "mesh",
        "--agents-dns",
        &names,
        "--wait-agents",
        "30s",
        "--auth-key",
        key.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--dry-run",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("4 agents, plan all-pairs, 12 pairs"),
        "{stdout}"
    );
    let (_, stdout, _) = dry("all-pairs", "2");
    assert!(stdout.contains("2 pairs same-node host-pod"), "{stdout}");
    // Two nodes: one run at a time, whatever --concurrency says.
    assert!(stdout.contains("up to 1 at once"), "{stdout}");
    assert!(!out.exists(), "a dry run writes nothing");
    // Bad plans and concurrencies are input errors.
    for (plan, concurrency, says) in [
        ("every", "1", "use all-pairs, ring"),
        ("one-to-all:n9", "1", "no agent is named so"),
        ("ring", "0", "use a number from 1 up, or all"),
    ] {
        let (code, _, err) = dry(plan, concurrency);
        assert_eq!(code, 2, "{plan} {concurrency}: {err}");
        assert!(err.contains(says), "{err}");
    }
    // An agent that cannot prove the key is left out, saying why.
    let other = key_file(dir.path(), "o", OTHER_KEY);
    let stranger = Agent::start(&AgentSpec {
        key: Some(&other),
        ..AgentSpec::default()
    });
    let list = format!(
        "{},{},{}",
        agents[0].addr(),
        agents[1].addr(),
        stranger.addr()
    );
    let (code, stdout, err) = run(&[
        "mesh",
        "--agents",
        &list,
        "--auth-key",
        key.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--dry-run",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("1 of 3 agents left out"), "{err}");
    assert!(err.contains("it holds another key"), "{err}");
    assert!(
        stdout.contains("2 agents, plan all-pairs, 2 pairs"),
        "{stdout}"
    );
}

#[test]
fn a_mesh_without_the_key_or_over_an_old_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", KEY);
    let (code, _, err) = run(&["mesh", "--agents", "127.0.0.1:9,127.0.0.1:10", "--out", "x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a mesh needs the agents' key"), "{err}");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("mesh.json"), "{}").unwrap();
    let (code, _, err) = run(&[
        "mesh",
        "--agents",
        "127.0.0.1:9,127.0.0.1:10",
        "--auth-key",
        key.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("add --resume"), "{err}");
}
