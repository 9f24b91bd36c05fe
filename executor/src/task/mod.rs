//! Tasks (Go's G): futures wrapped by async-task.
//!
//! A task is one allocation made by async-task: its header (state, refcount,
//! vtable, awaiter), our `TaskMeta` (seven 32-bit words: the id, the flags
//! and the last P (16 bits each),
//! the registry slot with the dump's state bit, the last poll's time and the
//! task's registry; the spawn location lives in the registry), the schedule
//! function (nothing for a `Send` task, which finds its runtime through its
//! registry; an `Arc` of the pinned queue for a local task) and the future.
//! Vyukov asked for "about 6 words" per G.
//!
//! A `Runnable` is the right to poll the task once; it lives in exactly one
//! run queue at a time (or is being polled). The schedule function decides
//! which queue — see `Shared::schedule` for the policy (runnext, tail,
//! inbox, node queue).
//!
//! # The harness
//!
//! Every future is wrapped in a `Harness` (harness.rs; two words: a pointer
//! to the task's `TaskMeta` and the task's registry) before async-task sees
//! it. async-task aborts the process when a destructor panics inside it (the
//! future's, the output's) or when the awaiter's waker panics; the harness
//! and the handles make sure it never meets one:
//!
//! - a panic while polling completes the task with [`JoinError`];
//! - the future is dropped by the harness itself, inside `catch_unwind`, when
//!   it completes or is aborted; a panic there becomes `JoinError::Panic`.
//!   When the runtime drops a pending task (shutdown), a panicking destructor
//!   is caught and reported on stderr with the task's id;
//! - the output travels in an `Output` whose destructor catches a panic of
//!   the value's (a finished task nobody awaits) and reports it on stderr;
//! - a [`JoinHandle`] hands async-task either the polling task's own waker
//!   (which cannot panic) or a forwarding waker of its own that calls the
//!   caller's waker inside `catch_unwind`.
//!
//! # Aborting
//!
//! [`JoinHandle::abort`] and [`AbortHandle::abort`] set a flag in the task's
//! `TaskMeta` and wake the task. Its next poll (at once if it was idle,
//! after the poll in progress if it was running) drops the future instead of
//! polling it, then completes with a cancelled [`JoinError`]: whoever awaits
//! the handle therefore resumes only after the future is gone (tokio's order).
//!
//! # Ids
//!
//! [`id()`] and [`try_id()`] read a thread-local that the harness sets for
//! the length of each poll (and of the drop of the future), to the same
//! [`Id`] that [`JoinHandle::id`] returns.
//!
//! # Instrumentation
//!
//! With the `tracing` feature each task carries a `tracing` span in its
//! `TaskMeta`, entered by every poll, and its wakers report themselves as
//! events, in the shape tokio-console reads: see trace.rs. Without the
//! feature none of it is compiled.

mod abort;
mod dump;
pub(crate) mod harness;
mod id;
mod join;
mod join_set;
mod local_set;
mod meta;
mod near;
pub(crate) mod registry;
mod spawned;
#[cfg(feature = "tracing")]
pub(crate) mod trace;
mod yield_now;

pub use crate::spawn::spawn_near;
pub use abort::AbortHandle;
pub use dump::{TaskDump, TaskInfo, TaskState};
pub use harness::{id, try_id};
pub use id::Id;
pub use join::{JoinError, JoinHandle};
pub use join_set::JoinSet;
pub use local_set::{LocalEnterGuard, LocalSet, RunUntil};
#[doc(hidden)]
pub use near::Anchor;
pub use near::Near;
pub use yield_now::yield_now;

pub(crate) use harness::enter_block_on;
pub(crate) use join::TaskRef;

pub(crate) use meta::batch_id::{batch_id_for, BatchId, BATCH_BITS, BATCH_MASK, BATCH_SHIFT};
pub(crate) use meta::{epoch_ms, epoch_ns, ms_of_epoch_ns, site_location, TaskMeta, NO_SITE};
pub(crate) use spawned::{spawn_local_tracked, spawn_tracked, spawn_untracked};

use std::any::Any;
use std::ptr::NonNull;

/// How a task was spawned (its span's `kind` with the `tracing` feature).
#[cfg(feature = "tracing")]
pub(crate) use trace::Kind;

/// How a task was spawned: a zero-sized stand-in without the `tracing`
/// feature, so the spawn paths read the same either way.
#[cfg(not(feature = "tracing"))]
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Task,
    Local,
    Blocking,
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
