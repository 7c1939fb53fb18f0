//! The planner service's configuration file (`dingo planner --config FILE`,
//! TOML). Unknown keys are errors, so a typo is reported rather than
//! silently ignored; every value is checked before the service starts.
//!
//! ```toml
//! listen = "127.0.0.1:7500"        # gRPC
//! metrics = "127.0.0.1:7501"       # Prometheus /metrics (optional)
//! meta = "127.0.0.1:7400"          # metadata service
//! data = "/var/lib/dingo/planner"  # holds planner.redb (or --data)
//! quantum_ms = 60000               # scheduling quantum
//! dispatch_spacing_ms = 1000       # time between dispatch groups
//! pin_grace_ms = 5000              # pins outlive their group by this much
//! group_cache = "64MB"             # cache one dispatch group may pin, or "unlimited"
//! group_disk_cache = "unlimited"    # of which on one disk (half its node's pinned region, say)
//! leftover = "unused"              # or "fill": spend leftover budget
//! admin_token = "change-me"        # SetBudget, and Status of every client
//!
//! [budget]                         # per quantum; a limit left out (or "unlimited") is none; 0 is refused
//! cluster_bytes = "500MB"
//! disk_head_time_ms = 800
//! diurnal = [1.0, 1.0, ...]        # optional: 24 multipliers, UTC hour
//!
//! [budget.task_rates]              # optional: a task's disk reads per second, under the budget
//! scrubbing = "20MB"
//!
//! [[clients]]
//! name = "scrubber"
//! token = "secret-1"
//!
//! [storage]                        # how to call the metadata service and the nodes
//! secret_file = "/etc/dingo/cluster.secret"  # the cluster secret (or --secret-file)
//! ca = "/etc/dingo/ca.pem"         # optional: they serve TLS (or --ca)
//!
//! [tls]                            # optional: serve gRPC over TLS
//! cert = "/etc/dingo/cert.pem"     # certificate chain, PEM
//! key = "/etc/dingo/key.pem"       # its private key, PEM
//! ```

use dingo_planner::{Budget, DiskBudget, LeftoverPolicy, PlannerConfig, TaskCaps};
use dingo_proto::planner as pb;
use dingo_types::{ByteLimit, ByteSize, TaskKind, UNLIMITED};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("malformed config file: {0}")]
    Malformed(String),
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// One task client: its name (shown in Status and metrics) and its token.
/// `Debug` leaves the token out, so a logged config does not leak it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEntry {
    pub name: String,
    pub token: String,
}

/// What `Debug` shows in place of a token.
const REDACTED: &str = "<redacted>";

impl std::fmt::Debug for ClientEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientEntry").field("name", &self.name).field("token", &REDACTED).finish()
    }
}

/// The per-quantum budget as configured. Sizes are strings (`"500MB"`); a
/// limit left out, or the byte limit `"unlimited"`, is no limit. Zero is
/// refused: it would read nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    pub cluster_bytes: Option<ByteLimit>,
    pub disk_head_time_ms: Option<u64>,
    /// 24 multipliers, one per UTC hour, applied to the budget of a quantum
    /// starting in that hour (to the run-time budget as well).
    pub diurnal: Option<Vec<f64>>,
    /// Optional per-task caps: disk bytes per second a task's reads may
    /// be scheduled (the HDFS prototype's `declarative.<task>.rate`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_rates: BTreeMap<TaskKind, ByteSize>,
}

/// The whole configuration. `Debug` leaves the tokens out.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    #[serde(default = "default_listen")]
    pub listen: String,
    pub metrics: Option<String>,
    #[serde(default = "default_meta")]
    pub meta: String,
    /// Directory of `planner.redb` and `planner.addr`; `--data` overrides it.
    pub data: Option<PathBuf>,
    #[serde(default = "default_quantum_ms")]
    pub quantum_ms: u64,
    #[serde(default = "default_spacing_ms")]
    pub dispatch_spacing_ms: u64,
    #[serde(default = "default_grace_ms")]
    pub pin_grace_ms: u64,
    /// Cache one dispatch group may pin: a size, or `"unlimited"`.
    #[serde(default = "default_group_cache")]
    pub group_cache: ByteLimit,
    /// Cache one dispatch group may pin on one disk: a size, or
    /// `"unlimited"` (the default). Pins past a disk's pinned region are
    /// refused by its node, and their readers go to disk again.
    #[serde(default = "default_group_disk_cache")]
    pub group_disk_cache: ByteLimit,
    #[serde(default)]
    pub leftover: LeftoverPolicy,
    pub admin_token: String,
    #[serde(default)]
    pub budget: BudgetSection,
    #[serde(default)]
    pub clients: Vec<ClientEntry>,
    /// Serve gRPC over TLS with this certificate and key (plaintext if
    /// absent: loopback and trusted networks only, since tokens travel in
    /// every call).
    pub tls: Option<dingo_tls::ServerTlsFiles>,
    /// How to reach the storage services: the cluster secret's file and,
    /// if they serve TLS, their authority (`[storage]`).
    #[serde(default)]
    pub storage: dingo_auth::AuthSection,
}

