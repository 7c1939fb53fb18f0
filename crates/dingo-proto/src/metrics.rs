//! Prometheus text exposition and the minimal HTTP/1.1 server every daemon
//! runs for `GET /metrics`. Hand-written: one route, one response per
//! connection, no need for a web framework.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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

/// Binds `addr` and serves `GET /metrics` until the task is dropped.
/// Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr, render: Render) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { continue };
            let render = render.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut n = 0;
                // Read the request head; bounded so a slow client cannot hold memory.
                while n < buf.len() {
                    match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf[n..])).await {
                        Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                        Ok(Ok(k)) => n += k,
                    }
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let head = String::from_utf8_lossy(&buf[..n]);
                let path = head.split_whitespace().nth(1).unwrap_or("");
                let (status, body) =
                    if head.starts_with("GET ") && (path == "/metrics" || path.starts_with("/metrics?")) {
                        ("200 OK", render())
                    } else {
                        ("404 Not Found", "only GET /metrics is served\n".to_string())
                    };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok((local, task))
}

/// Fetches the metrics page served at `addr` (`host:port`): the body of
/// `GET /metrics`.
pub async fn scrape(addr: &str) -> std::io::Result<String> {
    use tokio::io::AsyncWriteExt;
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    sock.write_all(b"GET /metrics HTTP/1.1\r\nHost: dingo\r\nConnection: close\r\n\r\n").await?;
    let mut raw = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), sock.read_to_end(&mut raw))
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
    async fn serves_metrics_over_http() {
        let render: Render = Arc::new(|| "dingo_up 1\n".to_string());
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), render).await.unwrap();
        assert_eq!(scrape(&addr.to_string()).await.unwrap(), "dingo_up 1\n");
        task.abort();
    }
}
