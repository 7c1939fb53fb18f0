//! A local DINGO storage cluster: one `dingo meta` and N `dingo node`
//! processes on loopback, each a real child process that can be killed and
//! restarted. Used by `dingo cluster up`, `dingo bench io` and the fault
//! tests.
//!
//! Layout under the data directory:
//! `meta/` (redb and `meta.addr`), `node<i>/disk<j>/` (disks), `logs/`,
//! `cluster.secret` (the secret every storage RPC carries, mode 0600) and,
//! for a TLS cluster, `tls/` (a throwaway authority and the daemons'
//! certificate).
//!
//! Children get `PR_SET_PDEATHSIG`, so they die with the thread that started
//! them even if it is killed; [`LocalCluster`] stops them (SIGTERM, then
//! SIGKILL) when dropped.

pub mod config_file;
mod daemons;
mod planner;
mod security;
mod up;
pub use config_file::StorageConfig;
pub use daemons::{DaemonConfigError, MetaFlags, NodeFlags};
pub use planner::{PlannerProcess, PlannerSpec};
pub use security::Provisioned;
pub use up::{UpRequest, UpSummary};

use dingo_client::{Client, ClientError};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClusterError {
    #[error("cannot prepare {path}: {source}")]
    Prepare { path: PathBuf, source: std::io::Error },
    #[error("cannot start {what}: {source}")]
    Spawn { what: String, source: std::io::Error },
    #[error("{what} exited with {status} during startup; log {log}:\n{tail}")]
    Died { what: String, status: std::process::ExitStatus, log: PathBuf, tail: String },
    #[error("cluster not ready after {0:?}: {1}")]
    Timeout(Duration, String),
    #[error("no free port: {0}")]
    Port(std::io::Error),
    #[error("{0}")]
    Status(String),
    #[error(transparent)]
    Config(#[from] config_file::ConfigFileError),
    #[error("--data DIR (or cluster.data in --config) is required")]
    NoDataDir,
    #[error("a cluster needs at least one node and one disk per node")]
    Empty,
    #[error("cluster credentials: {0}")]
    Auth(#[from] dingo_auth::AuthError),
    #[error("cluster certificates: {0}")]
    Tls(#[from] dingo_tls::TlsError),
}

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The `dingo` executable.
    pub exe: PathBuf,
    pub data: PathBuf,
    pub nodes: u32,
    pub disks_per_node: u32,
    /// Meta gRPC on `base_port`, its metrics on `+1`; node `i` on
    /// `+10+2i` and metrics `+11+2i`. 0: free ports chosen at start.
    pub base_port: u16,
    /// Passed to every daemon as `--config`.
    pub config: Option<PathBuf>,
    /// Extra arguments for every `dingo node`.
    pub node_args: Vec<String>,
    /// Serve every daemon's gRPC over TLS, with certificates made at
    /// start; callers then trust `DATA/tls/ca.pem`.
    pub tls: bool,
}

struct Daemon {
    name: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    fn start(&mut self, exe: &Path) -> Result<(), ClusterError> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|source| ClusterError::Prepare { path: self.log.clone(), source })?;
        let err_log = log.try_clone().map_err(|source| ClusterError::Prepare { path: self.log.clone(), source })?;
        let mut cmd = Command::new(exe);
        cmd.args(&self.args).stdin(Stdio::null()).stdout(log).stderr(err_log);
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child
        // between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().map_err(|source| ClusterError::Spawn { what: self.name.clone(), source })?);
        Ok(())
    }

    /// Fails if the process has exited.
    fn check_running(&mut self) -> Result<(), ClusterError> {
        if let Some(c) = self.child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            self.child = None;
            let text = fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
            return Err(ClusterError::Died { what: self.name.clone(), status, log: self.log.clone(), tail });
        }
        Ok(())
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(c) = &self.child {
            // SAFETY: plain syscall on our own child's pid.
            unsafe {
                libc::kill(c.id() as libc::pid_t, sig);
            }
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    fn stop(&mut self, grace: Duration) {
        self.signal(libc::SIGTERM);
        let Some(mut c) = self.child.take() else { return };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

pub struct LocalCluster {
    spec: ClusterSpec,
    /// Arguments every node gets besides its own addresses and disks.
    node_common: Vec<String>,
    meta: Daemon,
    meta_addr: String,
    nodes: Vec<Daemon>,
    node_addrs: Vec<String>,
    /// `/metrics` addresses: the metadata service's, then each node's.
    metrics_addrs: Vec<String>,
    /// The maintenance supervisor (`dingo maintain`), if started.
    maintainer: Option<Daemon>,
    credentials: Provisioned,
}

/// Port `base + offset`, or a free port if `base` is 0.
fn port(base: u16, offset: usize) -> Result<u16, ClusterError> {
    if base != 0 {
        return u16::try_from(usize::from(base) + offset)
            .map_err(|_| ClusterError::Port(std::io::Error::other("port number beyond 65535")));
    }
    free_port()
}

/// The first port of the kernel's ephemeral range (Linux's default if
/// unknown).
fn ephemeral_port_start() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Lowest port [`free_port`] hands out.
const FIRST_FREE_PORT: u16 = 10_000;

/// A port nothing listens on, for a daemon to bind a moment later.
///
/// Every port of a cluster is chosen before its daemons start, and the
/// daemons connect to each other while starting: a port the kernel picked
/// (`bind` to port 0) lies in its ephemeral range, where one of those
/// outgoing connections could take it before its daemon binds it ("address
/// already in use"). So ports come from below the ephemeral range, in turn
/// from a per-process starting point, so that concurrent clusters of one
/// process never share one and other processes rarely do.
fn free_port() -> Result<u16, ClusterError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(ephemeral_port_start().saturating_sub(FIRST_FREE_PORT));
    if span < 1024 {
        // No room below the ephemeral range: let the kernel choose.
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(ClusterError::Port)?;
        return Ok(l.local_addr().map_err(ClusterError::Port)?.port());
    }
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let candidate = FIRST_FREE_PORT + offset as u16;
        if std::net::TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            return Ok(candidate);
        }
    }
    Err(ClusterError::Port(std::io::Error::other("no free port below the ephemeral range")))
}

