//! Link configurations: the built-in ones, options on them
//! (`veth,mtu=9000,rate=10gbit`), and lists of them (`veth,veth-10g,veth-1g`).
//!
//! Parsing only; nothing here touches the host.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use linkperf_workload::{BitsPerSecond, Bytes};
use serde::{Deserialize, Serialize};

use crate::{LabError, Mtu};

/// Longest configuration name: it becomes part of namespace names.
pub const MAX_NAME_LEN: usize = 40;

/// The shape of a configuration's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Client and server in one namespace over `lo`.
    Loopback,
    /// A veth pair between a client and a server namespace.
    Veth,
    /// A VXLAN tunnel over a veth underlay.
    Vxlan,
    /// Client and server namespaces on one Linux bridge.
    Bridge,
    /// Macvlan devices on a veth underlay.
    Macvlan,
}

impl Kind {
    /// Every kind, in documentation order.
    pub const ALL: [Kind; 5] = [
        Kind::Loopback,
        Kind::Veth,
        Kind::Vxlan,
        Kind::Bridge,
        Kind::Macvlan,
    ];

    /// The kind's name, as in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Loopback => "loopback",
            Kind::Veth => "veth",
            Kind::Vxlan => "vxlan",
            Kind::Bridge => "bridge",
            Kind::Macvlan => "macvlan",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One network configuration the lab can build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkConfig {
    /// Its name: results files, namespaces (`lp-NAME-…`) and reports carry it.
    pub name: String,
    /// The shape of the network.
    pub kind: Kind,
    /// MTU of the devices carrying test traffic (`None`: the kernel's default:
    /// 1500 on veth, bridge and macvlan, 1450 inside a VXLAN, 65536 on `lo`).
    pub mtu: Option<Mtu>,
    /// Shaping rate of the link (`None`: unshaped).
    pub rate: Option<BitsPerSecond>,
    /// tbf bucket size in bytes (`None`: [`crate::shaping`]'s rule).
    pub burst: Option<Bytes>,
    /// tbf queue length, as the time to drain it at `rate` (`None`: [`crate::shaping`]'s rule).
    pub latency: Option<Duration>,
    /// One line on what it emulates.
    pub description: String,
}

impl LinkConfig {
    fn builtin(name: &str, kind: Kind, rate: Option<u64>, description: &str) -> LinkConfig {
        LinkConfig {
            name: name.to_string(),
            kind,
            mtu: None,
            rate: rate.map(BitsPerSecond),
            burst: None,
            latency: None,
            description: description.to_string(),
        }
    }

    /// How it is written on the command line, every setting explicit:
    /// `veth-1g: veth, rate=1gbit` (the name, then kind and options).
    pub fn summary(&self) -> String {
        let mut s = format!("{}: {}", self.name, self.kind);
        if let Some(m) = self.mtu {
            s.push_str(&format!(", mtu={m}"));
        }
        if let Some(r) = self.rate {
            s.push_str(&format!(", rate={r}"));
        }
        if let Some(b) = self.burst {
            s.push_str(&format!(", burst={}", b.0));
        }
        if let Some(l) = self.latency {
            s.push_str(&format!(", latency={}", humantime::format_duration(l)));
        }
        s
    }

    /// Applies one `key=value` option.
    fn apply(&mut self, key: &str, value: &str) -> Result<(), LabError> {
        match key {
            "name" => self.name = check_name(value)?.to_string(),
            "mtu" => self.mtu = Some(value.parse()?),
            "rate" => self.rate = Some(crate::parse_rate(value)?),
            "burst" => {
                let b = value
                    .parse::<Bytes>()
                    .map_err(|e| LabError::Option(format!("burst '{value}': {e}")))?;
                if b.0 < 1500 || b.0 > 1 << 30 {
                    return Err(LabError::Option(format!(
                        "burst {value}: must be between 1500 bytes and 1 GiB"
                    )));
                }
                self.burst = Some(b);
            }
            "latency" => {
                let d = humantime::parse_duration(value).map_err(|e| {
                    LabError::Option(format!("latency '{value}': {e} (example: 5ms)"))
                })?;
                if d < Duration::from_micros(100) || d > Duration::from_secs(10) {
                    return Err(LabError::Option(format!(
                        "latency {value}: must be between 100us and 10s"
                    )));
                }
                self.latency = Some(d);
            }
            _ => {
                return Err(LabError::Option(format!(
                    "unknown option '{key}' (options: name, mtu, rate, burst, latency)"
                )))
            }
        }
        Ok(())
    }

