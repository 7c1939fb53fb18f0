//! Prometheus text exposition, and the HTTP endpoint every daemon serves it
//! at: `GET /metrics` (axum), each page rendered by a closure on request.

use crate::listener::LimitedListener;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Open connections the endpoint serves at once; more wait to be accepted.
/// A scraper or two, and an operator's curl, need far fewer.
pub const MAX_CONNECTIONS: usize = 32;
/// How long one connection may stay open: a page takes milliseconds, and a
/// scraper that keeps its connection alive between scrapes reconnects.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10);

/// Builds a Prometheus text-format page. Each metric family is announced once
/// with its `# HELP` and `# TYPE` lines before its samples.
#[derive(Default)]
pub struct MetricsText {
    out: String,
}

impl MetricsText {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a family; `kind` is `counter` or `gauge`.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample; `labels` are `(name, value)` pairs.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let v = v.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = write!(self.out, "{sep}{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
        self
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Renders the current metrics page.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Binds `addr` and serves `GET /metrics` until the task is dropped, with
/// at most [`MAX_CONNECTIONS`] connections open, each for at most
/// [`CONNECTION_LIFETIME`]. Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr, render: Render) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_limited(addr, render, MAX_CONNECTIONS, CONNECTION_LIFETIME).await
}

async fn serve_limited(
    addr: SocketAddr,
    render: Render,
    max_connections: usize,
    lifetime: Duration,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let page = move || {
        let render = render.clone();
        async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], render()) }
    };
    let app = Router::new()
        .route("/metrics", get(page))
        .fallback(|| async { (StatusCode::NOT_FOUND, "only GET /metrics is served\n") });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(LimitedListener::new(listener, max_connections, lifetime), app).await {
            tracing::warn!("metrics endpoint stopped: {e}");
        }
    });
    Ok((local, task))
}

/// Fetches the metrics page served at `addr` (`host:port`): the body of
/// `GET /metrics`. A one-request client for tests and experiments; it asks
/// the server to close the connection, so the body is the rest of the stream.
pub async fn scrape(addr: &str) -> std::io::Result<String> {
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    sock.write_all(b"GET /metrics HTTP/1.1\r\nHost: dingo\r\nConnection: close\r\n\r\n").await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut raw))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no metrics from {addr}")))??;
    let text = String::from_utf8_lossy(&raw);
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(std::io::Error::other(format!("bad metrics response from {addr}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_help_type_and_escaped_labels() {
        let mut m = MetricsText::new();
        m.family("dingo_x_total", "counter", "Things.").sample("dingo_x_total", &[("disk", "a\"b")], 3);
        let s = m.finish();
        assert_eq!(s, "# HELP dingo_x_total Things.\n# TYPE dingo_x_total counter\ndingo_x_total{disk=\"a\\\"b\"} 3\n");
    }

    #[tokio::test]
    async fn serves_metrics_over_http_and_nothing_else() {
        let render: Render = Arc::new(|| "dingo_up 1\n".to_string());
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), render).await.unwrap();
        assert_eq!(scrape(&addr.to_string()).await.unwrap(), "dingo_up 1\n");
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /other HTTP/1.1\r\nHost: dingo\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut raw = String::new();
        sock.read_to_string(&mut raw).await.unwrap();
        assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
        task.abort();
    }

    /// Regression: the endpoint accepted any number of connections; a
    /// client holding the only slot now keeps a second one waiting.
    #[tokio::test]
    async fn a_full_endpoint_makes_the_next_scrape_wait() {
        let render: Render = Arc::new(|| "dingo_up 1\n".to_string());
        let (addr, task) =
            serve_limited("127.0.0.1:0".parse().unwrap(), render, 1, Duration::from_secs(60)).await.unwrap();
        let idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(300), scrape(&addr.to_string())).await;
        assert!(waiting.is_err(), "a second connection was served past the limit of 1");
        drop(idle);
        assert_eq!(scrape(&addr.to_string()).await.unwrap(), "dingo_up 1\n");
        task.abort();
    }

    /// Regression: with no timeout on reading a request, clients that
    /// connect and send nothing would hold every slot for good.
    #[tokio::test]
    async fn an_idle_connection_gives_up_its_slot_after_its_lifetime() {
        let render: Render = Arc::new(|| "dingo_up 1\n".to_string());
        let lifetime = Duration::from_millis(300);
        let (addr, task) = serve_limited("127.0.0.1:0".parse().unwrap(), render, 1, lifetime).await.unwrap();
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let start = std::time::Instant::now();
        let scraped = tokio::time::timeout(Duration::from_secs(5), scrape(&addr.to_string())).await;
        assert_eq!(scraped.expect("the idle connection kept the only slot").unwrap(), "dingo_up 1\n");
        assert!(start.elapsed() >= lifetime / 2, "served before the idle connection's lifetime was over");
        let mut rest = Vec::new();
        assert_eq!(idle.read_to_end(&mut rest).await.unwrap(), 0, "the idle connection was closed");
        task.abort();
    }
}
