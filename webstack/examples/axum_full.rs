//! A full axum app (state, tower-http trace and compression, a request
//! timeout, connect info, WebSocket and SSE routes: `numa_rt_webstack::app`)
//! served by `numa_rt::serve` with a graceful shutdown on Ctrl-C.
//!
//! ```text
//! cargo run --release -p numa_rt_webstack --example axum_full -- 3000
//! curl http://127.0.0.1:3000/json
//! ```
//!
//! On tokio the last lines would read `axum::serve(listener, app)` with
//! tokio's listener and `tokio::signal::ctrl_c`; the rest is the same.

use std::net::SocketAddr;

use numa_rt_webstack::{app, AppConfig};

#[numa_rt::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p
            .parse()
            .map_err(|e| std::io::Error::other(format!("port {p:?}: {e}")))?,
        None => 3000,
    };
    let listener = numa_rt::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let app = app(Default::default(), AppConfig::default());
    numa_rt::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = numa_rt::signal::ctrl_c().await;
    })
    .await
}
