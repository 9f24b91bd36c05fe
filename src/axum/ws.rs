//! WebSockets in axum handlers, run on numa_rt: axum's
//! `extract::ws` API with the upgraded connection's task spawned on numa_rt
//! (axum's own `on_upgrade` calls `tokio::spawn`).
//!
//! A port changes one import, `axum::extract::ws::{WebSocketUpgrade,
//! WebSocket}` → `numa_rt::axum::ws::{WebSocketUpgrade, WebSocket}`;
//! [`Message`], [`CloseFrame`] and [`Utf8Bytes`] are axum's own types,
//! re-exported, so handlers keep matching on them.
//!
//! ```no_run
//! use axum::{response::Response, routing::get, Router};
//! use numa_rt::axum::ws::{Message, WebSocket, WebSocketUpgrade};
//!
//! async fn handler(ws: WebSocketUpgrade) -> Response {
//!     ws.on_upgrade(echo)
//! }
//!
//! async fn echo(mut socket: WebSocket) {
//!     while let Some(Ok(msg)) = socket.recv().await {
//!         if let Message::Text(_) | Message::Binary(_) = msg {
//!             if socket.send(msg).await.is_err() {
//!                 return; // the client went away
//!             }
//!         }
//!     }
//! }
//!
//! let app: Router = Router::new().route("/ws", get(handler));
//! ```
//!
//! HTTP/1.1's `Upgrade: websocket` and HTTP/2's extended CONNECT (RFC 8441,
//! which [`crate::serve()`] enables) are both accepted, as axum does. The
//! frames are tungstenite's (through tokio-tungstenite, which uses tokio's
//! I/O traits only).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Version};
use axum::response::{IntoResponse, Response};
use axum::Error;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::{self, frame, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

pub use axum::extract::ws::{CloseCode, CloseFrame, Message, Utf8Bytes};

/// The extractor that accepts a WebSocket handshake (axum's type of the same
/// name, spawning on numa_rt). Finish the handshake with
/// [`on_upgrade`](WebSocketUpgrade::on_upgrade).
pub struct WebSocketUpgrade<F = DefaultOnFailedUpgrade> {
    config: WebSocketConfig,
    /// The protocol chosen from the client's list (`protocols`).
    protocol: Option<HeaderValue>,
    /// `Some` on HTTP/1.1 (the accept header is derived from it), `None` on
    /// HTTP/2's CONNECT.
    sec_websocket_key: Option<HeaderValue>,
    on_upgrade: hyper::upgrade::OnUpgrade,
    on_failed_upgrade: F,
    sec_websocket_protocol: Option<HeaderValue>,
}

impl<F> std::fmt::Debug for WebSocketUpgrade<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketUpgrade")
            .field("config", &self.config)
            .field("protocol", &self.protocol)
            .field("sec_websocket_key", &self.sec_websocket_key)
            .field("sec_websocket_protocol", &self.sec_websocket_protocol)
            .finish_non_exhaustive()
    }
}

impl<F> WebSocketUpgrade<F> {
    /// The read buffer's size (tungstenite's default: 128 KiB).
    pub fn read_buffer_size(mut self, size: usize) -> Self {
        self.config.read_buffer_size = size;
        self
    }

    /// How much is buffered before a write goes to the socket (default
    /// 128 KiB; 0 writes each message at once).
    pub fn write_buffer_size(mut self, size: usize) -> Self {
        self.config.write_buffer_size = size;
        self
    }

    /// The most the write buffer may hold before a send fails.
    pub fn max_write_buffer_size(mut self, max: usize) -> Self {
        self.config.max_write_buffer_size = max;
        self
    }

