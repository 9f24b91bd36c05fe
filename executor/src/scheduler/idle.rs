//! Idle P's and spinning M's, per NUMA node: Go's `sched.pidle`, `npidle`,
//! `nmspinning` and `wakep`'s spinner claim, split by node as Vyukov's
//! design asks.
//!
//! The park/unpark protocol this serves — the steps of a park, who wakes
//! whom, the barrier and the other orderings that keep a wake-up from being
//! lost, the invariants — is told once, for both crates, in
//! docs/architecture.md, "Idle P's and parked M's: the park/unpark
//! protocol". This file owns its bookkeeping:
//!
//! - per node, the counters `npidle` and `nmspinning`, on a cache line of
//!   their own, read without a lock by submitters and spinners; SeqCst, as
//!   the barrier's stores and loads on the counters' side (the fences are
//!   the callers', `Worker::park` and `Shared::wake_idle_p`);
//! - the spinner claim ([`Idle::try_claim_spinner`], then
//!   [`Idle::pop_for_spinning`]: one submitter at a time per node, only
//!   while the node has an idle P and no spinning M) and Go's spinning rule
//!   ([`Idle::may_spin`]: at most half the node's busy P's spin);
//! - per node, one lock over the idle list (LIFO, doubly linked through the
//!   P's indices within the node, so a P leaves it from anywhere in O(1))
//!   and each P's state: [`Idle::release`] and [`Idle::reclaim`] by the P's
//!   own M, [`Idle::take_specific`] by a targeted waker (the lock is what
//!   orders a targeted wake against a park), [`Idle::retire`] and
//!   [`Idle::unretire`] for P's above a shrunk CPU quota.
//!
//! The locks are only taken on the park and wake paths, and the park and
//! wake paths of different nodes never meet. The loom models of the barrier
//! are in `idle/tests.rs`.

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
    /// Above the CPU quota (sysmon's re-read): the P takes no work and is
    /// not idle either; its M runs only its pinned tasks and sleeps in the
    /// driver. A targeted wake (`take_specific`) still reaches it.
    Retired,
}

/// The counters of one node, on their own cache line: M's of different
/// nodes never write each other's.
#[repr(align(128))]
struct NodeCounts {
    /// Idle P's of the node. Read without the lock by submitters; changed
    /// under it. SeqCst: the parker's side of the barrier (module docs).
    npidle: AtomicUsize,
    /// M's of the node looking for work to steal. SeqCst for the same barrier.
    nmspinning: AtomicUsize,
    /// Retired P's of the node (changed under the lock).
    retired: AtomicUsize,
    /// P's of the node.
    nprocs: usize,
}

pub(crate) struct Idle {
    nodes: Box<[NodeCounts]>,
    /// One lock per node: the park and wake paths of different nodes never
    /// meet (one lock for the whole runtime was contended at 16 P's).
    lists: Box<[Mutex<NodeList>]>,
    /// Each P's node and its index within the node. Fixed at build.
    place: Box<[(u32, u32)]>,
    /// Each node's first P (P's of a node are numbered consecutively).
    first: Box<[usize]>,
}

/// A node's idle list and its P's states (guarded by the node's lock).
///
/// The list is LIFO (the most recently idled P has the warmest caches and
/// the lowest chance of a deep sleep) and doubly linked through the P's
/// local indices, so a P leaves it from anywhere in O(1): a targeted wake
/// and a P reclaiming itself after its own I/O woke it used to scan a
/// vector of every idle P of the runtime under one lock.
struct NodeList {
    /// The most recently idled P (local index), `NIL` if none.
    top: u32,
    /// Per local index: the next older / newer idle P, `NIL` at the ends.
    older: Vec<u32>,
    newer: Vec<u32>,
    state: Vec<PState>,
}

/// No P.
const NIL: u32 = u32::MAX;

impl NodeList {
    fn new(nprocs: usize) -> Self {
        NodeList {
            top: NIL,
            older: vec![NIL; nprocs],
            newer: vec![NIL; nprocs],
            state: vec![PState::Running; nprocs],
        }
    }

    fn push(&mut self, k: u32) {
        self.older[k as usize] = self.top;
        self.newer[k as usize] = NIL;
        if self.top != NIL {
            self.newer[self.top as usize] = k;
        }
        self.top = k;
    }

    fn pop(&mut self) -> Option<u32> {
        let k = self.top;
        if k == NIL {
            return None;
        }
        self.unlink(k);
        Some(k)
    }

