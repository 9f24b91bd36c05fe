//! A machine (Go's M): an OS thread that runs tasks while it holds a P.
//!
//! This file is the M's shared face (what other threads see of it: its
//! node, its pinned queue, its seat, the slot a P is handed through) and
//! the set of M threads shutdown waits on (`Threads`). The thread's life is
//! `lifecycle.rs`; what it does while it holds a P is `worker/`.

use super::local::LocalQueue;
use super::seat::Seat;
use super::BoxCore;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

pub(crate) struct Machine {
    pub(crate) id: usize,
    pub(crate) node: usize,
    /// The thread's kernel id: sysmon reads its scheduler statistics to
    /// tell a task that blocks from a thread that waits for a CPU.
    pub(crate) tid: i32,
    /// Tasks pinned to this thread (`spawn_local`); it also records the P
    /// this M holds, so their wakers can unpark the right driver.
    pub(crate) local: Arc<LocalQueue>,
    /// Where the P's core sits while this M polls a task or runs the
    /// driver; sysmon's retake takes it from there (see `seat`).
    pub(crate) seat: Seat<BoxCore>,
    pub(crate) handoff: Mutex<Option<BoxCore>>,
    pub(crate) cv: Condvar,
    /// Set by sysmon when it retakes this M's P in the middle of a poll
    /// (counted in `Shared::in_place` from then), cleared by this M when
    /// that poll returns (and the count with it). Written inside the seat's
    /// `try_take` hand-off, which publishes `TAKEN` (Release) after it, and
    /// read after the M's `leave_poll` saw `TAKEN` (Acquire): Relaxed.
    pub(crate) retaken: AtomicBool,
}

impl super::local::AsksForP for Machine {
    fn ask_back(self: Arc<Self>, shared: &super::Shared, p: usize) {
        shared.procs[p].ask_back(&self);
    }
}

impl Machine {
    /// Hands `core` to this M, which waits for one in its node's pool (the
    /// caller took it out of the pool).
    pub(crate) fn give(&self, core: BoxCore) {
        *self.handoff.lock().unwrap() = Some(core);
        self.cv.notify_one();
    }
}

/// All M threads of a runtime, for shutdown.
#[derive(Default)]
pub(crate) struct Threads {
    pub(crate) threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Live M threads. Its own `Arc`, so an exiting M can signal it after
    /// dropping every reference it held to the runtime (see `LiveGuard`).
    pub(crate) live: Arc<Live>,
    pub(crate) next_id: AtomicUsize,
}

/// A count of live M threads and the condition signalled when one ends.
#[derive(Default)]
pub(crate) struct Live {
    pub(crate) count: Mutex<usize>,
    pub(crate) exited: Condvar,
}

impl Threads {
    pub(crate) fn live(&self) -> usize {
        *self.live.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn wake_pooled(&self, nodes: &[super::Node]) {
        for n in nodes {
            for m in n
                .idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let _g = m.handoff.lock().unwrap_or_else(|e| e.into_inner());
                m.cv.notify_all();
            }
        }
    }

    /// Waits for every M to exit, or until `deadline`; `except` is one M
    /// thread not to wait for (shutdown called from a worker). Returns
    /// whether all exited.
    pub(crate) fn wait_all(&self, deadline: Option<Instant>, except: usize) -> bool {
        let mut live = self.live.count.lock().unwrap_or_else(|e| e.into_inner());
        while *live > except {
            match deadline {
                None => {
                    live = self
                        .live
                        .exited
                        .wait(live)
                        .unwrap_or_else(|e| e.into_inner())
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    live = self
                        .live
                        .exited
                        .wait_timeout(live, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        drop(live);
        // Reap the threads that have ended; others are detached.
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        for t in std::mem::take(&mut *threads) {
            if t.is_finished() {
                let _ = t.join();
            }
        }
        true
    }
}
