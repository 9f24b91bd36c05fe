//! Serving HTTP with hyper on numa_rt: [`serve`], with `axum::serve`'s
//! shape (feature `hyper`; axum's `Router` and tonic's `Routes` plug in with
//! the features `axum` and `tonic`).
//!
//! `axum::serve` spawns every connection on tokio's runtime (`tokio::spawn`,
//! hyper-util's `TokioExecutor`) and sleeps on tokio's timer after an accept
//! error, so it cannot run inside numa_rt. This is the same function for
//! numa_rt: porting an axum app is the rename (`tokio` → `numa_rt`) plus
//! `axum::serve` → `numa_rt::serve`.
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # mod app {
//! use axum::{routing::get, Router};
//!
//! #[numa_rt::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = Router::new().route("/", get(|| async { "Hello, World!" }));
//!     let listener = numa_rt::net::TcpListener::bind("0.0.0.0:3000").await?;
//!     numa_rt::serve(listener, app).await
//! }
//! # }
//! # fn main() {}
//! ```
//!
//! # What it does
//!
//! - One task per connection, spawned right after its accept, so it is a
//!   *root task*: the connections go round-robin over the processors and
//!   their nodes (Vyukov's root distribution), and each connection's
//!   socket is then watched by the poller of the processor that runs it.
//!   The accept loop runs in the task that awaits [`Serve`].
//! - HTTP/1.1 and HTTP/2 (prior knowledge, h2c) on one port, detected from
//!   the first bytes (hyper-util's `auto::Builder`), with upgrades
//!   (WebSocket) and HTTP/2's extended CONNECT; hyper's timers and the
//!   HTTP/2 streams it spawns run on numa_rt's ([`crate::hyper::Timer`],
//!   [`crate::hyper::Executor`]).
//! - `TCP_NODELAY` is set on every accepted TCP connection (responses are
//!   small writes that Nagle's algorithm would hold back); axum 0.8 leaves
//!   it to the user's `tap_io`, which is here too ([`ListenerExt::tap_io`]).
//! - Accept errors as axum handles them. Running out of descriptors
//!   (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) never reaches the loop:
//!   numa_rt's listeners wait that out themselves, retrying every 10 ms, so
//!   the backlog is served as soon as descriptors are freed; they say so on
//!   standard error when it begins and ends (at most one report every 10 s). A connection
//!   reset or aborted before it was accepted is skipped; any other error is
//!   logged (a `tracing` error event with the feature `axum`, as axum logs
//!   it; on standard error without it), then the loop sleeps one second on
//!   numa_rt's timer and goes on.
//! - [`Serve::with_graceful_shutdown`]: when the signal future completes,
//!   the listener is closed, every open connection is told to finish
//!   (HTTP/1: after the response in flight; HTTP/2: GOAWAY, streams in
//!   flight complete), and the future completes once every connection task
//!   has ended.
//!
//! # The make-service
//!
//! `make_service` is called once per connection with an [`IncomingStream`]
//! (the accepted socket and the peer's address) and returns the service for
//! that connection, as in axum. It is any tower service
//! `Service<IncomingStream<'_, L>>`, which covers axum's `Router`,
//! `MethodRouter`, `into_make_service()` and
//! `into_make_service_with_connect_info::<SocketAddr>()` (feature `axum`),
//! tonic's `Routes` (feature `tonic`), and [`service_per_connection`] for
//! any cloneable HTTP service.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

mod listener;
pub use listener::{IncomingStream, Listener, ListenerExt, TapIo};

/// Serves `make_service` on `listener` until the returned future is dropped
/// (or, with [`Serve::with_graceful_shutdown`], until a signal); see the
/// [module docs](self).
///
/// `make_service` is called with each accepted connection and returns the
/// HTTP service for it: axum's `Router` (feature `axum`), tonic's `Routes`
/// (feature `tonic`), a make-service such as
/// `router.into_make_service_with_connect_info::<SocketAddr>()`, or
/// [`service_per_connection`]`(svc)` for any cloneable tower HTTP service.
pub fn serve<L, M, S, B>(listener: L, make_service: M) -> Serve<L, M, S>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S>,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    Serve {
        listener,
        make_service,
        _marker: PhantomData,
    }
}

