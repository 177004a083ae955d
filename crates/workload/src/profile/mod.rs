//! uperf profiles: the model (model.rs), the lenient XML reader (parse/)
//! and the server's view of a profile (mirror.rs). Documented in docs/profiles.md.

mod check;
mod hosts;
mod mirror;
mod model;
mod parse;

pub use check::CheckError;
pub use hosts::{check_runnable, split_by_host};
pub use mirror::mirror;
pub use model::{
    splitmix64, Endpoint, Flowop, FlowopKind, Group, Limit, Profile, ProfileProtocol, Rate, Size,
    Transaction, Xfer,
};
pub use parse::{parse_profile, ProfileError};

/// The test spec of a profile run: its users, TCP, no warmup (the profile's
/// own transactions do what warming up it wants), and its least time as the
/// duration.
pub fn profile_spec(profile: Profile) -> crate::TestSpec {
    let users = profile.users();
    let least = profile.least_time();
    // UDP when every connection the profile opens is.
    let mut endpoints = profile
        .groups
        .iter()
        .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
        .filter_map(|f| match &f.kind {
            FlowopKind::Connect(e) | FlowopKind::Accept(e) => Some(e.protocol),
            _ => None,
        })
        .peekable();
    let udp = endpoints.peek().is_some() && endpoints.all(|p| p == ProfileProtocol::Udp);
    let protocol = if udp {
        crate::Protocol::Udp
    } else {
        crate::Protocol::Tcp
    };
    let mut spec = crate::TestSpec::new(
        crate::Workload::Profile {
            profile: Box::new(profile),
        },
        protocol,
        users,
        least,
    );
    spec.warmup = std::time::Duration::ZERO;
    spec
}

/// Reads a profile file with `$variables` from `vars` first, then the
/// environment. Errors name the file, the line and the element.
pub fn load_profile(path: &std::path::Path, vars: &[(String, String)]) -> Result<Profile, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > 1024 * 1024 {
        return Err(format!(
            "{}: {} bytes is too large for a profile (at most 1 MiB)",
            path.display(),
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let lookup = |name: &str| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    };
    parse_profile(&text, &lookup).map_err(|e| format!("{}: {e}", path.display()))
}
