//! What every thread numa_rt starts for user code — each M and each
//! blocking-pool thread — does first and last: the builder's
//! `on_thread_start` / `on_thread_stop` hooks and, with `tokio-compat`,
//! entering the side tokio runtime (`crate::tokio_compat`).
//!
//! One place, so the two kinds of thread cannot drift apart (before it the
//! blocking pool ran no hooks). The monitor thread and the side tokio
//! thread run no user code and are left out.

use super::Shared;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// A runtime thread's life: made by [`started`], ended by
/// [`ThreadLife::stopping`].
///
/// It holds the thread's tokio context (feature `tokio-compat`), which
/// tokio requires to be left on the same thread in reverse order of
/// entering: it lives on the thread's stack, under everything the thread
/// enters later.
pub(crate) struct ThreadLife<'a> {
    shared: &'a Shared,
    _tokio: TokioGuard<'a>,
}

/// The side runtime's context, entered for as long as this lives.
#[cfg(feature = "tokio-compat")]
pub(crate) type TokioGuard<'a> = Option<tokio::runtime::EnterGuard<'a>>;
/// Without `tokio-compat`: nothing.
#[cfg(not(feature = "tokio-compat"))]
pub(crate) type TokioGuard<'a> = std::marker::PhantomData<&'a ()>;

/// Enters the side tokio runtime of `shared`, if it has one, until the
/// guard drops. Used by M's and blocking threads (through [`started`]) and
/// by `block_on`.
#[inline]
pub(crate) fn enter_tokio(shared: &Shared) -> TokioGuard<'_> {
    #[cfg(feature = "tokio-compat")]
    {
        shared.tokio.as_ref().map(|t| t.enter())
    }
    #[cfg(not(feature = "tokio-compat"))]
    {
        let _ = shared;
        std::marker::PhantomData
    }
}

/// Called first on a new runtime thread: enters the side tokio runtime (so
/// the hook may use it), then runs `on_thread_start`. A panicking hook is
/// reported on stderr and the thread serves as usual: an M holding a P
/// must not die (its tasks would wait forever), nor a blocking thread with
/// a closure queued for it.
pub(crate) fn started(shared: &Shared) -> ThreadLife<'_> {
    let tokio = enter_tokio(shared);
    if let Some(f) = &shared.config.on_thread_start {
        numa_rt_reactor::fault::contain(
            "the on_thread_start hook",
            "the thread serves as usual",
            || f(),
        );
    }
    ThreadLife {
        shared,
        _tokio: tokio,
    }
}

impl ThreadLife<'_> {
    /// Runs `on_thread_stop` (a panic is reported and the thread stops as
    /// usual), then leaves the tokio context. Not run when the thread
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

/// Places a runtime thread that belongs to no node — a blocking-pool thread,
/// the monitor thread (sysmon) — on every CPU of the runtime's topology,
/// with the default memory policy (first touch): they serve every node.
/// Without this a thread inherits its creator's binding, and a blocking
/// thread started by an M of node 1 (or one pinned to a core by
/// `pin_cores`) would run every later closure of every node there
/// (docs/architecture.md, "NUMA"). Failures are reported once per process
/// and the thread carries on where it was.
pub(crate) fn place_nodeless(shared: &Shared) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let report = |what: &str, e: std::io::Error| {
        if !REPORTED.swap(true, Relaxed) {
            eprintln!("numa_rt: {what} failed ({e}); continuing without it");
        }
    };
    if let Err(e) = numa_rt_numa::sys::set_thread_affinity(shared.topology.cpus()) {
        report(
            "binding a blocking or monitor thread to the runtime's CPUs",
            e,
        );
    }
    // M's set a preferred node only on a multi-node topology; elsewhere
    // every thread already has the default policy.
    if shared.topology.nodes().len() > 1 {
        if let Err(e) = numa_rt_numa::sys::reset_memory_policy() {
            report("set_mempolicy(MPOL_DEFAULT)", e);
        }
    }
}
