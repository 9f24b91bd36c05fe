//! "Hello, world!" over HTTP/1.1 with hyper 1.x on numa_rt.
//!
//! ```text
//! cargo run --release --features hyper --example hello_http -- 3000
//! curl http://127.0.0.1:3000/
//! ```
//!
//! The port is the first argument (default 3000). `NUMA_RT_MAXPROCS` sets the
//! number of processors. Each connection is served by its own task; because
//! that task is spawned right after `accept`, numa_rt hands it to the next
//! processor round-robin (Vyukov's root-task distribution), and its socket
//! registers with that processor's poller on first use.

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use numa_rt::net::TcpListener;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!",
    ))))
}

#[numa_rt::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("port {p:?}: {e}"))
        })?,
        None => 3000,
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let procs = numa_rt::Handle::current().metrics().num_procs();
    println!(
        "numa_rt hello_http listening on http://{} ({procs} processors)",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        numa_rt::spawn(async move {
            if let Err(e) = http1::Builder::new()
                .timer(numa_rt::hyper::Timer)
                .serve_connection(numa_rt::hyper::Io::new(stream), service_fn(hello))
                .await
            {
                if !e.is_incomplete_message() {
                    eprintln!("connection: {e}");
                }
            }
        });
    }
}
