//! What starts one storage daemon (`dingo meta`, `dingo node`): its flags
//! (with the `clap` feature) over the storage config file's tables, made
//! into the daemon's configuration and the credentials it serves with.

use crate::config_file::{ConfigFileError, StorageConfig};
use dingo_auth::{AuthError, ServerCredentials, ServerSecurity};
use dingo_meta::MetaConfig;
use dingo_meta::config_file::MetaConfigError;
use dingo_node::NodeConfig;
use dingo_node::config_file::{NodeConfigError, NodeEndpoints};
use std::net::SocketAddr;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DaemonConfigError {
    #[error(transparent)]
    File(#[from] ConfigFileError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Meta(#[from] MetaConfigError),
    #[error(transparent)]
    Node(#[from] NodeConfigError),
}

/// `dingo meta`: the metadata service.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MetaFlags {
    /// Directory of the metadata database.
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: PathBuf,
    /// gRPC listen address [default: 127.0.0.1:7400].
    #[cfg_attr(feature = "clap", arg(long))]
    pub listen: Option<SocketAddr>,
    /// Prometheus /metrics address.
    #[cfg_attr(feature = "clap", arg(long))]
    pub metrics: Option<SocketAddr>,
    /// The storage config file (TOML).
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub serve: ServerCredentials,
}

impl MetaFlags {
    /// The service's configuration and credentials: the config file's,
    /// with these flags over them.
    pub fn config(&self) -> Result<(MetaConfig, ServerSecurity), DaemonConfigError> {
        let file = StorageConfig::load(self.config.as_deref())?;
        let security = file.credentials(&self.serve).security()?;
        Ok((file.meta.meta_config(self.data.clone(), self.listen, self.metrics)?, security))
    }
}

/// `dingo node`: one storage node.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NodeFlags {
    /// A disk directory; repeat for several disks.
    #[cfg_attr(feature = "clap", arg(long = "disk", required = true))]
    pub disks: Vec<PathBuf>,
    /// Metadata service address.
    #[cfg_attr(feature = "clap", arg(long, default_value = dingo_client::DEFAULT_META_ADDR))]
    pub meta: String,
    /// gRPC listen address.
    #[cfg_attr(feature = "clap", arg(long, default_value = "127.0.0.1:7410"))]
    pub listen: SocketAddr,
    /// Address others reach this node at [default: the listen address].
    #[cfg_attr(feature = "clap", arg(long))]
    pub advertise: Option<String>,
    /// Prometheus /metrics address.
    #[cfg_attr(feature = "clap", arg(long))]
    pub metrics: Option<SocketAddr>,
    /// Capacity of each disk, e.g. 10GB [default: the filesystem's size].
    #[cfg_attr(feature = "clap", arg(long = "capacity", value_name = "CAPACITY", value_parser = dingo_types::parse_bytes))]
    pub capacity_bytes: Option<u64>,
    /// The storage config file (TOML).
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub serve: ServerCredentials,
}

impl NodeFlags {
    /// The node's configuration and credentials: the config file's, with
    /// these flags over them (the same secret serves and calls the
    /// metadata service).
    pub fn config(&self) -> Result<(NodeConfig, ServerSecurity), DaemonConfigError> {
        let file = StorageConfig::load(self.config.as_deref())?;
        let credentials = file.credentials(&self.serve);
        let endpoints = NodeEndpoints {
            listen: self.listen,
            advertise: self.advertise.clone(),
            meta: self.meta.clone(),
            meta_access: credentials.auth.access()?,
            metrics: self.metrics,
        };
        let config = file.node.node_config(self.disks.clone(), self.capacity_bytes, endpoints)?;
        Ok((config, credentials.security()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_config_file_or_secret_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaFlags {
            data: dir.path().join("meta"),
            listen: None,
            metrics: None,
            config: Some(dir.path().join("missing.toml")),
            serve: ServerCredentials::default(),
        };
        assert!(matches!(meta.config(), Err(DaemonConfigError::File(ConfigFileError::Read { .. }))));
        let no_secret = MetaFlags { config: None, ..meta };
        assert!(matches!(no_secret.config(), Err(DaemonConfigError::Auth(_))));
    }

    #[test]
    fn node_flags_reach_the_node_config() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join(dingo_auth::SECRET_FILE_NAME);
        dingo_auth::ClusterSecret::provision(&secret_file).unwrap();
        let mut serve = ServerCredentials::default();
        serve.auth.secret_file = Some(secret_file);
        let node = NodeFlags {
            disks: vec![dir.path().join("d0")],
            meta: "127.0.0.1:1".into(),
            listen: "127.0.0.1:2".parse().unwrap(),
            advertise: None,
            metrics: None,
            capacity_bytes: Some(1 << 30),
            config: None,
            serve,
        };
        let (config, _) = node.config().unwrap();
        assert_eq!((config.meta.as_str(), config.listen), ("127.0.0.1:1", node.listen));
        assert_eq!(config.disks.len(), 1);
    }
}
