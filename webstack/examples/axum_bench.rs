//! One axum app, two runtimes: `numa_rt::serve` on numa_rt, or
//! `axum::serve` on tokio's multi-threaded runtime, for
//! `benches/axum_wrk.py` to load side by side.
//!
//! ```text
//! cargo run --release -p numa_rt_webstack --example axum_bench -- numa_rt 3090
//! cargo run --release -p numa_rt_webstack --example axum_bench -- tokio 3091
//! ```
//!
//! The app is the same on both: `GET /plaintext` and `GET /json`
//! (TechEmpower's two simplest tests) with shared state, tower-http's trace
//! and compression layers and a 10 s request timeout (tower-http's on tokio,
//! numa_rt_util's on numa_rt: the one line that differs). Both runtimes get
//! the same worker count: `WORKERS` (default: the CPUs this process may use).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use tower_http::compression::CompressionLayer;
use tower_http::trace::TraceLayer;

const TIMEOUT: Duration = Duration::from_secs(10);

fn routes() -> Router {
    let hits = Arc::new(AtomicU64::new(0));
    Router::new()
        .route(
            "/plaintext",
            get(|State(hits): State<Arc<AtomicU64>>| async move {
                hits.fetch_add(1, Relaxed);
                "Hello, World!"
            }),
        )
        .route(
            "/json",
            get(|| async { Json(serde_json::json!({ "message": "Hello, World!" })) }),
        )
        .with_state(hits)
}

fn workers() -> usize {
    match std::env::var("WORKERS") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("WORKERS={v:?} is not a number");
            std::process::exit(2)
        }),
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let runtime = args.next().unwrap_or_default();
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(3090);
    let n = workers();
    match runtime.as_str() {
        "numa_rt" => numa_rt::Builder::new()
            .max_procs(n)
            .build()?
            .block_on(async move {
                let listener = numa_rt::net::TcpListener::bind(("127.0.0.1", port)).await?;
                let app = routes()
                    .layer(numa_rt_util::tower_http::TimeoutLayer::new(TIMEOUT))
                    .layer(CompressionLayer::new())
                    .layer(TraceLayer::new_for_http());
                numa_rt::serve(listener, app).await
            }),
        "tokio" => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?
            .block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
                #[allow(deprecated)] // `new` is tower-http 0.6's 408 answer.
                let timeout = tower_http::timeout::TimeoutLayer::new(TIMEOUT);
                let app = routes()
                    .layer(timeout)
                    .layer(CompressionLayer::new())
                    .layer(TraceLayer::new_for_http());
                // axum::serve does not set TCP_NODELAY; numa_rt::serve does.
                use axum::serve::ListenerExt;
                let listener = listener.tap_io(|s| {
                    let _ = s.set_nodelay(true);
                });
                axum::serve(listener, app).await
            }),
        other => {
            eprintln!("usage: axum_bench numa_rt|tokio [PORT] (got {other:?})");
            std::process::exit(2)
        }
    }
}
