//! Shutdown: stopping the M's, dropping every task left.

use super::Shared;
use std::sync::atomic::Ordering::Release;

impl Shared {
    /// Begins shutdown: schedule calls drop tasks from now on, every parked M
    /// is woken and exits. See `Runtime::shutdown_timeout` for the rest.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Release);
        // Every live task is woken and, the flag being set, dropped by its
        // schedule function — including idle tasks nobody else can reach.
        self.tasks.close_and_wake_all();
        for p in 0..self.nprocs() {
            self.unpark(p);
        }
        self.machines.wake_pooled(&self.nodes);
    }

    /// After every M has stopped: drops every task left in any queue, and
    /// every idle task (second registry pass, see `Registry::close_and_wake_all`).
    /// Stops the side tokio runtime, if any (see `crate::tokio_compat`):
    /// the last step of shutdown, once numa_rt's tasks are dropped.
    pub(crate) fn stop_tokio(&self, deadline: Option<std::time::Instant>) {
        #[cfg(feature = "tokio-compat")]
        if let Some(t) = &self.tokio {
            t.stop(deadline);
        }
        #[cfg(not(feature = "tokio-compat"))]
        let _ = deadline;
    }

    pub(crate) fn drain_all(&self) {
        self.tasks.close_and_wake_all();
        let mut dropped = Vec::new();
        for p in self.procs.iter() {
            dropped.extend(p.inbox.drain());
            if let Some(mut core) = p.core_slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                dropped.extend(core.drain_local(p));
                drop(core);
            }
        }
        for n in self.nodes.iter() {
            dropped.extend(n.inject.drain());
        }
        drop(dropped);
    }
}
