//! Helpers for the mesh tests (local/mesh.rs, lab/mesh_lab.rs, local/deploy.rs): agents (`linkperf serve` with
//! an identity in its environment), optionally inside a network namespace,
//! whose bound address is read from their own log line.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::process::{Proc, Stopped};
use super::serve::{ServeSpec, Server};
use super::BIN;

/// An agent: a `linkperf serve` child, killed when dropped.
pub struct Agent(Server);

/// How to start an agent.
#[derive(Default)]
pub struct AgentSpec<'a> {
    /// Run inside this network namespace (`ip netns exec NS`).
    pub netns: Option<&'a str>,
    /// `--listen` (default 127.0.0.1).
    pub listen: Option<&'a str>,
    /// `--port` (default 0: any free port).
    pub port: u16,
    /// `--auth-key`.
    pub key: Option<&'a Path>,
    /// LINKPERF_NODE.
    pub node: Option<&'a str>,
    /// LINKPERF_NETWORK.
    pub network: Option<&'a str>,
    /// LINKPERF_ZONE.
    pub zone: Option<&'a str>,
    /// More `serve` arguments.
    pub extra: &'a [&'a str],
    /// The program and arguments that stand for `linkperf` (e.g. a chroot of
    /// another binary), instead of the binary under test.
    pub command: Option<&'a [&'a str]>,
}

impl Agent {
    /// Starts an agent and returns once it has said where it listens.
    pub fn start(spec: &AgentSpec) -> Agent {
        let netns = spec.netns.map(|ns| ["ip", "netns", "exec", ns]);
        let under: &[&str] = match (&netns, spec.command) {
            (Some(ip), None) => ip,
            _ => &[],
        };
        let key = spec.key.map(|k| k.to_str().expect("a UTF-8 key path"));
        let mut extra: Vec<&str> = key.map(|k| vec!["--auth-key", k]).unwrap_or_default();
        extra.extend(spec.extra);
        Agent(Server::start_spec(&ServeSpec {
            under,
            command: spec.command,
            listen: spec.listen,
            port: Some(spec.port),
            extra: &extra,
            env: &[
                ("LINKPERF_AUTH_KEY_FILE", None),
                ("LINKPERF_NODE", spec.node),
                ("LINKPERF_NETWORK", spec.network),
                ("LINKPERF_ZONE", spec.zone),
            ],
        }))
    }

    /// Its control address, `HOST:PORT`.
    pub fn addr(&self) -> &str {
        self.0.address()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        self.0.log()
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        self.0.kill();
    }
}

/// A suite file of one test, `workload` with 1 user, of `duration` after a
/// 200 ms warmup, run once, no suspect run retried.
pub fn one_test_suite(dir: &Path, workload: &str, duration: &str) -> std::path::PathBuf {
    let p = dir.join("one.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"one\"\ndescription = \"one test\"\nrepeat = 1\nretry_suspect = 0\n\
             duration = \"{duration}\"\nwarmup = \"200ms\"\n\n[[test]]\nworkload = \"{workload}\"\nusers = 1\n"
        ),
    )
    .expect("write the suite");
    p
}

/// `linkperf ARGS` (inside `netns` when given) with its output read as it
/// comes: the tests act on what it has printed.
pub struct Controller(Proc);

impl Controller {
    /// Spawns `linkperf ARGS`.
    pub fn spawn(netns: Option<&str>, args: &[&str]) -> Controller {
        match netns {
            Some(ns) => Controller::spawn_as(&["ip", "netns", "exec", ns, BIN], args),
            None => Controller::spawn_as(&[BIN], args),
        }
    }

    /// Spawns `COMMAND ARGS`, COMMAND standing for `linkperf`.
    pub fn spawn_as(command: &[&str], args: &[&str]) -> Controller {
        let mut c = Command::new(command[0]);
        c.args(&command[1..])
            .args(args)
            .env_remove("LINKPERF_AUTH_KEY_FILE");
        Controller(Proc::spawn(&mut c, format!("linkperf {args:?}")))
    }

    /// Waits until `until` holds for one of its stdout's lines (then true),
    /// or its output ends or `within` passes (then false).
    pub fn wait_for(&mut self, within: Duration, until: impl Fn(&str) -> bool) -> bool {
        match self.0.wait_until(within, |out, _| out.lines().any(&until)) {
            Ok(()) => true,
            Err(Stopped::Late | Stopped::Ended) => false,
        }
    }

    /// What it printed so far: stdout, then stderr.
    pub fn seen(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.0.stdout(), self.0.stderr())
    }

    /// Reads to the end and waits for the exit (at most `within`, else it is
    /// killed and the test fails): the exit code, stdout and stderr.
    pub fn finish(self, within: Duration) -> (i32, String, String) {
        let (status, out, err): (ExitStatus, String, String) = self.0.finish(within);
        (status.code().unwrap_or(-1), out, err)
    }
}

/// Whether this process can build the mesh's namespaces (CAP_NET_ADMIN,
/// CAP_SYS_ADMIN, iproute2's `ip`, `tc` and `bridge`); if not, says so and
/// the test skips, or fails under LINKPERF_LAB_REQUIRED=1.
pub fn lab_ready(test: &str) -> bool {
    super::lab::ready(test, &["ip", "tc", "bridge"])
}

/// Three agents with `key` (`n1-host`, `n1-pod` on node n1, `n2`), and
/// their addresses as `--agents` takes them.
pub fn three_agents(key: &Path) -> (Vec<Agent>, String) {
    let agents: Vec<Agent> = [("n1", "host"), ("n1", "pod"), ("n2", "host")]
        .iter()
        .map(|(node, network)| {
            Agent::start(&AgentSpec {
                key: Some(key),
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
    (agents, list)
}