/// The future [`serve`] returns (through [`IntoFuture`]): it runs the accept
/// loop when awaited, and resolves only on an error it cannot go on from
/// (there is none today: accept errors are waited out).
#[must_use = "a Serve does nothing until it is awaited"]
pub struct Serve<L, M, S> {
    listener: L,
    make_service: M,
    _marker: PhantomData<fn() -> S>,
}

impl<L: Listener, M, S> Serve<L, M, S> {
    /// Stops accepting when `signal` completes, lets every open connection
    /// finish what it is doing, and completes when all have closed.
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<L, M, S, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            listener: self.listener,
            make_service: self.make_service,
            signal,
            _marker: PhantomData,
        }
    }

    /// The listener's address.
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

impl<L: fmt::Debug, M: fmt::Debug, S> fmt::Debug for Serve<L, M, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("make_service", &self.make_service)
            .finish()
    }
}

/// [`serve`] with a shutdown signal ([`Serve::with_graceful_shutdown`]).
#[must_use = "a WithGracefulShutdown does nothing until it is awaited"]
pub struct WithGracefulShutdown<L, M, S, F> {
    listener: L,
    make_service: M,
    signal: F,
    _marker: PhantomData<fn() -> S>,
}

impl<L: Listener, M, S, F> WithGracefulShutdown<L, M, S, F> {
    /// The listener's address.
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

impl<L: fmt::Debug, M: fmt::Debug, S, F> fmt::Debug for WithGracefulShutdown<L, M, S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithGracefulShutdown")
            .field("listener", &self.listener)
            .field("make_service", &self.make_service)
            .finish_non_exhaustive()
    }
}

/// The future of a [`Serve`] or [`WithGracefulShutdown`].
pub struct ServeFuture(Pin<Box<dyn Future<Output = io::Result<()>> + Send>>);

impl Future for ServeFuture {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServeFuture")
    }
}

impl<L, M, S, B> IntoFuture for Serve<L, M, S>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S> + Send + 'static,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        let Serve {
            mut listener,
            mut make_service,
            ..
        } = self;
        ServeFuture(Box::pin(async move {
            loop {
                let (io, addr) = listener.accept().await;
                let (io, service) = make_connection_service(&mut make_service, io, addr).await;
                spawn_connection(io, service, None);
            }
        }))
    }
}

impl<L, M, S, B, F> IntoFuture for WithGracefulShutdown<L, M, S, F>
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S> + Send + 'static,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        let WithGracefulShutdown {
            mut listener,
            mut make_service,
            signal,
            ..
        } = self;
        ServeFuture(Box::pin(async move {
            // Every connection task holds a receiver of `stop` (it learns of
            // the signal when the sender is dropped) and one of `open` (the
            // loop learns that all have ended when the last is dropped).
            let (stop_tx, stop_rx) = watch::channel(());
            let (open_tx, open_rx) = watch::channel(());
            let mut signal = std::pin::pin!(signal);
            loop {
                let (io, addr) = crate::select! {
                    conn = listener.accept() => conn,
                    () = signal.as_mut() => break,
                };
                let (io, service) = make_connection_service(&mut make_service, io, addr).await;
                let guard = ShutdownGuard {
                    stop: stop_rx.clone(),
                    _open: open_rx.clone(),
                };
                spawn_connection(io, service, Some(guard));
            }
            // Closing the listener first: new connections are refused while
            // the open ones drain.
            drop(listener);
            drop(stop_tx);
            drop(open_rx);
            open_tx.closed().await;
            Ok(())
        }))
    }
}

