//! The Kubernetes deployment and its image, without a cluster:
//!
//! - `deploy/kubernetes` renders (`kubectl kustomize`) and every rendered
//!   object validates against the Kubernetes schemas offline
//!   (`kubernetes-validate --strict`, run in a network namespace of its own
//!   where this process may make one), and holds what docs/kubernetes.md says.
//! - The statically linked binary the Containerfile builds
//!   (scripts/build-static.sh; its path in LINKPERF_STATIC_BIN) runs `serve`
//!   and `mesh`, report and charts included, in an empty root holding nothing
//!   but itself and a mounted /proc, as a container built FROM scratch has.
//!
//! Without the tools (scripts/setup.sh installs them) or the binary, each test
//! says what is missing and skips; with LINKPERF_DEPLOY_REQUIRED=1 (as
//! scripts/test.sh sets it) that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::control::key_file;
use crate::util::mesh::{one_test_suite, Agent, AgentSpec, Controller};

const REQUIRED: &str = "LINKPERF_DEPLOY_REQUIRED";

/// The test cannot run here for want of `what`: skip, or fail when required.
fn missing(test: &str, what: &str) {
    assert!(
        std::env::var(REQUIRED).as_deref() != Ok("1"),
        "{test}: {REQUIRED}=1 but {what}"
    );
    eprintln!("{test}: SKIPPED: {what}");
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The rendered manifests, one string per object.
fn objects(rendered: &str) -> Vec<String> {
    rendered
        .split("\n---\n")
        .map(str::to_string)
        .filter(|o| o.contains("kind:"))
        .collect()
}

fn kind(o: &str) -> &str {
    o.lines()
        .find_map(|l| l.strip_prefix("kind: "))
        .unwrap_or_default()
}

#[test]
fn the_manifests_render_and_validate_offline() {
    let test = "the_manifests_render_and_validate_offline";
    for (program, probe) in [("kubectl", "version"), ("kubernetes-validate", "--version")] {
        let ok = if program == "kubectl" {
            Command::new("kubectl")
                .args(["version", "--client"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        } else {
            runs(program, probe)
        };
        if !ok {
            return missing(
                test,
                &format!("no {program} (scripts/setup.sh installs it)"),
            );
        }
    }
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo().join("deploy/kubernetes"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, &rendered).unwrap();

    // Offline: in a network namespace with nothing but a loopback that is down.
    let mut validate = if runs("unshare", "--version")
        && Command::new("unshare")
            .args(["--net", "true"])
            .status()
            .is_ok_and(|s| s.success())
    {
        let mut c = Command::new("unshare");
        c.args(["--net", "kubernetes-validate"]);
        c
    } else {
        Command::new("kubernetes-validate")
    };
    let v = validate.arg("--strict").arg(&file).output().unwrap();
    let said =
        String::from_utf8_lossy(&v.stdout).into_owned() + &String::from_utf8_lossy(&v.stderr);
    assert!(v.status.success(), "kubernetes-validate --strict: {said}");

    let objects = objects(&rendered);
    let kinds: Vec<&str> = objects.iter().map(|o| kind(o)).collect();
    for k in [
        "Namespace",
        "ServiceAccount",
        "Service",
        "PersistentVolumeClaim",
        "DaemonSet",
        "Job",
        "CronJob",
        "Deployment",
    ] {
        assert!(kinds.contains(&k), "no {k} in {kinds:?}");
        assert!(
            said.contains(&format!("passed for resource {}", k.to_lowercase())),
            "{said}"
        );
    }
    assert!(
        !kinds.contains(&"Secret"),
        "the key is the operator's, never rendered"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "DaemonSet").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "Service").count(), 3);
    for o in &objects {
        match kind(o) {
            // The agents' Services are headless; the metrics' one is not.
            "Service" if !o.contains("name: linkperf-metrics") => {
                assert!(o.contains("clusterIP: None"), "headless: {o}")
            }
            "DaemonSet" | "Job" | "CronJob" | "Deployment" => {
                for needed in [
                    "runAsNonRoot: true",
                    "allowPrivilegeEscalation: false",
                    "readOnlyRootFilesystem: true",
                    "- ALL",
                    "type: RuntimeDefault",
                    "automountServiceAccountToken: false",
                    "requests:",
                    "limits:",
                ] {
                    assert!(o.contains(needed), "{needed} in {o}");
                }
                // Whatever talks to agents holds the key; the metrics pod talks to none.
                assert_eq!(
                    o.contains("secretName: linkperf-key"),
                    kind(o) != "Deployment",
                    "{o}"
                );
                assert!(!o.contains("privileged: true"), "{o}");
                assert!(!o.contains("add:"), "no capability added: {o}");
            }
            _ => {}
        }
    }
    let host: Vec<&String> = objects
        .iter()
        .filter(|o| o.contains("hostNetwork: true"))
        .collect();
    assert_eq!(host.len(), 1, "only the host-network agents");
    assert!(host[0].contains("value: host") && host[0].contains("status.hostIP"));
    let pod = objects
        .iter()
        .find(|o| kind(o) == "DaemonSet" && !o.contains("hostNetwork"))
        .unwrap();
    assert!(pod.contains("value: pod") && pod.contains("spec.nodeName"));
    let job = objects.iter().find(|o| kind(o) == "Job").unwrap();
    assert!(
        job.contains("- mesh") && job.contains("--agents-dns"),
        "{job}"
    );
    the_history_is_recorded_nightly_and_scraped(&rendered);
}

/// The CronJob meshes into the history on the shared volume, one directory
/// per Job, never two at once, on the metrics pod's node; the metrics pod
/// serves that history to Prometheus through its scrape annotations.
fn the_history_is_recorded_nightly_and_scraped(rendered: &str) {
    let docs: Vec<serde_yaml_ng::Value> = rendered
        .split("\n---\n")
        .filter(|o| o.contains("kind:"))
        .map(|o| serde_yaml_ng::from_str(o).unwrap_or_else(|e| panic!("{e}: {o}")))
        .collect();
    let find = |k: &str| {
        docs.iter()
            .find(|d| d["kind"].as_str() == Some(k))
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let strings = |v: &serde_yaml_ng::Value| -> Vec<String> {
        v.as_sequence()
            .unwrap_or_else(|| panic!("not a list: {v:?}"))
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    /// The value after `flag` in `args`.
    fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
        let i = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
        args.get(i + 1)
            .unwrap_or_else(|| panic!("{flag} without a value in {args:?}"))
    }
    let volume_claim = |pod: &serde_yaml_ng::Value, mount: &str| -> String {
        let c = &pod["containers"][0];
        let name = c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"].as_str() == Some(mount))
            .unwrap_or_else(|| panic!("nothing mounted at {mount}: {c:?}"))["name"]
            .as_str()
            .unwrap()
            .to_string();
        pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"].as_str() == Some(name.as_str()))
            .unwrap()["persistentVolumeClaim"]["claimName"]
            .as_str()
            .unwrap_or_else(|| panic!("{mount} is no claim"))
            .to_string()
    };

    let cron = find("CronJob");
    let schedule = cron["spec"]["schedule"].as_str().unwrap();
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    assert_eq!(fields.len(), 5, "a five-field schedule: {schedule}");
    assert_eq!(
        cron["spec"]["concurrencyPolicy"].as_str(),
        Some("Forbid"),
        "two meshes at once measure each other"
    );
    let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = strings(&container["args"]);
    assert_eq!(args[0], "mesh", "{args:?}");
    let db = after(&args, "--history");
    assert!(db.starts_with("/history/") && db.ends_with(".db"), "{db}");
    let out = after(&args, "--out");
    assert!(
        out.starts_with("/history/") && out.contains("$(JOB_NAME)"),
        "one directory per Job: {out}"
    );
    assert!(
        args.contains(&"--resume-if-present".to_string()),
        "{args:?}"
    );
    let job_name = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("JOB_NAME"))
        .unwrap_or_else(|| panic!("JOB_NAME is not set: {container:?}"));
    assert_eq!(
        job_name["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.labels['batch.kubernetes.io/job-name']")
    );
    let cron_claim = volume_claim(pod, "/history");
    // SQLite's temporary files need a writable directory: the root is read-only.
    let tmp_is_empty_dir = |pod: &serde_yaml_ng::Value| {
        let mounted = pod["containers"][0]["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"].as_str() == Some("/tmp"))
            .map(|m| m["name"].clone());
        mounted.is_some_and(|name| {
            pod["volumes"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|v| v["name"] == name && v["emptyDir"].is_mapping())
        })
    };
    assert!(tmp_is_empty_dir(pod), "no /tmp for SQLite: {pod:?}");
    // Scheduled beside the metrics pod (one node mounts the volume).
    let affinity =
        &pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        affinity["labelSelector"]["matchLabels"]["app.kubernetes.io/component"].as_str(),
        Some("metrics")
    );
    assert_eq!(
        affinity["topologyKey"].as_str(),
        Some("kubernetes.io/hostname")
    );

    let deployment = find("Deployment");
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["app.kubernetes.io/component"].as_str(),
        Some("metrics")
    );
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"));
    assert_eq!(annotations["prometheus.io/path"].as_str(), Some("/metrics"));
    let port = annotations["prometheus.io/port"].as_str().unwrap();
    let metrics = &template["spec"]["containers"][0];
    let args = strings(&metrics["args"]);
    assert_eq!(args[0], "serve", "{args:?}");
    assert_eq!(after(&args, "--metrics"), format!("0.0.0.0:{port}"));
    assert_eq!(
        after(&args, "--listen"),
        "127.0.0.1",
        "no agent: its tests on loopback only"
    );
    assert_eq!(
        after(&args, "--history"),
        db,
        "the history the CronJob writes"
    );
    assert_eq!(
        metrics["ports"][0]["containerPort"]
            .as_u64()
            .map(|p| p.to_string()),
        Some(port.to_string())
    );
    assert_eq!(volume_claim(&template["spec"], "/history"), cron_claim);
    assert!(tmp_is_empty_dir(&template["spec"]), "no /tmp for SQLite");
    // The annotated pod is scraped; the Service is not annotated (no second scrape).
    let service = docs
        .iter()
        .find(|d| {
            d["kind"].as_str() == Some("Service")
                && d["metadata"]["name"].as_str() == Some("linkperf-metrics")
        })
        .expect("the metrics Service");
    assert!(service["metadata"]["annotations"]["prometheus.io/scrape"].is_null());
}

