//! Credentials on DINGO's gRPC calls.
//!
//! Every DINGO endpoint authenticates a call the same way: the caller sends
//! `authorization: Bearer <token>` metadata, and the server compares the
//! token in constant time. The planner's tokens name task clients; the
//! storage services (metadata and nodes) take one shared [`ClusterSecret`].
//! A bearer token rather than mutual TLS works the same with and without TLS
//! (plain text stays possible on loopback) and is what every gRPC library's
//! standard per-call credentials send; with TLS on (`dingo-tls`) the token
//! travels encrypted. `docs/SECURITY.md` gives the trust model.
//!
//! Server side: [`ServerSecurity`] (the secret and the server's TLS files)
//! and [`RequireSecret`] (the interceptor). Caller side:
//! [`ClusterAccess`] (the secret and the authority to trust), which makes
//! endpoints ([`ClusterAccess::endpoint`]) and attaches the secret
//! ([`BearerCredentials`]). [`AuthSection`] is the `[auth]` table of a
//! config file that names the files.

mod access;
mod bearer;
mod secret;
mod server;

pub use access::{AuthSection, ClusterAccess, SECRET_FILE_NAME};
pub use bearer::{BearerCredentials, RequireSecret, bearer_token};
pub use dingo_tls::ServerTlsFiles;
pub use secret::{ClusterSecret, MIN_SECRET_CHARS, random_hex};
pub use server::{ServerCredentials, ServerSecurity};

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AuthError {
    #[error("cannot read the cluster secret {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write the cluster secret {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error(
        "the cluster secret {} can be read by other users (mode {mode:o}); make it private: chmod 600 {}",
        path.display(), path.display()
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("the cluster secret {what} must be at least {MIN_SECRET_CHARS} printable ASCII characters without spaces")]
    Malformed { what: String },
    #[error(
        "no cluster secret: give --secret-file FILE (or DINGO_SECRET_FILE, or `secret_file` in the config's [auth] \
         table); `dingo cluster up` writes one as DATA/{SECRET_FILE_NAME}"
    )]
    NoSecret,
    #[error("the operating system's random source failed: {0}")]
    Random(getrandom::Error),
    #[error(transparent)]
    Tls(#[from] dingo_tls::TlsError),
    #[error("cannot serve TLS: {0}")]
    ServerTls(tonic::transport::Error),
    #[error("`{0}` is not a host:port address")]
    Address(String),
}
