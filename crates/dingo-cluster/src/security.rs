//! The credentials of a local cluster, made at its start: a random cluster
//! secret in `DATA/cluster.secret` (mode 0600, kept across restarts) and,
//! for a TLS cluster, a throwaway authority and a loopback certificate in
//! `DATA/tls/` (also kept). The daemons get the file names as flags.

use crate::ClusterError;
use dingo_auth::{AuthSection, ClusterAccess, ClusterSecret, SECRET_FILE_NAME, ServerTlsFiles};
use dingo_tls::DevCertificates;
use std::path::Path;

/// What a local cluster's daemons and callers are given.
#[derive(Clone, Debug)]
pub struct Provisioned {
    /// The secret's file and, with TLS, the authority: what callers read.
    pub auth: AuthSection,
    /// The servers' certificate and key, with TLS.
    pub server_tls: Option<ServerTlsFiles>,
    pub access: ClusterAccess,
}

/// Provisions the credentials of the cluster in `data` (reusing those a
/// previous start made).
pub fn provision(data: &Path, tls: bool) -> Result<Provisioned, ClusterError> {
    let secret_file = data.join(SECRET_FILE_NAME);
    let secret = ClusterSecret::provision(&secret_file)?;
    let (ca, server_tls) = if tls {
        let dir = data.join("tls");
        let ca = dir.join("ca.pem");
        let server = ServerTlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
        if !(ca.exists() && server.cert.exists() && server.key.exists()) {
            // Every daemon listens on 127.0.0.1.
            DevCertificates::generate(&["127.0.0.1".into(), "localhost".into()])?.write(&dir)?;
        }
        (Some(ca), Some(server))
    } else {
        (None, None)
    };
    let access = ClusterAccess::new(secret, ca.as_deref())?;
    Ok(Provisioned { auth: AuthSection { secret_file: Some(secret_file), ca }, server_tls, access })
}

/// `--secret-file FILE [--ca FILE]`: the flags of `dingo` commands that
/// call the storage services.
pub fn caller_args(auth: &AuthSection) -> Vec<String> {
    let mut args = Vec::new();
    args.extend(auth.secret_file.iter().flat_map(|f| ["--secret-file".into(), f.display().to_string()]));
    args.extend(auth.ca.iter().flat_map(|ca| ["--ca".into(), ca.display().to_string()]));
    args
}

impl Provisioned {
    /// `--secret-file FILE`: the secret a server requires.
    pub fn secret_args(&self) -> Vec<String> {
        caller_args(&AuthSection { ca: None, ..self.auth.clone() })
    }

    /// `dingo` flags that give a caller (a node calling the metadata
    /// service, `dingo maintain`, the planner) the cluster's credentials:
    /// the secret and, with TLS, the authority to trust.
    pub fn caller_args(&self) -> Vec<String> {
        caller_args(&self.auth)
    }

    /// With TLS, the `--tls-cert` and `--tls-key` flags a server serves with.
    pub fn serve_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(tls) = &self.server_tls {
            args.extend(["--tls-cert".into(), tls.cert.display().to_string()]);
            args.extend(["--tls-key".into(), tls.key.display().to_string()]);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_keeps_its_credentials_across_starts() {
        let dir = tempfile::tempdir().unwrap();
        let first = provision(dir.path(), true).unwrap();
        let again = provision(dir.path(), true).unwrap();
        assert_eq!(first.access.secret(), again.access.secret());
        assert_eq!(
            std::fs::read(dir.path().join("tls/ca.pem")).unwrap(),
            std::fs::read(again.auth.ca.unwrap()).unwrap()
        );
        let plain = provision(dir.path(), false).unwrap();
        assert!(!plain.access.uses_tls() && plain.server_tls.is_none());
        assert_eq!(
            plain.caller_args(),
            ["--secret-file".to_string(), dir.path().join(SECRET_FILE_NAME).display().to_string()]
        );
        assert_eq!(first.serve_args().len(), 4);
        assert!(plain.serve_args().is_empty());
        assert_eq!(first.caller_args().len(), 4, "the secret and the authority");
    }
}
