//! A deadline on every response, on numa_rt's timer.

use super::BoxError;
use numa_rt::time::Sleep;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// Fails a request whose response takes longer than a duration (tower's
/// `Timeout`, timed on numa_rt).
///
/// The error is tower's own [`Elapsed`](::tower::timeout::error::Elapsed)
/// in a [`BoxError`], or the inner service's error boxed.
#[derive(Debug, Clone)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> Timeout<S> {
    /// Wraps `inner`: each response must be ready within `timeout`.
    pub const fn new(inner: S, timeout: Duration) -> Self {
        Timeout { inner, timeout }
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

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // As tower: readiness is not timed, only the response.
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        ResponseFuture {
            response: self.inner.call(request),
            sleep: numa_rt::time::sleep(self.timeout),
        }
    }
}

pin_project! {
    /// The response future of [`Timeout`].
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        response: F,
        #[pin]
        sleep: Sleep,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The response first: one that is ready at the deadline wins.
        if let Poll::Ready(result) = this.response.poll(cx) {
            return Poll::Ready(result.map_err(Into::into));
        }
        match this.sleep.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Box::new(::tower::timeout::error::Elapsed::new()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Applies [`Timeout`] to a service (tower's `TimeoutLayer`).
#[derive(Debug, Clone, Copy)]
pub struct TimeoutLayer {
    timeout: Duration,
}

impl TimeoutLayer {
    /// A layer whose services time out after `timeout`.
    pub const fn new(timeout: Duration) -> Self {
        TimeoutLayer { timeout }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout::new(inner, self.timeout)
    }
}