    /// Checks settings that only make sense together.
    fn validate(&self) -> Result<(), LabError> {
        if self.rate.is_none() && (self.burst.is_some() || self.latency.is_some()) {
            return Err(LabError::Option(format!(
                "{}: burst and latency shape the link and need a rate",
                self.name
            )));
        }
        if let (Kind::Vxlan, Some(m)) = (self.kind, self.mtu) {
            if m.0 + crate::topology::VXLAN_OVERHEAD > crate::MAX_MTU.0 {
                return Err(LabError::Option(format!(
                    "{}: a VXLAN mtu of {m} needs an underlay mtu above {}",
                    self.name,
                    crate::MAX_MTU
                )));
            }
        }
        Ok(())
    }
}

/// Checks that `name` can be part of namespace and file names.
pub fn check_name(name: &str) -> Result<&str, LabError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(name)
    } else {
        Err(LabError::Option(format!(
            "configuration name '{name}': use 1 to {MAX_NAME_LEN} lowercase letters, digits and single dashes (e.g. veth-jumbo)"
        )))
    }
}

/// The built-in configurations, in documentation order.
pub fn builtin_configs() -> Vec<LinkConfig> {
    vec![
        LinkConfig::builtin(
            "loopback",
            Kind::Loopback,
            None,
            "client and server in one namespace over lo: the same-kernel baseline",
        ),
        LinkConfig::builtin(
            "veth",
            Kind::Veth,
            None,
            "a veth pair between two namespaces: the in-memory path (the HiperSockets analog)",
        ),
        LinkConfig::builtin(
            "veth-10g",
            Kind::Veth,
            Some(10_000_000_000),
            "the veth pair shaped to 10 Gbit/s on both ends (the OSA 10 Gb analog)",
        ),
        LinkConfig::builtin(
            "veth-1g",
            Kind::Veth,
            Some(1_000_000_000),
            "the veth pair shaped to 1 Gbit/s on both ends (the OSA 1 Gb analog)",
        ),
        LinkConfig::builtin(
            "vxlan",
            Kind::Vxlan,
            None,
            "a VXLAN tunnel over a veth underlay, test traffic inside the tunnel (the overlay analog)",
        ),
        LinkConfig::builtin(
            "bridge",
            Kind::Bridge,
            None,
            "both hosts on a Linux bridge (a virtual switch)",
        ),
        LinkConfig::builtin(
            "macvlan",
            Kind::Macvlan,
            None,
            "macvlan devices on a veth underlay (the MacVTap analog)",
        ),
    ]
}

/// The configurations a command can name: the built-in ones and those of a
/// configuration file.
#[derive(Debug, Clone)]
pub struct Catalog {
    configs: Vec<LinkConfig>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::builtin()
    }
}

impl Catalog {
    /// The built-in configurations only.
    pub fn builtin() -> Catalog {
        Catalog {
            configs: builtin_configs(),
        }
    }

    /// Every configuration, built-in first.
    pub fn configs(&self) -> &[LinkConfig] {
        &self.configs
    }

    /// The configuration named `name`.
    pub fn get(&self, name: &str) -> Option<&LinkConfig> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// Adds a configuration; its name must be new.
    pub fn add(&mut self, config: LinkConfig) -> Result<(), LabError> {
        if self.get(&config.name).is_some() {
            return Err(LabError::Option(format!(
                "configuration '{}' is defined twice (built-in names: {})",
                config.name,
                self.builtin_names()
            )));
        }
        config.validate()?;
        self.configs.push(config);
        Ok(())
    }