    /// Takes `k` (on the list) off it.
    fn unlink(&mut self, k: u32) {
        let (o, n) = (self.older[k as usize], self.newer[k as usize]);
        if o != NIL {
            self.newer[o as usize] = n;
        }
        if n != NIL {
            self.older[n as usize] = o;
        } else {
            self.top = o;
        }
        self.older[k as usize] = NIL;
        self.newer[k as usize] = NIL;
    }
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
        let counts = (0..nodes)
            .map(|n| NodeCounts {
                npidle: AtomicUsize::new(0),
                nmspinning: AtomicUsize::new(0),
                retired: AtomicUsize::new(0),
                nprocs: node_of.iter().filter(|&&k| k == n).count(),
            })
            .collect::<Box<[_]>>();
        let mut seen = vec![0u32; nodes];
        let place = node_of
            .iter()
            .map(|&n| {
                let k = seen[n];
                seen[n] += 1;
                (n as u32, k)
            })
            .collect::<Box<[_]>>();
        let first: Box<[usize]> = (0..nodes)
            .map(|n| node_of.iter().position(|&k| k == n).unwrap_or(0))
            .collect();
        debug_assert!(
            place
                .iter()
                .enumerate()
                .all(|(p, &(n, k))| first[n as usize] + k as usize == p),
            "the P's of a node are numbered consecutively"
        );
        Idle {
            lists: counts
                .iter()
                .map(|c| Mutex::new(NodeList::new(c.nprocs)))
                .collect(),
            nodes: counts,
            place,
            first,
        }
    }

    /// P `p`'s node and its index within the node.
    #[inline]
    fn place(&self, p: usize) -> (usize, u32) {
        let (n, k) = self.place[p];
        (n as usize, k)
    }

    /// Idle P's, all nodes.
    pub(crate) fn npidle(&self) -> usize {
        self.nodes.iter().map(|n| n.npidle.load(SeqCst)).sum()
    }

    /// Retired P's (above the CPU quota), all nodes.
    pub(crate) fn nretired(&self) -> usize {
        // Relaxed: a gauge for sysmon and the metrics.
        self.nodes.iter().map(|n| n.retired.load(Relaxed)).sum()
    }

    /// Spinning M's, all nodes.
    pub(crate) fn nmspinning(&self) -> usize {
        self.nodes.iter().map(|n| n.nmspinning.load(SeqCst)).sum()
    }

    /// Idle P's of `node`.
    pub(crate) fn node_npidle(&self, node: usize) -> usize {
        self.nodes[node].npidle.load(SeqCst)
    }

    /// Spinning M's of `node`.
    pub(crate) fn node_nmspinning(&self, node: usize) -> usize {
        self.nodes[node].nmspinning.load(SeqCst)
    }

    /// `node_npidle` without ordering, for hints (`Shared::wake_idle_p_hint`).
    pub(crate) fn node_npidle_hint(&self, node: usize) -> usize {
        self.nodes[node].npidle.load(Relaxed)
    }

    /// `node_nmspinning` without ordering, for hints.
    pub(crate) fn node_nmspinning_hint(&self, node: usize) -> usize {
        self.nodes[node].nmspinning.load(Relaxed)
    }

    /// Go's rule, per node: an M may start spinning only while fewer than
    /// half the node's busy P's have a spinning M, so spinning cannot eat the
    /// CPU it is looking for.
    pub(crate) fn may_spin(&self, node: usize) -> bool {
        2 * self.nodes[node].nmspinning.load(SeqCst) < self.busy(node)
    }

    /// The P's of `node` held by an M: neither idle nor retired. SeqCst
    /// load of `npidle`: `may_spin` is part of Go's spinning rule (the
    /// counters pair with the updates in `release`, `reclaim` and the
    /// spinner claims); `others_busy` only needs a hint.
    fn busy(&self, node: usize) -> usize {
        let n = &self.nodes[node];
        n.nprocs
            .saturating_sub(n.npidle.load(SeqCst))
            .saturating_sub(n.retired.load(Relaxed))
    }

    /// Whether a P of `node` other than the caller's (which is not idle)
    /// is held by an M: only those can have work to steal, since an idle
    /// P's ring is empty (its M emptied it before parking, and only the
    /// owner pushes there). A stale answer only costs a needless scan, or
    /// leaves work to the submitters' wake-ups (the barrier), which
    /// do not count on spinners.
    pub(crate) fn others_busy(&self, node: usize) -> bool {
        self.busy(node) > 1
    }

    pub(crate) fn start_spinning(&self, node: usize) {
        self.nodes[node].nmspinning.fetch_add(1, SeqCst);
    }

    /// Returns true when the caller was the node's last spinner (Go: it must
    /// then wake another M, since it found work and there may be more).
    pub(crate) fn stop_spinning(&self, node: usize) -> bool {
        self.nodes[node].nmspinning.fetch_sub(1, SeqCst) == 1
    }

    /// Claims the right to wake one spinning M of `node`: true if none of the
    /// node's M's was spinning and one of its P's is idle. The caller must
    /// then call `pop_for_spinning(node)`.
    pub(crate) fn try_claim_spinner(&self, node: usize) -> bool {
        let n = &self.nodes[node];
        // SeqCst loads: the submitter side of the barrier (after its fence).
        if n.nmspinning.load(SeqCst) != 0 || n.npidle.load(SeqCst) == 0 {
            return false;
        }
        n.nmspinning.compare_exchange(0, 1, SeqCst, SeqCst).is_ok()
    }

    /// Takes an idle P of `node` for a spinner already counted in the node's
    /// `nmspinning`; on `None` the caller must undo its count.
    pub(crate) fn pop_for_spinning(&self, node: usize) -> Option<usize> {
        let mut list = self.lists[node].lock().unwrap();
        let k = list.pop()?;
        list.state[k as usize] = PState::Woken { spinning: true };
        self.nodes[node].npidle.fetch_sub(1, SeqCst);
        Some(self.first[node] + k as usize)
    }

    /// Takes P `p` off the idle list for a targeted wake-up (a push to its
    /// inbox or pinned queue). False if it is not idle (running, or already woken).
    /// A retired P stays retired, and true is returned: its M sleeps too and
    /// must look (a pinned task, an inbox push, a quota that grew back).
    pub(crate) fn take_specific(&self, p: usize) -> bool {
        let (node, k) = self.place(p);
        let mut list = self.lists[node].lock().unwrap();
        match list.state[k as usize] {
            PState::Retired => return true,
            PState::Idle => {}
            _ => return false,
        }
        list.unlink(k);
        list.state[k as usize] = PState::Woken { spinning: false };
        self.nodes[node].npidle.fetch_sub(1, SeqCst);
        true
    }

    /// Puts P `p` on the idle list (its M is about to park in its driver).
    pub(crate) fn release(&self, p: usize) {
        let (node, k) = self.place(p);
        let mut list = self.lists[node].lock().unwrap();
        debug_assert_eq!(
            list.state[k as usize],
            PState::Running,
            "P{p} released twice"
        );
        list.push(k);
        list.state[k as usize] = PState::Idle;
        self.nodes[node].npidle.fetch_add(1, SeqCst);
    }

    /// The P's own M retires it (it is above the CPU quota; it was running).
    /// (barrier) Under the node's lock, like `release`: a targeted waker
    /// that pushes before `take_specific` is seen by the M's check after this.
    pub(crate) fn retire(&self, p: usize) {
        let (node, k) = self.place(p);
        let mut list = self.lists[node].lock().unwrap();
        if list.state[k as usize] == PState::Retired {
            return;
        }
        debug_assert_eq!(
            list.state[k as usize],
            PState::Running,
            "P{p} retired while idle"
        );
        list.state[k as usize] = PState::Retired;
        self.nodes[node].retired.fetch_add(1, Relaxed);
    }

    /// The P's own M puts a retired P back to work (the quota grew back).
    pub(crate) fn unretire(&self, p: usize) {
        let (node, k) = self.place(p);
        let mut list = self.lists[node].lock().unwrap();
        if list.state[k as usize] == PState::Retired {
            list.state[k as usize] = PState::Running;
            self.nodes[node].retired.fetch_sub(1, Relaxed);
        }
    }

    /// The P's own M takes it back after parking or after its re-check.
    pub(crate) fn reclaim(&self, p: usize) -> Reclaim {
        let (node, k) = self.place(p);
        let mut list = self.lists[node].lock().unwrap();
        match list.state[k as usize] {
            PState::Idle => {
                list.unlink(k);
                list.state[k as usize] = PState::Running;
                self.nodes[node].npidle.fetch_sub(1, SeqCst);
                Reclaim::Plain
            }
            PState::Woken { spinning } => {
                list.state[k as usize] = PState::Running;
                if spinning {
                    Reclaim::Spinning
                } else {
                    Reclaim::Plain
                }
            }
            PState::Running => unreachable!("P{p} reclaimed while running"),
            PState::Retired => unreachable!("P{p} reclaimed while retired"),
        }
    }
}

#[cfg(test)]
mod tests;
