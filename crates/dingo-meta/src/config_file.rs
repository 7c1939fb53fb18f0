//! The `[meta]` table of the storage configuration file: every key is
//! optional, command-line flags override it, unknown keys are errors.
//!
//! ```toml
//! [meta]
//! listen = "127.0.0.1:7400"
//! metrics = "127.0.0.1:7401"
//! dead_after_ms = 5000     # a node silent this long is not alive (>= 2 x node.heartbeat_ms)
//! lease_ttl_ms = 60000     # >= 1000; an expired lease is recovered (file sealed or removed)
//! mark_dead_after_ms = 600000  # a node silent, or a disk its node leaves out of heartbeats, this long is marked DEAD (its chunks get rebuilt); 0: never
//! ```

use crate::MetaConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// Where the metadata service listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7400";
/// Default of `meta.dead_after_ms`.
pub const DEFAULT_DEAD_AFTER_MS: u64 = 5000;
/// Default of `meta.lease_ttl_ms`.
pub const DEFAULT_LEASE_TTL_MS: u64 = 60_000;
/// Default of `meta.mark_dead_after_ms`: ten minutes, like HDFS' default.
pub const DEFAULT_MARK_DEAD_AFTER_MS: u64 = 600_000;
/// Shortest lease lifetime accepted: a writer renews its lease once per
/// write unit, so shorter leases would expire mid-write.
pub const MIN_LEASE_TTL_MS: u64 = 1000;
/// Shortest `dead_after_ms` accepted whatever the heartbeat.
const MIN_DEAD_AFTER_MS: u64 = 100;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark_dead_after_ms: Option<u64>,
}

/// A `[meta]` value that cannot work, naming the key and the reason.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum MetaConfigError {
    #[error(
        "meta.dead_after_ms = {value_ms} is too short: a node heartbeats every {heartbeat_ms} ms (node.heartbeat_ms), \
         so live nodes would be taken for silent; use at least {minimum_ms} ms"
    )]
    DeadAfterTooShort { value_ms: u64, heartbeat_ms: u64, minimum_ms: u64 },
    #[error(
        "meta.lease_ttl_ms = {0} is too short: a writer renews its lease once per write unit, so leases would expire \
         mid-write; use at least {MIN_LEASE_TTL_MS} ms"
    )]
    LeaseTtlTooShort(u64),
    #[error(
        "meta.mark_dead_after_ms = {value_ms} must be at least meta.dead_after_ms ({silent_ms}): a node is first \
         silent, then marked dead"
    )]
    MarkDeadBeforeSilent { value_ms: u64, silent_ms: u64 },
    #[error("meta.{key} `{value}` is not an address")]
    BadAddress { key: &'static str, value: String },
}

impl MetaSection {
    /// Refuses values that cannot work with nodes heartbeating every
    /// `node_heartbeat`.
    pub fn validate(&self, node_heartbeat: Duration) -> Result<(), MetaConfigError> {
        if let Some(value_ms) = self.dead_after_ms {
            let heartbeat_ms = node_heartbeat.as_millis() as u64;
            let minimum_ms = (2 * heartbeat_ms).max(MIN_DEAD_AFTER_MS);
            if value_ms < minimum_ms {
                return Err(MetaConfigError::DeadAfterTooShort { value_ms, heartbeat_ms, minimum_ms });
            }
        }
        if let Some(ms) = self.lease_ttl_ms.filter(|&ms| ms < MIN_LEASE_TTL_MS) {
            return Err(MetaConfigError::LeaseTtlTooShort(ms));
        }
        if let Some(value_ms) = self.mark_dead_after_ms {
            let silent_ms = self.dead_after_ms.unwrap_or(DEFAULT_DEAD_AFTER_MS);
            if value_ms != 0 && value_ms < silent_ms {
                return Err(MetaConfigError::MarkDeadBeforeSilent { value_ms, silent_ms });
            }
        }
        Ok(())
    }

    /// `listen`, or [`DEFAULT_LISTEN`].
    pub fn listen_addr(&self) -> Result<SocketAddr, MetaConfigError> {
        let value = self.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        value.parse().map_err(|_| MetaConfigError::BadAddress { key: "listen", value: value.to_string() })
    }

    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, MetaConfigError> {
        self.metrics
            .as_deref()
            .map(|m| m.parse().map_err(|_| MetaConfigError::BadAddress { key: "metrics", value: m.to_string() }))
            .transpose()
    }

    /// The service's settings from this table; `listen` and `metrics`
    /// given (command-line flags) override the table's.
    pub fn meta_config(
        &self,
        data_dir: PathBuf,
        listen: Option<SocketAddr>,
        metrics: Option<SocketAddr>,
    ) -> Result<MetaConfig, MetaConfigError> {
        Ok(MetaConfig {
            listen: listen.map_or_else(|| self.listen_addr(), Ok)?,
            data_dir,
            metrics: metrics.map_or_else(|| self.metrics_addr(), |m| Ok(Some(m)))?,
            dead_after: Duration::from_millis(self.dead_after_ms.unwrap_or(DEFAULT_DEAD_AFTER_MS)),
            lease_ttl: Duration::from_millis(self.lease_ttl_ms.unwrap_or(DEFAULT_LEASE_TTL_MS)),
            mark_dead_after: match self.mark_dead_after_ms.unwrap_or(DEFAULT_MARK_DEAD_AFTER_MS) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEARTBEAT: Duration = Duration::from_secs(1);

    #[test]
    fn defaults_and_overrides() {
        let section = MetaSection { metrics: Some("127.0.0.1:9".into()), ..MetaSection::default() };
        let c = section.meta_config("d".into(), None, None).unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(c.metrics, Some("127.0.0.1:9".parse().unwrap()));
        assert_eq!(c.dead_after, Duration::from_millis(DEFAULT_DEAD_AFTER_MS));
        assert_eq!(c.mark_dead_after, Some(Duration::from_millis(DEFAULT_MARK_DEAD_AFTER_MS)));
        let flag: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c =
            MetaSection { mark_dead_after_ms: Some(0), ..section }.meta_config("d".into(), Some(flag), None).unwrap();
        assert_eq!((c.listen, c.mark_dead_after), (flag, None));
    }

    #[test]
    fn values_that_cannot_work_are_refused() {
        let check = |s: MetaSection| s.validate(HEARTBEAT).unwrap_err().to_string();
        assert!(check(MetaSection { dead_after_ms: Some(1500), ..Default::default() }).contains("at least 2000 ms"));
        assert!(check(MetaSection { lease_ttl_ms: Some(0), ..Default::default() }).contains("lease_ttl_ms = 0"));
        let e = check(MetaSection { mark_dead_after_ms: Some(10), ..Default::default() });
        assert!(e.contains("mark_dead_after_ms = 10"), "{e}");
        let bad = MetaSection { listen: Some("here".into()), ..Default::default() };
        let e = bad.meta_config("d".into(), None, None).unwrap_err().to_string();
        assert!(e.contains("meta.listen `here`"), "{e}");
        MetaSection { dead_after_ms: Some(2000), mark_dead_after_ms: Some(0), ..Default::default() }
            .validate(HEARTBEAT)
            .unwrap();
    }
}
