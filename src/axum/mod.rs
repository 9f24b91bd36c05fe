//! axum on numa_rt (feature `axum`): what an axum app reaches for beside
//! its `Router` that axum itself runs on tokio's runtime.
//!
//! | axum | on numa_rt |
//! |---|---|
//! | `axum::serve(listener, app)` | [`crate::serve()`]`(listener, app)` |
//! | `axum::extract::ws::{WebSocketUpgrade, WebSocket}` (spawns on tokio) | [`ws::WebSocketUpgrade`], [`ws::WebSocket`] (same API; `Message` is axum's own) |
//! | `axum::response::sse::{Sse, KeepAlive}` (keep-alive sleeps on tokio) | [`sse::Sse`], [`sse::KeepAlive`] (same API; `Event` is axum's own) |
//! | `into_make_service_with_connect_info::<SocketAddr>()` + `ConnectInfo` | the same, served by [`crate::serve()`] |
//!
//! The rest of axum — routing, extractors, `State`, middleware from tower
//! and tower-http that does not sleep — is plain tower services and runs
//! on numa_rt as it is.
//!
//! This module also lets [`crate::serve()`] take axum's `Router` and
//! `MethodRouter` directly, and gives `ConnectInfo` the peer's address of a
//! numa_rt TCP or Unix connection.

use std::convert::Infallible;
use std::future::Ready;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::routing::MethodRouter;
use axum::Router;
use tower_service::Service;

use crate::serve::{IncomingStream, Listener};

pub mod sse;
pub mod ws;

impl<'a, L: Listener> Service<IncomingStream<'a, L>> for Router<()> {
    type Response = Router<()>;
    type Error = Infallible;
    type Future = Ready<Result<Router<()>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _conn: IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}

impl<'a, L: Listener> Service<IncomingStream<'a, L>> for MethodRouter<(), Infallible> {
    type Response = MethodRouter<(), Infallible>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _conn: IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}

impl<'a, L> Connected<IncomingStream<'a, L>> for SocketAddr
where
    L: Listener<Addr = SocketAddr>,
{
    fn connect_info(conn: IncomingStream<'a, L>) -> SocketAddr {
        *conn.remote_addr()
    }
}

impl<'a, L> Connected<IncomingStream<'a, L>> for crate::net::unix::SocketAddr
where
    L: Listener<Addr = crate::net::unix::SocketAddr>,
{
    fn connect_info(conn: IncomingStream<'a, L>) -> crate::net::unix::SocketAddr {
        conn.remote_addr().clone()
    }
}

#[cfg(feature = "tonic")]
impl<'a, L: Listener> Service<IncomingStream<'a, L>> for tonic::service::Routes {
    type Response = tonic::service::Routes;
    type Error = Infallible;
    type Future = Ready<Result<tonic::service::Routes, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _conn: IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}
