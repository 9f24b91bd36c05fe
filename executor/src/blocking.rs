//! `block_in_place` (Go's handoffp): hand this M's P to another M, then block.
//!
//! The blocking pool behind `spawn_blocking` is `scheduler::blocking_pool`.

use crate::scheduler::{context, lifecycle};
use std::sync::atomic::Ordering::Relaxed;

/// Runs `f`, which may block, on the current thread after handing this M's
/// P (and its queued tasks) to another M, so the P's other tasks keep
/// running (Go's handoffp at a syscall). On a thread that holds no P (a
/// `block_on` thread, a blocking thread) it just runs `f`.
///
/// After `f` returns, the rest of the current task's poll runs on this
/// thread without a P; the M then waits in its node's pool for a P.
///
/// While `f` runs the thread is not a worker: `f` may call
/// [`Handle::block_on`](crate::Handle::block_on) (of this runtime, through
/// `Handle::current()`, or of another one), which a task may not do
/// directly. `spawn_local` is not available inside `f`.
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let mut running = None;
    let kept = context::with_worker(|w| {
        let w = w?;
        // Counted before the P goes: the M that takes it may find nothing,
        // park, and as the last thread to go idle advance a paused clock,
        // which must see this closure coming. Counted after the hand-off,
        // that M could jump the clock in between (CI: time_paused's
        // no_auto_advance_while_a_task_blocks_in_place, 1 failure).
        running = Some(InPlace::enter(w.shared.clone()));
        // SAFETY: `w` is this thread's M, the seat's owner. `None` also
        // while sysmon is taking the core (or has): then there is nothing
        // to hand over.
        let core = unsafe { w.machine.seat.access(Option::take) }.flatten()?;
        let shared = w.shared.clone();
        let p = &shared.procs[core.index];
        // The P leaves this poll with its core: the M taking it owns the
        // flag from now on (it may set it before `handoff` returns).
        p.in_task.store(false, Relaxed);
        p.clear_holder(&w.machine);
        match lifecycle::handoff(&shared, core) {
            Ok(()) => {
                // This M no longer holds a P: new I/O registers elsewhere and
                // pinned wakes no longer target the P we gave away.
                numa_rt_reactor::context::set_current_p(None);
                w.machine.local.set_machine_p(usize::MAX);
                None
            }
            // No thread could be started: keep the P and block with it.
            Err(core) => {
                p.in_task.store(true, Relaxed);
                p.set_holder(&w.machine);
                Some(core)
            }
        }
    });
    let _left = context::leave_worker(kept);
    // Dropped before `_left`: uncounted as soon as `f` is done.
    let _running = running;
    f()
}

/// Counts a `block_in_place` closure in `Shared::in_place` while it runs
/// (a guard, so a panicking closure is uncounted too).
struct InPlace(std::sync::Arc<crate::scheduler::Shared>);

impl InPlace {
    fn enter(shared: std::sync::Arc<crate::scheduler::Shared>) -> InPlace {
        // Relaxed: read by sysmon as a snapshot (see `Shared::in_place`).
        shared
            .in_place
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InPlace(shared)
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        self.0
            .in_place
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Makes the current runtime's blocking pool the thread that resolves host
/// names for the reactor's sockets (`numa_rt_reactor::net`'s blocking hook),
/// unless a program installed its own hook first. Called by every
/// `Builder::build`; idempotent.
#[doc(hidden)]
pub fn resolve_names_on_blocking_pool() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        numa_rt_reactor::net::set_blocking_hook_if_unset(blocking_pool_hook);
    });
}

/// Runs a resolver job on the current runtime's blocking pool; hands it
/// back (the reactor then starts a thread for it) outside a runtime.
fn blocking_pool_hook(
    job: numa_rt_reactor::net::BlockingJob,
) -> Result<(), numa_rt_reactor::net::BlockingJob> {
    match crate::Handle::try_current() {
        Ok(handle) => {
            // Detached: the job reports through its own channel, and a job
            // the pool drops (shutdown) fails its lookup instead of hanging.
            drop(handle.spawn_blocking(job));
            Ok(())
        }
        Err(_) => Err(job),
    }
}