    /// The largest message accepted (default 64 MiB).
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.config.max_message_size = Some(max);
        self
    }

    /// The largest frame accepted (default 16 MiB).
    pub fn max_frame_size(mut self, max: usize) -> Self {
        self.config.max_frame_size = Some(max);
        self
    }

    /// Accepts frames the client did not mask (RFC 6455 forbids them).
    pub fn accept_unmasked_frames(mut self, accept: bool) -> Self {
        self.config.accept_unmasked_frames = accept;
        self
    }

    /// The subprotocols this server speaks, in order of preference: the
    /// first one the client also asked for is chosen and sent back.
    pub fn protocols<I>(mut self, protocols: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<std::borrow::Cow<'static, str>>,
    {
        if let Some(req) = &self.sec_websocket_protocol {
            let asked: Vec<&str> = req
                .to_str()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .collect();
            self.protocol = protocols
                .into_iter()
                .map(Into::into)
                .find(|p| asked.iter().any(|a| a.eq_ignore_ascii_case(p)))
                .and_then(|p| HeaderValue::from_str(&p).ok());
        }
        self
    }

    /// The subprotocols the client asked for (`Sec-WebSocket-Protocol`).
    pub fn requested_protocols(&self) -> impl Iterator<Item = &HeaderValue> {
        self.sec_websocket_protocol.iter()
    }

    /// Sets the subprotocol sent back.
    pub fn set_selected_protocol(&mut self, protocol: HeaderValue) {
        self.protocol = Some(protocol);
    }

    /// The subprotocol that will be sent back, if any.
    pub fn selected_protocol(&self) -> Option<&HeaderValue> {
        self.protocol.as_ref()
    }

    /// Calls `callback` with the error when the connection fails to upgrade
    /// (by default nothing is done).
    pub fn on_failed_upgrade<C: OnFailedUpgrade>(self, callback: C) -> WebSocketUpgrade<C> {
        WebSocketUpgrade {
            config: self.config,
            protocol: self.protocol,
            sec_websocket_key: self.sec_websocket_key,
            on_upgrade: self.on_upgrade,
            on_failed_upgrade: callback,
            sec_websocket_protocol: self.sec_websocket_protocol,
        }
    }

    /// Answers the handshake and, once the connection is upgraded, runs
    /// `callback` with the WebSocket in a numa_rt task.
    pub fn on_upgrade<C, Fut>(self, callback: C) -> Response
    where
        C: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        F: OnFailedUpgrade,
    {
        let WebSocketUpgrade {
            config,
            protocol,
            sec_websocket_key,
            on_upgrade,
            on_failed_upgrade,
            ..
        } = self;
        let chosen = protocol.clone();
        drop(crate::spawn(async move {
            let upgraded = match on_upgrade.await {
                Ok(upgraded) => upgraded,
                Err(e) => return on_failed_upgrade.call(Error::new(e)),
            };
            let inner = WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                protocol::Role::Server,
                Some(config),
            )
            .await;
            callback(WebSocket {
                inner,
                protocol: chosen,
            })
            .await;
        }));

        let mut response = match sec_websocket_key {
            // HTTP/1.1: 101 with the accept key.
            Some(key) => {
                let accept =
                    tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
                let mut response = Response::new(Body::empty());
                *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                let headers = response.headers_mut();
                headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
                if let Ok(v) = HeaderValue::from_str(&accept) {
                    headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
                }
                response
            }
            // HTTP/2 (RFC 9113 8.5): a 2xx with an empty body.
            None => Response::new(Body::empty()),
        };
        if let Some(p) = protocol {
            response
                .headers_mut()
                .insert(header::SEC_WEBSOCKET_PROTOCOL, p);
        }
        response
    }
}

/// What to do when an accepted handshake's connection fails to upgrade
/// (axum's trait of the same name); any `FnOnce(axum::Error)` is one.
pub trait OnFailedUpgrade: Send + 'static {
    /// Called with the upgrade's error.
    fn call(self, error: Error);
}

impl<F: FnOnce(Error) + Send + 'static> OnFailedUpgrade for F {
    fn call(self, error: Error) {
        self(error)
    }
}

/// The default [`OnFailedUpgrade`]: does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultOnFailedUpgrade;

impl OnFailedUpgrade for DefaultOnFailedUpgrade {
    fn call(self, _error: Error) {}
}

