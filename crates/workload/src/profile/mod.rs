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
pub use parse::{parse_profile, parse_profile_warned, ProfileError, ProfileWarning};

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

/// Why a profile file was not read: each names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileLoadError {
    /// The file could not be read, or is too large.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The profile in it is refused.
    #[error("{}: {error}", path.display())]
    Profile {
        /// The file.
        path: std::path::PathBuf,
        /// Where and why.
        error: ProfileError,
    },
    /// It asks what linkperf would only run with a warning, and the caller
    /// has no way to show one.
    #[error("{}: {warning} (refused where no warning can be shown; run it alone to see it run with the warning)", path.display())]
    Warned {
        /// The file.
        path: std::path::PathBuf,
        /// The first warning.
        warning: ProfileWarning,
    },
}

impl ProfileLoadError {
    /// The variable the profile uses that is not set, if that is what was
    /// wrong: the caller says where it can be set.
    pub fn unset_variable(&self) -> Option<&str> {
        match self {
            ProfileLoadError::Profile { error, .. } => error.unset_variable.as_deref(),
            _ => None,
        }
    }
}

/// Reads a profile file with `$variables` from `vars` first, then the
/// environment. Errors name the file, the line and the element. What
/// [`load_profile_warned`] would warn about is refused here: a caller
/// without a way to show a warning never runs a profile differently from
/// what it says in silence.
pub fn load_profile(
    path: &std::path::Path,
    vars: &[(String, String)],
) -> Result<Profile, ProfileLoadError> {
    let (profile, mut warnings) = load_profile_warned(path, vars)?;
    if warnings.is_empty() {
        return Ok(profile);
    }
    Err(ProfileLoadError::Warned {
        path: path.to_path_buf(),
        warning: warnings.swap_remove(0),
    })
}

/// [`load_profile`], with the warnings (each names what linkperf ignores or
/// does differently from uperf; the caller shows them with the file).
pub fn load_profile_warned(
    path: &std::path::Path,
    vars: &[(String, String)],
) -> Result<(Profile, Vec<ProfileWarning>), ProfileLoadError> {
    let file = |message: String| ProfileLoadError::File {
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| file(e.to_string()))?;
    if meta.len() > 1024 * 1024 {
        return Err(file(format!(
            "{} bytes is too large for a profile (at most 1 MiB)",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| file(e.to_string()))?;
    let lookup = |name: &str| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    };
    parse_profile_warned(&text, &lookup).map_err(|error| ProfileLoadError::Profile {
        path: path.to_path_buf(),
        error,
    })
}
