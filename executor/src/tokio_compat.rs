//! The side tokio runtime behind `Builder::enable_tokio_compat` (feature
//! `tokio-compat`).
//!
//! Crates written against tokio (`tokio::time::sleep`, `tokio::net`,
//! reqwest, database drivers) look up tokio's runtime context in a
//! thread-local and panic ("there is no reactor running") without one.
//! tokio has no pluggable reactor (its I/O and timer drivers are private),
//! so numa_rt cannot serve those resources itself. Instead it starts one
//! small multi-thread tokio runtime (I/O and time drivers on) with
//! `Builder::tokio_compat_workers` worker threads (default 1), named
//! `numa_rt-tokio`, and every numa_rt thread enters that runtime's context:
//! M's and blocking threads for their whole life
//! (`crate::scheduler::thread_life`), `block_on` callers while `block_on` runs.
//!
//! What runs where: a tokio resource registers with the side runtime's
//! driver, which an idle worker polls; when it is ready the driver calls
//! the waker of the numa_rt task that awaited it, and the task runs on a
//! numa_rt P as usual. `tokio::spawn` puts the future on a side worker.
//!
//! Why the multi-thread flavour, even for one worker (until issue 24 it was
//! a current-thread runtime): tokio lets only a current-thread runtime
//! pause its clock, and a paused side clock is wrong here. tokio
//! auto-advances a paused clock to the next timer whenever the runtime
//! that owns it has nothing to do, and the side runtime is idle while
//! numa_rt's tasks work: a `tokio::time::timeout` around numa_rt work fired
//! at once in paused time (a probe of 200 ms of real work under a 1 s
//! paused timeout: `Elapsed`), and a ported test suite hung. tokio offers
//! no hook to make its clock follow numa_rt's, so the honest answer is to
//! refuse: on a multi-thread runtime `tokio::time::pause()` panics at once
//! (tokio's message: "requires the `current_thread` Tokio runtime") and
//! `advance` with "time is not frozen"; numa_rt's own paused clock
//! (`numa_rt::time::pause`, `start_paused`) is the one to use.
//!
//! One more thread, `numa_rt-tokio-owner`, owns the runtime: it sits in
//! `block_on` until told to stop, so that the runtime is dropped on a
//! thread that is not inside any async context (tokio panics otherwise).
//!
//! Shutdown (`Runtime::shutdown`, after numa_rt's tasks are dropped, so
//! tokio resources inside them deregister from a live driver): the owner
//! thread is told to stop, leaves `block_on`, drops the tokio runtime (its
//! tasks, its workers and blocking threads) and ends; numa_rt waits for it
//! (until the deadline of `shutdown_timeout`).

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::{JoinHandle, ThreadId};
use std::time::Instant;

thread_local! {
    /// On a thread of a side runtime (worker or blocking): that runtime's
    /// serial; 0 elsewhere.
    static SIDE_THREAD_OF: Cell<u64> = const { Cell::new(0) };
}

/// The side tokio runtime: its handle, and how to stop its thread.
pub(crate) struct SideRuntime {
    handle: tokio::runtime::Handle,
    /// `None` once stopped: stopping is idempotent (shutdown, then `Drop`).
    stop: Mutex<Option<Stop>>,
    /// The owner thread, which must not wait for itself.
    thread_id: ThreadId,
    /// Which side runtime a thread of tokio's belongs to (see
    /// `SIDE_THREAD_OF`): a numa_rt runtime dropped inside a future its own
    /// side runtime runs must not wait for that runtime's threads.
    serial: u64,
}

struct Stop {
    /// Dropping it ends the side thread's `block_on`.
    tx: tokio::sync::oneshot::Sender<Option<Instant>>,
    /// Receives once the tokio runtime has been dropped.
    done: mpsc::Receiver<()>,
    thread: JoinHandle<()>,
}

impl SideRuntime {
    /// Builds the tokio runtime with `workers` worker threads (at least 1,
    /// checked by `Builder::build`) and starts the thread that owns it.
    /// Errors name what failed (`Builder::build` returns them).
    pub(crate) fn start(workers: usize) -> io::Result<SideRuntime> {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .on_thread_start(move || SIDE_THREAD_OF.set(serial))
            .worker_threads(workers)
            .enable_all()
            // Workers and tokio's blocking threads alike.
            .thread_name("numa_rt-tokio")
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
            .name("numa_rt-tokio-owner".into())
            .spawn(move || {
                // Waits to be told to stop (the workers drive the runtime).
                // A dropped sender (numa_rt runtime gone without `stop`)
                // stops it too.
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
                    format!(
                        "Builder::enable_tokio_compat: starting the numa_rt-tokio-owner thread: {e}"
                    ),
                )
            })?;
        let thread_id = thread.thread().id();
        Ok(SideRuntime {
            handle,
            serial,
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
        if std::thread::current().id() == self.thread_id || SIDE_THREAD_OF.get() == self.serial {
            // Dropped inside a `tokio::spawn`ed future (on a worker, which
            // the runtime's drop waits for): the owner finishes the drop on
            // its own; waiting here would wait for this very thread.
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
