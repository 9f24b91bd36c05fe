//! hyper-util's pooled client on numa_rt through `numa_rt::hyper::Connector`:
//! sequential requests share one connection, names resolve, and URIs the
//! connector cannot serve fail with an error that names them.
//!
//! The pool gets a connection back in a task the client spawns (it waits for
//! the connection to finish the response), so "the connection is idle" is
//! observed by counting the client's live spawned tasks down to the one
//! connection task, never by sleeping.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use numa_rt::hyper::{Connector, Io};
use numa_rt::net::TcpListener;
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

/// An HTTP/1 keep-alive server on 127.0.0.1 that answers every request
/// with its path; returns its port and its count of accepted connections.
async fn server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepts = Arc::new(AtomicUsize::new(0));
    let counter = accepts.clone();
    drop(numa_rt::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            drop(numa_rt::spawn(async move {
                let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let body = Full::new(Bytes::from(req.uri().path().to_owned()));
                    Ok::<_, Infallible>(Response::new(body))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(Io::new(stream), service)
                    .await;
            }));
        }
    }));
    (port, accepts)
}

/// `numa_rt::hyper::Executor`, counting the futures it runs that are still
/// alive and reporting each one that ends.
#[derive(Clone)]
struct Counting {
    live: Arc<AtomicUsize>,
    ended: mpsc::UnboundedSender<()>,
}

struct Live(Counting);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
        let _ = self.0.ended.unbounded_send(());
    }
}

impl<F> hyper::rt::Executor<F> for Counting
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.live.fetch_add(1, Ordering::SeqCst);
        let live = Live(self.clone());
        hyper::rt::Executor::execute(&numa_rt::hyper::Executor, async move {
            let _live = live;
            fut.await;
        });
    }
}

async fn get(client: &Client<Connector, Empty<Bytes>>, url: String) -> String {
    let res = client.get(url.parse().unwrap()).await.unwrap();
    assert!(res.status().is_success());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[test]
fn sequential_requests_reuse_one_pooled_connection() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (port, accepts) = server().await;
            let (ended_tx, mut ended_rx) = mpsc::unbounded();
            let exec = Counting {
                live: Arc::new(AtomicUsize::new(0)),
                ended: ended_tx,
            };
            let client: Client<Connector, Empty<Bytes>> =
                Client::builder(exec.clone()).build(Connector::new());

            assert_eq!(
                get(&client, format!("http://127.0.0.1:{port}/one")).await,
                "/one"
            );
            // Wait until only the connection task is left: the connection
            // is back in the pool.
            while exec.live.load(Ordering::SeqCst) > 1 {
                ended_rx.next().await.unwrap();
            }
            assert_eq!(exec.live.load(Ordering::SeqCst), 1, "one connection task");
            assert_eq!(
                get(&client, format!("http://127.0.0.1:{port}/two")).await,
                "/two"
            );
            assert_eq!(
                accepts.load(Ordering::SeqCst),
                1,
                "the second request reused the connection"
            );
        })
        .await
        .unwrap();
    });
}

#[test]
fn a_host_name_is_resolved_and_the_connection_pooled() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (port, accepts) = server().await;
            let client: Client<Connector, Empty<Bytes>> = Client::builder(numa_rt::hyper::Executor)
                .pool_timer(numa_rt::hyper::Timer)
                .build(Connector::new());
            let url = format!("http://localhost:{port}/by-name");
            assert_eq!(get(&client, url).await, "/by-name");
            assert_eq!(accepts.load(Ordering::SeqCst), 1);
        })
        .await
        .unwrap();
    });
}

#[test]
fn uris_the_connector_cannot_serve_fail_naming_them() {
    use tower_service::Service;
    rt().block_on(async {
        let mut c = Connector::new();
        for (uri, words) in [
            ("https://localhost:1/", "https"),
            ("ftp://localhost:1/", "ftp"),
            ("/relative", "no scheme"),
        ] {
            let e = c.call(uri.parse().unwrap()).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{uri}: {e}");
            assert!(e.to_string().contains(words), "{uri}: {e}");
        }
        // A port nobody listens on: the error says where it tried.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = c
            .call(format!("http://127.0.0.1:{port}/").parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    });
}