impl LocalCluster {
    /// Starts the metadata service, waits for it to listen, then starts the
    /// nodes. Call [`LocalCluster::wait_ready`] before using the cluster.
    pub fn start(spec: ClusterSpec) -> Result<Self, ClusterError> {
        let mkdir =
            |p: &Path| fs::create_dir_all(p).map_err(|source| ClusterError::Prepare { path: p.to_path_buf(), source });
        let logs = spec.data.join("logs");
        mkdir(&logs)?;
        let meta_dir = spec.data.join("meta");
        mkdir(&meta_dir)?;
        let credentials = security::provision(&spec.data, spec.tls)?;
        let meta_addr = format!("127.0.0.1:{}", port(spec.base_port, 0)?);
        let metrics_addrs = vec![format!("127.0.0.1:{}", port(spec.base_port, 1)?)];
        let mut meta_args: Vec<String> = vec![
            "meta".into(),
            "--data".into(),
            meta_dir.display().to_string(),
            "--listen".into(),
            meta_addr.clone(),
            "--metrics".into(),
            metrics_addrs[0].clone(),
        ];
        meta_args.extend(credentials.secret_args());
        meta_args.extend(credentials.serve_args());
        let mut node_common = vec!["--meta".into(), meta_addr.clone()];
        node_common.extend(credentials.caller_args());
        node_common.extend(credentials.serve_args());
        if let Some(c) = &spec.config {
            meta_args.extend(["--config".into(), c.display().to_string()]);
            node_common.extend(["--config".into(), c.display().to_string()]);
        }
        node_common.extend(spec.node_args.iter().cloned());
        let meta = Daemon { name: "metadata service".into(), args: meta_args, log: logs.join("meta.log"), child: None };
        let mut cluster = LocalCluster {
            node_common,
            meta,
            meta_addr,
            nodes: Vec::new(),
            node_addrs: Vec::new(),
            metrics_addrs,
            spec,
            maintainer: None,
            credentials,
        };
        for _ in 0..cluster.spec.nodes {
            cluster.define_node(cluster.spec.disks_per_node)?;
        }
        cluster.start_meta()?;
        for i in 0..cluster.nodes.len() {
            cluster.start_node(i)?;
        }
        Ok(cluster)
    }

