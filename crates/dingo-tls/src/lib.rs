//! TLS for DINGO's gRPC endpoints: rustls (ring provider) through tonic.
//!
//! One mechanism for every service: a server is configured with
//! [`ServerTlsFiles`] (its certificate chain and private key, PEM), a client
//! with the PEM of the certificate authority it trusts
//! ([`client_config`]). Tokens (the planner's `authorization: Bearer`)
//! then travel encrypted, and gRPC libraries attach their standard per-call
//! credentials, which they refuse to send over plaintext.
//!
//! [`DevCertificates`] makes a throwaway authority and a server certificate
//! for loopback tests and first setups (`dingo tls dev-certs`); production
//! sites bring their own.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{path} is not a PEM {what} (no `-----BEGIN {marker}` block)")]
    NotPem { what: &'static str, path: PathBuf, marker: &'static str },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A server's certificate chain and private key, as PEM files; in a TOML
/// config, a `[tls]` table with `cert` and `key`; on a command line (with
/// the `clap` feature, flattened as an `Option`), `--tls-cert` and
/// `--tls-key`, neither without the other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct ServerTlsFiles {
    /// Serve gRPC over TLS with this certificate chain, leaf first (PEM)
    /// [config: tls.cert].
    // Not required on their own: flattened as an `Option`, the pair is
    // absent unless one is given, and then needs the other.
    #[cfg_attr(feature = "clap", arg(long = "tls-cert", required = false, requires = "key"))]
    pub cert: PathBuf,
    /// The certificate's private key: PKCS#8, PKCS#1 or SEC1 (PEM)
    /// [config: tls.key].
    #[cfg_attr(feature = "clap", arg(long = "tls-key", required = false, requires = "cert"))]
    pub key: PathBuf,
}

/// The server side of TLS from `files`, checked now so that a wrong path or
/// file is reported by name at start, not as a failed handshake later.
pub fn server_config(files: &ServerTlsFiles) -> Result<ServerTlsConfig, TlsError> {
    let cert = read_pem(&files.cert, "certificate", "CERTIFICATE")?;
    let key = read_pem(&files.key, "private key", "")?;
    if !key.contains("PRIVATE KEY-----") {
        return Err(TlsError::NotPem { what: "private key", path: files.key.clone(), marker: "... PRIVATE KEY" });
    }
    Ok(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
}

/// The client side of TLS, trusting the authority in the PEM file `ca`
/// (only it: the site's own authority, not the system's roots).
pub fn client_config(ca: &Path) -> Result<ClientTlsConfig, TlsError> {
    let pem = read_pem(ca, "CA certificate", "CERTIFICATE")?;
    Ok(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
}

/// Reads a PEM file and checks that it holds a `-----BEGIN <marker>` block.
/// tonic takes PEM bytes as they are and reports a bad one only as a
/// generic transport error when the server starts or a client connects;
/// this early look names the file.
fn read_pem(path: &Path, what: &'static str, marker: &'static str) -> Result<String, TlsError> {
    let text = std::fs::read_to_string(path).map_err(|source| TlsError::Read { what, path: path.into(), source })?;
    if !text.contains(&format!("-----BEGIN {marker}")) {
        return Err(TlsError::NotPem { what, path: path.into(), marker });
    }
    Ok(text)
}

/// A throwaway certificate authority and a server certificate it signed,
/// for the names given (IP addresses or DNS names). For tests and first
/// setups on loopback: the authority's key is not kept.
pub struct DevCertificates {
    /// The authority's certificate: what clients trust (`ca.pem`).
    pub ca_pem: String,
    /// The server's certificate (`cert.pem`).
    pub cert_pem: String,
    /// The server's private key (`key.pem`).
    pub key_pem: String,
    /// The names the server certificate is for.
    pub names: Vec<String>,
}

/// Where [`DevCertificates::write`] put the files. Its text says which
/// file to trust and the planner's `[tls]` table that serves with the rest.
#[derive(Clone, Debug)]
pub struct DevCertificatePaths {
    pub ca: PathBuf,
    pub server: ServerTlsFiles,
    /// The names the server certificate is for.
    pub names: Vec<String>,
}

impl std::fmt::Display for DevCertificatePaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (cert, key) = (self.server.cert.display(), self.server.key.display());
        writeln!(f, "wrote {} (trust this), {cert} and {key} for {}", self.ca.display(), self.names.join(", "))?;
        write!(f, "planner config:\n[tls]\ncert = \"{cert}\"\nkey = \"{key}\"")
    }
}

impl DevCertificates {
    pub fn generate(names: &[String]) -> Result<DevCertificates, TlsError> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "DINGO development CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let mut params = CertificateParams::new(names.to_vec())?;
        params.distinguished_name.push(DnType::CommonName, names.first().map_or("dingo", String::as_str));
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(DevCertificates {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            names: names.to_vec(),
        })
    }

    /// Writes `ca.pem`, `cert.pem` and `key.pem` (mode 0600 on Unix) into
    /// `dir`, creating it.
    pub fn write(&self, dir: &Path) -> Result<DevCertificatePaths, TlsError> {
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.into(), source })?;
        let paths = DevCertificatePaths {
            ca: dir.join("ca.pem"),
            server: ServerTlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") },
            names: self.names.clone(),
        };
        write_file(&paths.ca, &self.ca_pem, false)?;
        write_file(&paths.server.cert, &self.cert_pem, false)?;
        write_file(&paths.server.key, &self.key_pem, true)?;
        Ok(paths)
    }
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), TlsError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let write = |source| TlsError::Write { path: path.into(), source };
    options.open(path).map_err(write)?.write_all(text.as_bytes()).map_err(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_certificates_load_as_server_and_client_configs() {
        let dir = tempfile::tempdir().unwrap();
        let certs = DevCertificates::generate(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        let paths = certs.write(dir.path()).unwrap();
        server_config(&paths.server).unwrap();
        client_config(&paths.ca).unwrap();
        let text = paths.to_string();
        assert!(text.contains("(trust this)") && text.contains("for 127.0.0.1, localhost"), "{text}");
        assert!(
            text.ends_with(&format!(
                "[tls]\ncert = \"{}\"\nkey = \"{}\"",
                paths.server.cert.display(),
                paths.server.key.display()
            )),
            "{text}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&paths.server.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the key is private: {mode:o}");
        }
    }

    #[test]
    fn missing_or_wrong_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let paths = DevCertificates::generate(&["127.0.0.1".into()]).unwrap().write(dir.path()).unwrap();
        let missing = ServerTlsFiles { cert: dir.path().join("nope.pem"), key: paths.server.key.clone() };
        let err = server_config(&missing).unwrap_err().to_string();
        assert!(err.contains("nope.pem") && err.contains("certificate"), "{err}");
        // A key given as the certificate, and a certificate as the key.
        let swapped = ServerTlsFiles { cert: paths.server.key.clone(), key: paths.server.cert.clone() };
        let err = server_config(&swapped).unwrap_err().to_string();
        assert!(err.contains("key.pem") && err.contains("not a PEM certificate"), "{err}");
        let cert_as_key = ServerTlsFiles { cert: paths.server.cert.clone(), key: paths.ca.clone() };
        let err = server_config(&cert_as_key).unwrap_err().to_string();
        assert!(err.contains("ca.pem") && err.contains("private key"), "{err}");
        let err = client_config(&paths.server.key).unwrap_err().to_string();
        assert!(err.contains("CA certificate"), "{err}");
    }
}