/// Whether the ELF file at `path` asks for no program interpreter (it is
/// statically linked).
fn is_static(path: &Path) -> bool {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "an ELF file");
    assert_eq!(b[4], 2, "64-bit");
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    (0..count).all(|i| {
        let o = phoff + i * size;
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) != PT_INTERP
    })
}

#[test]
fn the_static_binary_serves_and_meshes_in_an_empty_root() {
    let test = "the_static_binary_serves_and_meshes_in_an_empty_root";
    let Some(bin) = std::env::var_os("LINKPERF_STATIC_BIN").map(PathBuf::from) else {
        return missing(
            test,
            "LINKPERF_STATIC_BIN is not set (scripts/build-static.sh builds it)",
        );
    };
    if !Command::new("unshare")
        .args(["--mount", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        return missing(test, "no mount namespace (unshare --mount needs root)");
    }
    assert!(
        is_static(&bin),
        "{} is not statically linked",
        bin.display()
    );
    let _g = crate::util::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("proc")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::copy(&bin, root.join("linkperf")).unwrap();
    key_file(&root, "key", "the empty root's key, 32 bytes!!");
    one_test_suite(&root, "rr1c-1x1", "300ms");
    let root_s = root.to_str().unwrap().to_string();
    let proc_mount = format!("--mount-proc={root_s}/proc");
    // The root holds the binary, the key, the suite and an empty out/: no
    // libraries, no /etc, no fonts, no /dev.
    let entries: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries.len(), 5, "{entries:?}");
    let chrooted: Vec<&str> = vec![
        "unshare",
        "--fork",
        "--kill-child",
        &proc_mount,
        "chroot",
        &root_s,
        "/linkperf",
    ];
    let agents: Vec<Agent> = [("n1", "host"), ("n1", "pod"), ("n2", "host"), ("n2", "pod")]
        .iter()
        .map(|(node, network)| {
            Agent::start(&AgentSpec {
                command: Some(&chrooted),
                key: Some(Path::new("/key")),
                node: Some(node),
                network: Some(network),
                ..AgentSpec::default()
            })
        })
        .collect();
    let list = agents
        .iter()
        .map(|a| a.addr().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (code, out, err) = Controller::spawn_as(
        &chrooted,
        &[
            "mesh",
            "--agents",
            &list,
            "--auth-key",
            "/key",
            "--suite",
            "/one.toml",
            "--plan",
            "path-classes:1",
            "--out",
            "/out/mesh",
        ],
    )
    .finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("charts not drawn"), "{err}");
    let mesh = root.join("out/mesh");
    let doc: serde_json::Value = crate::util::read_doc(&mesh.join("mesh.json"));
    assert_eq!(
        doc["tests"].as_array().unwrap().len(),
        6,
        "six classes, a pair each"
    );
    assert!(mesh.join("report/index.html").is_file());
    // A class comparison's full report, its charts drawn with the embedded font.
    let pngs = walk(&mesh.join("report"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .count();
    assert!(pngs > 0, "charts in the report");
    for a in &agents {
        assert!(a.log().contains("listening on 127.0.0.1:"), "{}", a.log());
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
