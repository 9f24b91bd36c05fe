//! The harness: what every task's future is wrapped in before async-task
//! sees it, so that no panic of user code reaches async-task (which aborts
//! the process on a panic while it drops a future or an output).
//!
//! Per poll it costs one thread-local store and restore (the current task,
//! for [`id()`](super::id()) and for `JoinHandle`'s trusted-waker check),
//! one plain load (the abort flag) and the `catch_unwind` that was there
//! before (free unless something panics).

use super::meta::{ABORTED, FINISHED};
use super::{Id, JoinError, Panic, TaskMeta};
use std::cell::Cell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, Waker};

/// What runs on this thread right now: a task (its id and its waker), or
/// the main future of a `block_on` (no id, its waker).
struct Current {
    id: Option<Id>,
    /// The waker of the poll in progress; null while a future is dropped.
    waker: *const Waker,
}

thread_local! {
    /// Points at a `Current` on the stack of the poll (or drop) in
    /// progress on this thread; null outside one. Nested polls (a task
    /// polled inside `block_in_place(|| block_on(..))`) save and restore it.
    static CURRENT: Cell<*const Current> = const { Cell::new(ptr::null()) };
}

/// Restores the previous `CURRENT` when the poll (or drop) ends, unwinding
/// included.
struct Enter(*const Current);

impl Enter {
    #[inline]
    fn new(current: &Current) -> Enter {
        Enter(CURRENT.with(|c| c.replace(current)))
    }
}

impl Enter {
    /// [`Enter::new`] where this thread's locals may be gone (a handle
    /// dropped by a `thread_local!`'s destructor): `None` then.
    fn try_new(current: &Current) -> Option<Enter> {
        CURRENT.try_with(|c| Enter(c.replace(current))).ok()
    }
}

impl Drop for Enter {
    #[inline]
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.0));
    }
}

/// The id of the task being run on this thread.
///
/// Works inside a task's future (spawned with `spawn`, `spawn_local`,
/// `spawn_on` or a [`JoinSet`](super::JoinSet)), inside a `spawn_blocking`
/// closure, and while the runtime drops a task's future (in its `Drop`).
///
/// # Panics
/// Anywhere else: outside the runtime, or in the future passed to
/// `Runtime::block_on` (which is not a task). See [`try_id()`].
///
/// ```
/// let rt = numa_rt_executor::Runtime::new().unwrap();
/// rt.block_on(async {
///     let h = numa_rt_executor::spawn(async { numa_rt_executor::task::id() });
///     let id = h.id();
///     assert_eq!(h.await.unwrap(), id);
/// });
/// ```
#[track_caller]
pub fn id() -> Id {
    match try_id() {
        Some(id) => id,
        None => panic!(
            "numa_rt::task::id() called outside a task: call it from a spawned task's future \
             or a spawn_blocking closure (the future given to block_on is not a task); \
             numa_rt::task::try_id() returns None instead of panicking"
        ),
    }
}

/// The id of the task being run on this thread, or `None` outside a task.
/// See [`id()`].
pub fn try_id() -> Option<Id> {
    current_id()
}

/// The id of the task polled (or dropped) on this thread.
pub(crate) fn current_id() -> Option<Id> {
    CURRENT.with(|c| {
        let p = c.get();
        // SAFETY: a non-null `CURRENT` points at a `Current` that lives on
        // this thread's stack until the `Enter` that installed it restores
        // the previous value.
        unsafe { p.as_ref() }.and_then(|cur| cur.id)
    })
}

/// Whether `waker` is the waker of the task (or `block_on`) being polled on
/// this thread: a waker of the runtime's own, whose wake, clone and drop
/// cannot panic, which `JoinHandle` may hand to async-task as it is.
pub(crate) fn is_trusted_waker(waker: &Waker) -> bool {
    CURRENT.with(|c| {
        let p = c.get();
        if p.is_null() {
            return false;
        }
        // SAFETY: as in `current_id`; `cur.waker`, when not null, is the
        // `&Waker` of the poll in progress, alive as long as `cur`.
        unsafe { (*p).waker.as_ref() }.is_some_and(|w| waker.will_wake(w))
    })
}

