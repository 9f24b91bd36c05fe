//! tonic on numa_rt (feature `tonic`): servers through [`crate::serve()`],
//! clients through tonic's own `Channel` with numa_rt's executor, connector
//! and timer.
//!
//! **Servers.** tonic's `transport::Server` spawns on tokio and sleeps on
//! tokio's timer. Its `service::Routes` is a tower service, and
//! [`crate::serve()`] takes it as it is:
//!
//! ```ignore
//! let routes = tonic::service::Routes::new(GreeterServer::new(MyGreeter));
//! let listener = numa_rt::net::TcpListener::bind("127.0.0.1:50051").await?;
//! numa_rt::serve(listener, routes).await?;
//! ```
//!
//! **Clients.** tonic's `Channel` takes an executor and a connector, but
//! its timeouts (`Endpoint::timeout`, `connect_timeout`, a request's
//! `grpc-timeout` from `Request::set_timeout`) and HTTP/2 keep-alive sleep
//! on tokio's timer, which panics where no tokio runtime runs. [`Endpoint`]
//! builds the same `Channel` with [`crate::hyper::Executor`] and
//! [`crate::hyper::Connector`] (the connect timeout on numa_rt's timer) and
//! wraps it in a [`Channel`] that enforces the deadlines on numa_rt's timer:
//! a call past its deadline fails with `DEADLINE_EXCEEDED`, as tonic's
//! fails with `CANCELLED`. Generated clients take it as they take tonic's:
//!
//! ```ignore
//! let channel = numa_rt::tonic::Endpoint::from_static("http://127.0.0.1:50051")
//!     .timeout(Duration::from_secs(5))
//!     .connect_timeout(Duration::from_secs(1))
//!     .connect()
//!     .await?;
//! let mut client = GreeterClient::new(channel);
//! ```
//!
//! Deadlines on the server: tonic's `Server` ends a call at the deadline its
//! client sent (`grpc-timeout`) or at `Server::timeout`, on tokio's timer;
//! wrap the routes in [`GrpcTimeoutLayer`] for the same on numa_rt's.
//!
//! One difference remains: the `grpc-timeout` header is taken off the
//! request before tonic's channel sees it (tonic's channel would start a
//! tokio timer for it), so the server is not told the client's deadline;
//! the client still gives up at that deadline. HTTP/2 keep-alive pings are
//! not offered (tonic times them on tokio's timer).

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::{Request, Response, Uri};
use tonic::body::Body;
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Where and how a [`Channel`] connects (tonic's `Endpoint`, with the
/// settings that tonic times on tokio taken here and timed on numa_rt).
#[derive(Clone)]
pub struct Endpoint {
    inner: tonic::transport::Endpoint,
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    nodelay: bool,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("uri", self.inner.uri())
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint for a static URI such as `"http://127.0.0.1:50051"`.
    ///
    /// # Panics
    ///
    /// If the URI does not parse (tonic's `Endpoint::from_static`).
    pub fn from_static(uri: &'static str) -> Endpoint {
        Endpoint::new(tonic::transport::Endpoint::from_static(uri))
    }

    /// An endpoint for a URI given at run time.
    pub fn from_shared(uri: impl Into<String>) -> Result<Endpoint, tonic::transport::Error> {
        let uri: String = uri.into();
        Ok(Endpoint::new(tonic::transport::Endpoint::from_shared(uri)?))
    }

    /// Wraps a tonic endpoint. Settings it already has that tonic times on
    /// tokio (`timeout`, `connect_timeout`, `http2_keep_alive_interval`,
    /// `rate_limit`) would panic inside numa_rt: set the first two here.
    pub fn new(endpoint: tonic::transport::Endpoint) -> Endpoint {
        Endpoint {
            inner: endpoint.executor(crate::hyper::Executor),
            timeout: None,
            connect_timeout: None,
            nodelay: true,
        }
    }

    /// The default deadline of every call (a shorter `grpc-timeout` on a
    /// request wins).
    pub fn timeout(mut self, timeout: Duration) -> Endpoint {
        self.timeout = Some(timeout);
        self
    }

    /// Gives up connecting to an address after `timeout`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Endpoint {
        self.connect_timeout = Some(timeout);
        self
    }

    /// `TCP_NODELAY` on the connection (default: on).
    pub fn tcp_nodelay(mut self, on: bool) -> Endpoint {
        self.nodelay = on;
        self
    }

    /// Applies any other tonic setting (window sizes, user agent, origin,
    /// concurrency limit…). Do not set tonic's timeouts, keep-alive or rate
    /// limit here: tonic times them on tokio.
    pub fn configure(
        mut self,
        f: impl FnOnce(tonic::transport::Endpoint) -> tonic::transport::Endpoint,
    ) -> Endpoint {
        self.inner = f(self.inner).executor(crate::hyper::Executor);
        self
    }

    /// The URI.
    pub fn uri(&self) -> &Uri {
        self.inner.uri()
    }

    fn connector(&self) -> crate::hyper::Connector {
        let mut c = crate::hyper::Connector::new();
        c.set_nodelay(self.nodelay);
        c.set_connect_timeout(self.connect_timeout);
        c
    }

    /// Connects now.
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        let inner = self.inner.connect_with_connector(self.connector()).await?;
        Ok(Channel {
            inner,
            timeout: self.timeout,
        })
    }

    /// A channel that connects on its first call.
    pub fn connect_lazy(&self) -> Channel {
        Channel {
            inner: self.inner.connect_with_connector_lazy(self.connector()),
            timeout: self.timeout,
        }
    }
}

