//! Preflight: what is missing is said before anything is created.

use super::*;

// ---------------------------------------------------------------------------
// Preflight: what is missing is said before anything is created.
// ---------------------------------------------------------------------------

#[test]
fn without_iproute2_the_lab_names_what_is_missing_and_creates_nothing() {
    let Some(_g) = lab_lock("no iproute2") else {
        return;
    };
    let _c = Cleanup("t-noip".into());
    let out = Command::new(BIN)
        .args(["lab", "up", "veth,name=t-noip"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("missing the `ip` program") && err.contains("missing the `tc` program"),
        "{err}"
    );
    assert!(err.contains("install iproute2"), "{err}");
    assert!(namespaces("lp-t-noip-").is_empty());
}

#[test]
fn without_privileges_the_lab_names_the_capabilities_and_creates_nothing() {
    let Some(_g) = lab_lock("unprivileged") else {
        return;
    };
    let _c = Cleanup("t-nopriv".into());
    if !has_setpriv() {
        skip("unprivileged", "setpriv (util-linux)");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args(["lab", "up", "veth,name=t-nopriv"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("missing CAP_NET_ADMIN: run as root"), "{err}");
    assert!(err.contains("missing CAP_SYS_ADMIN"), "{err}");
    assert!(namespaces("lp-t-nopriv-").is_empty());
    // Dry runs need nothing: they only print the commands.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args(["lab", "up", "veth-1g", "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("tbf rate 1gbit"));
}

fn has_setpriv() -> bool {
    Command::new("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
