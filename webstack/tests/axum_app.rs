//! The axum app of `numa_rt_webstack::app`, served by `numa_rt::serve`:
//! every route, HTTP/1 and HTTP/2 on one port, a WebSocket and an SSE
//! client, Unix sockets, bad peers, graceful shutdown, and no tokio runtime
//! anywhere in the process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Version};
use hyper_util::client::legacy::Client;
use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_webstack::{app, tokio_runtime_present, AppConfig, AppState};
use tokio_tungstenite::tungstenite::Message as WsMessage;

type Http = Client<numa_rt::hyper::Connector, Full<Bytes>>;

fn client(http2: bool) -> Http {
    Client::builder(numa_rt::hyper::Executor)
        .pool_timer(numa_rt::hyper::Timer)
        .timer(numa_rt::hyper::Timer)
        .http2_only(http2)
        .build(numa_rt::hyper::Connector::new())
}

struct Answer {
    status: StatusCode,
    version: Version,
    headers: hyper::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

async fn send(client: &Http, req: Request<Full<Bytes>>) -> Answer {
    let res = client.request(req).await.expect("the request is answered");
    let status = res.status();
    let version = res.version();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.expect("a body").to_bytes();
    Answer {
        status,
        version,
        headers,
        body,
    }
}

async fn get(client: &Http, addr: SocketAddr, path: &str) -> Answer {
    let req = Request::get(format!("http://{addr}{path}"))
        .body(Full::default())
        .unwrap();
    send(client, req).await
}

/// Serves the app on a fresh loopback port with connect info and a
/// graceful shutdown on `stop`; returns the address and the serve task.
async fn start(
    state: Arc<AppState>,
    config: AppConfig,
    stop: numa_rt::sync::oneshot::Receiver<()>,
) -> (SocketAddr, numa_rt::JoinHandle<std::io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let make = app(state, config).into_make_service_with_connect_info::<SocketAddr>();
    let server = numa_rt::serve(listener, make).with_graceful_shutdown(async move {
        let _ = stop.await;
    });
    (addr, numa_rt::spawn(server.into_future()))
}

use std::future::IntoFuture;

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_and_no_tokio_runtime_exists() {
    let state = Arc::new(AppState::default());
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(state.clone(), AppConfig::default(), stop_rx).await;
    let http = client(false);

    let a = get(&http, addr, "/plaintext").await;
    assert_eq!((a.status, a.text()), (StatusCode::OK, "Hello, World!"));
    assert_eq!(a.version, Version::HTTP_11);

    let a = get(&http, addr, "/json").await;
    assert_eq!(a.status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(v["message"], "Hello, World!");

    assert_eq!(get(&http, addr, "/count").await.text(), "1");
    assert_eq!(get(&http, addr, "/count").await.text(), "2");
    assert_eq!(
        state.hits.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "the handlers share the app's state"
    );

    let v: serde_json::Value =
        serde_json::from_slice(&get(&http, addr, "/users/7").await.body).unwrap();
    assert_eq!(v["id"], 7);

    // Connect info: the peer address the server saw is a loopback address
    // with the client's port (the pooled client's connection).
    let who = get(&http, addr, "/whoami").await;
    let peer: SocketAddr = who.text().parse().expect("a socket address");
    assert!(peer.ip().is_loopback(), "peer {peer}");
    assert_ne!(peer.port(), addr.port());

    // The compression layer: a body past its threshold, gzip asked for.
    let big = "numa_rt ".repeat(512);
    let req = Request::post(format!("http://{addr}/echo"))
        .header("accept-encoding", "gzip")
        .body(Full::new(Bytes::from(big.clone())))
        .unwrap();
    let a = send(&http, req).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers["content-encoding"], "gzip");
    assert!(a.body.len() < big.len() / 4, "{} bytes", a.body.len());

    // Inside a handler and here: no tokio runtime.
    assert_eq!(get(&http, addr, "/tokio").await.text(), "absent");
    assert!(!tokio_runtime_present());

    let a = get(&http, addr, "/nowhere").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    stop_tx.send(()).unwrap();
    drop(http);
    server.await.unwrap().unwrap();
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_served_on_the_same_port() {
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), AppConfig::default(), stop_rx).await;
    let h2 = client(true);
    let h1 = client(false);
    for _ in 0..3 {
        let a = get(&h2, addr, "/plaintext").await;
        assert_eq!((a.version, a.text()), (Version::HTTP_2, "Hello, World!"));
        let a = get(&h1, addr, "/plaintext").await;
        assert_eq!((a.version, a.text()), (Version::HTTP_11, "Hello, World!"));
    }
    // Streams of one HTTP/2 connection run concurrently (hyper spawns them
    // on numa_rt's executor).
    let mut pending = Vec::new();
    for i in 0..16 {
        let h2 = h2.clone();
        pending.push(numa_rt::spawn(async move {
            get(&h2, addr, &format!("/users/{i}")).await.body
        }));
    }
    for (i, p) in pending.into_iter().enumerate() {
        let v: serde_json::Value = serde_json::from_slice(&p.await.unwrap()).unwrap();
        assert_eq!(v["id"], i);
    }
    stop_tx.send(()).unwrap();
    drop((h1, h2));
    server.await.unwrap().unwrap();
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_echoes_on_numa_rt() {
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), AppConfig::default(), stop_rx).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut ws, response) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream)
        .await
        .expect("the handshake completes");
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    for i in 0..20 {
        ws.send(WsMessage::text(format!("hello {i}")))
            .await
            .unwrap();
        let got = ws.next().await.unwrap().unwrap();
        assert_eq!(got, WsMessage::text(format!("hello {i}")));
    }
    ws.send(WsMessage::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        WsMessage::binary(vec![1u8, 2, 3])
    );
    ws.close(None).await.unwrap();
    // The server's side ends; the stream then ends too.
    while let Some(Ok(_)) = ws.next().await {}

    // A plain GET on the WebSocket route is refused as axum refuses it.
    let http = client(false);
    let a = get(&http, addr, "/ws").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    stop_tx.send(()).unwrap();
    drop(http);
    server.await.unwrap().unwrap();
}

