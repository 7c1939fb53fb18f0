//! The cluster secret: the one token every storage RPC carries.

use crate::AuthError;
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Shortest secret accepted: anything shorter is a password, not a key.
pub const MIN_SECRET_CHARS: usize = 16;
/// Random bytes in a generated secret (256 bits, written as 64 hex digits).
const GENERATED_SECRET_BYTES: usize = 32;

/// The cluster's shared secret. Its `Debug` form hides the value, so it
/// never reaches a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Arc<str>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// `bytes` random bytes from the operating system's CSPRNG, as lowercase
/// hex: secrets and tokens.
pub fn random_hex(bytes: usize) -> Result<String, AuthError> {
    let mut raw = vec![0u8; bytes];
    getrandom::fill(&mut raw).map_err(AuthError::Random)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

impl ClusterSecret {
    /// `text` (surrounding whitespace ignored) as a secret; `what` names it
    /// in the error.
    pub fn new(text: &str, what: &str) -> Result<ClusterSecret, AuthError> {
        let text = text.trim();
        // It travels as an HTTP/2 header value: visible ASCII only.
        if text.len() < MIN_SECRET_CHARS || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(AuthError::Malformed { what: what.to_string() });
        }
        Ok(ClusterSecret(text.into()))
    }

    /// A fresh random secret.
    pub fn generate() -> Result<ClusterSecret, AuthError> {
        ClusterSecret::new(&random_hex(GENERATED_SECRET_BYTES)?, "from the random source")
    }

    /// Reads the secret from `path`, refusing a file other users can read
    /// (as ssh refuses such a key): the secret lets anyone who has it
    /// write and delete every chunk.
    pub fn read(path: &Path) -> Result<ClusterSecret, AuthError> {
        let read = |source| AuthError::Read { path: path.into(), source };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_err(read)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(AuthError::Exposed { path: path.into(), mode: mode & 0o777 });
            }
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        ClusterSecret::new(&text, &path.display().to_string())
    }

    /// The secret in `path`, or a fresh one written there (mode 0600,
    /// never replacing a file) if there is none: what a local cluster
    /// does at every start.
    pub fn provision(path: &Path) -> Result<ClusterSecret, AuthError> {
        if path.exists() {
            return ClusterSecret::read(path);
        }
        let secret = ClusterSecret::generate()?;
        match write_private_new(path, &format!("{}\n", secret.0)) {
            Ok(()) => Ok(secret),
            // Another process provisioned it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => ClusterSecret::read(path),
            Err(source) => Err(AuthError::Write { path: path.into(), source }),
        }
    }

    /// Whether `token` is this secret, compared in constant time so that
    /// the time taken does not tell how much of a guess was right (only
    /// its length can show).
    pub fn matches(&self, token: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(token.as_bytes()))
    }

    /// The secret itself, to send.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Creates `path` (failing if it exists) readable by its owner only, and
/// writes `text`.
fn write_private_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioned_secrets_are_private_random_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.secret");
        let first = ClusterSecret::provision(&path).unwrap();
        assert_eq!(first.expose().len(), 2 * GENERATED_SECRET_BYTES);
        assert!(first.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(ClusterSecret::provision(&path).unwrap(), first, "a second start keeps the secret");
        assert_ne!(ClusterSecret::provision(&dir.path().join("other")).unwrap(), first);
        assert_eq!(format!("{first:?}"), "ClusterSecret(..)", "the value never reaches a log");
    }

    #[test]
    fn weak_or_exposed_secrets_are_refused() {
        assert!(matches!(ClusterSecret::new("short", "x"), Err(AuthError::Malformed { .. })));
        assert!(matches!(ClusterSecret::new("sixteen chars ok", "x"), Err(AuthError::Malformed { .. })), "space");
        let secret = ClusterSecret::new("  0123456789abcdef\n", "x").unwrap();
        assert!(secret.matches("0123456789abcdef"));
        for wrong in ["0123456789abcdeF", "0123456789abcde", "0123456789abcdef0", ""] {
            assert!(!secret.matches(wrong), "{wrong}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            std::fs::write(&path, "0123456789abcdef").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = ClusterSecret::read(&path).unwrap_err().to_string();
            assert!(err.contains("chmod 600") && err.contains("644"), "{err}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert!(ClusterSecret::read(&path).unwrap().matches("0123456789abcdef"));
        }
    }
}
