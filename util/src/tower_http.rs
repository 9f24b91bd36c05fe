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
//! tower-http's body timeouts (`RequestBodyTimeout`,
//! `ResponseBodyTimeout`) are not here.

use http::{Request, Response, StatusCode};
use numa_rt::time::Sleep;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
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