/// SSE with a paused clock: the keep-alive (every 5 s) fires between events
/// 12 s apart, in deadline order, whatever the machine's speed.
#[numa_rt::test(start_paused = true)]
async fn sse_sends_events_and_keep_alives_between_them() {
    let config = AppConfig {
        sse_keep_alive: Duration::from_secs(5),
        ..AppConfig::default()
    };
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), config, stop_rx).await;
    let http = client(false);
    let res = http
        .request(
            Request::get(format!("http://{addr}/sse?n=3&gap_ms=12000"))
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let text = std::str::from_utf8(&body).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "event: tick",
            "data: 0",
            ": keep-alive",
            ": keep-alive",
            "event: tick",
            "data: 1",
            ": keep-alive",
            ": keep-alive",
            "event: tick",
            "data: 2",
        ],
        "{text:?}"
    );
    stop_tx.send(()).unwrap();
    drop(http);
    server.await.unwrap().unwrap();
}

/// The request timeout answers 408 as tower-http's does; quick requests are
/// answered. Real time, not a paused clock: a paused clock may jump past a
/// request still in the kernel's loopback queue (seen in the TCG guest,
/// where hyper's 30 s header timer then closed the connection), and the
/// margins here are wide (a request that sleeps 10 minutes against a 1 s
/// limit).
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_is_answered_408() {
    let config = AppConfig {
        request_timeout: Duration::from_secs(1),
        ..AppConfig::default()
    };
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), config, stop_rx).await;
    let http = client(false);
    let a = get(&http, addr, "/sleep?ms=0").await;
    assert_eq!((a.status, a.text()), (StatusCode::OK, "slept 0 ms"));
    let a = get(&http, addr, "/sleep?ms=600000").await;
    assert_eq!(a.status, StatusCode::REQUEST_TIMEOUT);
    assert!(a.body.is_empty());
    // The connection and the server go on.
    let a = get(&http, addr, "/plaintext").await;
    assert_eq!(a.status, StatusCode::OK);
    stop_tx.send(()).unwrap();
    drop(http);
    server.await.unwrap().unwrap();
}

