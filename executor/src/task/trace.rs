//! Task instrumentation with `tracing` (the `tracing` feature; this module
//! is not compiled without it).
//!
//! Every task gets one span when it is spawned, kept in its `TaskMeta` and
//! closed when the task's allocation is freed. Every poll of the task (and
//! the drop of its future) enters it, so an event logged by the task's code
//! has the span as its parent, and fmt output reads
//! `runtime.spawn{kind="task" task.id=7 loc.file=.. loc.line=..}: ..`.
//!
//! The span is shaped the way console-subscriber (tokio-console) recognises
//! a task: it matches task spans by the *name* `runtime.spawn`, whatever the
//! target, and reads the fields `kind`, `task.name`, `task.id`, `loc.file`,
//! `loc.line`, `loc.col`; a poll is an enter/exit of the span. Wakers are
//! matched by the event *target* `runtime::waker` (or `tokio::task::waker`),
//! with `op` (`waker.wake`, `waker.wake_by_ref`, `waker.clone`,
//! `waker.drop`) and `task.id` = the *span's* id (not the task's). So
//! numa_rt uses its own span target, `numa_rt::task`, and the neutral
//! waker target `runtime::waker`: it never pretends to be tokio.
//!
//! Costs. Feature off: none (no field, no code). Feature on, no subscriber
//! interested: per spawn, the span's callsite interest check (a load and a
//! compare); per poll, entering a disabled span (a `None` check) and the
//! waker callsite's interest check. Feature on and console listening: per
//! poll, one `Arc` allocation for the wrapping waker (see [`Poll`]), and an
//! event per waker clone, drop and wake.

use super::{Id, TaskMeta};
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Waker};
use tracing::Span;

/// The target of the waker events (console-subscriber matches it).
pub(crate) const WAKER_TARGET: &str = "runtime::waker";

/// How the task was spawned: the span's `kind` field (tokio's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `spawn`, `spawn_on`, `JoinSet::spawn`, `JoinSet::spawn_on`, `JoinSet::spawn_on_node`.
    Task,
    /// `spawn_local`, `JoinSet::spawn_local`.
    Local,
    /// `spawn_blocking`, `JoinSet::spawn_blocking`.
    Blocking,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Local => "local",
            Kind::Blocking => "blocking",
        }
    }
}

/// The task's span. INFO, so that a default fmt subscriber shows which task
/// logged a line (tokio uses TRACE; filter `numa_rt::task=off` to drop it).
pub(crate) fn spawn_span(kind: Kind, id: Id, loc: &'static Location<'static>) -> Span {
    tracing::info_span!(
        target: "numa_rt::task",
        "runtime.spawn",
        kind = kind.as_str(),
        task.name = tracing::field::Empty,
        task.id = id.as_u64(),
        loc.file = loc.file(),
        loc.line = loc.line(),
        loc.col = loc.column(),
    )
}

/// One poll's instrumentation: the span entered until this is dropped, and
/// the waker the future sees when a subscriber wants waker events.
pub(crate) struct Poll<'a> {
    _entered: tracing::span::Entered<'a>,
    /// Our reference to the wrapping waker, and a `Waker` borrowing it
    /// (never dropped as a `Waker`, so dropping this emits no `waker.drop`
    /// event and takes no extra count).
    traced: Option<(Arc<TracedWaker>, ManuallyDrop<Waker>)>,
}

impl<'a> Poll<'a> {
    #[inline]
    pub(crate) fn enter(meta: &'a TaskMeta, waker: &Waker) -> Poll<'a> {
        let span = &meta.span;
        // `event_enabled!`, not `enabled!`: the latter asks with a "hint"
        // callsite, which console-subscriber's layer never enables.
        let traced = match span.id() {
            Some(id) if tracing::event_enabled!(target: WAKER_TARGET, tracing::Level::TRACE) => {
                let arc = Arc::new(TracedWaker {
                    inner: waker.clone(),
                    span: id.into_u64(),
                });
                // SAFETY: the data pointer is an `Arc<TracedWaker>` kept
                // alive by the `Arc` stored next to this waker; the waker is
                // never dropped as a `Waker` (`ManuallyDrop`) and can only be
                // cloned or woken by reference through the `&Waker` that
                // `Poll::waker` lends, so it owns no count, as `VTABLE`'s
                // functions expect of a borrowed one.
                let borrowed =
                    unsafe { Waker::from_raw(RawWaker::new(Arc::as_ptr(&arc).cast(), &VTABLE)) };
                Some((arc, ManuallyDrop::new(borrowed)))
            }
            _ => None,
        };
        Poll {
            _entered: span.enter(),
            traced,
        }
    }

    /// The waker to poll the future with: the wrapping one if there is one,
    /// else `original`.
    #[inline]
    pub(crate) fn waker<'b>(&'b self, original: &'b Waker) -> &'b Waker {
        match &self.traced {
            Some((_, w)) => w,
            None => original,
        }
    }
}

/// A task's waker that reports its clones, drops and wakes as events.
struct TracedWaker {
    inner: Waker,
    /// The task span's id (console matches waker events by it).
    span: u64,
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

// Each function below receives the pointer of a `RawWaker` made by
// `Poll::enter` or by `clone`: an `Arc<TracedWaker>`'s `as_ptr`, owning one
// strong count unless it is the borrowed one made by `Poll::enter` (which is only
// ever cloned or woken by reference).

unsafe fn clone(p: *const ()) -> RawWaker {
    // SAFETY: see above: `p` is a live `Arc<TracedWaker>`'s pointer.
    let w = unsafe { &*p.cast::<TracedWaker>() };
    tracing::trace!(target: WAKER_TARGET, op = "waker.clone", task.id = w.span);
    // SAFETY: as above; the new count is owned by the returned waker.
    unsafe { Arc::increment_strong_count(p.cast::<TracedWaker>()) };
    RawWaker::new(p, &VTABLE)
}

unsafe fn wake(p: *const ()) {
    // SAFETY: see above; waking by value consumes this waker's count.
    let w = unsafe { Arc::from_raw(p.cast::<TracedWaker>()) };
    // No `waker.drop` after it: console counts a wake by value as a drop.
    tracing::trace!(target: WAKER_TARGET, op = "waker.wake", task.id = w.span);
    w.inner.wake_by_ref();
}

unsafe fn wake_by_ref(p: *const ()) {
    // SAFETY: see above.
    let w = unsafe { &*p.cast::<TracedWaker>() };
    tracing::trace!(target: WAKER_TARGET, op = "waker.wake_by_ref", task.id = w.span);
    w.inner.wake_by_ref();
}

unsafe fn drop_waker(p: *const ()) {
    // SAFETY: see above; this waker's count is released here.
    let w = unsafe { Arc::from_raw(p.cast::<TracedWaker>()) };
    tracing::trace!(target: WAKER_TARGET, op = "waker.drop", task.id = w.span);
}
