//! Tasks (Go's G): futures wrapped by async-task.
//!
//! A task is one allocation made by async-task: its header (state, refcount,
//! vtable, awaiter), our `TaskMeta` (the id, one word), the schedule
//! function (an `Arc` to the runtime, or to the pinned queue of a local
//! task) and the future. Vyukov asked for "about 6 words" per G; the header
//! plus metadata plus schedule function is five.
//!
//! A `Runnable` is the right to poll the task once; it lives in exactly one
//! run queue at a time (or is being polled). The schedule function decides
//! which queue — see `Shared::schedule` for the policy (runnext, tail,
//! inbox, node queue).
//!
//! Panics are caught around the future (not by async-task), so a panicking
//! task completes with [`JoinError`] and never unwinds into a worker.

mod join;
pub(crate) mod registry;
mod yield_now;

pub use join::{JoinError, JoinHandle};
pub use yield_now::yield_now;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

/// What the scheduler keeps in each task's header.
#[derive(Debug)]
pub(crate) struct TaskMeta {
    /// Unique per process; shown in panics, metrics and (later) traces.
    pub(crate) id: Id,
}

/// A task's id: unique for the life of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(u64);

impl Id {
    pub(crate) fn next() -> Id {
        // std's atomic even under loom: ids are not part of any model.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Relaxed: ids only need uniqueness, not ordering.
        Id(NEXT.fetch_add(1, Relaxed))
    }

    /// The id as a number.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The right to poll a task once.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

/// The payload of a caught panic.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;

// SAFETY: async-task's into_raw/from_raw round-trip the same unique Runnable.
unsafe impl crate::queue::RawTask for Runnable {
    fn into_raw(self) -> NonNull<()> {
        async_task::Runnable::into_raw(self)
    }
    unsafe fn from_raw(ptr: NonNull<()>) -> Self {
        // SAFETY: the queue passes back exactly what into_raw gave, once.
        unsafe { async_task::Runnable::from_raw(ptr) }
    }
}

/// Polls the inner future, catching a panic as `Err`.
pub(crate) struct CatchUnwind<F> {
    future: F,
}

impl<F> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind { future }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning: `future` is never moved out of a
        // pinned `CatchUnwind`, which has no Drop impl.
        let fut = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(p) => Poll::Ready(Err(p)),
        }
    }
}