async fn read_all(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    out
}

/// A peer that sends its headers and never finishes them (slowloris) is
/// closed after hyper's header timeout, on numa_rt's timer.
#[numa_rt::test(start_paused = true)]
async fn a_slowloris_connection_is_closed() {
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), AppConfig::default(), stop_rx).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let answer = read_all(&mut slow).await;
    // hyper closes the connection, with a 408 or without an answer.
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_vanishing_clients_leave_the_server_serving() {
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), AppConfig::default(), stop_rx).await;

    // Garbage: hyper answers 400 and closes.
    let mut bad = TcpStream::connect(addr).await.unwrap();
    bad.write_all(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
        .await
        .unwrap();
    let answer = read_all(&mut bad).await;
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 400"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );

    // A client that goes away in the middle of its request body.
    for _ in 0..8 {
        let mut gone = TcpStream::connect(addr).await.unwrap();
        gone.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
            .await
            .unwrap();
        drop(gone);
    }
    // A client that resets with a request in flight.
    let gone = std::net::TcpStream::connect(addr).unwrap();
    set_linger_zero(&gone);
    drop(gone);

    let http = client(false);
    let a = get(&http, addr, "/plaintext").await;
    assert_eq!((a.status, a.text()), (StatusCode::OK, "Hello, World!"));
    stop_tx.send(()).unwrap();
    drop(http);
    server.await.unwrap().unwrap();
}

/// SO_LINGER 0: the close sends a reset.
fn set_linger_zero(s: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// A shutdown with a request in flight answers it, closes the idle
/// keep-alive connection, refuses new connections, and completes once every
/// connection has ended.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_answers_what_is_in_flight() {
    let state = Arc::new(AppState::default());
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(state.clone(), AppConfig::default(), stop_rx).await;

    // An idle keep-alive connection.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 256];
    let n = idle.read(&mut first).await.unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));

    // A request in flight.
    let http = client(false);
    let held = numa_rt::spawn({
        let http = http.clone();
        async move { get(&http, addr, "/hold").await }
    });
    state.entered.notified().await;
    stop_tx.send(()).unwrap();

    // The idle connection is closed by the server.
    let rest = read_all(&mut idle).await;
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));

    // The held request is still answered.
    state.release.notify_one();
    let a = held.await.unwrap();
    assert_eq!((a.status, a.text()), (StatusCode::OK, "released"));
    drop(http);
    server.await.unwrap().unwrap();

    // The listener is closed.
    let err = TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_listener_is_served() {
    let dir = std::env::temp_dir().join(format!("numa_rt_serve_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.sock");
    let _ = std::fs::remove_file(&path);
    let listener = numa_rt::net::UnixListener::bind(&path).unwrap();
    let app = app(Default::default(), AppConfig::default());
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel::<()>();
    let server = numa_rt::spawn(
        numa_rt::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .into_future(),
    );
    let mut conn = numa_rt::net::UnixStream::connect(&path).await.unwrap();
    conn.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8(answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("Hello, World!"), "{answer}");
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Connection tasks are root tasks: spawned right after their accept, they
/// are dealt round-robin over the processors.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_root_tasks() {
    let metrics = numa_rt::runtime::Handle::current().metrics();
    if metrics.placement() == numa_rt::Placement::go() {
        eprintln!("skipped: NUMA_RT_PLACEMENT=go turns the root-task rule off");
        return;
    }
    let roots = |m: &numa_rt::runtime::RuntimeMetrics| -> u64 {
        m.procs().iter().map(|p| p.root_tasks_received).sum()
    };
    let before = roots(&metrics);
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel();
    let (addr, server) = start(Default::default(), AppConfig::default(), stop_rx).await;
    for _ in 0..8 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let answer = read_all(&mut c).await;
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }
    let after = roots(&numa_rt::runtime::Handle::current().metrics());
    assert!(after - before >= 8, "{before} → {after} root tasks");
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}
