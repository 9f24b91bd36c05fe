//! The side tokio runtime behind `Builder::enable_tokio_compat` (feature
//! `tokio-compat`).
//!
//! Crates written against tokio (`tokio::time::sleep`, `tokio::net`,
//! reqwest, database drivers) look up tokio's runtime context in a
//! thread-local and panic ("there is no reactor running") without one.
//! tokio has no pluggable reactor (its I/O and timer drivers are private),
//! so numa_rt cannot serve those resources itself. Instead it starts one
//! small current-thread tokio runtime (I/O and time drivers on) driven by
//! one thread, `numa_rt-tokio`, and every numa_rt thread enters that
//! runtime's context: M's and blocking threads for their whole life
//! (`crate::scheduler::thread_life`), `block_on` callers while `block_on` runs.
//!
//! What runs where: a tokio resource registers with the side runtime's
//! driver, which the side thread polls; when it is ready the driver calls
//! the waker of the numa_rt task that awaited it, and the task runs on a
//! numa_rt P as usual. `tokio::spawn` puts the future on the side thread.
//!
//! Shutdown (`Runtime::shutdown`, after numa_rt's tasks are dropped, so
//! tokio resources inside them deregister from a live driver): the side
//! thread is told to stop, leaves `block_on`, drops the tokio runtime (its
//! tasks, its blocking threads) on its own thread and ends; numa_rt waits
//! for it (until the deadline of `shutdown_timeout`).

use std::io;
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::{JoinHandle, ThreadId};
use std::time::Instant;

/// The side tokio runtime: its handle, and how to stop its thread.
pub(crate) struct SideRuntime {
    handle: tokio::runtime::Handle,
    /// `None` once stopped: stopping is idempotent (shutdown, then `Drop`).
    stop: Mutex<Option<Stop>>,
    /// The side thread, which must not wait for itself (a numa_rt runtime
    /// dropped inside a `tokio::spawn`ed future).
    thread_id: ThreadId,
}

struct Stop {
    /// Dropping it ends the side thread's `block_on`.
    tx: tokio::sync::oneshot::Sender<Option<Instant>>,
    /// Receives once the tokio runtime has been dropped.
    done: mpsc::Receiver<()>,
    thread: JoinHandle<()>,
}

impl SideRuntime {
    /// Builds the tokio runtime and starts the thread that drives it.
    /// Errors name what failed (`Builder::build` returns them).
    pub(crate) fn start() -> io::Result<SideRuntime> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("numa_rt-tokio-blocking")
            .build()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("Builder::enable_tokio_compat: building the tokio runtime failed: {e}"),
                )
            })?;
        let handle = rt.handle().clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<Option<Instant>>();
        let (done_tx, done) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("numa_rt-tokio".into())
            .spawn(move || {
                // The one thread that drives the runtime: while it is inside
                // `block_on`, the I/O and time drivers and every
                // `tokio::spawn`ed task run here. A dropped sender (numa_rt
                // runtime gone without `stop`) stops it too.
                let deadline = rt.block_on(rx).ok().flatten();
                match deadline {
                    None => drop(rt),
                    Some(d) => rt.shutdown_timeout(d.saturating_duration_since(Instant::now())),
                }
                let _ = done_tx.send(());
            })
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("Builder::enable_tokio_compat: starting the numa_rt-tokio thread: {e}"),
                )
            })?;
        let thread_id = thread.thread().id();
        Ok(SideRuntime {
            handle,
            stop: Mutex::new(Some(Stop { tx, done, thread })),
            thread_id,
        })
    }

    /// Enters the side runtime's context on this thread until the guard
    /// drops. tokio's guards must drop on the thread that made them, in
    /// reverse order: callers keep it on their stack.
    pub(crate) fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.handle.enter()
    }

    /// Stops the side runtime: its tasks are dropped and its thread ends.
    /// Waits for that until `deadline` (for ever with `None`); a runtime
    /// still busy after it (a `spawn_blocking` closure of tokio's that does
    /// not return) is left to finish on its own. Idempotent.
    pub(crate) fn stop(&self, deadline: Option<Instant>) {
        let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        // The receiver is gone only if the side thread already ended.
        let _ = stop.tx.send(deadline);
        if std::thread::current().id() == self.thread_id {
            // Dropped inside a `tokio::spawn`ed future: the thread ends
            // once that poll returns; it cannot wait for itself.
            return;
        }
        let finished = match deadline {
            None => stop.done.recv().is_ok(),
            Some(d) => stop
                .done
                .recv_timeout(d.saturating_duration_since(Instant::now()))
                .is_ok(),
        };
        // `done` is sent just before the thread returns, so this join is
        // short; on a timeout the thread is detached.
        if finished || stop.thread.is_finished() {
            let _ = stop.thread.join();
        }
    }
}

impl Drop for SideRuntime {
    fn drop(&mut self) {
        // `Runtime::shutdown` has normally stopped it already; this covers a
        // failed `Builder::build`.
        self.stop(None);
    }
}
