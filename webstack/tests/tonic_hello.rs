//! tonic's hello world on numa_rt alone: the generated server served by
//! `numa_rt::serve`, the generated client over `numa_rt::tonic::Channel`
//! (tonic's `Channel` with numa_rt's executor, connector and timer), with
//! deadlines, errors and concurrent calls, and no tokio runtime.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::Duration;

use numa_rt::net::TcpListener;
use numa_rt_webstack::greeter::greeter_client::GreeterClient;
use numa_rt_webstack::greeter::greeter_server::GreeterServer;
use numa_rt_webstack::greeter::HelloRequest;
use numa_rt_webstack::{tokio_runtime_present, MyGreeter};

async fn start() -> (
    SocketAddr,
    numa_rt::sync::oneshot::Sender<()>,
    numa_rt::JoinHandle<std::io::Result<()>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = tonic::service::Routes::new(GreeterServer::new(MyGreeter));
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel::<()>();
    let server = numa_rt::serve(listener, routes).with_graceful_shutdown(async move {
        let _ = stop_rx.await;
    });
    (addr, stop_tx, numa_rt::spawn(server.into_future()))
}

fn hello(name: &str, delay_ms: u64) -> HelloRequest {
    HelloRequest {
        name: name.into(),
        delay_ms,
    }
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_client_calls_the_generated_server() {
    let (addr, stop, server) = start().await;
    let channel = numa_rt::tonic::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("connects");
    let mut client = GreeterClient::new(channel);

    let reply = client.say_hello(hello("numa_rt", 0)).await.unwrap();
    assert_eq!(reply.into_inner().message, "Hello numa_rt!");

    // A status from the server reaches the client as it was sent.
    let status = client.say_hello(hello("", 0)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "name is empty");

    // Concurrent calls share the HTTP/2 connection.
    let mut calls = Vec::new();
    for i in 0..32 {
        let mut client = client.clone();
        calls.push(numa_rt::spawn(async move {
            client.say_hello(hello(&format!("n{i}"), 0)).await
        }));
    }
    for (i, call) in calls.into_iter().enumerate() {
        let reply = call.await.unwrap().unwrap();
        assert_eq!(reply.into_inner().message, format!("Hello n{i}!"));
    }

    assert!(!tokio_runtime_present());
    stop.send(()).unwrap();
    drop(client);
    server.await.unwrap().unwrap();
}

/// Deadlines on numa_rt's timer: the endpoint's default and a request's
/// own `set_timeout`, the shorter wins. Real time with wide margins (calls
/// that would take a minute against deadlines under a second), not a
/// paused clock, which may jump past a reply still in the kernel's
/// loopback queue.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_are_kept_on_numa_rts_timer() {
    let (addr, stop, server) = start().await;
    let channel = numa_rt::tonic::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let mut client = GreeterClient::new(channel);

    // Well within the endpoint's deadline.
    let reply = client.say_hello(hello("quick", 0)).await.unwrap();
    assert_eq!(reply.into_inner().message, "Hello quick!");

    // Past the endpoint's deadline.
    let status = client.say_hello(hello("slow", 60_000)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");

    // A request's own deadline, shorter than the endpoint's: the call that
    // would take a minute gives up at it (the endpoint's 500 ms would do
    // too, so the message tells which one fired).
    let mut req = tonic::Request::new(hello("hurried", 60_000));
    req.set_timeout(Duration::from_millis(100));
    let status = client.say_hello(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("100ms"), "{status:?}");

    // The channel still works after calls that timed out.
    let reply = client.say_hello(hello("again", 0)).await.unwrap();
    assert_eq!(reply.into_inner().message, "Hello again!");

    stop.send(()).unwrap();
    drop(client);
    server.await.unwrap().unwrap();
}

#[numa_rt::test]
async fn connecting_to_a_closed_port_fails_with_an_error() {
    // A port that was just free: bind, note it, close.
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let err = numa_rt::tonic::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.contains("onnection refused") || text.contains("Connect"),
        "{text}"
    );

    // A lazy channel reports the same on its first call.
    let channel = numa_rt::tonic::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let status = GreeterClient::new(channel)
        .say_hello(hello("nobody", 0))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
}

/// The server ends a call at the deadline its client sent in `grpc-timeout`
/// (or at its own `server_timeout`, the shorter wins), on numa_rt's timer,
/// as tonic's `Server` does on tokio's: `CANCELLED`, "Timeout expired".
/// The client here is tonic's generated one over hyper-util's client, which
/// sends the header as it is and keeps no deadline of its own, so the status
/// seen is the server's. Real time with wide margins: calls that would take
/// a minute against deadlines under a second.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_keeps_the_deadline_its_client_sent() {
    use numa_rt::tonic::GrpcTimeoutLayer;

    async fn serve_with(layer: GrpcTimeoutLayer) -> (SocketAddr, numa_rt::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = tonic::service::Routes::new(GreeterServer::new(MyGreeter))
            .into_axum_router()
            .layer(layer);
        let server = numa_rt::spawn(async move {
            numa_rt::serve(listener, app).await.unwrap();
        });
        (addr, server)
    }
    fn client(
        addr: SocketAddr,
    ) -> GreeterClient<
        hyper_util::client::legacy::Client<numa_rt::hyper::Connector, tonic::body::Body>,
    > {
        let http = hyper_util::client::legacy::Client::builder(numa_rt::hyper::Executor)
            .timer(numa_rt::hyper::Timer)
            .http2_only(true)
            .build(numa_rt::hyper::Connector::new());
        GreeterClient::with_origin(http, format!("http://{addr}").parse().unwrap())
    }

    // Deadlines from the header only.
    let (addr, server) = serve_with(GrpcTimeoutLayer::new()).await;
    let mut greeter = client(addr);
    let reply = greeter.say_hello(hello("quick", 0)).await.unwrap();
    assert_eq!(reply.into_inner().message, "Hello quick!");

    let mut req = tonic::Request::new(hello("hurried", 60_000));
    req.set_timeout(Duration::from_millis(200));
    let status = greeter.say_hello(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    assert_eq!(status.message(), "Timeout expired", "{status:?}");

    // A deadline the call beats is not an error; nor is a malformed header.
    let mut req = tonic::Request::new(hello("in time", 0));
    req.set_timeout(Duration::from_secs(30));
    assert!(greeter.say_hello(req).await.is_ok());
    let mut req = tonic::Request::new(hello("bad header", 0));
    req.metadata_mut()
        .insert("grpc-timeout", "soon".parse().unwrap());
    assert!(greeter.say_hello(req).await.is_ok());
    server.abort();

    // The server's own limit, shorter than the client's deadline.
    let (addr, server) =
        serve_with(GrpcTimeoutLayer::new().server_timeout(Duration::from_millis(200))).await;
    let mut greeter = client(addr);
    let mut req = tonic::Request::new(hello("patient", 60_000));
    req.set_timeout(Duration::from_secs(120));
    let status = greeter.say_hello(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    let reply = greeter.say_hello(hello("quick", 0)).await.unwrap();
    assert_eq!(reply.into_inner().message, "Hello quick!");
    server.abort();
    assert!(!tokio_runtime_present());
}
