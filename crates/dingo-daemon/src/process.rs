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

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