/// Runs one poll of `block_on`'s main future, with its (thread-unparking,
/// never panicking) waker marked as trusted: awaiting a `JoinHandle` there
/// needs no forwarding waker.
#[inline]
pub(crate) fn enter_block_on<R>(waker: &Waker, poll: impl FnOnce() -> R) -> R {
    let current = Current { id: None, waker };
    let _enter = Enter::new(&current);
    poll()
}

/// Runs `f`, containing a panic. The payload is dropped inside
/// `catch_unwind` too; a payload whose own drop panics is leaked.
pub(crate) fn contain(f: impl FnOnce()) -> Result<(), Panic> {
    catch_unwind(AssertUnwindSafe(f))
}

/// Drops a panic payload, containing (and leaking) a panic of its drop.
pub(crate) fn drop_payload(p: Panic) {
    if let Err(again) = contain(move || drop(p)) {
        std::mem::forget(again);
    }
}

/// Why a task produced no value (converted to [`JoinError`] for the handle).
pub(crate) enum Failure {
    /// Aborted (its future dropped without a panic).
    Cancelled,
    /// Its poll panicked, or the drop of its future after completion did.
    Panicked(Panic),
    /// Aborted, and the future's destructor panicked.
    DropPanicked(Panic),
}

/// A task's output, as async-task stores it: dropping it never unwinds.
pub(crate) struct Output<T> {
    id: Id,
    /// Taken exactly once: by `into_result` (which forgets `self`) or `Drop`.
    result: ManuallyDrop<Result<T, Failure>>,
}

impl<T> Output<T> {
    fn new(id: Id, result: Result<T, Failure>) -> Self {
        Output {
            id,
            result: ManuallyDrop::new(result),
        }
    }

    /// The value or the error, for the `JoinHandle` that awaited it.
    pub(crate) fn into_result(self) -> Result<T, JoinError> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `result` is taken only here.
        let result = unsafe { ManuallyDrop::take(&mut this.result) };
        let id = this.id;
        result.map_err(|f| match f {
            Failure::Cancelled => JoinError::cancelled(id),
            Failure::Panicked(p) | Failure::DropPanicked(p) => JoinError::panic(id, p),
        })
    }
}

impl<T> Drop for Output<T> {
    /// Nobody took the output: async-task drops it (the handle was dropped
    /// before the task finished) or the handle is dropped unawaited.
    #[inline]
    fn drop(&mut self) {
        // The common case (a `()` or other destructor-less value nobody
        // awaited) needs no `catch_unwind`: nothing can panic.
        if !std::mem::needs_drop::<T>() && self.result.is_ok() {
            return;
        }
        self.drop_slow();
    }
}

impl<T> Output<T> {
    /// The rest of `Drop`: a value with a destructor, or a failure.
    #[inline(never)]
    fn drop_slow(&mut self) {
        // SAFETY: `into_result` forgets `self`, and `Drop` calls this once,
        // so this is the only take.
        let result = unsafe { ManuallyDrop::take(&mut self.result) };
        let id = self.id;
        // The value's destructor runs as part of its task: `id()` names the
        // task that made it, whoever drops it (tokio's rule), not the task
        // dropping the handle.
        let current = Current {
            id: Some(id),
            waker: ptr::null(),
        };
        let _enter = Enter::try_new(&current);
        match result {
            Err(Failure::DropPanicked(p)) => {
                eprintln!(
                    "numa_rt: task {id} was aborted and its future panicked while being dropped; \
                     nobody awaits its JoinHandle, so the panic (contained) is reported here"
                );
                drop_payload(p);
            }
            Err(Failure::Panicked(p)) => drop_payload(p),
            result => {
                if let Err(p) = contain(move || drop(result)) {
                    eprintln!(
                        "numa_rt: task {id} finished, nobody awaited its JoinHandle, and dropping \
                         its output panicked; the panic was contained"
                    );
                    drop_payload(p);
                }
            }
        }
    }
}

