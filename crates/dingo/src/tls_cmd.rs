//! `dingo tls`: certificates for the gRPC endpoints' TLS.

use anyhow::Result;
use clap::Subcommand;
use dingo_tls::DevCertificates;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum TlsCommand {
    /// Make a throwaway certificate authority (`ca.pem`, what clients
    /// trust) and a server certificate it signed (`cert.pem`, `key.pem`),
    /// for tests and first setups: production sites use their own.
    DevCerts {
        /// Directory to write the three files into (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// Names the server is reached by: IP addresses or DNS names.
        #[arg(long = "name", default_values_t = ["127.0.0.1".to_string(), "localhost".to_string()])]
        names: Vec<String>,
    },
}

pub fn run(c: TlsCommand) -> Result<()> {
    match c {
        TlsCommand::DevCerts { out, names } => {
            outln!("{}", DevCertificates::generate(&names)?.write(&out)?);
            Ok(())
        }
    }
}
