//! The `/metrics` page every daemon serves: Prometheus text (format 0.0.4)
//! encoded by `prometheus-client`, over HTTP (axum) at `GET /metrics`.
//!
//! The daemons' figures already live in their state (atomics, stats
//! replies, the planner's published view), so each daemon hands [`registry`]
//! one function that writes them onto a [`Page`] at scrape time (a
//! `prometheus-client` collector), instead of mirroring every value into a
//! second set of metric objects. The text format (not OpenMetrics) keeps the
//! page as it was: no `# EOF` line, and the content type scrapers and the
//! tests already read.

use crate::listener::LimitedListener;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
    prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
pub use prometheus_client::registry::Registry;
use std::fmt;
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

/// The metric families of one scrape. Each call announces a family (its
/// `# HELP` and `# TYPE` lines) and writes its samples; `name` is the name
/// on the page, a counter's with its `_total` suffix (which
/// `prometheus-client` adds itself, so it is taken off here).
pub struct Page<'a> {
    encoder: DescriptorEncoder<'a>,
}

impl Page<'_> {
    /// A counter family, one sample per label set.
    pub fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        self.family(
            counter_base(name),
            help,
            MetricType::Counter,
            samples.into_iter().map(|(l, v)| (l, ConstCounter::new(v))),
        )
    }

    /// A counter without labels.
    pub fn counter(&mut self, name: &str, help: &str, value: impl EncodeCounterValue) -> fmt::Result {
        let family = self.encoder.encode_descriptor(counter_base(name), help, None, MetricType::Counter)?;
        ConstCounter::new(value).encode(family)
    }

    /// A gauge family, one sample per label set.
    pub fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        self.family(name, help, MetricType::Gauge, samples.into_iter().map(|(l, v)| (l, ConstGauge::new(v))))
    }

    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl EncodeGaugeValue) -> fmt::Result {
        let family = self.encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(value).encode(family)
    }

    /// A histogram family, one histogram per label set.
    pub fn histograms<L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, Histogram)>,
    ) -> fmt::Result {
        self.family(name, help, MetricType::Histogram, samples.into_iter())
    }

    fn family<L: EncodeLabelSet, M: EncodeMetric>(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        samples: impl Iterator<Item = (L, M)>,
    ) -> fmt::Result {
        let mut family = self.encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, metric) in samples {
            metric.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// A histogram read at scrape time from counts kept elsewhere.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Sum of the observed values.
    pub sum: f64,
    /// Observations, including those above the last bound (the `+Inf`
    /// bucket, which the encoder adds).
    pub count: u64,
    /// `(upper bound, observations in this bucket alone)`, bounds rising;
    /// the page shows the cumulative counts.
    pub buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A counter's name without the `_total` the encoder appends.
fn counter_base(name: &str) -> &str {
    debug_assert!(name.ends_with("_total"), "counter {name} is exposed without _total");
    name.strip_suffix("_total").unwrap_or(name)
}

/// Writes a daemon's figures onto the page, on each scrape.
type Scrape = dyn Fn(&mut Page<'_>) -> fmt::Result + Send + Sync;

/// The collector behind [`registry`]: it holds the daemon's scrape function.
struct ScrapeCollector(Box<Scrape>);

impl fmt::Debug for ScrapeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScrapeCollector")
    }
}

impl Collector for ScrapeCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        (self.0)(&mut Page { encoder })
    }
}

/// A registry whose page `scrape` writes, from the daemon's state, each
/// time it is encoded.
pub fn registry(scrape: impl Fn(&mut Page<'_>) -> fmt::Result + Send + Sync + 'static) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ScrapeCollector(Box::new(scrape))));
    registry
}

/// The page of `registry` in the Prometheus text format (0.0.4). Writing
/// to a `String` fails only if a collector fails.
pub fn encode(registry: &Registry) -> Result<String, fmt::Error> {
    let mut page = String::new();
    prometheus_text::encode(&mut page, registry)?;
    Ok(page)
}

/// Binds `addr` and serves `GET /metrics` until the task is dropped, with
/// at most [`MAX_CONNECTIONS`] connections open, each for at most
/// [`CONNECTION_LIFETIME`]. Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr, registry: Registry) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_limited(addr, registry, MAX_CONNECTIONS, CONNECTION_LIFETIME).await
}