/// Why a request is not a WebSocket handshake; answered as axum answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WebSocketUpgradeRejection {
    /// HTTP/1.1 handshakes are `GET` (405).
    MethodNotGet,
    /// HTTP/2 handshakes are extended `CONNECT` (405).
    MethodNotConnect,
    /// `Connection` does not list `upgrade` (400).
    InvalidConnectionHeader,
    /// `Upgrade` is not `websocket` (400).
    InvalidUpgradeHeader,
    /// HTTP/2's `:protocol` is not `websocket` (400).
    InvalidProtocolPseudoheader,
    /// `Sec-WebSocket-Version` is not 13 (400).
    InvalidWebSocketVersionHeader,
    /// No `Sec-WebSocket-Key` (400).
    WebSocketKeyHeaderMissing,
    /// The connection cannot be upgraded: it was not served with upgrades
    /// (426).
    ConnectionNotUpgradable,
}

impl WebSocketUpgradeRejection {
    /// The status code answered.
    pub fn status(&self) -> StatusCode {
        use WebSocketUpgradeRejection::*;
        match self {
            MethodNotGet | MethodNotConnect => StatusCode::METHOD_NOT_ALLOWED,
            ConnectionNotUpgradable => StatusCode::UPGRADE_REQUIRED,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The text of the answer's body.
    pub fn body_text(&self) -> &'static str {
        use WebSocketUpgradeRejection::*;
        match self {
            MethodNotGet => "Request method must be `GET`",
            MethodNotConnect => "Request method must be `CONNECT`",
            InvalidConnectionHeader => "Connection header did not include 'upgrade'",
            InvalidUpgradeHeader => "`Upgrade` header did not include 'websocket'",
            InvalidProtocolPseudoheader => "`:protocol` pseudo-header did not include 'websocket'",
            InvalidWebSocketVersionHeader => "`Sec-WebSocket-Version` header did not include '13'",
            WebSocketKeyHeaderMissing => "`Sec-WebSocket-Key` header missing",
            ConnectionNotUpgradable => {
                "WebSocket request couldn't be upgraded since no upgrade state was present"
            }
        }
    }
}

impl std::fmt::Display for WebSocketUpgradeRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.body_text())
    }
}

impl std::error::Error for WebSocketUpgradeRejection {}

impl IntoResponse for WebSocketUpgradeRejection {
    fn into_response(self) -> Response {
        (self.status(), self.body_text()).into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebSocketUpgrade<DefaultOnFailedUpgrade> {
    type Rejection = WebSocketUpgradeRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        use WebSocketUpgradeRejection::*;
        let sec_websocket_key = if parts.version <= Version::HTTP_11 {
            if parts.method != Method::GET {
                return Err(MethodNotGet);
            }
            if !header_has_token(&parts.headers, header::CONNECTION, "upgrade") {
                return Err(InvalidConnectionHeader);
            }
            if !header_is(&parts.headers, header::UPGRADE, "websocket") {
                return Err(InvalidUpgradeHeader);
            }
            Some(
                parts
                    .headers
                    .get(header::SEC_WEBSOCKET_KEY)
                    .ok_or(WebSocketKeyHeaderMissing)?
                    .clone(),
            )
        } else {
            if parts.method != Method::CONNECT {
                return Err(MethodNotConnect);
            }
            match parts.extensions.get::<hyper::ext::Protocol>() {
                Some(p) if p.as_str().eq_ignore_ascii_case("websocket") => {}
                _ => return Err(InvalidProtocolPseudoheader),
            }
            None
        };
        if !header_is(&parts.headers, header::SEC_WEBSOCKET_VERSION, "13") {
            return Err(InvalidWebSocketVersionHeader);
        }
        let on_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or(ConnectionNotUpgradable)?;
        Ok(WebSocketUpgrade {
            config: WebSocketConfig::default(),
            protocol: None,
            sec_websocket_key,
            on_upgrade,
            on_failed_upgrade: DefaultOnFailedUpgrade,
            sec_websocket_protocol: parts.headers.get(header::SEC_WEBSOCKET_PROTOCOL).cloned(),
        })
    }
}

fn header_is(headers: &HeaderMap, name: HeaderName, want: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

fn header_has_token(headers: &HeaderMap, name: HeaderName, want: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(want))
}

/// An upgraded WebSocket connection (axum's type of the same name): a
/// [`Stream`] of received [`Message`]s and a [`Sink`] of sent ones.
#[derive(Debug)]
pub struct WebSocket {
    inner: WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>,
    protocol: Option<HeaderValue>,
}

impl WebSocket {
    /// The next message; `None` once the connection is closed.
    pub async fn recv(&mut self) -> Option<Result<Message, Error>> {
        self.next().await
    }

