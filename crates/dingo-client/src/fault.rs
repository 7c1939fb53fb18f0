//! Fault injection for tests and experiments: slowing one disk of a
//! cluster whose nodes allow it (`fault_injection = true` under `[node]`).

use crate::{Client, ClientError, Result};
use dingo_proto::v1::InjectSlowdownRequest;
use dingo_types::DiskId;
use std::time::Duration;

/// One disk's modelled service time multiplied by a factor for a window.
/// With the `clap` feature, also `dingo cluster slow-disk`'s flags.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DiskSlowdown {
    /// The disk's id (as `cluster status` lists it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub disk: DiskId,
    /// How many times slower, at least 1.
    #[cfg_attr(feature = "clap", arg(long))]
    pub factor: f64,
    /// From how long after the call, e.g. 2s.
    #[cfg_attr(feature = "clap", arg(long, default_value = "0s", value_parser = dingo_types::parse_duration))]
    pub after: Duration,
    /// For how long, e.g. 30s.
    #[cfg_attr(feature = "clap", arg(long = "for", value_parser = dingo_types::parse_duration))]
    pub lasting: Duration,
}

impl Client {
    /// Slows one disk, wherever it is in the cluster. The node holding it
    /// must allow fault injection, and the disk must emulate an HDD.
    pub async fn inject_slowdown(&self, s: DiskSlowdown) -> Result<()> {
        if !(s.factor >= 1.0 && s.factor.is_finite()) {
            return Err(ClientError::Invalid(format!("slowdown factor {} is not a number at least 1", s.factor)));
        }
        let status = self.cluster_status().await?;
        let node = status
            .nodes
            .iter()
            .find(|n| n.disks.iter().any(|d| d.id == s.disk.0))
            .ok_or_else(|| ClientError::Invalid(format!("{} is not in the cluster", s.disk)))?;
        let request = InjectSlowdownRequest {
            disk: s.disk.0,
            factor_permille: (s.factor * 1000.0).round() as u64,
            delay_ms: u64::try_from(s.after.as_millis()).unwrap_or(u64::MAX),
            for_ms: u64::try_from(s.lasting.as_millis()).unwrap_or(u64::MAX),
        };
        self.node(&node.addr)?.inject_slowdown(request).await.map_err(ClientError::Rpc)?;
        Ok(())
    }
}

impl std::fmt::Display for DiskSlowdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} slowed {}x from {:?} for {:?}", self.disk, self.factor, self.after, self.lasting)
    }
}
