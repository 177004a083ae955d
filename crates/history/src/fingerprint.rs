//! The environment a run was measured in, reduced to what decides its
//! figures: both hosts (name, kernel, CPU model and count, the MTU of the
//! path), the link configuration, where each side's workers ran, and the
//! linkperf version. Runs whose fingerprints differ are in different
//! series: a new kernel or NIC starts a series of its own instead of being
//! called a regression of the old one.

use serde::Serialize;
use sha2::{Digest, Sha256};

use linkperf_measured::{AgentIdentity, Environment};
use linkperf_results::{ResultsDocument, Run, TestResult};

/// Hex digits of the digest that name a fingerprint (64 bits: no two
/// environments of one history share them by chance).
const HASH_HEX: usize = 16;

/// One host, as far as the fingerprint cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostPrint {
    /// Its name: a mesh agent's node (`LINKPERF_NODE`) and network when it
    /// says them, so that a rescheduled pod keeps its series; else the
    /// hostname.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// MTU of the interface the tests used, when known.
    pub mtu: Option<u32>,
}

impl HostPrint {
    fn of(env: &Environment, identity: Option<&AgentIdentity>) -> HostPrint {
        let host = match identity.and_then(|i| i.node.as_ref()) {
            Some(node) => match identity.and_then(|i| i.network.as_ref()) {
                Some(net) => format!("{node}/{net}"),
                None => node.clone(),
            },
            None => env.hostname.clone(),
        };
        HostPrint {
            host,
            kernel: env.kernel.clone(),
            cpu_model: env.cpu_model.clone(),
            cpus: env.cpu_count,
            mtu: env.mtu,
        }
    }
}

/// What a run's environment was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fingerprint {
    /// The client's host (a mesh run's source agent).
    pub client: Option<HostPrint>,
    /// The server's host (a mesh run's target agent).
    pub server: Option<HostPrint>,
    /// The link configuration the lab built (`veth-1g`), if any.
    pub link: Option<String>,
    /// Where the client's workers ran, as the test asked.
    pub client_placement: serde_json::Value,
    /// Where the server's workers ran, as the test asked.
    pub server_placement: serde_json::Value,
    /// The linkperf that measured.
    pub linkperf_version: String,
}

impl Fingerprint {
    /// The fingerprint of `run` of `test` in `doc`.
    pub fn of(doc: &ResultsDocument, test: &TestResult, run: &Run) -> Fingerprint {
        let (client, server) = match &run.agents {
            Some(a) => (
                a.source
                    .environment
                    .as_ref()
                    .map(|e| HostPrint::of(e, Some(&a.source.identity))),
                a.target
                    .environment
                    .as_ref()
                    .map(|e| HostPrint::of(e, Some(&a.target.identity))),
            ),
            None => (
                doc.environment
                    .client
                    .as_ref()
                    .map(|e| HostPrint::of(e, None)),
                doc.environment
                    .server
                    .as_ref()
                    .map(|e| HostPrint::of(e, None)),
            ),
        };
        let placement = |p| serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
        Fingerprint {
            client,
            server,
            link: doc.link.as_ref().map(|l| l.configuration.clone()),
            client_placement: placement(&test.config.client_placement),
            server_placement: placement(&test.config.server_placement),
            linkperf_version: doc.linkperf_version.clone(),
        }
    }

    /// The fingerprint as JSON (its fields in a fixed order).
    pub fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Its name: the first hex digits of the SHA-256 of its JSON.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.json().as_bytes());
        hex(&digest)[..HASH_HEX].to_string()
    }
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
