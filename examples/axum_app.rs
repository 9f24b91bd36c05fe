//! An axum application served on numa_rt.
//!
//! ```text
//! cargo run --features hyper --example axum_app             # serve, query itself, exit
//! cargo run --features hyper --example axum_app -- serve 3000
//! curl http://127.0.0.1:3000/users/7
//! ```
//!
//! `axum::serve` cannot be used: it takes a `tokio::net::TcpListener` and
//! spawns on tokio. What it does is small, though: accept, then serve each
//! connection with hyper, the `Router` turned into a hyper service by
//! hyper-util's `TowerToHyperService`. This example writes that loop with
//! numa_rt's listener, spawner and timer.
//!
//! Without arguments it serves on a free loopback port, sends itself two
//! requests with the pooled client, prints the answers, and exits (within
//! ten seconds). `serve PORT` keeps serving on 127.0.0.1:PORT.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::service::TowerToHyperService;
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

/// What `axum::serve` does, on numa_rt: one task per connection, each
/// serving the router through hyper.
async fn serve(listener: TcpListener, app: Router) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        numa_rt::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(numa_rt::hyper::Timer)
                .serve_connection(numa_rt::hyper::Io::new(stream), service);
            if let Err(e) = conn.await {
                if !e.is_incomplete_message() {
                    eprintln!("connection: {e}");
                }
            }
        });
    }
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
        serve(listener, app()).await;
        return Ok(());
    }

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    numa_rt::spawn(serve(listener, app()));
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
