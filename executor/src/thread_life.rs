//! What every thread numa_rt starts for user code — each M and each
//! blocking-pool thread — does first and last: the builder's
//! `on_thread_start` / `on_thread_stop` hooks.
//!
//! One place, so the two kinds of thread cannot drift apart (before it the
//! blocking pool ran no hooks). The monitor thread runs no user code and
//! is left out.

use crate::scheduler::Shared;

/// A runtime thread's life: made by [`started`], ended by
/// [`ThreadLife::stopping`].
pub(crate) struct ThreadLife<'a> {
    shared: &'a Shared,
}

/// Called first on a new runtime thread: runs `on_thread_start`. A panicking hook is
/// reported on stderr and the thread serves as usual: an M holding a P
/// must not die (its tasks would wait forever), nor a blocking thread with
/// a closure queued for it.
pub(crate) fn started(shared: &Shared) -> ThreadLife<'_> {
    if let Some(f) = &shared.config.on_thread_start {
        numa_rt_reactor::fault::contain(
            "the on_thread_start hook",
            "the thread serves as usual",
            || f(),
        );
    }
    ThreadLife { shared }
}

impl ThreadLife<'_> {
    /// Runs `on_thread_stop` (a panic is reported and the thread stops as
    /// usual). Not run when the thread
    /// unwinds: the hook would run in the middle of a panic.
    pub(crate) fn stopping(self) {
        if let Some(f) = &self.shared.config.on_thread_stop {
            numa_rt_reactor::fault::contain(
                "the on_thread_stop hook",
                "the thread stops as usual",
                || f(),
            );
        }
    }
}