impl std::fmt::Debug for ServiceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be forgotten here.
        let ServiceConfig {
            listen,
            metrics,
            meta,
            data,
            quantum_ms,
            dispatch_spacing_ms,
            pin_grace_ms,
            group_cache,
            group_disk_cache,
            leftover,
            admin_token: _,
            budget,
            clients,
            tls,
            storage,
        } = self;
        f.debug_struct("ServiceConfig")
            .field("listen", listen)
            .field("metrics", metrics)
            .field("meta", meta)
            .field("data", data)
            .field("quantum_ms", quantum_ms)
            .field("dispatch_spacing_ms", dispatch_spacing_ms)
            .field("pin_grace_ms", pin_grace_ms)
            .field("group_cache", group_cache)
            .field("group_disk_cache", group_disk_cache)
            .field("leftover", leftover)
            .field("admin_token", &REDACTED)
            .field("budget", budget)
            .field("clients", clients)
            .field("tls", tls)
            .field("storage", storage)
            .finish()
    }
}

fn default_listen() -> String {
    "127.0.0.1:7500".into()
}
fn default_meta() -> String {
    "127.0.0.1:7400".into()
}
fn default_quantum_ms() -> u64 {
    60_000
}
fn default_spacing_ms() -> u64 {
    1_000
}
fn default_grace_ms() -> u64 {
    5_000
}
fn default_group_cache() -> ByteLimit {
    ByteLimit::Bytes(64_000_000)
}
fn default_group_disk_cache() -> ByteLimit {
    ByteLimit::Unlimited
}

/// What a command line sets over the service's config file: with the
/// `clap` feature, `dingo planner`'s flags.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ServiceOverrides {
    /// Data directory (overrides `data` in the config).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// gRPC listen address (overrides `listen`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub listen: Option<SocketAddr>,
    /// Prometheus /metrics address (overrides `metrics`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub metrics: Option<SocketAddr>,
    /// How the service calls the metadata service and the nodes
    /// (overrides the `[storage]` table).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub storage: dingo_auth::AuthSection,
}

impl ServiceConfig {
    /// A configuration with defaults, the given admin token and no clients.
    pub fn new(admin_token: &str) -> Self {
        ServiceConfig {
            listen: default_listen(),
            metrics: None,
            meta: default_meta(),
            data: None,
            quantum_ms: default_quantum_ms(),
            dispatch_spacing_ms: default_spacing_ms(),
            pin_grace_ms: default_grace_ms(),
            group_cache: default_group_cache(),
            group_disk_cache: default_group_disk_cache(),
            leftover: LeftoverPolicy::Unused,
            admin_token: admin_token.into(),
            budget: BudgetSection::default(),
            clients: Vec::new(),
            tls: None,
            storage: dingo_auth::AuthSection::default(),
        }
    }

    /// Parses and checks a TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let cfg: ServiceConfig = toml::from_str(text).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml(&text).map_err(|e| match e {
            ConfigError::Malformed(m) => ConfigError::Malformed(format!("{}: {m}", path.display())),
            ConfigError::Invalid(m) => ConfigError::Invalid(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// This configuration with what `over` sets replaced.
    pub fn overridden(self, over: &ServiceOverrides) -> Self {
        ServiceConfig {
            storage: self.storage.overridden(&over.storage),
            data: over.data.clone().or(self.data),
            listen: over.listen.map_or(self.listen, |a| a.to_string()),
            metrics: over.metrics.map(|a| a.to_string()).or(self.metrics),
            ..self
        }
    }

    /// The TOML text of this configuration (for tests and the demo, which
    /// write a config file for a `dingo planner` child process).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("the config always serializes")
    }

