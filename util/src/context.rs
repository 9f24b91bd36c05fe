//! Running a future in the context of a given runtime (tokio-util's
//! `context` module): [`RuntimeExt::wrap`] and [`TokioContext`].
//!
//! numa_rt's timers and sockets register with the runtime entered on the
//! thread that first polls them. [`TokioContext`] enters its runtime's
//! [`Handle`] around every poll of the future it wraps, so a future polled
//! by one runtime (or by any executor, or by `block_on` on a plain thread)
//! creates its timers and sockets on another — typically one built with a
//! configuration the poller lacks. Tasks the future spawns go to that
//! runtime too.
//!
//! The name `TokioContext` is tokio-util's, kept so that ported code builds
//! unchanged; here the context is numa_rt's.
//!
//! ```
//! use numa_rt::runtime::Builder;
//! use numa_rt::time::{sleep, Duration};
//! use numa_rt_util::context::RuntimeExt;
//!
//! let timers = Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
//! let other = Builder::new_current_thread().build().unwrap();
//! // The sleep is made and registered on `timers`, while `other` polls it.
//! other.block_on(timers.wrap(async { sleep(Duration::from_millis(1)).await }));
//! ```

use numa_rt::runtime::{Handle, Runtime};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project! {
    /// A future that enters a runtime's context ([`Handle::enter`]) for
    /// each of its polls.
    ///
    /// ```
    /// use numa_rt_util::context::TokioContext;
    ///
    /// let rt = numa_rt::Runtime::new().unwrap();
    /// let fut = TokioContext::new(async { numa_rt::runtime::Handle::current().id() }, rt.handle().clone());
    /// let id = futures::executor::block_on(fut); // polled by another executor
    /// assert_eq!(id, rt.handle().id());
    /// ```
    #[derive(Debug)]
    pub struct TokioContext<F> {
        #[pin]
        inner: F,
        handle: Handle,
    }
}

impl<F> TokioContext<F> {
    /// Wraps `future`, to be polled inside `handle`'s runtime.
    pub fn new(future: F, handle: Handle) -> TokioContext<F> {
        TokioContext {
            inner: future,
            handle,
        }
    }

    /// The runtime the future is polled in.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The wrapped future.
    pub fn into_inner(self) -> F {
        self.inner
    }
}

impl<F: Future> Future for TokioContext<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.handle.enter();
        this.inner.poll(cx)
    }
}

/// `wrap` on a [`Runtime`].
pub trait RuntimeExt {
    /// `future` in this runtime's context: see [`TokioContext`].
    fn wrap<F: Future>(&self, future: F) -> TokioContext<F>;
}

impl RuntimeExt for Runtime {
    fn wrap<F: Future>(&self, future: F) -> TokioContext<F> {
        TokioContext::new(future, self.handle().clone())
    }
}