    /// Sets up (does not start) node `i = self.nodes.len()` with `disks`
    /// fresh disk directories `node<i>/disk<j>`; returns `i`.
    fn define_node(&mut self, disks: u32) -> Result<usize, ClusterError> {
        let i = self.nodes.len();
        let addr = format!("127.0.0.1:{}", port(self.spec.base_port, 10 + 2 * i)?);
        let metrics = format!("127.0.0.1:{}", port(self.spec.base_port, 11 + 2 * i)?);
        let mut args: Vec<String> =
            vec!["node".into(), "--listen".into(), addr.clone(), "--metrics".into(), metrics.clone()];
        for d in 0..disks {
            args.extend(["--disk".into(), self.spec.data.join(format!("node{i}/disk{d}")).display().to_string()]);
        }
        args.extend(self.node_common.iter().cloned());
        let log = self.spec.data.join("logs").join(format!("node{i}.log"));
        self.nodes.push(Daemon { name: format!("node {i}"), args, log, child: None });
        self.node_addrs.push(addr);
        self.metrics_addrs.push(metrics);
        Ok(i)
    }

    /// Starts one more node, with `disks_per_node` fresh disk directories
    /// and the same settings as the others (config, extra arguments such as
    /// HDD emulation); returns its index. Wait with
    /// [`LocalCluster::wait_ready`] before placing data on it.
    pub fn add_node(&mut self, disks_per_node: u32) -> Result<usize, ClusterError> {
        let i = self.define_node(disks_per_node)?;
        self.start_node(i)?;
        Ok(i)
    }

    /// Number of nodes defined (running or not).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The metadata service's id of node `i` (known once it registered),
    /// e.g. for [`Client::mark_node_dead`] after [`LocalCluster::kill_node`].
    pub async fn node_id(&self, i: usize) -> Result<u32, ClusterError> {
        let fail = |e: String| ClusterError::Status(format!("cluster status from {}: {e}", self.meta_addr));
        let status = self.client().map_err(|e| fail(e.to_string()))?.cluster_status().await;
        let status = status.map_err(|e| fail(e.to_string()))?;
        status
            .nodes
            .iter()
            .find(|n| n.addr == self.node_addrs[i])
            .map(|n| n.id)
            .ok_or_else(|| fail(format!("node {i} ({}) has not registered", self.node_addrs[i])))
    }

    pub fn meta_addr(&self) -> &str {
        &self.meta_addr
    }

    /// A client of this cluster, with its credentials.
    pub fn client(&self) -> Result<Client, ClientError> {
        Client::new(&self.meta_addr, &self.credentials.access)
    }

    /// The cluster's credentials: the secret's file (and the authority
    /// with TLS), for callers in other processes.
    pub fn credentials(&self) -> &Provisioned {
        &self.credentials
    }

    pub fn node_addr(&self, i: usize) -> &str {
        &self.node_addrs[i]
    }

    /// `/metrics` address of the metadata service (`None`) or of node `i`.
    pub fn metrics_addr(&self, node: Option<usize>) -> &str {
        &self.metrics_addrs[node.map_or(0, |i| i + 1)]
    }

    pub fn data_dir(&self) -> &Path {
        &self.spec.data
    }

    pub fn log_dir(&self) -> PathBuf {
        self.spec.data.join("logs")
    }

