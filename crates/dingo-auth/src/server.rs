//! What a storage server needs to admit calls: the secret they must carry,
//! and its certificate if it serves TLS.

use crate::{AuthError, ClusterSecret, RequireSecret};
use dingo_tls::ServerTlsFiles;
use std::net::SocketAddr;
use tonic::transport::Server;

#[derive(Clone, Debug)]
pub struct ServerSecurity {
    pub secret: ClusterSecret,
    /// Serve TLS with this certificate and key; `None`: plain text.
    pub tls: Option<ServerTlsFiles>,
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
