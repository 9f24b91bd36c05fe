//! Serves the runtime's metrics in Prometheus' text format on `/metrics`,
//! from a hyper server on numa_rt, through the `prometheus-client` crate.
//!
//! ```text
//! cargo run --release --features hyper --example metrics_exporter -- 9000
//! curl http://127.0.0.1:9000/metrics
//! curl http://127.0.0.1:9000/work     # some load, so the figures move
//!
//! cargo run --features hyper --example metrics_exporter -- --once
//! ```
//!
//! `--once` starts the server on a free port, makes some load, scrapes
//! `/metrics` once over a plain socket, prints what it got and exits.
//!
//! What to watch (docs/guide.md's "Metrics" section says more):
//! - `rate(numa_rt_proc_busy_seconds_total[1m])`: each P's busy ratio. P's
//!   near 1 all the time: the runtime needs more processors; all far below
//!   1 at peak: `max_procs` can shrink.
//! - `numa_rt_proc_poll_time_seconds`: the poll-time histogram. Polls in
//!   the millisecond buckets are tasks that block their thread.
//! - `numa_rt_node_spurious_wakeups_total / numa_rt_node_unparks_total`:
//!   wake-ups that bought nothing.
//! - `numa_rt_proc_watch_unhostings_total` growing as fast as
//!   `numa_rt_proc_watch_hostings_total` under steady load: the node's watch
//!   keeps moving between pollers, two `epoll_ctl`s each time.

use std::convert::Infallible;
use std::fmt::Error as FmtError;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use numa_rt::metrics::{HistogramConfig, RuntimeMetrics};
use numa_rt::net::TcpListener;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Reads the runtime's counters at each scrape (no copy kept between
/// scrapes: the counters are per-P cells read with relaxed loads).
#[derive(Debug)]
struct RuntimeCollector {
    metrics: RuntimeMetrics,
}

type Labels = Vec<(&'static str, String)>;

/// One metric family: a name, a help line, and one sample per label set.
fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels, M)>,
) -> Result<(), FmtError> {
    let mut samples = samples.into_iter().peekable();
    let Some((_, first)) = samples.peek() else {
        return Ok(());
    };
    let mut metric = enc.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, m) in samples {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn seconds(d: Duration) -> ConstCounter<f64> {
    ConstCounter::new(d.as_secs_f64())
}

fn gauge(v: usize) -> ConstGauge<i64> {
    ConstGauge::new(v as i64)
}

impl Collector for RuntimeCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), FmtError> {
        let m = &self.metrics;
        let procs = m.procs();
        let nodes: Vec<_> = (0..m.num_nodes()).map(|n| m.node(n)).collect();
        let none = || Vec::new();
        let p_labels = |p: &numa_rt::metrics::ProcMetrics| {
            vec![("proc", p.index.to_string()), ("node", p.node.to_string())]
        };
        let n_labels = |n: &numa_rt::metrics::NodeMetrics| vec![("node", n.node.to_string())];

        // Runtime-wide.
        family(
            &mut enc,
            "numa_rt_procs",
            "Processors (P's).",
            [(none(), gauge(m.num_procs()))],
        )?;
        family(
            &mut enc,
            "numa_rt_uptime_seconds",
            "Time since the runtime was built.",
            [(none(), ConstGauge::new(m.uptime().as_secs_f64()))],
        )?;
        family(
            &mut enc,
            "numa_rt_live_tasks",
            "Live Send tasks.",
            [(none(), gauge(m.live_tasks()))],
        )?;
        family(
            &mut enc,
            "numa_rt_global_queue_depth",
            "Tasks in the nodes' global queues.",
            [(none(), gauge(m.global_queue_depth()))],
        )?;
        family(
            &mut enc,
            "numa_rt_blocking_threads",
            "Threads of the blocking pool.",
            [(none(), gauge(m.blocking_threads()))],
        )?;
        family(
            &mut enc,
            "numa_rt_blocking_queue_depth",
            "Closures waiting for a blocking thread.",
            [(none(), gauge(m.blocking_queue_depth()))],
        )?;
        family(
            &mut enc,
            "numa_rt_machines",
            "Worker threads (M's) alive.",
            [(none(), gauge(m.num_machines()))],
        )?;