    /// Sends a message (and flushes it).
    pub async fn send(&mut self, msg: Message) -> Result<(), Error> {
        self.inner
            .send(into_tungstenite(msg))
            .await
            .map_err(Error::new)
    }

    /// The subprotocol chosen in the handshake.
    pub fn protocol(&self) -> Option<&HeaderValue> {
        self.protocol.as_ref()
    }
}

impl Stream for WebSocket {
    type Item = Result<Message, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(msg))) => {
                    // tungstenite's raw frames never reach a reader.
                    if let Some(msg) = from_tungstenite(msg) {
                        return Poll::Ready(Some(Ok(msg)));
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(Error::new(e)))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Sink<Message> for WebSocket {
    type Error = Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Pin::new(&mut self.inner).poll_ready(cx).map_err(Error::new)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Error> {
        Pin::new(&mut self.inner)
            .start_send(into_tungstenite(item))
            .map_err(Error::new)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Pin::new(&mut self.inner).poll_flush(cx).map_err(Error::new)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Pin::new(&mut self.inner).poll_close(cx).map_err(Error::new)
    }
}

use tokio_tungstenite::tungstenite::Message as TsMessage;

fn into_tungstenite(msg: Message) -> TsMessage {
    match msg {
        Message::Text(t) => TsMessage::Text(ts_text(t)),
        Message::Binary(b) => TsMessage::Binary(b),
        Message::Ping(b) => TsMessage::Ping(b),
        Message::Pong(b) => TsMessage::Pong(b),
        Message::Close(frame) => TsMessage::Close(frame.map(|f| frame::CloseFrame {
            code: frame::coding::CloseCode::from(f.code),
            reason: ts_text(f.reason),
        })),
    }
}

fn ts_text(t: Utf8Bytes) -> tokio_tungstenite::tungstenite::Utf8Bytes {
    // axum's text is valid UTF-8 already; tungstenite checks it once more
    // (its unchecked constructor is not public).
    let bytes = bytes_of(t);
    tokio_tungstenite::tungstenite::Utf8Bytes::try_from(bytes)
        .unwrap_or_else(|_| tokio_tungstenite::tungstenite::Utf8Bytes::from_static(""))
}

fn bytes_of(t: Utf8Bytes) -> axum::body::Bytes {
    t.into()
}

fn axum_text(t: tokio_tungstenite::tungstenite::Utf8Bytes) -> Utf8Bytes {
    // Valid UTF-8 (tungstenite checked it on receipt); axum checks it again.
    let bytes: axum::body::Bytes = t.into();
    Utf8Bytes::try_from(bytes).unwrap_or_else(|_| Utf8Bytes::from_static(""))
}

fn from_tungstenite(msg: TsMessage) -> Option<Message> {
    Some(match msg {
        TsMessage::Text(t) => Message::Text(axum_text(t)),
        TsMessage::Binary(b) => Message::Binary(b),
        TsMessage::Ping(b) => Message::Ping(b),
        TsMessage::Pong(b) => Message::Pong(b),
        TsMessage::Close(frame) => Message::Close(frame.map(|f| CloseFrame {
            code: f.code.into(),
            reason: axum_text(f.reason),
        })),
        TsMessage::Frame(_) => return None,
    })
}
