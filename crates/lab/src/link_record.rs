//! The link block of a results document: which configuration the results were
//! measured on, the capacity it was shaped to, and the exact commands that
//! built it.
//!
//! The results schema's `LinkInfo` (`configuration`, `capacity_bits_per_s`,
//! `commands`) is this block's typed reader; the lab writes the block into
//! the JSON text of a results file, at the top level under `"link"`, so that
//! it is there whether or not the reading side is typed.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{LabError, Topology};

/// `"link": {...}` of a results document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// The configuration's name (`veth-1g`, `veth-mtu9000`); its settings
    /// are in the commands.
    pub configuration: String,
    /// The rate the link was shaped to, bits per second (`null`: unshaped).
    pub capacity_bits_per_s: Option<f64>,
    /// The `ip` and `tc` commands that built it, in order.
    pub commands: Vec<String>,
    /// The `linkperf lab run` command line that produced the results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lab_command_line: Vec<String>,
    /// Every namespace as it was while the tests ran: links, queueing
    /// disciplines and their counters, offloads, sysctls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<crate::NamespaceSnapshot>,
}

impl LinkRecord {
    /// The record of one pair's results: the capacity is that pair's path's.
    pub fn for_pair(topology: &Topology) -> LinkRecord {
        LinkRecord {
            configuration: topology.config.name.clone(),
            capacity_bits_per_s: topology.pair_capacity().map(|c| c.as_f64()),
            commands: topology.command_lines(),
            lab_command_line: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    /// The record of the results of all pairs together: the capacity they share.
    pub fn for_all(topology: &Topology) -> LinkRecord {
        LinkRecord {
            capacity_bits_per_s: topology.capacity().map(|c| c.as_f64()),
            ..LinkRecord::for_pair(topology)
        }
    }

    /// This record with the `lab run` command line and the namespaces as they were.
    pub fn with_context(
        mut self,
        command_line: &[String],
        namespaces: Vec<crate::NamespaceSnapshot>,
    ) -> LinkRecord {
        self.lab_command_line = command_line.to_vec();
        self.namespaces = namespaces;
        self
    }

    /// Sets `doc["link"]` to this record (replacing one already there).
    pub fn insert_into(&self, doc: &mut Value) -> Result<(), LabError> {
        let obj = doc.as_object_mut().ok_or_else(|| {
            LabError::Aggregate("a results document is a JSON object; this one is not".into())
        })?;
        obj.insert(
            "link".into(),
            serde_json::to_value(self).expect("link records serialize"),
        );
        Ok(())
    }

    /// Sets the `"link"` block of the results file at `path`, rewriting it
    /// atomically (temporary file, sync, rename); every other field is kept
    /// as it was.
    pub fn add_to_file(&self, path: &Path) -> Result<(), LabError> {
        let io = |what: &str, p: &Path, source| LabError::Io {
            what: format!("{what} {}", p.display()),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(|e| io("read", path, e))?;
        let mut doc: Value = serde_json::from_str(&text).map_err(|e| {
            io(
                "parse",
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        self.insert_into(&mut doc)?;
        let mut body = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
        body.push('\n');
        let tmp = path.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(body.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| io("write", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    #[test]
    fn the_link_block_has_the_schema_field_names() {
        let c = Catalog::builtin();
        let t = Topology::build(c.get("veth-1g").unwrap(), 1).unwrap();
        let mut doc = serde_json::json!({"schema": "linkperf/results/v1", "tests": []});
        LinkRecord::for_pair(&t).insert_into(&mut doc).unwrap();
        let link = &doc["link"];
        assert_eq!(link["configuration"], "veth-1g");
        assert_eq!(link["capacity_bits_per_s"], 1e9);
        assert_eq!(link["commands"][0], "ip netns add lp-veth-1g-s1");
        assert_eq!(link.as_object().unwrap().len(), 3);
        assert_eq!(doc["schema"], "linkperf/results/v1");

        // Unshaped: null capacity; inserting again replaces.
        let t = Topology::build(c.get("bridge").unwrap(), 2).unwrap();
        LinkRecord::for_all(&t).insert_into(&mut doc).unwrap();
        assert_eq!(doc["link"]["capacity_bits_per_s"], Value::Null);
        assert_eq!(doc["link"]["configuration"], "bridge");
        assert_eq!(doc["link"]["commands"][0], "ip netns add lp-bridge-switch");
        assert!(LinkRecord::for_all(&t)
            .insert_into(&mut Value::Null)
            .is_err());
    }

    #[test]
    fn the_link_block_is_added_to_a_results_file_keeping_the_rest() {
        let dir = std::env::temp_dir().join(format!("linkperf-lab-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("veth.json");
        std::fs::write(
            &f,
            r#"{"schema":"linkperf/results/v1","label":"veth","tests":[1,2]}"#,
        )
        .unwrap();
        let t = Topology::build(Catalog::builtin().get("veth").unwrap(), 1).unwrap();
        LinkRecord::for_all(&t).add_to_file(&f).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(v["label"], "veth");
        assert_eq!(v["tests"], serde_json::json!([1, 2]));
        assert_eq!(v["link"]["configuration"], "veth");
        assert!(!dir.join("veth.json.tmp").exists());
        let e = LinkRecord::for_all(&t)
            .add_to_file(&dir.join("missing.json"))
            .unwrap_err();
        assert!(e.to_string().starts_with("read "), "{e}");
        std::fs::write(&f, "not json").unwrap();
        let e = LinkRecord::for_all(&t).add_to_file(&f).unwrap_err();
        assert!(e.to_string().starts_with("parse "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn shared_capacity_is_the_link_rate_except_on_a_bridge() {
        let c = Catalog::builtin();
        let veth = Topology::build(c.get("veth-1g").unwrap(), 4).unwrap();
        assert_eq!(LinkRecord::for_all(&veth).capacity_bits_per_s, Some(1e9));
        assert_eq!(LinkRecord::for_pair(&veth).capacity_bits_per_s, Some(1e9));
        let br = Topology::build(&c.resolve("bridge,rate=1gbit").unwrap(), 4).unwrap();
        assert_eq!(LinkRecord::for_all(&br).capacity_bits_per_s, Some(4e9));
        assert_eq!(LinkRecord::for_pair(&br).capacity_bits_per_s, Some(1e9));
    }
}
