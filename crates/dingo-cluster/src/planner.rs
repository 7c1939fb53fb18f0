//! A `dingo planner` child process for tests and the demo: started with a
//! config file on fixed loopback ports, so that after a kill and a restart
//! its clients reconnect to the same address and find the same state.

use crate::{ClusterError, Daemon, port};
use dingo_auth::AuthSection;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to start.
#[derive(Clone, Debug)]
pub struct PlannerSpec {
    /// The `dingo` executable.
    pub exe: PathBuf,
    /// The service config (TOML); `data`, `listen` and `metrics` in it are
    /// overridden by the fields below.
    pub config: PathBuf,
    /// Directory of `planner.redb` and `planner.addr`.
    pub data: PathBuf,
    /// Log file (appended to across restarts).
    pub log: PathBuf,
    /// How the planner reaches the storage services (a local cluster's
    /// [`crate::Provisioned::auth`]); given as flags, over the config's.
    pub storage: AuthSection,
}

/// A running (or killed) planner service process.
pub struct PlannerProcess {
    spec: PlannerSpec,
    daemon: Daemon,
    addr: String,
    metrics_addr: String,
}

/// How long the planner may take to restore its state and listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

impl PlannerProcess {
    /// Picks free loopback ports, starts the planner and waits until it
    /// listens (it first loads the topology, so the metadata service must
    /// be up).
    pub fn start(spec: PlannerSpec) -> Result<Self, ClusterError> {
        fs::create_dir_all(&spec.data).map_err(|source| ClusterError::Prepare { path: spec.data.clone(), source })?;
        let addr = format!("127.0.0.1:{}", port(0, 0)?);
        let metrics_addr = format!("127.0.0.1:{}", port(0, 0)?);
        let mut args: Vec<String> = vec![
            "planner".into(),
            "--config".into(),
            spec.config.display().to_string(),
            "--data".into(),
            spec.data.display().to_string(),
            "--listen".into(),
            addr.clone(),
            "--metrics".into(),
            metrics_addr.clone(),
        ];
        args.extend(crate::security::caller_args(&spec.storage));
        let daemon = Daemon { name: "planner".into(), args, log: spec.log.clone(), child: None };
        let mut p = PlannerProcess { spec, daemon, addr, metrics_addr };
        p.restart()?;
        Ok(p)
    }

    /// gRPC address (stable across restarts).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `/metrics` address (stable across restarts).
    pub fn metrics_addr(&self) -> &str {
        &self.metrics_addr
    }

    /// SIGKILLs the planner: a crash, with no chance to clean up.
    pub fn kill(&mut self) {
        self.daemon.kill();
    }

    /// Sends `sig` to the planner (e.g. `SIGSTOP`/`SIGCONT`), if it runs.
    pub fn signal(&self, sig: libc::c_int) {
        self.daemon.signal(sig);
    }

    /// SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        self.daemon.stop(Duration::from_secs(5));
    }

    /// Starts the planner (again, after [`Self::kill`] or [`Self::stop`];
    /// kills it first if it still runs) on the same ports and data, and
    /// waits until it listens.
    pub fn restart(&mut self) -> Result<(), ClusterError> {
        self.daemon.kill();
        let addr_file = self.spec.data.join("planner.addr");
        let _ = fs::remove_file(&addr_file);
        self.daemon.start(&self.spec.exe)?;
        let deadline = Instant::now() + START_TIMEOUT;
        while !addr_file.exists() {
            self.daemon.check_running()?;
            if Instant::now() > deadline {
                return Err(ClusterError::Timeout(START_TIMEOUT, "the planner did not start listening".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Fails if the process exited on its own.
    pub fn check_running(&mut self) -> Result<(), ClusterError> {
        self.daemon.check_running()
    }
}

impl Drop for PlannerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
