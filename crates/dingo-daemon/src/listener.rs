//! The `/metrics` server's listener: at most a fixed number of open
//! connections, each closed after a fixed lifetime (axum sets no timeout on
//! reading a request, so an idle client would otherwise keep its slot for
//! good), and a pause after an accept error instead of a retry loop.
//!
//! axum's own `TcpListener` listener pauses on errors too, but has no
//! connection limit; the limit has to wrap `accept`, so the error policy
//! lives here with it, where a test can feed it errors.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Wait after an accept error that is not about one connection (such as
/// EMFILE, out of file descriptors): retrying at once would spin a core
/// while the condition lasts.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Where connections come from: a TCP listener, or a test's stand-in.
pub trait Accept: Send + 'static {
    fn accept(&mut self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

impl Accept for TcpListener {
    async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        TcpListener::accept(self).await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpListener::local_addr(self)
    }
}

/// Accepts from `A` while fewer than the limit of its connections are open.
pub struct LimitedListener<A> {
    source: A,
    open: Arc<Semaphore>,
    lifetime: Duration,
}

impl<A: Accept> LimitedListener<A> {
    /// At most `max_connections` open at once, each for at most `lifetime`.
    pub fn new(source: A, max_connections: usize, lifetime: Duration) -> Self {
        LimitedListener { source, open: Arc::new(Semaphore::new(max_connections)), lifetime }
    }

    /// The next connection, once one may be opened.
    pub async fn next(&mut self) -> (LimitedStream, SocketAddr) {
        // The semaphore is never closed, so a permit always comes.
        let permit = self.open.clone().acquire_owned().await.expect("the semaphore is never closed");
        loop {
            match self.source.accept().await {
                Ok((stream, peer)) => {
                    let end = Box::pin(tokio::time::sleep(self.lifetime));
                    return (LimitedStream { stream, end, _permit: permit }, peer);
                }
                // The peer gave up while queued: nothing is wrong here.
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::warn!("metrics endpoint cannot accept a connection: {e}");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

impl<A: Accept> axum::serve::Listener for LimitedListener<A> {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.next().await
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.source.local_addr()
    }
}

/// An accepted connection; its slot frees when it is dropped. Reads and
/// writes fail once its lifetime is over, which makes the server drop it.
pub struct LimitedStream {
    stream: TcpStream,
    end: Pin<Box<tokio::time::Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl LimitedStream {
    /// An error once the lifetime is over; otherwise arranges to be woken
    /// when it ends, so that an idle connection is dropped then.
    fn check_lifetime(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.end.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(io::ErrorKind::TimedOut, "metrics connection lifetime over")),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.check_lifetime(cx)?;
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check_lifetime(cx)?;
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails with EMFILE `failures` times, then accepts from a real listener.
    struct OutOfFiles {
        failures: u32,
        calls: u32,
        real: TcpListener,
    }

    impl Accept for OutOfFiles {
        async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
            self.calls += 1;
            if self.calls <= self.failures {
                return Err(io::Error::from_raw_os_error(24));
            }
            self.real.accept().await
        }

        fn local_addr(&self) -> io::Result<SocketAddr> {
            self.real.local_addr()
        }
    }

    /// Regression: the accept loop retried at once on a persistent error
    /// such as EMFILE, spinning a core for as long as it lasted.
    #[tokio::test]
    async fn a_persistent_accept_error_pauses_between_attempts() {
        let real = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(real.local_addr().unwrap()).await.unwrap();
        let mut listener = LimitedListener::new(OutOfFiles { failures: 3, calls: 0, real }, 4, Duration::from_secs(60));
        let start = tokio::time::Instant::now();
        listener.next().await;
        assert_eq!(listener.source.calls, 4);
        assert!(start.elapsed() >= ACCEPT_ERROR_PAUSE * 3, "retried without pausing: {:?}", start.elapsed());
    }

    /// A connection past the limit waits until an open one closes.
    #[tokio::test]
    async fn connections_past_the_limit_wait_for_a_free_slot() {
        let real = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = real.local_addr().unwrap();
        let mut listener = LimitedListener::new(real, 2, Duration::from_secs(60));
        let _clients: Vec<TcpStream> = connect_clients(addr, 3).await;
        let first = listener.next().await;
        let _second = listener.next().await;
        let third = tokio::time::timeout(Duration::from_millis(200), listener.next()).await;
        assert!(third.is_err(), "a third connection was accepted past the limit of 2");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), listener.next()).await.expect("a slot freed");
    }

    async fn connect_clients(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(TcpStream::connect(addr).await.unwrap());
        }
        out
    }
}
