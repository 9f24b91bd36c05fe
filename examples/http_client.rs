//! A pooled HTTP client on numa_rt: hyper-util's `Client` with
//! `numa_rt::hyper::Connector`.
//!
//! ```text
//! cargo run --features hyper --example http_client                 # against its own local server
//! cargo run --features hyper --example http_client -- http://127.0.0.1:3000/
//! ```
//!
//! Without an argument it starts an HTTP/1 server on 127.0.0.1 (a free
//! port), sends it five requests through one client, and prints how many
//! connections the server accepted: one, as the client pools it (keep-alive)
//! — a request sent before the previous connection is back in the pool may
//! open a second. With a URL it fetches that URL and prints the status and
//! the body's size. Either way it is done within ten seconds.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use numa_rt::hyper::{Connector, Executor, Io, Timer};
use numa_rt::net::TcpListener;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[numa_rt::main]
async fn main() -> Result<(), Error> {
    let run = async {
        match std::env::args().nth(1) {
            Some(url) => fetch(&url).await,
            None => against_local_server().await,
        }
    };
    numa_rt::time::timeout(Duration::from_secs(10), run)
        .await
        .map_err(|_| "http_client: gave up after 10 s")?
}

fn client() -> Client<Connector, Empty<Bytes>> {
    // The executor runs the client's connection tasks on numa_rt; the timer
    // expires idle pooled connections (90 s by default).
    Client::builder(Executor)
        .pool_timer(Timer)
        .build(Connector::new())
}

async fn fetch(url: &str) -> Result<(), Error> {
    let uri = url.parse().map_err(|e| format!("URL {url:?}: {e}"))?;
    let res = client().get(uri).await?;
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    println!("GET {url}: {status}, {} bytes", body.len());
    Ok(())
}

async fn against_local_server() -> Result<(), Error> {
    let (addr, accepts) = serve().await?;
    let client = client();
    for i in 1..=5 {
        // A name, resolved on the blocking pool, not on a worker.
        let url = format!("http://localhost:{}/request/{i}", addr.port());
        let res = client.get(url.parse()?).await?;
        let body = res.into_body().collect().await?.to_bytes();
        println!("{}", String::from_utf8_lossy(&body));
    }
    println!(
        "5 requests, {} connection(s) accepted by the server",
        accepts.load(Ordering::Relaxed)
    );
    Ok(())
}

/// An HTTP/1 server on a free loopback port that echoes each request's path
/// and counts the connections it accepts.
async fn serve() -> std::io::Result<(std::net::SocketAddr, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let accepts = Arc::new(AtomicUsize::new(0));
    let counter = accepts.clone();
    numa_rt::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            numa_rt::spawn(async move {
                let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let text = format!("served {}", req.uri().path());
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(Io::new(stream), service)
                    .await;
            });
        }
    });
    Ok((addr, accepts))
}