/// tonic's `Channel` with its deadlines on numa_rt's timer; give it to a
/// generated client as tonic's (`GreeterClient::new(channel)`).
#[derive(Clone, Debug)]
pub struct Channel {
    inner: tonic::transport::Channel,
    timeout: Option<Duration>,
}

impl Channel {
    /// tonic's channel inside (its own calls are not given deadlines).
    pub fn into_inner(self) -> tonic::transport::Channel {
        self.inner
    }
}

impl Service<Request<Body>> for Channel {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<Body>) -> ResponseFuture {
        let asked = req
            .headers_mut()
            .remove("grpc-timeout")
            .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        let deadline = match (asked, self.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let call = self.inner.call(req);
        ResponseFuture {
            call: Box::pin(async move {
                match deadline {
                    None => call.await.map_err(Into::into),
                    Some(d) => match crate::time::timeout(d, call).await {
                        Ok(r) => r.map_err(Into::into),
                        Err(_) => Err(Box::new(tonic::Status::deadline_exceeded(format!(
                            "the call's deadline ({d:?}) passed"
                        ))) as BoxError),
                    },
                }
            }),
        }
    }
}

/// The future of a [`Channel`] call.
pub struct ResponseFuture {
    call: Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>,
}

impl Future for ResponseFuture {
    type Output = Result<Response<Body>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.call.as_mut().poll(cx)
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

/// A tower layer that gives each gRPC call on the server the deadline its
/// client sent in `grpc-timeout` (and at most `server_timeout`), on
/// numa_rt's timer: what tonic's `Server` does with `Server::timeout` and the
/// header, which [`crate::serve()`] does not do by itself (tonic's own layer
/// sleeps on tokio's timer).
///
/// A call still running at its deadline is dropped, which cancels the
/// handler's future at its next await, and answered as tonic's server
/// answers it: status `CANCELLED`, "Timeout expired", in a trailers-only
/// response. A malformed header is ignored, as tonic ignores it.
///
/// ```ignore
/// let routes = tonic::service::Routes::new(GreeterServer::new(MyGreeter))
///     .into_axum_router()
///     .layer(numa_rt::tonic::GrpcTimeoutLayer::new().server_timeout(Duration::from_secs(30)));
/// numa_rt::serve(listener, routes).await?;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcTimeoutLayer {
    server_timeout: Option<Duration>,
}

impl GrpcTimeoutLayer {
    /// Deadlines from the `grpc-timeout` header only.
    pub fn new() -> GrpcTimeoutLayer {
        GrpcTimeoutLayer::default()
    }

    /// No call runs longer than `timeout`, whatever its client asked
    /// (tonic's `Server::timeout`).
    pub fn server_timeout(mut self, timeout: Duration) -> GrpcTimeoutLayer {
        self.server_timeout = Some(timeout);
        self
    }
}

impl<S> tower_layer::Layer<S> for GrpcTimeoutLayer {
    type Service = GrpcTimeout<S>;

    fn layer(&self, inner: S) -> GrpcTimeout<S> {
        GrpcTimeout {
            inner,
            server_timeout: self.server_timeout,
        }
    }
}

/// The service of a [`GrpcTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct GrpcTimeout<S> {
    inner: S,
    server_timeout: Option<Duration>,
}

impl<S, B, RB> Service<Request<B>> for GrpcTimeout<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = GrpcTimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> GrpcTimeoutFuture<S::Future> {
        let asked = req
            .headers()
            .get("grpc-timeout")
            .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        let deadline = match (asked, self.server_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        GrpcTimeoutFuture {
            call: Box::pin(self.inner.call(req)),
            sleep: deadline.map(|d| Box::pin(crate::time::sleep(d))),
        }
    }
}

/// The future of a [`GrpcTimeout`] call.
pub struct GrpcTimeoutFuture<F> {
    // Boxed so that the future is `Unpin` without a pin projection.
    call: Pin<Box<F>>,
    sleep: Option<Pin<Box<crate::time::Sleep>>>,
}

impl<F, RB, E> Future for GrpcTimeoutFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    RB: Default,
{
    type Output = Result<Response<RB>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(r) = self.call.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        let expired = match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx).is_ready(),
            None => false,
        };
        if !expired {
            return Poll::Pending;
        }
        // The handler's future is dropped with this one, which the caller
        // drops once it is finished.
        Poll::Ready(Ok(tonic::Status::cancelled("Timeout expired").into_http()))
    }
}

impl<F> fmt::Debug for GrpcTimeoutFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrpcTimeoutFuture")
    }
}

/// gRPC's `grpc-timeout`: at most 8 digits and a unit (H, M, S, m, u, n).
/// A malformed value is ignored, as tonic ignores it.
fn parse_grpc_timeout(v: &[u8]) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_grpc_timeout;
    use std::time::Duration;

    #[test]
    fn grpc_timeouts_parse_as_the_spec_writes_them() {
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_grpc_timeout(b"250m"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_grpc_timeout(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            parse_grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [&b""[..], b"S", b"123456789S", b"12x", b"-1S", b"1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }
}
