//! How a program reaches a cluster: where the metadata service is, how long
//! each metadata operation may take, how foreground reads choose a copy,
//! and the credentials. With the `clap` feature these are also a command
//! line's flags (global, so they may follow a subcommand), so the command
//! line and the library share one definition.

use crate::{Client, ClientError, DEFAULT_DEADLINE, ReplicaChoice, Result};
use dingo_auth::AuthSection;
use std::time::Duration;

/// Where a client looks for the metadata service when told nothing: the
/// service's own default listen address.
pub const DEFAULT_META_ADDR: &str = "127.0.0.1:7400";

/// Everything [`ClientConfig::connect`] needs to make a [`Client`].
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ClientConfig {
    /// Metadata service address.
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "DINGO_META", default_value = DEFAULT_META_ADDR))]
    pub meta: String,
    /// Deadline of each metadata operation, retries included (e.g. 10s).
    #[cfg_attr(
        feature = "clap",
        arg(long, global = true, env = "DINGO_TIMEOUT", default_value = "10s", value_parser = dingo_types::parse_duration)
    )]
    pub timeout: Duration,
    /// How foreground reads choose a copy: "steering" (by weight, away from
    /// disks that report congestion) or "random" (the baseline).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "DINGO_REPLICA_CHOICE", default_value = "steering"))]
    pub replica_choice: ReplicaChoice,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub access: AuthSection,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            meta: DEFAULT_META_ADDR.into(),
            timeout: DEFAULT_DEADLINE,
            replica_choice: ReplicaChoice::default(),
            access: AuthSection::default(),
        }
    }
}

impl ClientConfig {
    /// A client as configured; the secret file is read now. Connects
    /// lazily, as [`Client::new`] does.
    pub fn connect(&self) -> Result<Client> {
        if self.timeout.is_zero() {
            return Err(ClientError::Invalid("the metadata deadline (--timeout) must be positive".into()));
        }
        let client = Client::new(&self.meta, &self.access.access()?)?;
        Ok(client.with_deadline(self.timeout).with_replica_choice(self.replica_choice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_deadline_or_a_missing_secret_is_refused_by_name() {
        let zero = ClientConfig { timeout: Duration::ZERO, ..ClientConfig::default() };
        let err = zero.connect().err().expect("refused").to_string();
        assert!(err.contains("--timeout"), "{err}");
        let err = ClientConfig::default().connect().err().expect("refused").to_string();
        assert!(err.contains("--secret-file"), "{err}");
    }

    #[tokio::test]
    async fn a_client_gets_the_configured_deadline_and_choice() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join(dingo_auth::SECRET_FILE_NAME);
        dingo_auth::ClusterSecret::provision(&secret_file).unwrap();
        let config = ClientConfig {
            meta: "127.0.0.1:1".into(),
            replica_choice: ReplicaChoice::Random,
            access: AuthSection { secret_file: Some(secret_file), ca: None },
            ..ClientConfig::default()
        };
        let client = config.connect().unwrap();
        assert_eq!(client.replica_choice(), ReplicaChoice::Random);
        assert_eq!(client.meta_addr(), "127.0.0.1:1");
    }
}
