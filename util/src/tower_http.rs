//! tower-http's request timeout on numa_rt's timer (feature `tower-http`).
//!
//! tower-http's `timeout::TimeoutLayer` sleeps on tokio's timer. This
//! module's [`TimeoutLayer`] is the same middleware timed on numa_rt: a
//! response not ready within the duration is replaced by an empty
//! `408 Request Timeout` (or the status given to
//! [`with_status_code`](TimeoutLayer::with_status_code)), and the inner
//! service's future is dropped. A port changes one `use` line:
//!
//! ```
//! use numa_rt_util::tower_http::TimeoutLayer; // was: tower_http::timeout::TimeoutLayer
//! use http::{Request, Response, StatusCode};
//! use std::time::Duration;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! #[numa_rt::main(max_procs = 1)]
//! async fn main() {
//!     let app = ServiceBuilder::new()
//!         .layer(TimeoutLayer::new(Duration::from_millis(10)))
//!         .service(service_fn(|_req: Request<()>| async {
//!             numa_rt::time::sleep(Duration::from_secs(5)).await;
//!             Ok::<_, std::convert::Infallible>(Response::new(String::from("late")))
//!         }));
//!     let response = app.oneshot(Request::new(())).await.unwrap();
//!     assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
//!     assert!(response.body().is_empty());
//! }
//! ```
//!
//! The same types are in [`crate::tower`] as [`RequestTimeoutLayer`] and
//! [`RequestTimeout`], names that do not clash with tower's `Timeout`.
//!
//! tower-http's body timeouts are here too, with its names:
//! [`RequestBodyTimeoutLayer`] and [`ResponseBodyTimeoutLayer`] wrap the
//! request's or the response's body in a [`TimeoutBody`], which fails with
//! [`TimeoutError`] when no frame comes within the duration (a client
//! that trickles its body, slowloris-style, is cut off).

use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use numa_rt::time::Sleep;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`RequestTimeout`] to a service (tower-http's
/// `timeout::TimeoutLayer`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeoutLayer {
    timeout: Duration,
    status: StatusCode,
}

/// tower-http's name for [`RequestTimeoutLayer`].
pub type TimeoutLayer = RequestTimeoutLayer;

/// tower-http's name for [`RequestTimeout`].
pub type Timeout<S> = RequestTimeout<S>;

impl RequestTimeoutLayer {
    /// Responses not ready within `timeout` become `408 Request Timeout`.
    pub const fn new(timeout: Duration) -> Self {
        Self::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout)
    }

    /// Responses not ready within `timeout` become an empty response with
    /// `status` (tower-http 0.6.7's constructor).
    pub const fn with_status_code(status: StatusCode, timeout: Duration) -> Self {
        RequestTimeoutLayer { timeout, status }
    }
}

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;

    fn layer(&self, inner: S) -> RequestTimeout<S> {
        RequestTimeout::with_status_code(inner, self.status, self.timeout)
    }
}

/// Answers with an empty `408 Request Timeout` when the inner service's
/// response is not ready within a duration (tower-http's
/// `timeout::Timeout`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeout<S> {
    inner: S,
    timeout: Duration,
    status: StatusCode,
}

impl<S> RequestTimeout<S> {
    /// Wraps `inner`: responses not ready within `timeout` become 408.
    pub const fn new(inner: S, timeout: Duration) -> Self {
        Self::with_status_code(inner, StatusCode::REQUEST_TIMEOUT, timeout)
    }

    /// Wraps `inner`: responses not ready within `timeout` become an empty
    /// response with `status`.
    pub const fn with_status_code(inner: S, status: StatusCode, timeout: Duration) -> Self {
        RequestTimeout {
            inner,
            timeout,
            status,
        }
    }

    /// A [`RequestTimeoutLayer`] (tower-http's `Timeout::layer`).
    pub const fn layer(timeout: Duration) -> RequestTimeoutLayer {
        RequestTimeoutLayer::new(timeout)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequestTimeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RequestTimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        RequestTimeoutFuture {
            response: self.inner.call(request),
            sleep: numa_rt::time::sleep(self.timeout),
            status: self.status,
        }
    }
}

pin_project! {
    /// The response future of [`RequestTimeout`].
    #[derive(Debug)]
    pub struct RequestTimeoutFuture<F> {
        #[pin]
        response: F,
        #[pin]
        sleep: Sleep,
        status: StatusCode,
    }
}

