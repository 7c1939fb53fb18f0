//! Process-wide settings and signals every daemon's `main` uses.

/// Keeps freed memory in the process. Storage daemons and clients allocate
/// and free multi-megabyte buffers (gRPC messages) at a high rate; glibc's
/// defaults hand such memory back to the kernel at once (a fresh `mmap` per
/// large allocation, heap trimming), so every new buffer faults in and zeroes
/// fresh pages — a large share of the CPU time of bulk transfers on loopback.
/// Call it first; process-wide.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; 32 MiB is glibc's
    // largest mmap threshold.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Logs to stderr at the level `DINGO_LOG` (or `RUST_LOG`) sets, e.g.
/// `debug` or `info,dingo_meta=debug`; by default `info` with the gRPC
/// stack's chatter at `warn`. Colour only on a terminal, so log files (the
/// daemons' stderr under `cluster up`) stay plain text. Call once.
pub fn init_logging() {
    let filter = std::env::var("DINGO_LOG")
        .ok()
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .or_else(|| tracing_subscriber::EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| "info,h2=warn,tower=warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
