//! An axum application served on numa_rt.
//!
//! ```text
//! cargo run --features axum --example axum_app             # serve, query itself, exit
//! cargo run --features axum --example axum_app -- serve 3000
//! curl http://127.0.0.1:3000/users/7
//! ```
//!
//! `axum::serve` spawns on tokio; `numa_rt::serve` is the same call on
//! numa_rt (one root task per connection, HTTP/1 and HTTP/2). A fuller app
//! (WebSocket, SSE, tower-http layers, graceful shutdown) is
//! `webstack/examples/axum_full.rs`.
//!
//! Without arguments it serves on a free loopback port, sends itself two
//! requests with the pooled client, prints the answers, and exits (within
//! ten seconds). `serve PORT` keeps serving on 127.0.0.1:PORT.

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use numa_rt::net::TcpListener;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello from axum on numa_rt\n" }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u32>| async move {
                Json(BTreeMap::from([
                    ("id", id.to_string()),
                    ("runtime", "numa_rt".to_string()),
                ]))
            }),
        )
}

#[numa_rt::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("serve") {
        let port: u16 = match args.next() {
            Some(p) => p.parse().map_err(|e| format!("port {p:?}: {e}"))?,
            None => 3000,
        };
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("axum on numa_rt: http://{}", listener.local_addr()?);
        numa_rt::serve(listener, app()).await?;
        return Ok(());
    }

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    numa_rt::spawn(numa_rt::serve(listener, app()).into_future());
    let client: Client<_, Empty<Bytes>> =
        Client::builder(numa_rt::hyper::Executor).build(numa_rt::hyper::Connector::new());
    let run = async {
        for path in ["/", "/users/7"] {
            let res = client.get(format!("http://{addr}{path}").parse()?).await?;
            let status = res.status();
            let body = res.into_body().collect().await?.to_bytes();
            println!(
                "GET {path}: {status} {}",
                String::from_utf8_lossy(&body).trim_end()
            );
        }
        Ok::<_, Error>(())
    };
    numa_rt::time::timeout(Duration::from_secs(10), run)
        .await
        .map_err(|_| "axum_app: gave up after 10 s")?
}