impl<F, B, E> Future for RequestTimeoutFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.response.poll(cx) {
            return Poll::Ready(result);
        }
        match this.sleep.poll(cx) {
            Poll::Ready(()) => {
                let mut response = Response::new(B::default());
                *response.status_mut() = *this.status;
                Poll::Ready(Ok(response))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// tower's boxed error, the error type of [`TimeoutBody`].
type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project! {
    /// A body that fails with [`TimeoutError`] when no frame comes within
    /// a duration of the poll that started waiting for it (tower-http's
    /// `timeout::TimeoutBody`, timed on numa_rt).
    #[derive(Debug)]
    pub struct TimeoutBody<B> {
        timeout: Duration,
        // Runs while a frame is awaited; cleared by each frame.
        #[pin]
        sleep: Option<Sleep>,
        #[pin]
        body: B,
    }
}

impl<B> TimeoutBody<B> {
    /// Wraps `body`: each frame must come within `timeout`.
    pub fn new(timeout: Duration, body: B) -> Self {
        TimeoutBody {
            timeout,
            sleep: None,
            body,
        }
    }
}

impl<B> Body for TimeoutBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        if this.sleep.is_none() {
            this.sleep.set(Some(numa_rt::time::sleep(*this.timeout)));
        }
        if let Some(sleep) = this.sleep.as_mut().as_pin_mut() {
            if sleep.poll(cx).is_ready() {
                return Poll::Ready(Some(Err(Box::new(TimeoutError(())))));
            }
        }
        let frame = ready!(this.body.poll_frame(cx));
        this.sleep.set(None);
        Poll::Ready(frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// [`TimeoutBody`]'s error: no frame came in time.
#[derive(Debug)]
pub struct TimeoutError(());

impl std::error::Error for TimeoutError {}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("data was not received within the designated timeout")
    }
}

/// Applies [`RequestBodyTimeout`] (tower-http's
/// `timeout::RequestBodyTimeoutLayer`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct RequestBodyTimeoutLayer {
    timeout: Duration,
}

impl RequestBodyTimeoutLayer {
    /// Each request-body frame must come within `timeout`.
    pub const fn new(timeout: Duration) -> Self {
        RequestBodyTimeoutLayer { timeout }
    }
}

impl<S> Layer<S> for RequestBodyTimeoutLayer {
    type Service = RequestBodyTimeout<S>;

    fn layer(&self, inner: S) -> RequestBodyTimeout<S> {
        RequestBodyTimeout::new(inner, self.timeout)
    }
}

/// Wraps each request's body in a [`TimeoutBody`] (tower-http's
/// `timeout::RequestBodyTimeout`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct RequestBodyTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> RequestBodyTimeout<S> {
    /// Wraps `inner`: each request-body frame must come within `timeout`.
    pub const fn new(inner: S, timeout: Duration) -> Self {
        RequestBodyTimeout { inner, timeout }
    }

    /// A [`RequestBodyTimeoutLayer`].
    pub const fn layer(timeout: Duration) -> RequestBodyTimeoutLayer {
        RequestBodyTimeoutLayer::new(timeout)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody> Service<Request<ReqBody>> for RequestBodyTimeout<S>
where
    S: Service<Request<TimeoutBody<ReqBody>>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let timeout = self.timeout;
        self.inner
            .call(request.map(|body| TimeoutBody::new(timeout, body)))
    }
}

/// Applies [`ResponseBodyTimeout`] (tower-http's
/// `timeout::ResponseBodyTimeoutLayer`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct ResponseBodyTimeoutLayer {
    timeout: Duration,
}

impl ResponseBodyTimeoutLayer {
    /// Each response-body frame must come within `timeout`.
    pub const fn new(timeout: Duration) -> Self {
        ResponseBodyTimeoutLayer { timeout }
    }
}

impl<S> Layer<S> for ResponseBodyTimeoutLayer {
    type Service = ResponseBodyTimeout<S>;

    fn layer(&self, inner: S) -> ResponseBodyTimeout<S> {
        ResponseBodyTimeout::new(inner, self.timeout)
    }
}

/// Wraps each response's body in a [`TimeoutBody`] (tower-http's
/// `timeout::ResponseBodyTimeout`, timed on numa_rt).
#[derive(Debug, Clone, Copy)]
pub struct ResponseBodyTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> ResponseBodyTimeout<S> {
    /// Wraps `inner`: each response-body frame must come within `timeout`.
    pub const fn new(inner: S, timeout: Duration) -> Self {
        ResponseBodyTimeout { inner, timeout }
    }

    /// A [`ResponseBodyTimeoutLayer`].
    pub const fn layer(timeout: Duration) -> ResponseBodyTimeoutLayer {
        ResponseBodyTimeoutLayer::new(timeout)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ResponseBodyTimeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<TimeoutBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseBodyTimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        ResponseBodyTimeoutFuture {
            inner: self.inner.call(request),
            timeout: self.timeout,
        }
    }
}

pin_project! {
    /// The response future of [`ResponseBodyTimeout`].
    #[derive(Debug)]
    pub struct ResponseBodyTimeoutFuture<F> {
        #[pin]
        inner: F,
        timeout: Duration,
    }
}

impl<F, B, E> Future for ResponseBodyTimeoutFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TimeoutBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let timeout = *this.timeout;
        let response = ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(response.map(|body| TimeoutBody::new(timeout, body))))
    }
}