async fn serve_limited(
    addr: SocketAddr,
    registry: Registry,
    max_connections: usize,
    lifetime: Duration,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let registry = Arc::new(registry);
    let page = move || {
        let registry = registry.clone();
        async move {
            match encode(&registry) {
                Ok(page) => (StatusCode::OK, [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)], page),
                Err(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    [(header::CONTENT_TYPE, "text/plain")],
                    "the metrics page could not be written\n".to_string(),
                ),
            }
        }
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

    fn up() -> Registry {
        registry(|page| page.gauge("dingo_up", "1 while the daemon runs.", 1))
    }

    const UP: &str = "# HELP dingo_up 1 while the daemon runs.\n# TYPE dingo_up gauge\ndingo_up 1\n";

    /// The page keeps the names and shape of the hand-written encoder it
    /// replaced: counters announced under their `_total` name, labels
    /// escaped, an empty family still announced, no OpenMetrics `# EOF`.
    #[test]
    fn families_are_announced_once_with_their_samples() {
        let page = encode(&registry(|page| {
            page.counters("dingo_x_total", "Things.", [([("disk", "a\"b")], 3u64), ([("disk", "c")], 4)])?;
            page.counter("dingo_y_total", "Others.", 5u64)?;
            page.gauges("dingo_ratio", "A ratio.", [([("disk", "1"), ("class", "scrub")], 0.5f64)])?;
            page.gauges("dingo_empty", "Nothing yet.", std::iter::empty::<([(&str, &str); 1], u64)>())?;
            page.gauge("dingo_n", "A count.", 7usize)?;
            let waits = Histogram { sum: 1.5, count: 4, buckets: vec![(0.001, 1), (0.5, 2)] };
            page.histograms("dingo_wait_seconds", "Waits.", [([("class", "scrub")], waits)])
        }))
        .unwrap();
        assert_eq!(
            page,
            "# HELP dingo_x_total Things.\n# TYPE dingo_x_total counter\n\
             dingo_x_total{disk=\"a\\\"b\"} 3\ndingo_x_total{disk=\"c\"} 4\n\
             # HELP dingo_y_total Others.\n# TYPE dingo_y_total counter\ndingo_y_total 5\n\
             # HELP dingo_ratio A ratio.\n# TYPE dingo_ratio gauge\ndingo_ratio{disk=\"1\",class=\"scrub\"} 0.5\n\
             # HELP dingo_empty Nothing yet.\n# TYPE dingo_empty gauge\n\
             # HELP dingo_n A count.\n# TYPE dingo_n gauge\ndingo_n 7\n\
             # HELP dingo_wait_seconds Waits.\n# TYPE dingo_wait_seconds histogram\n\
             dingo_wait_seconds_bucket{class=\"scrub\",le=\"0.001\"} 1\n\
             dingo_wait_seconds_bucket{class=\"scrub\",le=\"0.5\"} 3\n\
             dingo_wait_seconds_bucket{class=\"scrub\",le=\"+Inf\"} 4\n\
             dingo_wait_seconds_sum{class=\"scrub\"} 1.5\ndingo_wait_seconds_count{class=\"scrub\"} 4\n"
        );
    }

    #[tokio::test]
    async fn serves_metrics_over_http_and_nothing_else() {
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), up()).await.unwrap();
        assert_eq!(scrape(&addr.to_string()).await.unwrap(), UP);
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /metrics HTTP/1.1\r\nHost: dingo\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut raw = String::new();
        sock.read_to_string(&mut raw).await.unwrap();
        assert!(raw.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{raw}");
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /other HTTP/1.1\r\nHost: dingo\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut raw = String::new();
        sock.read_to_string(&mut raw).await.unwrap();
        assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
        task.abort();
    }

    /// A scrape function that fails gives a 500, not half a page.
    #[tokio::test]
    async fn a_failed_page_is_a_server_error() {
        let failing = registry(|page| {
            page.gauge("dingo_up", "Up.", 1)?;
            Err(fmt::Error)
        });
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), failing).await.unwrap();
        let err = scrape(&addr.to_string()).await.unwrap_err();
        assert!(err.to_string().contains("bad metrics response"), "{err}");
        task.abort();
    }

    /// Regression: the endpoint accepted any number of connections; a
    /// client holding the only slot now keeps a second one waiting.
    #[tokio::test]
    async fn a_full_endpoint_makes_the_next_scrape_wait() {
        let (addr, task) =
            serve_limited("127.0.0.1:0".parse().unwrap(), up(), 1, Duration::from_secs(60)).await.unwrap();
        let idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(300), scrape(&addr.to_string())).await;
        assert!(waiting.is_err(), "a second connection was served past the limit of 1");
        drop(idle);
        assert_eq!(scrape(&addr.to_string()).await.unwrap(), UP);
        task.abort();
    }

    /// Regression: with no timeout on reading a request, clients that
    /// connect and send nothing would hold every slot for good.
    #[tokio::test]
    async fn an_idle_connection_gives_up_its_slot_after_its_lifetime() {
        let lifetime = Duration::from_millis(300);
        let (addr, task) = serve_limited("127.0.0.1:0".parse().unwrap(), up(), 1, lifetime).await.unwrap();
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let start = std::time::Instant::now();
        let scraped = tokio::time::timeout(Duration::from_secs(5), scrape(&addr.to_string())).await;
        assert_eq!(scraped.expect("the idle connection kept the only slot").unwrap(), UP);
        assert!(start.elapsed() >= lifetime / 2, "served before the idle connection's lifetime was over");
        let mut rest = Vec::new();
        assert_eq!(idle.read_to_end(&mut rest).await.unwrap(), 0, "the idle connection was closed");
        task.abort();
    }
}