    /// Checks every value; the error names the offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        self.listen_addr()?;
        self.metrics_addr()?;
        if self.meta.trim().is_empty() {
            return invalid("meta: the metadata service address is empty".into());
        }
        if self.quantum_ms == 0 {
            return invalid("quantum_ms must be at least 1".into());
        }
        if self.dispatch_spacing_ms == 0 || self.dispatch_spacing_ms > self.quantum_ms {
            return invalid(format!(
                "dispatch_spacing_ms is {} but must be between 1 and quantum_ms ({})",
                self.dispatch_spacing_ms, self.quantum_ms
            ));
        }
        if self.budget.cluster_bytes == Some(ByteLimit::Bytes(0)) {
            return invalid(format!("budget.cluster_bytes: 0 would read nothing; write \"{UNLIMITED}\" for no limit"));
        }
        if self.budget.disk_head_time_ms == Some(0) {
            return invalid("budget.disk_head_time_ms: 0 would read nothing; leave it out for no limit".into());
        }
        if let Some(curve) = &self.budget.diurnal
            && (curve.len() != 24 || curve.iter().any(|m| !m.is_finite() || *m < 0.0))
        {
            return invalid(format!(
                "budget.diurnal must list 24 non-negative multipliers (one per UTC hour); it has {}",
                curve.len()
            ));
        }
        if let Some((task, _)) = self.budget.task_rates.iter().find(|(_, rate)| rate.bytes() == 0) {
            return invalid(format!("budget.task_rates.{task}: 0 would read nothing; leave it out for no cap"));
        }
        if self.admin_token.is_empty() {
            return invalid("admin_token is empty".into());
        }
        let mut names = HashSet::new();
        let mut tokens = HashSet::from([self.admin_token.as_str()]);
        for c in &self.clients {
            if c.name.is_empty() || c.token.is_empty() {
                return invalid(format!("client `{}`: name and token must not be empty", c.name));
            }
            if !names.insert(c.name.as_str()) {
                return invalid(format!("client name `{}` is listed twice", c.name));
            }
            if !tokens.insert(c.token.as_str()) {
                return invalid(format!("client `{}` reuses another client's (or the admin) token", c.name));
            }
            if !c.token.bytes().all(|b| b.is_ascii_graphic()) {
                return invalid(format!("client `{}`: tokens must be printable ASCII without spaces", c.name));
            }
        }
        Ok(())
    }

    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        addr("listen", &self.listen)
    }

    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        self.metrics.as_deref().map(|m| addr("metrics", m)).transpose()
    }

    pub fn quantum(&self) -> Duration {
        Duration::from_millis(self.quantum_ms)
    }

    /// The planner core's configuration: the quantum, dispatch rounds of
    /// `dispatch_spacing_ms` each, the pin grace, the group cache and the
    /// per-task rate caps.
    pub fn planner_config(&self) -> PlannerConfig {
        let rounds = (self.quantum_ms / self.dispatch_spacing_ms.max(1)).max(1);
        PlannerConfig {
            quantum: self.quantum(),
            leftover: self.leftover,
            dispatch_rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
            group_cache_bytes: self.group_cache.bytes().unwrap_or(u64::MAX),
            group_disk_cache_bytes: self.group_disk_cache.bytes().unwrap_or(u64::MAX),
            pin_grace: Duration::from_millis(self.pin_grace_ms),
            task_caps: TaskCaps(self.budget.task_rates.iter().map(|(&t, rate)| (t, rate.bytes())).collect()),
            ..PlannerConfig::default()
        }
    }

    /// The configured budget in wire form (0 = unlimited).
    pub fn base_budget(&self) -> pb::Budget {
        pb::Budget {
            cluster_bytes: self.budget.cluster_bytes.and_then(ByteLimit::bytes).unwrap_or(0),
            disk_head_time_us: self.budget.disk_head_time_ms.unwrap_or(0).saturating_mul(1000),
        }
    }

    /// The budget of a quantum starting at `now_ms`: `base` scaled by the
    /// diurnal multiplier of that UTC hour.
    pub fn budget_at(&self, base: &pb::Budget, now_ms: u64) -> pb::Budget {
        let Some(curve) = &self.budget.diurnal else { return *base };
        let m = curve[((now_ms / 3_600_000) % 24) as usize];
        // Zero stays zero (unlimited); a limit scaled to zero becomes one
        // byte/microsecond so it does not flip to "unlimited".
        let scale = |v: u64| if v == 0 { 0 } else { ((v as f64 * m) as u64).max(1) };
        pb::Budget { cluster_bytes: scale(base.cluster_bytes), disk_head_time_us: scale(base.disk_head_time_us) }
    }
}

