//! Custom configurations in a TOML file (`docs/lab.md`, "Custom configurations"):
//!
//! ```toml
//! [[config]]
//! name = "jumbo-1g"          # required: a new name
//! base = "veth-1g"           # required: a built-in, or a configuration earlier in the file
//! description = "1 Gb with jumbo frames"
//! mtu = 9000                 # options, as on the command line
//! rate = "1gbit"
//! burst = "256k"
//! latency = "5ms"
//! ```

use serde::Deserialize;

use crate::{Catalog, LabError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    config: Vec<RawConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: String,
    base: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    mtu: Option<u32>,
    #[serde(default)]
    rate: Option<String>,
    #[serde(default)]
    burst: Option<toml::Value>,
    #[serde(default)]
    latency: Option<String>,
}

impl Catalog {
    /// The built-in configurations plus those of the TOML text `text` (read
    /// from `origin`, named in errors).
    pub fn with_file(text: &str, origin: &str) -> Result<Catalog, LabError> {
        let err = |message: String| LabError::ConfigFile {
            path: origin.to_string(),
            message,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| err(e.to_string().trim().into()))?;
        if raw.config.is_empty() {
            return Err(err(
                "no [[config]] table: define at least one configuration".into(),
            ));
        }
        let mut catalog = Catalog::builtin();
        for c in raw.config {
            let mut options = vec![format!("name={}", c.name)];
            if let Some(m) = c.mtu {
                options.push(format!("mtu={m}"));
            }
            if let Some(r) = &c.rate {
                options.push(format!("rate={r}"));
            }
            match &c.burst {
                Some(toml::Value::Integer(n)) => options.push(format!("burst={n}")),
                Some(toml::Value::String(s)) => options.push(format!("burst={s}")),
                Some(other) => {
                    return Err(err(format!(
                    "config {}: burst must be a number of bytes or a string like \"256k\", not {}",
                    c.name,
                    other.type_str()
                )))
                }
                None => {}
            }
            if let Some(l) = &c.latency {
                options.push(format!("latency={l}"));
            }
            let refs: Vec<&str> = options.iter().map(String::as_str).collect();
            let spec = std::iter::once(c.base.as_str())
                .chain(refs)
                .collect::<Vec<_>>()
                .join(",");
            let mut config = catalog
                .resolve(&spec)
                .map_err(|e| err(format!("config {}: {e}", c.name)))?;
            if let Some(d) = c.description {
                config.description = d;
            }
            catalog
                .add(config)
                .map_err(|e| err(format!("config {}: {e}", c.name)))?;
        }
        Ok(catalog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, Mtu};
    use linkperf_workload::BitsPerSecond;

    #[test]
    fn custom_configurations_build_on_builtins_and_each_other() {
        let c = Catalog::with_file(
            r#"
            [[config]]
            name = "jumbo-1g"
            base = "veth-1g"
            description = "1 Gb with jumbo frames"
            mtu = 9000

            [[config]]
            name = "jumbo-2g"
            base = "jumbo-1g"
            rate = "2gbit"
            burst = 262144
            latency = "2ms"

            [[config]]
            name = "overlay"
            base = "vxlan"
            burst = "1m"
            rate = "5gbit"
            "#,
            "lab.toml",
        )
        .unwrap();
        let j1 = c.get("jumbo-1g").unwrap();
        assert_eq!(j1.kind, Kind::Veth);
        assert_eq!(j1.mtu, Some(Mtu(9000)));
        assert_eq!(j1.rate, Some(BitsPerSecond(1_000_000_000)));
        assert_eq!(j1.description, "1 Gb with jumbo frames");
        let j2 = c.get("jumbo-2g").unwrap();
        assert_eq!(
            j2.summary(),
            "jumbo-2g: veth, mtu=9000, rate=2gbit, burst=262144, latency=2ms"
        );
        assert_eq!(c.get("overlay").unwrap().burst.unwrap().0, 1 << 20);
        assert_eq!(c.configs().len(), 10);
        // The catalog resolves options on custom configurations too.
        assert_eq!(
            c.resolve("jumbo-1g,mtu=1500").unwrap().name,
            "jumbo-1g-mtu1500"
        );
    }

    #[test]
    fn file_errors_name_the_file_and_the_problem() {
        for (text, why) in [
            ("", "no [[config]]"),
            ("[[config]]\nname = \"x\"\n", "missing field `base`"),
            (
                "[[config]]\nname = \"x\"\nbase = \"veth\"\nspeed = 1\n",
                "unknown field `speed`",
            ),
            (
                "[[config]]\nname = \"veth\"\nbase = \"veth\"\n",
                "defined twice",
            ),
            (
                "[[config]]\nname = \"x\"\nbase = \"nope\"\n",
                "unknown configuration 'nope'",
            ),
            (
                "[[config]]\nname = \"x\"\nbase = \"veth\"\nmtu = 10\n",
                "config x: mtu 10",
            ),
            (
                "[[config]]\nname = \"x\"\nbase = \"veth\"\nrate = \"1g\"\nburst = true\n",
                "burst must be",
            ),
            ("[[config]\n", "lab.toml"),
        ] {
            let e = Catalog::with_file(text, "lab.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains("lab.toml") && e.contains(why), "{text:?}: {e}");
        }
    }
}
