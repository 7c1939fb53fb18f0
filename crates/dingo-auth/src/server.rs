//! What a storage server needs to admit calls: the secret they must carry,
//! and its certificate if it serves TLS.

use crate::{AuthError, AuthSection, ClusterSecret, RequireSecret};
use dingo_tls::ServerTlsFiles;
use std::net::SocketAddr;
use tonic::transport::Server;

#[derive(Clone, Debug)]
pub struct ServerSecurity {
    pub secret: ClusterSecret,
    /// Serve TLS with this certificate and key; `None`: plain text.
    pub tls: Option<ServerTlsFiles>,
}

/// A server's `[auth]` and `[tls]` tables together: what it needs to read
/// its [`ServerSecurity`] and to call the other services. With the `clap`
/// feature these are also its command line's flags, which override the
/// config file's tables ([`ServerCredentials::overridden`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ServerCredentials {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub auth: AuthSection,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub tls: Option<ServerTlsFiles>,
}

impl ServerCredentials {
    /// These tables with what `over` sets replaced: each of `auth`'s
    /// entries, and `tls` as a whole.
    pub fn overridden(&self, over: &ServerCredentials) -> ServerCredentials {
        ServerCredentials { auth: self.auth.overridden(&over.auth), tls: over.tls.clone().or_else(|| self.tls.clone()) }
    }

    /// The secret to require (read now) and the TLS files to serve with.
    pub fn security(&self) -> Result<ServerSecurity, AuthError> {
        Ok(ServerSecurity { secret: self.auth.secret()?, tls: self.tls.clone() })
    }
}

impl ServerSecurity {
    /// The interceptor every service of the server is wrapped in.
    pub fn require(&self) -> RequireSecret {
        RequireSecret::new(self.secret.clone())
    }

    /// A server builder, with TLS if configured: the certificate files are
    /// read now, so a wrong path stops the start with the file's name. A
    /// plain-text server on an address other than loopback is started but
    /// warned about: the secret would cross the network in clear.
    pub fn server(&self, listen: SocketAddr, what: &str) -> Result<Server, AuthError> {
        let builder = Server::builder();
        match &self.tls {
            Some(files) => builder.tls_config(dingo_tls::server_config(files)?).map_err(AuthError::ServerTls),
            None => {
                if !listen.ip().is_loopback() {
                    tracing::warn!(%listen, "the {what} serves plain text beyond loopback: the cluster secret and all data cross the network unencrypted; configure [tls]");
                }
                Ok(builder)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tls(name: &str) -> Option<ServerTlsFiles> {
        Some(ServerTlsFiles { cert: PathBuf::from(format!("{name}.pem")), key: PathBuf::from(format!("{name}.key")) })
    }

    #[test]
    fn flags_replace_auth_entries_one_by_one_and_tls_as_a_whole() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join(crate::SECRET_FILE_NAME);
        let secret = ClusterSecret::provision(&secret_file).unwrap();
        let file = ServerCredentials {
            auth: AuthSection { secret_file: Some("elsewhere".into()), ca: Some("ca.pem".into()) },
            tls: tls("file"),
        };
        let flags = ServerCredentials {
            auth: AuthSection { secret_file: Some(secret_file.clone()), ca: None },
            tls: tls("flag"),
        };
        let merged = file.overridden(&flags);
        assert_eq!(merged.auth, AuthSection { secret_file: Some(secret_file), ca: Some("ca.pem".into()) });
        assert_eq!(merged.tls, tls("flag"));
        assert_eq!(file.overridden(&ServerCredentials::default()), file);

        let security = merged.security().unwrap();
        assert_eq!(security.secret.expose(), secret.expose());
        assert_eq!(security.tls, tls("flag"));
        assert!(matches!(ServerCredentials::default().security(), Err(AuthError::NoSecret)));
    }

    /// The TLS pair is optional as a whole, and neither file comes alone.
    #[cfg(feature = "clap")]
    #[test]
    fn the_tls_flags_are_both_or_neither() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            credentials: ServerCredentials,
        }
        let none = Cli::try_parse_from(["x"]).unwrap().credentials;
        assert_eq!(none, ServerCredentials::default());
        let both = Cli::try_parse_from(["x", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--secret-file", "s"]);
        let both = both.unwrap().credentials;
        assert_eq!(both.tls, Some(ServerTlsFiles { cert: "c.pem".into(), key: "k.pem".into() }));
        assert_eq!(both.auth.secret_file, Some("s".into()));
        assert!(Cli::try_parse_from(["x", "--tls-cert", "c.pem"]).is_err());
        assert!(Cli::try_parse_from(["x", "--tls-key", "k.pem"]).is_err());
    }
}