/// Wire budget (0 = unlimited) to the core's.
pub fn core_budget(b: &pb::Budget) -> Budget {
    let limit = |v: u64| if v == 0 { u64::MAX } else { v };
    Budget { cluster_bytes: limit(b.cluster_bytes), disk_head_time_us: DiskBudget::Uniform(limit(b.disk_head_time_us)) }
}

fn addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| ConfigError::Invalid(format!("{key}: `{value}` is not a host:port address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_only_what_they_set() {
        let cfg = ServiceConfig { metrics: Some("127.0.0.1:9001".into()), ..ServiceConfig::new("admin") };
        let unchanged = cfg.clone().overridden(&ServiceOverrides::default());
        assert_eq!(
            (unchanged.listen.as_str(), unchanged.metrics.as_deref()),
            (cfg.listen.as_str(), Some("127.0.0.1:9001"))
        );
        let over = ServiceOverrides {
            data: Some("/d".into()),
            listen: Some("127.0.0.1:1".parse().unwrap()),
            ..ServiceOverrides::default()
        };
        let changed = cfg.overridden(&over);
        assert_eq!((changed.listen.as_str(), changed.data.as_deref()), ("127.0.0.1:1", Some(Path::new("/d"))));
        assert_eq!(changed.metrics.as_deref(), Some("127.0.0.1:9001"));
    }

    const FULL: &str = r#"
listen = "127.0.0.1:9000"
metrics = "127.0.0.1:9001"
meta = "127.0.0.1:7400"
data = "/tmp/p"
quantum_ms = 1000
dispatch_spacing_ms = 100
pin_grace_ms = 2000
admin_token = "adm"
[budget]
cluster_bytes = "500MB"
disk_head_time_ms = 800
[budget.task_rates]
scrubbing = "20MB"
garbage-collection = "1MiB"
[[clients]]
name = "scrubber"
token = "t1"
[[clients]]
name = "fsck"
token = "t2"
"#;

    #[test]
    fn full_config_parses_and_round_trips() {
        let c = ServiceConfig::from_toml(FULL).unwrap();
        assert_eq!(c.clients.len(), 2);
        assert_eq!(c.base_budget(), pb::Budget { cluster_bytes: 500_000_000, disk_head_time_us: 800_000 });
        let p = c.planner_config();
        assert_eq!((p.quantum, p.dispatch_rounds, p.pin_grace), (Duration::from_secs(1), 10, Duration::from_secs(2)));
        // Rates per second become caps per quantum (one second here).
        let caps = p.task_caps.per_quantum(p.quantum);
        assert_eq!(caps[TaskKind::Scrubbing.index()], 20_000_000);
        assert_eq!(caps[TaskKind::GarbageCollection.index()], 1 << 20);
        assert_eq!(caps[TaskKind::Fsck.index()], u64::MAX, "uncapped");
        assert_eq!(ServiceConfig::from_toml(&c.to_toml()).unwrap(), c);
        let zero = ServiceConfig::from_toml(&FULL.replace("\"20MB\"", "\"0\"")).unwrap_err().to_string();
        assert!(zero.contains("budget.task_rates.scrubbing"), "{zero}");
        let minimal = ServiceConfig::from_toml("admin_token = \"x\"").unwrap();
        assert_eq!(minimal.base_budget(), pb::Budget::default(), "unlimited by default");
        assert_eq!(core_budget(&minimal.base_budget()), Budget::UNLIMITED);
        assert_eq!(minimal.planner_config().group_cache_bytes, 64_000_000);
        assert_eq!(minimal.planner_config().group_disk_cache_bytes, u64::MAX, "unlimited by default");
        let per_disk = ServiceConfig::from_toml("admin_token = \"x\"\ngroup_disk_cache = \"2GB\"").unwrap();
        assert_eq!(per_disk.planner_config().group_disk_cache_bytes, 2_000_000_000);
        assert_eq!(ServiceConfig::from_toml(&per_disk.to_toml()).unwrap(), per_disk);
    }

    // Regression: an unparsable group cache was read as unlimited.
    #[test]
    fn unlimited_is_spelled_out() {
        let c = ServiceConfig::from_toml(
            "admin_token = \"x\"\ngroup_cache = \"unlimited\"\n[budget]\ncluster_bytes = \"unlimited\"",
        )
        .unwrap();
        assert_eq!(c.planner_config().group_cache_bytes, u64::MAX);
        assert_eq!(c.base_budget().cluster_bytes, 0, "the wire's unlimited");
        assert_eq!(ServiceConfig::from_toml(&c.to_toml()).unwrap(), c);
        assert!(ServiceConfig::from_toml("admin_token = \"x\"\ngroup_cache = \"lots\"").is_err());
    }

    #[test]
    fn mistakes_are_reported_with_their_key() {
        let cases = [
            ("admin_token = \"x\"\nquantom_ms = 5", "quantom_ms"),
            ("quantum_ms = 5", "admin_token"),
            ("admin_token = \"x\"\nlisten = \"nowhere\"", "listen"),
            ("admin_token = \"x\"\nquantum_ms = 0", "quantum_ms"),
            ("admin_token = \"x\"\nquantum_ms = 100\ndispatch_spacing_ms = 200", "dispatch_spacing_ms"),
            ("admin_token = \"x\"\n[budget]\ncluster_bytes = \"lots\"", "cluster_bytes"),
            ("admin_token = \"x\"\n[budget]\ndiurnal = [1.0]", "budget.diurnal"),
            ("admin_token = \"x\"\ngroup_cache = \"-1\"", "group_cache"),
            ("admin_token = \"x\"\ngroup_cache = \"infinite\"", "group_cache"),
            ("admin_token = \"x\"\ngroup_disk_cache = \"lots\"", "group_disk_cache"),
            ("admin_token = \"x\"\n[budget]\ncluster_bytes = \"0\"", "unlimited"),
            ("admin_token = \"x\"\n[budget]\ndisk_head_time_ms = 0", "budget.disk_head_time_ms"),
            ("admin_token = \"x\"\n[[clients]]\nname = \"a\"\ntoken = \"x\"", "reuses"),
            (
                "admin_token = \"x\"\n[[clients]]\nname = \"a\"\ntoken = \"y\"\n[[clients]]\nname = \"a\"\ntoken = \"z\"",
                "twice",
            ),
            ("admin_token = \"x\"\n[[clients]]\nname = \"a\"\ntoken = \"has space\"", "printable"),
        ];
        for (text, needle) in cases {
            let e = ServiceConfig::from_toml(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        let e = ServiceConfig::load(Path::new("/nonexistent/p.toml")).unwrap_err().to_string();
        assert!(e.contains("cannot read config file"), "{e}");
    }

    #[test]
    fn debug_output_shows_no_token() {
        let c = ServiceConfig::from_toml(FULL).unwrap();
        let shown = format!("{c:?}");
        for token in ["adm", "t1", "t2"] {
            assert!(!shown.contains(&format!("\"{token}\"")), "{token} leaked: {shown}");
        }
        assert!(shown.contains("scrubber") && shown.contains(REDACTED), "{shown}");
    }

    #[test]
    fn diurnal_curve_scales_the_budget_by_utc_hour() {
        let mut c = ServiceConfig::from_toml(FULL).unwrap();
        let mut curve = vec![1.0; 24];
        curve[3] = 0.5;
        curve[4] = 0.0;
        c.budget.diurnal = Some(curve);
        let base = c.base_budget();
        let at = |hour: u64| c.budget_at(&base, hour * 3_600_000 + 17);
        assert_eq!(at(3).cluster_bytes, 250_000_000);
        assert_eq!(at(27).disk_head_time_us, 400_000, "hour 27 is 3 o'clock the next day");
        assert_eq!(at(4).cluster_bytes, 1, "a zero multiplier is a tiny limit, not unlimited");
        assert_eq!(c.budget_at(&pb::Budget::default(), 3 * 3_600_000).cluster_bytes, 0);
    }
}
