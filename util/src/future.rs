//! [`FutureExt`]: fluent adapters for any future (tokio-util's `future`
//! module), with the timeouts on numa_rt's timers.

use crate::sync::{CancellationToken, WaitForCancellationFuture, WaitForCancellationFutureOwned};
use numa_rt::time::{Duration, Instant, Timeout};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Adapters for every `Future`.
///
/// The timeouts are [`numa_rt::time::timeout`] and
/// [`numa_rt::time::timeout_at`] in method form: they use numa_rt's timers
/// and its [`Instant`], so they follow a paused clock and need a numa_rt
/// runtime (tokio-util's take tokio's `Instant` and need tokio's timer).
/// As tokio-util's, they panic when called outside a runtime, at the
/// caller's line (numa_rt's own `timeout` would only panic when polled
/// there).
pub trait FutureExt: Future {
    /// [`numa_rt::time::timeout`] as a method: `Err(Elapsed)` if the future
    /// has not completed `timeout` from now.
    ///
    /// ```
    /// use numa_rt::time::Duration;
    /// use numa_rt_util::future::FutureExt;
    ///
    /// # #[numa_rt::main(max_procs = 1, start_paused = true)]
    /// # async fn main() {
    /// let (_tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    /// assert!(rx.timeout(Duration::from_millis(10)).await.is_err());
    /// assert_eq!(async { 7 }.timeout(Duration::from_secs(1)).await.unwrap(), 7);
    /// # }
    /// ```
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    fn timeout(self, timeout: Duration) -> Timeout<Self>
    where
        Self: Sized,
    {
        require_runtime("timeout");
        numa_rt::time::timeout(timeout, self)
    }

    /// [`numa_rt::time::timeout_at`] as a method: `Err(Elapsed)` if the
    /// future has not completed by `deadline`.
    ///
    /// ```
    /// use numa_rt::time::{Duration, Instant};
    /// use numa_rt_util::future::FutureExt;
    ///
    /// # #[numa_rt::main(max_procs = 1, start_paused = true)]
    /// # async fn main() {
    /// let (_tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    /// let deadline = Instant::now() + Duration::from_millis(10);
    /// assert!(rx.timeout_at(deadline).await.is_err());
    /// # }
    /// ```
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    fn timeout_at(self, deadline: Instant) -> Timeout<Self>
    where
        Self: Sized,
    {
        require_runtime("timeout_at");
        numa_rt::time::timeout_at(deadline, self)
    }

    /// Runs the future until it completes (`Some(output)`) or the token is
    /// cancelled (`None`, and the future is dropped with the adapter).
    ///
    /// A token already cancelled gives `None` without polling the future;
    /// after that, when both are ready at one poll, the future's output
    /// wins.
    ///
    /// ```
    /// use numa_rt_util::future::FutureExt;
    /// use numa_rt_util::sync::CancellationToken;
    ///
    /// # #[numa_rt::main(max_procs = 1)]
    /// # async fn main() {
    /// let token = CancellationToken::new();
    /// let (_tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    /// let canceller = token.clone();
    /// numa_rt::spawn(async move { canceller.cancel() });
    /// assert!(rx.with_cancellation_token(&token).await.is_none());
    /// # }
    /// ```
    fn with_cancellation_token(
        self,
        cancellation_token: &CancellationToken,
    ) -> WithCancellationTokenFuture<'_, Self>
    where
        Self: Sized,
    {
        WithCancellationTokenFuture {
            cancelled_at_start: cancellation_token.is_cancelled(),
            cancelled: cancellation_token.cancelled(),
            future: self,
        }
    }

    /// [`with_cancellation_token`](Self::with_cancellation_token) with a
    /// token it owns (the adapter is `'static` if the future is).
    ///
    /// ```
    /// use numa_rt_util::future::FutureExt;
    /// use numa_rt_util::sync::CancellationToken;
    ///
    /// # #[numa_rt::main(max_procs = 1)]
    /// # async fn main() {
    /// let token = CancellationToken::new();
    /// let task = numa_rt::spawn(std::future::pending::<()>().with_cancellation_token_owned(token.clone()));
    /// token.cancel();
    /// assert_eq!(task.await.unwrap(), None);
    /// # }
    /// ```
    fn with_cancellation_token_owned(
        self,
        cancellation_token: CancellationToken,
    ) -> WithCancellationTokenFutureOwned<Self>
    where
        Self: Sized,
    {
        WithCancellationTokenFutureOwned {
            cancelled_at_start: cancellation_token.is_cancelled(),
            cancelled: cancellation_token.cancelled_owned(),
            future: self,
        }
    }
}

impl<T: Future + ?Sized> FutureExt for T {}

pin_project! {
    /// The future of [`FutureExt::with_cancellation_token`].
    #[must_use = "futures do nothing unless polled"]
    pub struct WithCancellationTokenFuture<'a, F: Future> {
        cancelled_at_start: bool,
        #[pin]
        cancelled: WaitForCancellationFuture<'a>,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for WithCancellationTokenFuture<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        race(this.cancelled_at_start, this.future, this.cancelled, cx)
    }
}

impl<F: Future + std::fmt::Debug> std::fmt::Debug for WithCancellationTokenFuture<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithCancellationTokenFuture")
            .field("future", &self.future)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The future of [`FutureExt::with_cancellation_token_owned`].
    #[must_use = "futures do nothing unless polled"]
    pub struct WithCancellationTokenFutureOwned<F: Future> {
        cancelled_at_start: bool,
        #[pin]
        cancelled: WaitForCancellationFutureOwned,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for WithCancellationTokenFutureOwned<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        race(this.cancelled_at_start, this.future, this.cancelled, cx)
    }
}

impl<F: Future + std::fmt::Debug> std::fmt::Debug for WithCancellationTokenFutureOwned<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithCancellationTokenFutureOwned")
            .field("future", &self.future)
            .finish_non_exhaustive()
    }
}

/// Panics, at the caller's line, outside a numa_rt runtime.
#[track_caller]
fn require_runtime(what: &str) {
    if numa_rt::runtime::Handle::try_current().is_err() {
        panic!(
            "FutureExt::{what} must be called from a numa_rt runtime (a task, block_on, \
             #[numa_rt::main], or with a Handle entered): its timer belongs to one"
        );
    }
}

/// One poll of a future against a cancellation: `None` at once if the
/// token was cancelled when the adapter was made, else the future first.
fn race<F: Future>(
    cancelled_at_start: &bool,
    future: Pin<&mut F>,
    cancelled: Pin<&mut impl Future<Output = ()>>,
    cx: &mut Context<'_>,
) -> Poll<Option<F::Output>> {
    if *cancelled_at_start {
        return Poll::Ready(None);
    }
    if let Poll::Ready(out) = future.poll(cx) {
        return Poll::Ready(Some(out));
    }
    cancelled.poll(cx).map(|()| None)
}