/// A task's future, its abort check, its panic containment, its
/// current-task marker and its registry entry. See the module docs.
pub(crate) struct Harness<F> {
    /// This task's metadata, in the header of the allocation that also
    /// holds this future: valid for as long as the future lives (async-task
    /// drops the future before the header).
    meta: NonNull<TaskMeta>,
    /// Dropped in place by `drop_future`, never moved (structural pinning).
    /// Alive until the `FINISHED` flag of `meta` is set (by `drop_future`,
    /// right after the drop, also when the drop panicked), which saves a
    /// flag of its own (a word per task).
    future: ManuallyDrop<F>,
}

// SAFETY: `meta` points at a `TaskMeta`, which is `Sync` (an id and an
// atomic word); the rest is `F`, sent only if `F: Send`.
unsafe impl<F: Send> Send for Harness<F> {}

impl<F> Harness<F> {
    pub(crate) fn new(future: F, meta: &TaskMeta) -> Self {
        Harness {
            meta: NonNull::from(meta),
            future: ManuallyDrop::new(future),
        }
    }

    fn meta(&self) -> &TaskMeta {
        // SAFETY: see the field: the header outlives the future.
        unsafe { self.meta.as_ref() }
    }

    /// Whether the future is gone (see `future`). Only this task's poll or
    /// drop sets the flag, on this thread, so a plain load sees it.
    fn is_dropped(&self) -> bool {
        self.meta().flags() & FINISHED != 0
    }

    /// Drops the future in place, once, containing a panic of its drop;
    /// then marks the task finished and frees its registry entry.
    fn drop_future(&mut self) -> Result<(), Panic> {
        if self.is_dropped() {
            return Ok(());
        }
        self.drop_live_future()
    }

    /// [`Harness::drop_future`] for a caller that just saw the future
    /// alive (the poll, which read the flags as it began).
    fn drop_live_future(&mut self) -> Result<(), Panic> {
        let future = &mut self.future;
        // SAFETY: the future is alive (not yet marked finished) and is never
        // used again (marked finished below, whatever the drop does short of
        // aborting); dropping in place keeps the pinning promise.
        let result = contain(|| unsafe { ManuallyDrop::drop(future) });
        let meta = self.meta();
        meta.set_finished();
        // The registry holding the task's entry (at `TaskMeta::slot` in the
        // shard of its id), freed right after the drop, or counting it
        // unpolled (a task gone before its first `Pending`); none for an
        // untracked (blocking-pool) task.
        if let Some(registry) = meta.registry() {
            match meta.slot() {
                Some(slot) => registry.remove(meta.id.as_u64(), slot),
                None => registry.uncount_unpolled(),
            }
        }
        result
    }

    /// Gives a task its registry entry as its first poll returns `Pending`
    /// (see `registry`'s docs); `waker` is the task's own. False if the
    /// registry is closed (shutdown): nothing would ever drop this idle
    /// future, so the caller drops it now.
    #[cold]
    #[inline(never)]
    fn register(&self, waker: &Waker) -> bool {
        let meta = self.meta();
        let Some(registry) = meta.registry() else {
            return true;
        };
        // A location too far to compress (see `compress_location`) is
        // shown as the harness's own.
        let location = meta.location().unwrap_or_else(Location::caller);
        match registry.register(meta, location, waker) {
            Some(slot) => {
                meta.set_registered(slot);
                registry.uncount_unpolled();
                true
            }
            None => false,
        }
    }
}