/// A connection task's part in a graceful shutdown.
struct ShutdownGuard {
    /// Changes (closes) when the shutdown signal has fired.
    stop: watch::Receiver<()>,
    /// Dropped when the connection task ends.
    _open: watch::Receiver<()>,
}

/// Asks the make-service for a connection's service. The socket is owned
/// here and lent only to `call`'s future, so the accept loop's future is
/// `Send` without `L::Io: Sync` (as axum's).
async fn make_connection_service<L, M, S>(
    make_service: &mut M,
    io: L::Io,
    addr: L::Addr,
) -> (L::Io, S)
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Error = Infallible, Response = S>,
{
    match std::future::poll_fn(|cx| {
        <M as Service<IncomingStream<'_, L>>>::poll_ready(make_service, cx)
    })
    .await
    {
        Ok(()) => {}
        Err(never) => match never {},
    }
    let made = make_service
        .call(IncomingStream {
            io: &io,
            remote_addr: addr,
        })
        .await;
    match made {
        Ok(service) => (io, service),
        Err(never) => match never {},
    }
}

/// Spawns the task that serves one connection. It is spawned right after
/// the accept (the make-service's future, in between, runs no task of its
/// own for the services above), which makes it a root task.
fn spawn_connection<I, S, B>(io: I, service: S, shutdown: Option<ShutdownGuard>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let service = TowerToHyperService::new(service);
    drop(crate::spawn(async move {
        let mut builder = Builder::new(crate::hyper::Executor);
        builder.http1().timer(crate::hyper::Timer);
        builder
            .http2()
            .timer(crate::hyper::Timer)
            // WebSockets over HTTP/2 (RFC 8441), as axum enables it.
            .enable_connect_protocol();
        let conn = builder.serve_connection_with_upgrades(ConnIo(io), service);
        let mut conn = std::pin::pin!(conn);
        match shutdown {
            None => {
                // Errors are the peer's (reset, garbage, a timeout): the
                // connection is closed either way, as axum does.
                let _ = conn.await;
            }
            Some(mut guard) => {
                let stopped = crate::select! {
                    _ = conn.as_mut() => false,
                    _ = guard.stop.changed() => true,
                };
                if stopped {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
                drop(guard);
            }
        }
    }));
}

/// tokio's I/O traits (which numa_rt's sockets implement, reading straight
/// into uninitialized memory) seen as hyper's. hyper-util's `TokioIo` does
/// the same, but compiles tokio's runtime in with it.
struct ConnIo<T>(T);

impl<T: AsyncRead + Unpin> hyper::rt::Read for ConnIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `as_mut` requires that no initialized byte is
        // de-initialized through it. The bytes go to tokio's `ReadBuf`,
        // whose own contract forbids exactly that of the reader (it only
        // writes bytes and tracks how many are filled).
        let spare = unsafe { buf.as_mut() };
        let mut read_buf = ReadBuf::uninit(spare);
        let n = match Pin::new(&mut self.0).poll_read(cx, &mut read_buf) {
            Poll::Ready(Ok(())) => read_buf.filled().len(),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        // SAFETY: `ReadBuf` guarantees its first `filled().len()` bytes are
        // initialized, and they are the first `n` bytes of the cursor.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for ConnIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}

/// A make-service that hands every connection a clone of `service`: for
/// serving any cloneable tower HTTP service with [`serve`] (axum's `Router`
/// and tonic's `Routes` need no wrapper).
pub fn service_per_connection<S: Clone>(service: S) -> ServicePerConnection<S> {
    ServicePerConnection(service)
}

/// See [`service_per_connection`].
#[derive(Debug, Clone)]
pub struct ServicePerConnection<S>(S);

impl<'a, L: Listener, S: Clone> Service<IncomingStream<'a, L>> for ServicePerConnection<S> {
    type Response = S;
    type Error = Infallible;
    type Future = std::future::Ready<Result<S, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _conn: IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(self.0.clone()))
    }
}
