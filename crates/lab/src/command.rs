//! One `ip` or `tc` invocation, as data: what the lab will run, what it records
//! in results files, what the golden tests compare.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The two programs of iproute2 the lab drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Program {
    /// `ip`: namespaces, links, addresses.
    Ip,
    /// `tc`: queueing disciplines (shaping).
    Tc,
}

impl Program {
    /// The program's name, as looked up in `PATH`.
    pub fn name(self) -> &'static str {
        match self {
            Program::Ip => "ip",
            Program::Tc => "tc",
        }
    }
}

/// A command line: the program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cmd {
    /// `ip` or `tc`.
    pub program: Program,
    /// Its arguments, one per element.
    pub args: Vec<String>,
}

impl Cmd {
    /// `ip ARGS` (split on spaces: the lab's arguments never contain one).
    pub fn ip(args: &str) -> Cmd {
        Cmd::new(Program::Ip, args)
    }

    /// `tc ARGS`.
    pub fn tc(args: &str) -> Cmd {
        Cmd::new(Program::Tc, args)
    }

    fn new(program: Program, args: &str) -> Cmd {
        Cmd {
            program,
            args: args.split_whitespace().map(String::from).collect(),
        }
    }

    /// `ip -n NS ARGS`: the command runs inside namespace `ns`.
    pub fn ip_in(ns: &str, args: &str) -> Cmd {
        Cmd::ip(&format!("-n {ns} {args}"))
    }

    /// `tc -n NS ARGS`.
    pub fn tc_in(ns: &str, args: &str) -> Cmd {
        Cmd::tc(&format!("-n {ns} {args}"))
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.program.name())?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_print_as_typed() {
        let c = Cmd::ip_in("lp-veth-s1", "link set lp-s1 up");
        assert_eq!(c.program, Program::Ip);
        assert_eq!(c.args[..3], ["-n", "lp-veth-s1", "link"]);
        assert_eq!(c.to_string(), "ip -n lp-veth-s1 link set lp-s1 up");
        assert_eq!(
            Cmd::tc_in("x", "qdisc show").to_string(),
            "tc -n x qdisc show"
        );
        assert_eq!(Cmd::ip("netns list").to_string(), "ip netns list");
    }
}
