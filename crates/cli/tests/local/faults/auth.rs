//! Authentication: the pre-shared key, from the flag or the environment,
//! wrong, missing, replayed or unusable.

use super::*;

// ---------------------------------------------------------------------------
// 1. Authentication.
// ---------------------------------------------------------------------------

#[test]
fn the_right_key_authenticates_from_the_flag_or_the_environment() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a pre-shared key of some length\n");
    let key = key.to_str().unwrap();
    let server = Server::start(&["--auth-key", key]);
    assert!(
        server.log().contains("clients must authenticate"),
        "{}",
        server.log()
    );
    let addr = server.addr();
    let (code, _, err, doc) = run_against(&server, &["--auth-key", key]);
    assert_eq!(code, 0, "{err}\nserver: {}", server.log());
    util::assert_measured(first_run(&doc), "authenticated");

    // The same key, with the whitespace around it different, from the environment.
    let same = key_file(
        dir.path(),
        "same",
        "  a pre-shared key of some length  \n\n",
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-q", "--server", &addr])
        .args(TIMING)
        .env("LINKPERF_AUTH_KEY_FILE", &same);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_wrong_or_missing_key_fails_before_any_data_endpoint() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "the server's key, 32 bytes long.");
    let wrong = key_file(dir.path(), "w", "not the server's key, but longer");
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);

    // The CLI, wrong key: the server's proof does not match it, so the client
    // stops before answering the challenge; exit 1, a failed run recorded.
    let (code, _, err, doc) = run_against(&server, &["--auth-key", wrong.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("did not prove it holds this client's key") && err.contains("another key"),
        "{err}"
    );
    assert_eq!(text(first_run(&doc), "/status"), "failed");
    assert!(text(first_run(&doc), "/error").contains("did not prove it holds"));

    // The CLI, no key: told to give one.
    let (code, _, err, _) = run_against(&server, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the server requires authentication: give --auth-key"),
        "{err}"
    );

    // By hand: a wrong response is answered by auth_failed, never by `accepted`.
    let mut c = Control::connect(server.address());
    let (_, challenge) = c.hello();
    let challenge = challenge.expect("a server with a key sends a challenge");
    assert_eq!(challenge.len(), 64, "32 bytes in hex: {challenge}");
    c.send(&ClientMessage::Auth {
        response: "00".repeat(32),
    });
    c.send(&test_request(1, Duration::from_secs(1)));
    let (code, message) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("auth_failed", "authentication failed")
    );
    assert!(c.recv(Duration::from_secs(5)).is_none(), "the session ends");

    // By hand: a test request without any answer to the challenge.
    let mut c = Control::connect(server.address());
    c.hello();
    c.send(&test_request(1, Duration::from_secs(1)));
    let (code, _) = expect_error(c.recv(Duration::from_secs(5)));
    assert_eq!(code, "auth_failed");
    assert!(c.recv(Duration::from_secs(5)).is_none(), "the session ends");

    // No test was ever set up: the server bound no data endpoint.
    let log = server.log();
    assert!(log.contains("authentication failed"), "{log}");
    assert!(!log.contains("running"), "a test ran: {log}");
}

#[test]
fn a_replayed_response_fails_in_another_session() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let secret = "replay protection test key 0123";
    let key = key_file(dir.path(), "k", secret);
    let server = Server::start(&["--auth-key", key.to_str().unwrap()]);
    let k = AuthKey::from_bytes(secret.as_bytes()).unwrap();

    // Session A answers its challenge rightly; an eavesdropper records the answer.
    let mut a = Control::connect(server.address());
    let (session_a, challenge_a) = a.hello();
    let recorded = k.respond(&challenge_a.unwrap(), session_a).unwrap();
    a.send(&ClientMessage::Auth {
        response: recorded.clone(),
    });
    a.send(&test_request(1, Duration::from_millis(300)));
    match a.recv(Duration::from_secs(10)) {
        Some(ServerMessage::Accepted { .. }) => {}
        other => panic!("the right response must be accepted: {other:?}"),
    }
    a.send(&ClientMessage::Abort {
        reason: "done".into(),
    });

    // Session B replays it: refused.
    let mut b = Control::connect(server.address());
    let (session_b, challenge_b) = b.hello();
    assert_ne!(session_a, session_b);
    let challenge_b = challenge_b.unwrap();
    assert_ne!(k.respond(&challenge_b, session_b).unwrap(), recorded);
    b.send(&ClientMessage::Auth { response: recorded });
    let (code, _) = expect_error(b.recv(Duration::from_secs(5)));
    assert_eq!(code, "auth_failed");
}

#[test]
fn unusable_key_files_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let short = key_file(dir.path(), "short.key", "fifteen bytes!!\n");
    let short = short.to_str().unwrap();
    let missing = dir.path().join("missing.key");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["serve", "--port", "0", "--auth-key", short],
            "fewer than the 16",
        ),
        (
            &["serve", "--port", "0", "--auth-key", missing],
            "missing.key",
        ),
        (
            &["run", "--server", "127.0.0.1:9", "--auth-key", short],
            "short.key",
        ),
        (
            &["run", "--server", "127.0.0.1:9", "--auth-key", missing],
            "missing.key",
        ),
        (
            &[
                "suite",
                "quick",
                "--server",
                "127.0.0.1:9",
                "--auth-key",
                missing,
            ],
            "missing.key",
        ),
    ];
    for (args, says) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let _g = shared();
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "k", "a key the server does not ask for");
    let server = Server::start(&[]);
    let (code, _, err, _) = run_against(&server, &["--auth-key", key.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "did not prove it holds this client's key (it sent no proof: it holds no key)"
        ),
        "{err}"
    );
    let log = server.log();
    assert!(!log.contains("running"), "a test ran: {log}");
}
