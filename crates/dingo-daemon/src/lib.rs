//! Plumbing every DINGO daemon shares, apart from any protocol: the
//! Prometheus `/metrics` endpoint ([`metrics`]), gRPC server sockets with
//! Nagle's algorithm off ([`accept_nodelay`]), the wall clock in
//! milliseconds ([`now_ms`]), and what a daemon's `main` sets up
//! ([`init_logging`], [`keep_freed_memory`], [`shutdown_signal`]).

mod listener;
pub mod metrics;
mod process;

pub use process::{init_logging, keep_freed_memory, shutdown_signal};

use std::time::{SystemTime, UNIX_EPOCH};

/// The connections `listener` accepts, with Nagle's algorithm off, for
/// tonic's `serve_with_incoming*` (which ignores the server's own
/// `tcp_nodelay` setting). With Nagle on, a reply's last small frame waits
/// for the peer's delayed ACK: ~40 ms stalls on metadata calls and chunk
/// writes under load.
pub fn accept_nodelay(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
        let conn = conn?;
        if let Err(e) = conn.set_nodelay(true) {
            tracing::warn!("cannot turn Nagle's algorithm off on an accepted connection: {e}");
        }
        Ok(conn)
    })
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: servers fed by `serve_with_incoming` kept Nagle on.
    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        use tokio_stream::StreamExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut incoming = std::pin::pin!(accept_nodelay(listener));
        let conn = incoming.next().await.unwrap().unwrap();
        assert!(conn.nodelay().unwrap());
    }
}
