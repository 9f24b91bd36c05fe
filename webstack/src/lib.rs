//! The web stack on numa_rt: an axum app and a tonic service, written as
//! they are for tokio, and served by [`numa_rt::serve()`] with no tokio
//! runtime in the process.
//!
//! The app ([`app`]) is what a real service is made of: shared state,
//! tower-http's trace and compression layers, a request timeout that
//! answers 408, connect info, JSON, a WebSocket route and a server-sent
//! events route. Ported from tokio, its imports changed in three places:
//!
//! ```text
//! axum::extract::ws::{WebSocketUpgrade, WebSocket} → numa_rt::axum::ws::{…}
//! axum::response::sse::{Sse, KeepAlive}            → numa_rt::axum::sse::{…}
//! tower_http::timeout::TimeoutLayer                → numa_rt_util::tower_http::TimeoutLayer
//! ```
//!
//! and `axum::serve` became `numa_rt::serve` (see `examples/axum_full.rs`).
//!
//! The gRPC service ([`greeter`]) is tonic's hello world, generated from
//! `proto/helloworld.proto` by tonic's code generator.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use numa_rt::axum::sse::{Event, KeepAlive, Sse};
use numa_rt::axum::ws::{Message, WebSocket, WebSocketUpgrade};
use serde::{Deserialize, Serialize};
use tower_http::compression::CompressionLayer;
use tower_http::trace::TraceLayer;

/// The app's shared state.
#[derive(Debug, Default)]
pub struct AppState {
    /// Requests served by the counting route.
    pub hits: AtomicU64,
    /// Notified when a request enters `/hold`.
    pub entered: numa_rt::sync::Notify,
    /// `/hold` answers once this is notified.
    pub release: numa_rt::sync::Notify,
}

/// How the app is configured.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// A request that takes longer is answered `408 Request Timeout`.
    pub request_timeout: Duration,
    /// How often a quiet SSE stream sends a keep-alive comment.
    pub sse_keep_alive: Duration,
}

impl Default for AppConfig {
    fn default() -> AppConfig {
        AppConfig {
            request_timeout: Duration::from_secs(10),
            sse_keep_alive: Duration::from_secs(15),
        }
    }
}

/// A JSON answer.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Greeting {
    /// The text.
    pub message: String,
}

/// The app: routes, state and layers.
///
/// - `GET /plaintext`, `GET /json`: TechEmpower's two simplest answers.
/// - `GET /count`: increments and returns the shared counter.
/// - `GET /users/{id}`: a path parameter, as JSON.
/// - `GET /whoami`: the peer's address (connect info).
/// - `GET /sleep?ms=N`: answers after N ms (408 past the request timeout).
/// - `POST /echo`: the request body back.
/// - `GET /hold`: tells [`AppState::entered`], answers once
///   [`AppState::release`] is notified (for shutdown tests).
/// - `GET /tokio`: `present` if a tokio runtime exists, else `absent`.
/// - `GET /ws`: a WebSocket that echoes text and binary messages.
/// - `GET /sse?n=N&gap_ms=M`: N events M ms apart, with keep-alives.
pub fn app(state: Arc<AppState>, config: AppConfig) -> Router {
    let keep_alive = config.sse_keep_alive;
    Router::new()
        .route("/plaintext", get(|| async { "Hello, World!" }))
        .route(
            "/json",
            get(|| async {
                Json(Greeting {
                    message: "Hello, World!".into(),
                })
            }),
        )
        .route("/count", get(count))
        .route("/users/{id}", get(user))
        .route("/whoami", get(whoami))
        .route("/sleep", get(sleep))
        .route("/echo", post(|body: String| async move { body }))
        .route("/hold", get(hold))
        .route(
            "/tokio",
            get(|| async {
                if tokio_runtime_present() {
                    "present"
                } else {
                    "absent"
                }
            }),
        )
        .route("/ws", get(ws))
        .route("/sse", get(move |q| sse(q, keep_alive)))
        .with_state(state)
        .layer(numa_rt_util::tower_http::TimeoutLayer::new(
            config.request_timeout,
        ))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
}

async fn count(State(state): State<Arc<AppState>>) -> String {
    (state.hits.fetch_add(1, Relaxed) + 1).to_string()
}

async fn user(Path(id): Path<u32>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "id": id, "runtime": "numa_rt" }))
}

async fn whoami(ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    peer.to_string()
}

async fn hold(State(state): State<Arc<AppState>>) -> &'static str {
    state.entered.notify_one();
    state.release.notified().await;
    "released"
}

#[derive(Deserialize)]
struct SleepQuery {
    ms: u64,
}

async fn sleep(Query(q): Query<SleepQuery>) -> String {
    numa_rt::time::sleep(Duration::from_millis(q.ms)).await;
    format!("slept {} ms", q.ms)
}

async fn ws(upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(echo_socket)
}

async fn echo_socket(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        let echo = matches!(msg, Message::Text(_) | Message::Binary(_));
        if matches!(msg, Message::Close(_)) || (echo && socket.send(msg).await.is_err()) {
            return;
        }
    }
}

#[derive(Deserialize)]
struct SseQuery {
    n: u32,
    gap_ms: u64,
}

async fn sse(Query(q): Query<SseQuery>, keep_alive: Duration) -> impl IntoResponse {
    let events = futures_util::stream::unfold(0u32, move |i| async move {
        if i == q.n {
            return None;
        }
        if i > 0 {
            numa_rt::time::sleep(Duration::from_millis(q.gap_ms)).await;
        }
        let event = Event::default().event("tick").data(i.to_string());
        Some((Ok::<_, Infallible>(event), i + 1))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
}

/// tonic's hello-world service, generated from `proto/helloworld.proto`.
pub mod greeter {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("helloworld");
}

/// The greeter's implementation: answers `Hello {name}!` after the
/// request's `delay_ms`.
#[derive(Debug, Default, Clone)]
pub struct MyGreeter;

#[tonic::async_trait]
impl greeter::greeter_server::Greeter for MyGreeter {
    async fn say_hello(
        &self,
        request: tonic::Request<greeter::HelloRequest>,
    ) -> Result<tonic::Response<greeter::HelloReply>, tonic::Status> {
        let req = request.into_inner();
        if req.delay_ms > 0 {
            numa_rt::time::sleep(Duration::from_millis(req.delay_ms)).await;
        }
        if req.name.is_empty() {
            return Err(tonic::Status::invalid_argument("name is empty"));
        }
        Ok(tonic::Response::new(greeter::HelloReply {
            message: format!("Hello {}!", req.name),
        }))
    }
}

/// Whether a tokio runtime exists in this process: a thread named as
/// tokio names its workers and blocking threads, or a runtime context on
/// the calling thread.
pub fn tokio_runtime_present() -> bool {
    if tokio::runtime::Handle::try_current().is_ok() {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("comm"))
            .map(|name| name.starts_with("tokio-runtime"))
            .unwrap_or(false)
    })
}
