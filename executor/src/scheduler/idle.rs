//! Coordinates idle processors and spinning machines (Go's `sched.pidle`,
//! `npidle`, `nmspinning`, `wakep`).
//!
//! An idle P keeps its M: the M is parked in the P's driver (its poller).
//! Waking an idle P therefore means taking it off the idle list and calling
//! its driver's `Unparker`; the M that wakes up knows from the state left
//! here whether it was woken to spin (look for work to steal) or by its own
//! I/O, timers or a targeted push.
//!
//! The lock is only taken on the park/unpark paths; the hot paths read the
//! two counters without it. See docs/architecture.md, "Parking and the
//! barrier", for the protocol these counters take part in.

use crate::loom::atomic::{AtomicUsize, Ordering::*};
use crate::loom::Mutex;

/// Where a P stands with respect to the idle list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PState {
    /// Held by a running M.
    Running,
    /// On the idle list; its M is (or is about to be) parked in its driver.
    Idle,
    /// Taken off the idle list by a waker who has not yet been seen by the
    /// P's M. `spinning`: the waker counted the M in `nmspinning`.
    Woken { spinning: bool },
}

pub(crate) struct Idle {
    /// Idle P's. Read without the lock by `wake_idle_p`; changed under it.
    /// SeqCst: takes part in the Dekker-style barrier with work submitters.
    npidle: AtomicUsize,
    /// M's looking for work to steal. SeqCst for the same barrier.
    nmspinning: AtomicUsize,
    inner: Mutex<Inner>,
    nprocs: usize,
}

struct Inner {
    /// Per node, a LIFO stack of idle P's (the most recently idled P has the
    /// warmest caches and the lowest chance of a deep sleep).
    stacks: Vec<Vec<usize>>,
    state: Vec<PState>,
    node_of: Vec<usize>,
}

/// How a parked P's M got its P back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// Woken to spin: the waker incremented `nmspinning` on our behalf.
    Spinning,
    /// Woken by I/O, a timer, a targeted push, or the M took it back itself.
    Plain,
}

impl Idle {
    pub(crate) fn new(node_of: Vec<usize>, nodes: usize) -> Self {
        let nprocs = node_of.len();
        Idle {
            npidle: AtomicUsize::new(0),
            nmspinning: AtomicUsize::new(0),
            inner: Mutex::new(Inner {
                stacks: vec![Vec::new(); nodes],
                state: vec![PState::Running; nprocs],
                node_of,
            }),
            nprocs,
        }
    }

    pub(crate) fn npidle(&self) -> usize {
        self.npidle.load(SeqCst)
    }

    pub(crate) fn nmspinning(&self) -> usize {
        self.nmspinning.load(SeqCst)
    }

    /// Go's rule: an M may start spinning only while fewer than half the busy
    /// P's have a spinning M, so spinning cannot eat the CPU it is looking for.
    pub(crate) fn may_spin(&self) -> bool {
        let busy = self.nprocs.saturating_sub(self.npidle.load(SeqCst));
        2 * self.nmspinning.load(SeqCst) < busy
    }

    pub(crate) fn start_spinning(&self) {
        self.nmspinning.fetch_add(1, SeqCst);
    }

    /// Returns true when the caller was the last spinner (Go: it must then
    /// wake another M, since it found work and there may be more).
    pub(crate) fn stop_spinning(&self) -> bool {
        self.nmspinning.fetch_sub(1, SeqCst) == 1
    }

    /// Claims the right to wake one spinning M: true if none was spinning and
    /// a P is idle. The caller must then call `pop_for_spinning`.
    pub(crate) fn try_claim_spinner(&self) -> bool {
        // SeqCst loads: the submitter side of the barrier (after its fence).
        if self.nmspinning.load(SeqCst) != 0 || self.npidle.load(SeqCst) == 0 {
            return false;
        }
        self.nmspinning
            .compare_exchange(0, 1, SeqCst, SeqCst)
            .is_ok()
    }

    /// Takes an idle P (preferring `node`) for a spinner already counted in
    /// `nmspinning`; on `None` the caller must undo its count.
    pub(crate) fn pop_for_spinning(&self, node: usize) -> Option<usize> {
        let mut inner = self.inner.lock().unwrap();
        let n = inner.stacks.len();
        let p = (0..n)
            .map(|i| (node + i) % n)
            .find_map(|k| inner.stacks[k].pop())?;
        inner.state[p] = PState::Woken { spinning: true };
        self.npidle.fetch_sub(1, SeqCst);
        Some(p)
    }

    /// Takes P `p` off the idle list for a targeted wake-up (a push to its
    /// inbox or pinned queue). False if it is not idle (running, or already woken).
    pub(crate) fn take_specific(&self, p: usize) -> bool {
        let mut inner = self.inner.lock().unwrap();
        if inner.state[p] != PState::Idle {
            return false;
        }
        let node = inner.node_of[p];
        inner.stacks[node].retain(|&q| q != p);
        inner.state[p] = PState::Woken { spinning: false };
        self.npidle.fetch_sub(1, SeqCst);
        true
    }

    /// Puts P `p` on the idle list (its M is about to park in its driver).
    pub(crate) fn release(&self, p: usize) {
        let mut inner = self.inner.lock().unwrap();
        debug_assert_eq!(inner.state[p], PState::Running, "P{p} released twice");
        let node = inner.node_of[p];
        inner.stacks[node].push(p);
        inner.state[p] = PState::Idle;
        self.npidle.fetch_add(1, SeqCst);
    }

    /// The P's own M takes it back after parking or after its re-check.
    pub(crate) fn reclaim(&self, p: usize) -> Reclaim {
        let mut inner = self.inner.lock().unwrap();
        match inner.state[p] {
            PState::Idle => {
                let node = inner.node_of[p];
                inner.stacks[node].retain(|&q| q != p);
                inner.state[p] = PState::Running;
                self.npidle.fetch_sub(1, SeqCst);
                Reclaim::Plain
            }
            PState::Woken { spinning } => {
                inner.state[p] = PState::Running;
                if spinning {
                    Reclaim::Spinning
                } else {
                    Reclaim::Plain
                }
            }
            PState::Running => unreachable!("P{p} reclaimed while running"),
        }
    }
}

#[cfg(test)]
mod tests;
