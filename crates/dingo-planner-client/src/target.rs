//! Where a planner service is and who is asking: what a program needs to
//! make a [`PlannerClient`]. With the `clap` feature, a command line's
//! `--planner`, `--token` and `--planner-ca` (global, so they may follow a
//! subcommand; or `DINGO_PLANNER`, `DINGO_TOKEN`, `DINGO_PLANNER_CA`).

use crate::client::{PlannerClient, PlannerClientError, Result};
use std::path::PathBuf;

/// The planner service's default listen address.
pub const DEFAULT_PLANNER_ADDR: &str = "127.0.0.1:7500";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PlannerTarget {
    /// The IO Planner service's address [default: 127.0.0.1:7500].
    #[cfg_attr(
        feature = "clap",
        arg(id = "planner", long = "planner", alias = "addr", global = true, env = "DINGO_PLANNER")
    )]
    pub addr: Option<String>,
    /// This client's planner token (the admin token to change the budget).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "DINGO_TOKEN", hide_env_values = true))]
    pub token: Option<String>,
    /// Reach the planner over TLS, trusting the certificate authority in
    /// this PEM file.
    #[cfg_attr(feature = "clap", arg(id = "planner_ca", long = "planner-ca", global = true, env = "DINGO_PLANNER_CA"))]
    pub ca: Option<PathBuf>,
}

impl PlannerTarget {
    /// The address given, or [`DEFAULT_PLANNER_ADDR`].
    pub fn addr(&self) -> &str {
        self.addr.as_deref().unwrap_or(DEFAULT_PLANNER_ADDR)
    }

    /// A client of the planner at [`Self::addr`], over TLS when `ca` names
    /// the authority to trust. Connects lazily.
    pub fn connect(&self) -> Result<PlannerClient> {
        let token = self.token.as_deref().ok_or(PlannerClientError::NoToken)?;
        match &self.ca {
            Some(ca) => PlannerClient::connect_tls(self.addr(), token, ca),
            None => PlannerClient::connect(self.addr(), token),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_target_needs_a_token_and_defaults_its_address() {
        let none = PlannerTarget::default();
        assert_eq!(none.addr(), DEFAULT_PLANNER_ADDR);
        let err = none.connect().err().expect("refused").to_string();
        assert!(err.contains("--token") && err.contains("DINGO_TOKEN"), "{err}");
        let bad = PlannerTarget { token: Some("two words".into()), ..PlannerTarget::default() };
        assert!(matches!(bad.connect(), Err(PlannerClientError::Token)));
        let given = PlannerTarget { addr: Some("127.0.0.1:1".into()), token: Some("t".into()), ca: None };
        assert_eq!(given.addr(), "127.0.0.1:1");
        assert!(given.connect().is_ok());
        let missing_ca = PlannerTarget { ca: Some("/nonexistent/ca.pem".into()), ..given };
        assert!(matches!(missing_ca.connect(), Err(PlannerClientError::TlsFiles(_))));
    }
}
