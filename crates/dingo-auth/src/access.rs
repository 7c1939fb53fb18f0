//! How a caller reaches DINGO's storage services: the cluster secret to
//! send and, when they serve TLS, the authority whose certificates to
//! trust.

use crate::{AuthError, BearerCredentials, ClusterSecret};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tonic::transport::{ClientTlsConfig, Endpoint};

/// The name of the cluster secret's file in a local cluster's data
/// directory.
pub const SECRET_FILE_NAME: &str = "cluster.secret";

/// The `[auth]` table of a config file: where the cluster secret is, and
/// (with TLS) which authority's certificates the storage services present.
///
/// ```toml
/// [auth]
/// secret_file = "/etc/dingo/cluster.secret"  # mode 0600
/// ca = "/etc/dingo/ca.pem"                   # set: call the services over TLS
/// ```
///
/// With the `clap` feature it is also the command line's `--secret-file`
/// and `--ca` (global, so they may follow a subcommand; or
/// `DINGO_SECRET_FILE`, `DINGO_CA`), which override the file's table
/// ([`AuthSection::overridden`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// File holding the cluster secret every storage call carries (mode
    /// 0600; `dingo cluster up` writes DATA/cluster.secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "DINGO_SECRET_FILE"))]
    pub secret_file: Option<PathBuf>,
    /// Call the storage services over TLS, trusting the certificate
    /// authority in this PEM file.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "DINGO_CA"))]
    pub ca: Option<PathBuf>,
}

impl AuthSection {
    /// This table with what `over` sets replaced (command-line flags
    /// override the file).
    pub fn overridden(&self, over: &AuthSection) -> AuthSection {
        AuthSection {
            secret_file: over.secret_file.clone().or_else(|| self.secret_file.clone()),
            ca: over.ca.clone().or_else(|| self.ca.clone()),
        }
    }

    /// The secret `secret_file` holds; an error if none is named.
    pub fn secret(&self) -> Result<ClusterSecret, AuthError> {
        ClusterSecret::read(self.secret_file.as_deref().ok_or(AuthError::NoSecret)?)
    }

    /// Everything a caller needs, read and checked now.
    pub fn access(&self) -> Result<ClusterAccess, AuthError> {
        ClusterAccess::new(self.secret()?, self.ca.as_deref())
    }
}

/// What a caller of the storage services holds: the secret, and the TLS
/// settings if the services serve TLS. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClusterAccess {
    secret: ClusterSecret,
    tls: Option<ClientTlsConfig>,
}

impl ClusterAccess {
    /// Access with `secret`, over TLS trusting only the authority in `ca`
    /// if given, else in plain text.
    pub fn new(secret: ClusterSecret, ca: Option<&Path>) -> Result<ClusterAccess, AuthError> {
        let tls = ca.map(dingo_tls::client_config).transpose()?;
        Ok(ClusterAccess { secret, tls })
    }

    pub fn secret(&self) -> &ClusterSecret {
        &self.secret
    }

    /// Whether calls go over TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// An endpoint for the service at `host:port`: `https` with this
    /// access's trust when TLS is on, else `http`.
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, AuthError> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let bad = |_| AuthError::Address(addr.to_string());
        let endpoint = Endpoint::from_shared(format!("{scheme}://{addr}")).map_err(bad)?;
        match &self.tls {
            Some(tls) => endpoint.tls_config(tls.clone()).map_err(bad),
            None => Ok(endpoint),
        }
    }

    /// The per-call credentials to build clients with.
    pub fn credentials(&self) -> BearerCredentials {
        BearerCredentials::cluster(&self.secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_table_reads_its_files_and_flags_override_it() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join(SECRET_FILE_NAME);
        let secret = ClusterSecret::provision(&secret_file).unwrap();
        let certs = dingo_tls::DevCertificates::generate(&["127.0.0.1".into()]).unwrap();
        let paths = certs.write(&dir.path().join("tls")).unwrap();

        let table: AuthSection = toml_like(&secret_file, &paths.ca);
        let access = table.access().unwrap();
        assert_eq!(access.secret(), &secret);
        assert!(access.uses_tls());
        assert_eq!(access.endpoint("127.0.0.1:7400").unwrap().uri().scheme_str(), Some("https"));

        let plain = AuthSection { secret_file: Some(secret_file.clone()), ca: None }.access().unwrap();
        assert_eq!(plain.endpoint("127.0.0.1:7400").unwrap().uri().scheme_str(), Some("http"));
        assert!(matches!(plain.endpoint("not an address"), Err(AuthError::Address(_))));

        let other = dir.path().join("other.secret");
        let flags = table.overridden(&AuthSection { secret_file: Some(other.clone()), ca: None });
        assert_eq!(
            (flags.secret_file.as_deref(), flags.ca.as_deref()),
            (Some(other.as_path()), Some(paths.ca.as_path()))
        );
        assert!(matches!(AuthSection::default().access(), Err(AuthError::NoSecret)));
        let err = AuthSection::default().access().unwrap_err().to_string();
        assert!(err.contains("--secret-file") && err.contains("DINGO_SECRET_FILE"), "{err}");
    }

    fn toml_like(secret_file: &Path, ca: &Path) -> AuthSection {
        AuthSection { secret_file: Some(secret_file.into()), ca: Some(ca.into()) }
    }
}