        // Per processor.
        family(
            &mut enc,
            "numa_rt_proc_busy_seconds",
            "Time the P spent running tasks; its rate is the busy ratio.",
            procs
                .iter()
                .map(|p| (p_labels(p), seconds(p.busy_duration))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_polls",
            "Task polls.",
            procs.iter().map(|p| (p_labels(p), counter(p.tasks_polled))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_mean_poll_time_seconds",
            "Mean poll time (moving average).",
            procs
                .iter()
                .map(|p| (p_labels(p), ConstGauge::new(p.mean_poll_time.as_secs_f64()))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_steals",
            "Tasks stolen by this P.",
            procs.iter().map(|p| (p_labels(p), counter(p.tasks_stolen))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_migrated_polls",
            "Polls of a task whose previous poll ran on another P.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.migrated_polls))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_io_sources",
            "I/O sources registered in this P's poller.",
            procs
                .iter()
                .map(|p| (p_labels(p), ConstGauge::new(p.io_sources as i64))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_remote_steals",
            "Steals from another node.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.remote_steals))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_parks",
            "Times the P's thread parked.",
            procs.iter().map(|p| (p_labels(p), counter(p.parks))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_unparks",
            "Times the P's thread was woken for work.",
            procs.iter().map(|p| (p_labels(p), counter(p.unparks))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_spurious_wakeups",
            "Wake-ups that found nothing to run.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.spurious_wakeups))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_unpark_latency_seconds",
            "Time from an unpark of a parked thread to it running again, summed.",
            procs
                .iter()
                .map(|p| (p_labels(p), seconds(p.unpark_latency_sum))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_unpark_latency_count",
            "Wake-ups timed in numa_rt_proc_unpark_latency_seconds.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.unpark_latency_count))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_watch_hostings",
            "Times the P's io poller took its node's watch epoll in.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.watch_hostings))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_watch_unhostings",
            "Times the P's io poller gave the watch back (churn if it keeps pace with hostings).",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.watch_unhostings))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_watch_releases",
            "Give-backs of the watch forced by the monitor (the hosting M stayed out of its park).",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.watch_releases))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_budget_forced_yields",
            "Polls ended by the cooperative budget.",
            procs
                .iter()
                .map(|p| (p_labels(p), counter(p.budget_forced_yields))),
        )?;
        family(
            &mut enc,
            "numa_rt_proc_local_queue_depth",
            "Tasks in the P's run queue.",
            procs
                .iter()
                .map(|p| (p_labels(p), gauge(p.local_queue_depth))),
        )?;
        if m.poll_time_histogram_buckets() > 0 {
            let mut metric = enc.encode_descriptor(
                "numa_rt_proc_poll_time_seconds",
                "Task poll times.",
                None,
                MetricType::Histogram,
            )?;
            for p in &procs {
                let buckets: Vec<(f64, u64)> = p
                    .poll_time_histogram
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let end = m.poll_time_histogram_bucket_range(i).end;
                        let le = if end == Duration::MAX {
                            f64::MAX
                        } else {
                            end.as_secs_f64()
                        };
                        (le, n)
                    })
                    .collect();
                let count = p.poll_time_histogram.iter().sum();
                let labels = p_labels(p);
                metric
                    .encode_family(&labels)?
                    .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                        p.total_poll_time.as_secs_f64(),
                        count,
                        &buckets,
                        None,
                    )?;
            }
        }

        // Per node.
        family(
            &mut enc,
            "numa_rt_node_busy_seconds",
            "Busy time summed over the node's P's.",
            nodes
                .iter()
                .map(|n| (n_labels(n), seconds(n.busy_duration))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_polls",
            "Task polls on the node.",
            nodes.iter().map(|n| (n_labels(n), counter(n.tasks_polled))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_parks",
            "Parks of the node's threads.",
            nodes.iter().map(|n| (n_labels(n), counter(n.parks))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_unparks",
            "Unparks of the node's threads.",
            nodes.iter().map(|n| (n_labels(n), counter(n.unparks))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_spurious_wakeups",
            "Wake-ups of the node's threads that found nothing.",
            nodes
                .iter()
                .map(|n| (n_labels(n), counter(n.spurious_wakeups))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_remote_steals",
            "Steals by the node's P's from other nodes.",
            nodes
                .iter()
                .map(|n| (n_labels(n), counter(n.remote_steals))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_queue_depth",
            "Tasks in the node's global queue.",
            nodes.iter().map(|n| (n_labels(n), gauge(n.queue_depth))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_idle_procs",
            "Idle P's of the node.",
            nodes.iter().map(|n| (n_labels(n), gauge(n.idle_procs))),
        )?;
        family(
            &mut enc,
            "numa_rt_node_spinning_threads",
            "Threads of the node looking for work.",
            nodes
                .iter()
                .map(|n| (n_labels(n), gauge(n.spinning_machines))),
        )?;
        Ok(())
    }
}

/// Some work for the figures to show: 64 tasks, each a few yields.
async fn work() -> usize {
    let hs: Vec<_> = (0..64)
        .map(|i| {
            numa_rt::spawn(async move {
                for _ in 0..8 {
                    numa_rt::task::yield_now().await;
                }
                i
            })
        })
        .collect();
    let mut sum = 0;
    for h in hs {
        sum += h.await.unwrap_or(0);
    }
    sum
}

async fn serve(
    registry: &Registry,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status, content_type, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(hyper::header::CONTENT_TYPE, content_type);
        Ok(r)
    };
    let text = hyper::header::HeaderValue::from_static("text/plain; charset=utf-8");
    match req.uri().path() {
        "/metrics" => {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => reply(
                    StatusCode::OK,
                    hyper::header::HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                    body,
                ),
                Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, text, format!("{e}\n")),
            }
        }
        "/work" => reply(StatusCode::OK, text, format!("{}\n", work().await)),
        _ => reply(
            StatusCode::NOT_FOUND,
            text,
            "try /metrics or /work\n".into(),
        ),
    }
}

/// One GET over a plain socket (the example needs no HTTP client).
async fn scrape(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use futures::{AsyncReadExt, AsyncWriteExt};
    let mut s = numa_rt::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

fn main() -> std::io::Result<()> {
    let once = std::env::args().nth(1).as_deref() == Some("--once");
    let port: u16 = match std::env::args().nth(1) {
        _ if once => 0,
        Some(p) => p.parse().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("port {p:?}: {e}"))
        })?,
        None => 9000,
    };
    let rt = numa_rt::Builder::new()
        // 1 µs, 2 µs, 4 µs, … 16.8 ms and over: fine where polls are, wide
        // where the blocking ones hide.
        .poll_time_histogram(HistogramConfig::log(Duration::from_micros(1), 16))
        .build()?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(RuntimeCollector {
        metrics: rt.metrics(),
    }));
    let registry = std::sync::Arc::new(registry);

    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        println!("metrics on http://{addr}/metrics");
        let server = numa_rt::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let registry = registry.clone();
                numa_rt::spawn(async move {
                    let svc = service_fn(move |req| {
                        let registry = registry.clone();
                        async move { serve(&registry, req).await }
                    });
                    let _ = http1::Builder::new()
                        .timer(numa_rt::hyper::Timer)
                        .serve_connection(numa_rt::hyper::Io::new(stream), svc)
                        .await;
                });
            }
        });
        if once {
            scrape(addr, "/work").await?;
            let reply = scrape(addr, "/metrics").await?;
            let body = reply.split("\r\n\r\n").nth(1).unwrap_or(&reply);
            print!("{body}");
            if !body.contains("numa_rt_proc_busy_seconds_total") {
                return Err(std::io::Error::other("the scrape has no busy time"));
            }
            server.abort();
            return Ok(());
        }
        server.await.map_err(std::io::Error::from)
    })
}