impl<F: Future> Future for Harness<F> {
    type Output = Output<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: nothing here moves `future` (it is polled pinned and
        // dropped in place).
        let this = unsafe { self.get_unchecked_mut() };
        let id = this.meta().id;
        let current = Current {
            id: Some(id),
            waker: cx.waker(),
        };
        let _enter = Enter::new(&current);
        // The task's own waker, for its registry entry (`cx` may be a
        // tracing wrapper below).
        let own_waker = cx.waker();
        // The task's span, entered for this poll; the future sees a
        // reporting waker while a subscriber wants waker events (trace.rs).
        #[cfg(feature = "tracing")]
        // SAFETY: as in `Harness::meta` (the header outlives the future);
        // not through `meta()`, whose borrow of `this` would last the poll.
        let traced = super::trace::Poll::enter(unsafe { this.meta.as_ref() }, cx.waker());
        #[cfg(feature = "tracing")]
        let mut traced_cx = Context::from_waker(traced.waker(cx.waker()));
        #[cfg(feature = "tracing")]
        let cx = &mut traced_cx;
        let flags = this.meta().flags();
        if flags & FINISHED != 0 {
            // async-task never polls a finished task; be total anyway.
            return Poll::Ready(Output::new(id, Err(Failure::Cancelled)));
        }
        let result = if flags & ABORTED != 0 {
            match this.drop_live_future() {
                Ok(()) => Err(Failure::Cancelled),
                Err(p) => Err(Failure::DropPanicked(p)),
            }
        } else {
            // SAFETY: the future is alive (not finished) and pinned:
            // it lives in async-task's allocation and is never moved.
            let future = unsafe { Pin::new_unchecked(&mut *this.future) };
            match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
                Ok(Poll::Pending) if this.meta().slot().is_some() => return Poll::Pending,
                Ok(Poll::Pending) if this.register(own_waker) => return Poll::Pending,
                // Shut down before its first `Pending`: dropped as shutdown
                // drops every idle task.
                Ok(Poll::Pending) => match this.drop_live_future() {
                    Ok(()) => Err(Failure::Cancelled),
                    Err(p) => Err(Failure::DropPanicked(p)),
                },
                Ok(Poll::Ready(v)) => match this.drop_live_future() {
                    Ok(()) => Ok(v),
                    // tokio's choice: a future whose destructor panics after
                    // it completed reports the panic, not the value.
                    Err(p) => {
                        if let Err(again) = contain(move || drop(v)) {
                            drop_payload(again);
                        }
                        Err(Failure::Panicked(p))
                    }
                },
                Err(p) => {
                    // The poll's panic is the one reported; one from the
                    // destructor as well was already shown by the hook.
                    if let Err(again) = this.drop_live_future() {
                        drop_payload(again);
                    }
                    Err(Failure::Panicked(p))
                }
            }
        };
        Poll::Ready(Output::new(id, result))
    }
}

impl<F> Drop for Harness<F> {
    /// Only reached with the future alive when the runtime drops a pending
    /// task: at shutdown, when its `block_on` returns, or when the blocking
    /// pool stops with it queued. No handle can receive a panic from here.
    #[inline]
    fn drop(&mut self) {
        // Every task passes here once its future is gone (async-task drops
        // the harness after it completes): keep that check inline.
        if !self.is_dropped() {
            self.drop_pending();
        }
    }
}

impl<F> Harness<F> {
    /// The rare half of `Drop`: the runtime drops a pending future.
    #[cold]
    #[inline(never)]
    fn drop_pending(&mut self) {
        let id = self.meta().id;
        let current = Current {
            id: Some(id),
            waker: ptr::null(),
        };
        let _enter = Enter::new(&current);
        #[cfg(feature = "tracing")]
        let _span = self.meta().span.clone().entered();
        // Looked up before the drop frees the entry (a blocking-pool
        // closure has none).
        let location = self.meta().location();
        if let Err(p) = self.drop_future() {
            let spawned = location.map_or(String::new(), |l| format!(" (spawned at {l})"));
            eprintln!(
                "numa_rt: task {id}{spawned} panicked in its future's destructor while the \
                 runtime dropped it (shutdown); the panic was contained"
            );
            drop_payload(p);
        }
    }
}