    fn builtin_names(&self) -> String {
        builtin_configs()
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn names(&self) -> String {
        self.configs
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One configuration with options: `veth`, `veth,mtu=9000`,
    /// `vxlan,mtu=1450,rate=10gbit`, `veth-1g,name=uplink`.
    pub fn resolve(&self, spec: &str) -> Result<LinkConfig, LabError> {
        let mut parts = spec.split(',').map(str::trim);
        let base = parts.next().unwrap_or_default();
        let options: Vec<&str> = parts.collect();
        self.resolve_parts(base, &options)
    }

    fn resolve_parts(&self, base: &str, options: &[&str]) -> Result<LinkConfig, LabError> {
        let mut config = self.get(base).cloned().ok_or_else(|| {
            LabError::Option(format!(
                "unknown configuration '{base}' (known: {})",
                self.names()
            ))
        })?;
        let mut derived = vec![config.name.clone()];
        let mut named = false;
        for opt in options {
            let (key, value) = opt.split_once('=').ok_or_else(|| {
                LabError::Option(format!(
                    "option '{opt}' of {base}: expected KEY=VALUE (e.g. mtu=9000)"
                ))
            })?;
            let (key, value) = (key.trim(), value.trim());
            config.apply(key, value)?;
            match key {
                "name" => named = true,
                "mtu" => derived.push(format!("mtu{}", config.mtu.map_or(0, |m| m.0))),
                "rate" => derived.push(format!(
                    "rate{}",
                    config.rate.map_or_else(String::new, |r| r.to_string())
                )),
                "burst" => derived.push(format!("burst{}", config.burst.map_or(0, |b| b.0))),
                "latency" => derived.push(format!(
                    "latency{}",
                    config.latency.map_or(0, |d| d.as_micros())
                )),
                _ => {}
            }
        }
        if !named && derived.len() > 1 {
            // `veth,mtu=9000` is `veth-mtu9000`: options never hide under a built-in's name.
            let name = derived.join("-");
            config.name = check_name(&name)
                .map_err(|_| {
                    LabError::Option(format!(
                        "the name {name} is too long: add name=SHORTER to {base}'s options"
                    ))
                })?
                .to_string();
        }
        if !options.is_empty() {
            config.description = format!("{} ({})", config.description, options.join(", "));
        }
        config.validate()?;
        Ok(config)
    }

    /// A comma-separated list of configurations, each optionally followed by
    /// its options: `veth,veth-10g,veth-1g` or `veth,veth,mtu=9000,name=jumbo`.
    /// An item with `=` is an option of the configuration before it. Names
    /// must be distinct.
    pub fn resolve_list(&self, list: &str) -> Result<Vec<LinkConfig>, LabError> {
        let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
        for item in list.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(LabError::Option(format!(
                    "configuration list '{list}' has an empty item"
                )));
            }
            if item.contains('=') {
                match groups.last_mut() {
                    Some((_, opts)) => opts.push(item),
                    None => {
                        return Err(LabError::Option(format!(
                            "configuration list '{list}' starts with option '{item}': name a configuration first"
                        )))
                    }
                }
            } else {
                groups.push((item, Vec::new()));
            }
        }
        let mut out: Vec<LinkConfig> = Vec::new();
        for (base, opts) in groups {
            let c = self.resolve_parts(base, &opts)?;
            if out.iter().any(|o| o.name == c.name) {
                return Err(LabError::Option(format!(
                    "configuration '{}' appears twice in '{list}': give one a name=… option",
                    c.name
                )));
            }
            out.push(c);
        }
        if out.is_empty() {
            return Err(LabError::Option("name at least one configuration".into()));
        }
        Ok(out)
    }
}

impl FromStr for Kind {
    type Err = LabError;

