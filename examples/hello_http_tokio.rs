//! The tokio twin of `hello_http` (hyper 1.x with hyper-util's `TokioIo`),
//! for comparing the two runtimes under `benches/http_wrk.sh`.
//!
//! ```text
//! cargo run --release --example hello_http_tokio -- 3001 2   # port, workers
//! ```
//!
//! Arguments: the port (default 3001) and the number of worker threads
//! (default: the number of CPUs).

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!",
    ))))
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args
        .next()
        .map_or(Ok(3001), |p| p.parse())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("port: {e}")))?;
    let workers: usize = match args.next() {
        Some(w) => w.parse().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("workers: {e}"))
        })?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = TcpListener::bind(("127.0.0.1", port)).await?;
            println!(
                "tokio hello_http listening on http://{} ({workers} workers)",
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
                tokio::spawn(async move {
                    if let Err(e) = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service_fn(hello))
                        .await
                    {
                        if !e.is_incomplete_message() {
                            eprintln!("connection: {e}");
                        }
                    }
                });
            }
        })
}