    /// Starts the metadata service and waits until it listens.
    pub fn start_meta(&mut self) -> Result<(), ClusterError> {
        let addr_file = self.spec.data.join("meta/meta.addr");
        let _ = fs::remove_file(&addr_file);
        self.meta.start(&self.spec.exe)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !addr_file.exists() {
            self.meta.check_running()?;
            if Instant::now() > deadline {
                return Err(ClusterError::Timeout(
                    Duration::from_secs(30),
                    "metadata service did not start listening".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    pub fn start_node(&mut self, i: usize) -> Result<(), ClusterError> {
        self.nodes[i].start(&self.spec.exe)
    }

    /// SIGKILLs node `i`: a crash, with no chance to clean up.
    pub fn kill_node(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Process id of node `i`, while it runs (for the kernel's per-process
    /// IO counters in `/proc/PID/io`).
    pub fn node_pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].child.as_ref().map(Child::id)
    }

    /// Starts the maintenance supervisor (`dingo maintain`) against this
    /// cluster, its state in `DATA/maintain.json`, its log in
    /// `DATA/logs/maintain.log`; `args` are further options (e.g.
    /// `--interval 1s`, `--planner ADDR`).
    pub fn start_maintainer(&mut self, args: &[String]) -> Result<(), ClusterError> {
        let mut all: Vec<String> = vec![
            "maintain".into(),
            "--meta".into(),
            self.meta_addr.clone(),
            "--state".into(),
            self.spec.data.join("maintain.json").display().to_string(),
        ];
        all.extend(self.credentials.caller_args());
        all.extend(args.iter().cloned());
        let log = self.spec.data.join("logs").join("maintain.log");
        let mut d = Daemon { name: "maintenance supervisor".into(), args: all, log, child: None };
        d.start(&self.spec.exe)?;
        self.maintainer = Some(d);
        Ok(())
    }

    /// Sends `sig` to node `i` (e.g. `SIGSTOP`/`SIGCONT`: a hung process),
    /// if it runs.
    pub fn signal_node(&self, i: usize, sig: libc::c_int) {
        self.nodes[i].signal(sig);
    }

    /// Sends `sig` to the metadata service, if it runs.
    pub fn signal_meta(&self, sig: libc::c_int) {
        self.meta.signal(sig);
    }

    /// Whether node `i` was started and has not been killed (it may have
    /// exited on its own since: see [`LocalCluster::check_running`]).
    pub fn node_started(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// Disk directory `d` of node `i` (`DATA/node<i>/disk<d>`).
    pub fn disk_dir(&self, i: usize, d: u32) -> PathBuf {
        self.spec.data.join(format!("node{i}/disk{d}"))
    }

    /// SIGKILLs the maintenance supervisor, if started.
    pub fn kill_maintainer(&mut self) {
        if let Some(m) = &mut self.maintainer {
            m.kill();
        }
    }

    /// Starts the maintenance supervisor again with the arguments of
    /// [`LocalCluster::start_maintainer`] (killing it first if it runs).
    pub fn restart_maintainer(&mut self) -> Result<(), ClusterError> {
        let exe = self.spec.exe.clone();
        match &mut self.maintainer {
            Some(m) => {
                m.kill();
                m.start(&exe)
            }
            None => Err(ClusterError::Status("the maintenance supervisor was never started".into())),
        }
    }

    /// Process id of the metadata service, while it runs.
    pub fn meta_pid(&self) -> Option<u32> {
        self.meta.child.as_ref().map(Child::id)
    }

    /// SIGKILLs the metadata service.
    pub fn kill_meta(&mut self) {
        self.meta.kill();
    }

    /// Waits until `n` nodes are alive and every started daemon still runs.
    pub async fn wait_alive(&mut self, n: usize, timeout: Duration) -> Result<(), ClusterError> {
        let client = self.client().map_err(|e| ClusterError::Timeout(timeout, e.to_string()))?;
        let deadline = Instant::now() + timeout;
        let mut last;
        loop {
            self.meta.check_running()?;
            for d in &mut self.nodes {
                d.check_running()?;
            }
            match client.cluster_status().await {
                Ok(s) => {
                    let alive = s.nodes.iter().filter(|n| n.alive).count();
                    if alive == n {
                        return Ok(());
                    }
                    last = format!("{alive} of {n} nodes alive");
                }
                Err(e) => last = e.to_string(),
            }
            if Instant::now() > deadline {
                return Err(ClusterError::Timeout(timeout, last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every running node is alive.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), ClusterError> {
        let running = self.nodes.iter().filter(|d| d.child.is_some()).count();
        self.wait_alive(running, timeout).await
    }

    /// Reports daemons that exited on their own, as errors.
    pub fn check_running(&mut self) -> Vec<ClusterError> {
        let mut out = Vec::new();
        out.extend(self.meta.check_running().err());
        out.extend(self.nodes.iter_mut().filter_map(|d| d.check_running().err()));
        out.extend(self.maintainer.iter_mut().filter_map(|d| d.check_running().err()));
        out
    }

    /// Stops nodes, then the metadata service: SIGTERM, SIGKILL after a grace period.
    pub fn stop(&mut self) {
        if let Some(m) = &mut self.maintainer {
            m.stop(Duration::from_secs(5));
        }
        for d in &self.nodes {
            d.signal(libc::SIGTERM);
        }
        for d in &mut self.nodes {
            d.stop(Duration::from_secs(5));
        }
        self.meta.stop(Duration::from_secs(5));
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "a process never hands out a port twice in a row");
        let ephemeral_start = ephemeral_port_start();
        for port in ports {
            if ephemeral_start >= FIRST_FREE_PORT + 1024 {
                assert!((FIRST_FREE_PORT..ephemeral_start).contains(&port), "{port}");
            }
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("free port is bindable");
        }
    }
}