    fn from_str(s: &str) -> Result<Kind, LabError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                LabError::Option(format!(
                    "unknown kind '{s}' (kinds: loopback, veth, vxlan, bridge, macvlan)"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> Catalog {
        Catalog::builtin()
    }

    #[test]
    fn builtins_are_the_seven_of_the_issue() {
        let names: Vec<String> = cat().configs().iter().map(|c| c.name.clone()).collect();
        assert_eq!(
            names,
            ["loopback", "veth", "veth-10g", "veth-1g", "vxlan", "bridge", "macvlan"]
        );
        let c = cat();
        assert_eq!(
            c.get("veth-10g").unwrap().rate,
            Some(BitsPerSecond(10_000_000_000))
        );
        assert_eq!(
            c.get("veth-1g").unwrap().rate,
            Some(BitsPerSecond(1_000_000_000))
        );
        assert_eq!(c.get("veth").unwrap().rate, None);
        for b in c.configs() {
            assert_eq!(check_name(&b.name).unwrap(), b.name);
            assert!(!b.description.is_empty());
        }
    }

    #[test]
    fn options_set_mtu_and_rate_and_derive_a_name() {
        let c = cat().resolve("veth,mtu=9000").unwrap();
        assert_eq!((c.name.as_str(), c.kind), ("veth-mtu9000", Kind::Veth));
        assert_eq!(c.mtu, Some(Mtu(9000)));
        assert_eq!(c.summary(), "veth-mtu9000: veth, mtu=9000");

        let c = cat().resolve("vxlan,mtu=1450,rate=10gbit").unwrap();
        assert_eq!(c.name, "vxlan-mtu1450-rate10gbit");
        assert_eq!(c.rate, Some(BitsPerSecond(10_000_000_000)));
        assert_eq!(
            c.summary(),
            "vxlan-mtu1450-rate10gbit: vxlan, mtu=1450, rate=10gbit"
        );

        let c = cat()
            .resolve("veth-1g, name=uplink, rate=2.5g, burst=256k, latency=10ms")
            .unwrap();
        assert_eq!(c.name, "uplink");
        assert_eq!(c.rate, Some(BitsPerSecond(2_500_000_000)));
        assert_eq!(c.burst, Some(Bytes(262_144)));
        assert_eq!(c.latency, Some(Duration::from_millis(10)));
        assert_eq!(
            c.summary(),
            "uplink: veth, rate=2500mbit, burst=262144, latency=10ms"
        );
        assert!(c.description.contains("name=uplink"), "{}", c.description);

        // A built-in without options keeps its name.
        assert_eq!(
            cat().resolve("veth-1g").unwrap().summary(),
            "veth-1g: veth, rate=1gbit"
        );
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for (spec, why) in [
            ("vethh", "unknown configuration 'vethh'"),
            ("veth,mtu", "expected KEY=VALUE"),
            ("veth,speed=1g", "unknown option 'speed'"),
            ("veth,mtu=9", "between 68"),
            ("veth,rate=fast", "rate 'fast'"),
            ("veth,name=Big", "lowercase"),
            ("veth,name=a--b", "single dashes"),
            ("veth,burst=64k", "need a rate"),
            ("veth,rate=1g,latency=1h", "between 100us"),
            ("vxlan,mtu=65500", "underlay mtu"),
            (
                "veth,mtu=9000,rate=10gbit,burst=262144,latency=10ms",
                "too long",
            ),
        ] {
            let e = cat().resolve(spec).unwrap_err().to_string();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }

    #[test]
    fn lists_group_options_with_the_configuration_before_them() {
        let l = cat()
            .resolve_list("veth,veth-10g,veth-1g,mtu=9000,veth,name=jumbo,mtu=9000")
            .unwrap();
        let names: Vec<&str> = l.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["veth", "veth-10g", "veth-1g-mtu9000", "jumbo"]);
        assert_eq!(l[2].rate, Some(BitsPerSecond(1_000_000_000)));
        assert_eq!(l[3].mtu, Some(Mtu(9000)));

        for (list, why) in [
            ("mtu=9000,veth", "starts with option"),
            ("veth,,veth-1g", "empty item"),
            ("veth,veth", "appears twice"),
            ("veth,mtu=1500,veth,name=veth-mtu1500", "appears twice"),
        ] {
            let e = cat().resolve_list(list).unwrap_err().to_string();
            assert!(e.contains(why), "{list}: {e}");
        }
    }

    #[test]
    fn names_are_checked() {
        for ok in ["veth", "a", "lp-1", "x9-jumbo"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "a b", &"x".repeat(41)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_round_trip() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>().unwrap(), k);
        }
        assert!("tap".parse::<Kind>().is_err());
    }
}
