//! The key's I/O: reading a pre-shared key file, and drawing the fresh
//! random challenges of the handshake (the key itself and its MACs are
//! pure, proto/auth.rs).

use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::proto::auth::{AuthKey, CHALLENGE_LEN, MAX_KEY_LEN, MIN_KEY_LEN};

/// Why a key file was refused.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("read the key file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Too short once whitespace is trimmed.
    #[error(
        "use the key file {path}: it holds {len} bytes of key (after trimming whitespace), \
         fewer than the {MIN_KEY_LEN} required; generate one with e.g. \
         `head -c 32 /dev/urandom | base64 > {path}`"
    )]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Bytes of key found.
        len: usize,
    },
    /// Larger than any key.
    #[error("use the key file {path}: it is larger than {MAX_KEY_LEN} bytes, which no key is")]
    TooLong {
        /// The file.
        path: PathBuf,
    },
}

impl AuthKey {
    /// Reads a key file (see [`AuthKey::from_bytes`]).
    pub fn from_file(path: &Path) -> Result<AuthKey, KeyError> {
        let read = |source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(read)?
            // One byte more than allowed tells a file that is too long.
            .take(MAX_KEY_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(read)?;
        if bytes.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                path: path.to_path_buf(),
            });
        }
        AuthKey::from_bytes(&bytes).ok_or_else(|| KeyError::TooShort {
            path: path.to_path_buf(),
            len: bytes.trim_ascii().len(),
        })
    }
}

/// A fresh random challenge, and its hex for `welcome` (or `hello`).
pub(crate) fn new_challenge() -> Result<([u8; CHALLENGE_LEN], String), getrandom::Error> {
    let mut c = [0u8; CHALLENGE_LEN];
    getrandom::getrandom(&mut c)?;
    Ok((c, hex::encode(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AuthKey {
        AuthKey::from_bytes(b"correct horse battery staple\n").unwrap()
    }

    #[test]
    fn key_files_are_read_trimmed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short.key");
        std::fs::write(&short, "tooshort\n").unwrap();
        let e = AuthKey::from_file(&short).unwrap_err().to_string();
        assert!(e.contains("short.key") && e.contains("8 bytes"), "{e}");
        let missing = dir.path().join("missing.key");
        let e = AuthKey::from_file(&missing).unwrap_err().to_string();
        assert!(e.contains("missing.key"), "{e}");
        let source = std::error::Error::source(&AuthKey::from_file(&missing).unwrap_err())
            .map(|s| s.to_string())
            .unwrap_or_default();
        assert!(source.contains("No such file"), "{source}");
        let long = dir.path().join("long.key");
        std::fs::write(&long, vec![b'k'; MAX_KEY_LEN + 10]).unwrap();
        assert!(matches!(
            AuthKey::from_file(&long),
            Err(KeyError::TooLong { .. })
        ));
        let good = dir.path().join("good.key");
        std::fs::write(&good, "correct horse battery staple\n").unwrap();
        assert_eq!(AuthKey::from_file(&good).unwrap(), key());
    }

    #[test]
    fn each_challenge_is_new_and_its_hex_is_its_bytes() {
        let (c, hex_c) = new_challenge().unwrap();
        let (c2, _) = new_challenge().unwrap();
        assert_ne!(c, c2);
        assert_eq!(hex::encode(c), hex_c);
        let r = key().respond(&hex_c, 1).unwrap();
        assert!(key().verify(&c, 1, &r));
    }
}
