//! Lending a node's watch to another node (issue 45, item 3): readiness
//! across NUMA nodes.
//!
//! Per node, only a parked M of that node holds the watcher role
//! ([`super::watch`]). When every M of node A is busy (no candidate of A is
//! parked), an event on one of A's pollers used to wait for A's own M (its
//! next non-blocking poll) or for the monitor's poll of unwatched pollers
//! (10 ms), while another node's M slept. Now node A's pollers are *lent*
//! to the nearest node T whose watcher is parked: T's watcher is woken by
//! A's event, drains A's poller ([`super::dispatch::help`]) and fires the
//! wakers on its own thread, so the woken task runs on T's P (a cross-node
//! migration, which is the point: stealing crosses nodes the same way when
//! the local node has nothing).
//!
//! **The descriptors.** On a runtime with several nodes, each node A has a
//! *lend epoll* `X_A` holding A's io pollers (the same ones its watch
//! holds: a poller that hosts the watch leaves both, see `super::watch_ops`).
//! At build time `X_A` is added, switched off, to the watch epolls of A's
//! [`LEND_TARGETS`] nearest nodes (by the distance table), tagged
//! [`super::LEND_IN_WATCH`] `| A`. Lending A to T switches that entry on
//! (one `EPOLL_CTL_MOD`, no loop check); giving it back switches it off. A
//! watcher that finds the tag looks into `X_A` without blocking, as it
//! looks into its own watch, and helps the ready pollers.
//!
//! Why an epoll of its own and not A's watch epoll in T's watch: both
//! directions must be registered at build time (switching by `MOD` avoids
//! the kernel's loop check, under a global mutex, on every lend), and
//! `watch(A)` in `watch(T)` with `watch(T)` in `watch(A)` is a loop the
//! kernel refuses. `X_A` holds only io pollers, and an io poller inside an
//! epoll never holds an epoll (the hosting poller leaves `X_A` too), so
//! there is no loop, and the deepest chain is four epolls (T's park epoll
//! or hosting poller → `watch(T)` → `X_A` → A's io poller → sockets), the
//! kernel's limit (`EP_MAX_NESTS`). Each target multiplies the paths from
//! a socket to a top epoll the kernel counts at registration (at most 50
//! of this length): [`LEND_TARGETS`] targets of 8 candidates each stay
//! under it.
//!
//! **The rules** (this file; the role lock of the node named first is held
//! by the caller, the lending lock is taken inside, in that order only):
//!
//! - **At build time** ([`Lending::lend_all`]) every node is lent to its
//!   nearest target: no M is parked yet, and an M that starts running
//!   without parking first would never lend its node.
//! - **Lending** ([`Lending::on_leave`]): a candidate M of node A that
//!   leaves its park and leaves no candidate of A parked lends A to the
//!   nearest target whose watcher is parked, or, if none is, to the
//!   nearest target (whose next watcher to park sees A). A lend to a node
//!   whose watcher is parked is kept as it is: repeated leaves cost loads,
//!   no syscall.
//! - **Giving it back** ([`Lending::on_park`], and `on_leave` when a
//!   candidate of A is still parked): an M of A that parks holding A's role
//!   switches A's entry off: A watches itself again.
//! - **Following the watcher** (`on_leave` of node T): when T's watcher
//!   leaves its park and no M of T blocks on T's watch any more, every node
//!   lent to T moves to its nearest target whose watcher is parked, if any.
//!   The race with a node lending to T as T's watcher leaves is a Dekker
//!   pair: the lender counts itself in T's `borrowed`, then a
//!   `fence(SeqCst)`, then reads whether T's watcher is parked; the leaving
//!   M clears its parked flag, then a `fence(SeqCst)`, then reads
//!   `borrowed`. Either the lender sees T's
//!   watcher running and looks further, or the leaving M sees the lend and
//!   moves it. The loom model below checks it.
//!
//! Lending only adds wake-ups: no rule of the role protocol depends on it,
//! and an event the lending misses (every target busy) is found as before
//! (A's own M's next poll, the monitor's poll of unwatched pollers). A
//! runtime with one node has no lend epoll and never takes the lending lock:
//! [`Lending::active`] is false, and a park or leave pays nothing.
//!
//! Rejected: switching A's watch epoll itself into T's (loop, above);
//! adding A's pollers to T's watch one by one (a `MOD` per P of A per lend,
//! and the same loop through a hosting poller); lending from the monitor
//! (the event waits up to a tick, 20 µs to 10 ms: not "at once"); T's
//! watcher waiting on its park epoll holding A's watch (no loop, but T's
//! watcher, blocked directly on its watch or hosting, would have to be
//! woken to change what it waits on: a context switch per lend).

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicUsize, Ordering};
#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::Mutex;

pub(super) use crate::tuning::LEND_TARGETS;

/// Not lent (`Lending::lent`).
const NONE: usize = usize::MAX;

/// What lending needs from the real world, so the loom model runs this very
/// code.
pub(super) trait LendOps {
    /// Switches node `node`'s lend epoll on or off in node `to`'s watch epoll.
    fn switch(&self, node: usize, to: usize, on: bool) -> std::io::Result<()>;
    /// Whether node `n`'s watcher is parked (blocked, or about to block, on
    /// its watch). SeqCst: the lender's side of the pair with a leaving
    /// watcher (module docs).
    fn watched(&self, n: usize) -> bool;
}

/// The runtime's lending state (one per reactor).
pub(super) struct Lending {
    /// Per node: the nodes whose watch epolls hold its lend epoll, nearest
    /// first (empty on a one-node runtime).
    targets: Vec<Vec<usize>>,
    /// Per node: the node it is lent to, or [`NONE`]. Written under `lock`
    /// and, for node A, only by an M of A holding A's role lock, or by a
    /// move (to another target, never to or from [`NONE`]); so an M of A
    /// under A's role lock reads whether A is lent without `lock`.
    lent: Vec<AtomicUsize>,
    /// Per node: how many nodes are lent to it. SeqCst: the Dekker pair
    /// with the parked flags (module docs).
    borrowed: Vec<AtomicUsize>,
    lock: Mutex<()>,
}

impl Lending {
    /// `targets[n]`: the nodes whose watch holds node `n`'s lend epoll,
    /// nearest first.
    pub(super) fn new(targets: Vec<Vec<usize>>) -> Lending {
        let n = targets.len();
        Lending {
            targets,
            lent: (0..n).map(|_| AtomicUsize::new(NONE)).collect(),
            borrowed: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            lock: Mutex::new(()),
        }
    }

    /// At build time, before any M parks: no candidate of any node is
    /// parked yet, so every node is lent to its nearest target (an M that
    /// starts running without parking first never passes through
    /// [`Lending::on_leave`]); each node's first parked watcher takes its
    /// node back ([`Lending::on_park`]).
    pub(super) fn lend_all(&self, ops: &impl LendOps) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        for node in 0..self.targets.len() {
            if self.active(node) {
                self.retarget(node, ops);
            }
        }
    }

    /// Whether node `node` can be lent at all (the runtime has another node
    /// with P's).
    pub(super) fn active(&self, node: usize) -> bool {
        self.targets.get(node).is_some_and(|t| !t.is_empty())
    }

    /// The node `node` is lent to now (diagnostics and tests).
    pub(super) fn lent_to(&self, node: usize) -> Option<usize> {
        // Relaxed: a snapshot for diagnostics.
        let t = self.lent[node].load(Ordering::Relaxed);
        (t != NONE).then_some(t)
    }

    /// Called by a candidate M of `node` that has cleared its parked flag
    /// and left its park (after `Role::on_leave`), under `node`'s role lock.
    /// `any_parked`: a candidate of `node` is still parked; `holder_parked`:
    /// the role's holder is one of them (so `node`'s watch is waited on).
    /// Returns whether it lent `node` (or moved its lend).
    pub(super) fn on_leave(
        &self,
        node: usize,
        any_parked: bool,
        holder_parked: bool,
        ops: &impl LendOps,
    ) -> bool {
        if !self.active(node) {
            return false;
        }
        // Relaxed: stable under `node`'s role lock (see `lent`).
        let cur = self.lent[node].load(Ordering::Relaxed);
        let lend = if any_parked {
            // Its own M's can take the role back: give the lend back.
            cur != NONE
        } else {
            cur == NONE || !ops.watched(cur)
        };
        // (pair) The leaving side: the caller stored its parked flag false
        // (SeqCst); this fence orders that store before the load of
        // `borrowed`, against `retarget`'s fence between its count and its
        // look at the parked flags. (A fence, not SeqCst accesses alone:
        // the loom model of the pair fails without it.)
        let borrowed = !holder_parked && {
            fence(Ordering::SeqCst);
            self.borrowed[node].load(Ordering::SeqCst) > 0
        };
        if !lend && !borrowed {
            return false;
        }
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut lent = false;
        if lend {
            if any_parked {
                self.give_back(node, ops);
            } else {
                lent = self.retarget(node, ops);
            }
        }
        if borrowed {
            for l in 0..self.lent.len() {
                // Relaxed: written under `lock`, which this holds.
                if self.lent[l].load(Ordering::Relaxed) == node {
                    lent |= self.retarget(l, ops);
                }
            }
        }
        lent
    }

    /// Called by an M of `node` about to block holding `node`'s role, under
    /// `node`'s role lock: `node` watches itself again.
    pub(super) fn on_park(&self, node: usize, ops: &impl LendOps) {
        // Relaxed: stable under `node`'s role lock (see `lent`).
        if !self.active(node) || self.lent[node].load(Ordering::Relaxed) == NONE {
            return;
        }
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.give_back(node, ops);
    }

    /// Under `lock`: switches `node`'s lend off.
    fn give_back(&self, node: usize, ops: &impl LendOps) {
        // Relaxed: written under `lock`, which this holds.
        let cur = self.lent[node].load(Ordering::Relaxed);
        if cur == NONE {
            return;
        }
        if ops.switch(node, cur, false).is_err() {
            // Still on: keep it recorded, so a later give-back tries again.
            return;
        }
        self.lent[node].store(NONE, Ordering::Relaxed);
        // SeqCst: the count of the pair (module docs).
        self.borrowed[cur].fetch_sub(1, Ordering::SeqCst);
    }

    /// Under `lock`: lends `node` to its nearest target whose watcher is
    /// parked, keeping its current lend if that one's is; with none parked,
    /// keeps the current lend or lends to the nearest target. Returns
    /// whether the lend changed.
    fn retarget(&self, node: usize, ops: &impl LendOps) -> bool {
        // Relaxed: written under `lock`, which this holds.
        let cur = self.lent[node].load(Ordering::Relaxed);
        if cur != NONE && ops.watched(cur) {
            return false;
        }
        for &t in &self.targets[node] {
            if t == cur {
                continue;
            }
            // (pair) The lender's side: count, fence, then look at `t`'s
            // watcher; a watcher of `t` leaving now sees the count and
            // moves this lend (after this releases `lock`). Pairs with the
            // fence in `on_leave`.
            self.borrowed[t].fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if ops.watched(t) && self.switch_to(node, cur, t, ops) {
                return true;
            }
            // SeqCst: as above.
            self.borrowed[t].fetch_sub(1, Ordering::SeqCst);
        }
        if cur != NONE {
            return false;
        }
        let t = self.targets[node][0];
        // SeqCst: as above.
        self.borrowed[t].fetch_add(1, Ordering::SeqCst);
        if self.switch_to(node, NONE, t, ops) {
            return true;
        }
        // SeqCst: as above.
        self.borrowed[t].fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Under `lock`, `borrowed[to]` already counting `node`: switches
    /// `node`'s lend on in `to`, then off in `from` (if lent). The new entry
    /// goes on first, so `node` is never left unlent between the two.
    fn switch_to(&self, node: usize, from: usize, to: usize, ops: &impl LendOps) -> bool {
        if ops.switch(node, to, true).is_err() {
            return false;
        }
        if from != NONE {
            if ops.switch(node, from, false).is_err() {
                // Only one lend is recorded: switch `to` off again and
                // stay lent to `from` (the caller uncounts `to`).
                let _ = ops.switch(node, to, false);
                return false;
            }
            // SeqCst: the count of the pair (module docs).
            self.borrowed[from].fetch_sub(1, Ordering::SeqCst);
        }
        self.lent[node].store(to, Ordering::Relaxed);
        true
    }
}

#[cfg(all(test, loom))]
mod models {
    use super::*;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use loom::thread;
    use std::sync::Arc;

    /// Three nodes of one P each: `parked[n]` is node n's only M's parked
    /// flag, and so whether n's watch is waited on; `on` is a bitmask of
    /// switched-on lend entries, bit `3 * node + to`.
    struct Model {
        parked: [AtomicBool; 3],
        on: AtomicUsize,
    }

    impl LendOps for Model {
        fn switch(&self, node: usize, to: usize, on: bool) -> std::io::Result<()> {
            let bit = 1 << (3 * node + to);
            if on {
                assert_eq!(self.on.fetch_or(bit, SeqCst) & bit, 0, "switched on twice");
            } else {
                assert_ne!(
                    self.on.fetch_and(!bit, SeqCst) & bit,
                    0,
                    "switched off twice"
                );
            }
            Ok(())
        }
        fn watched(&self, n: usize) -> bool {
            self.parked[n].load(SeqCst)
        }
    }

    fn setup() -> (Arc<Model>, Arc<Lending>, Arc<[loom::sync::Mutex<()>; 3]>) {
        let m = Arc::new(Model {
            parked: [true, true, true].map(AtomicBool::new),
            on: AtomicUsize::new(0),
        });
        // Node 0's nearest is 1, then 2; node 1's is 0, then 2; node 2's is
        // 1, then 0.
        let l = Arc::new(Lending::new(vec![vec![1, 2], vec![0, 2], vec![1, 0]]));
        let roles = Arc::new([(); 3].map(|_| loom::sync::Mutex::new(())));
        (m, l, roles)
    }

    /// The M of node `n` leaves its park: clears its flag, then, under its
    /// node's role lock, lends (no other M of its node is parked).
    fn leave(m: &Model, l: &Lending, roles: &[loom::sync::Mutex<()>; 3], n: usize) {
        m.parked[n].store(false, SeqCst);
        let _role = roles[n].lock().unwrap();
        l.on_leave(n, false, false, m);
    }

    /// Every lent node is lent to exactly one node, the one recorded, and
    /// `borrowed` counts them.
    fn assert_consistent(m: &Model, l: &Lending) {
        let on = m.on.load(SeqCst);
        let mut borrowed = [0; 3];
        for n in 0..3 {
            let row = (on >> (3 * n)) & 0b111;
            match l.lent_to(n) {
                Some(t) => {
                    assert_eq!(row, 1 << t, "node {n}: entries {row:b}, lent to {t}");
                    borrowed[t] += 1;
                }
                None => assert_eq!(row, 0, "node {n}: entries {row:b}, not lent"),
            }
        }
        for t in 0..3 {
            assert_eq!(l.borrowed[t].load(SeqCst), borrowed[t], "node {t}'s count");
        }
    }

    /// Node 0's M leaves while node 1's M (node 0's nearest target) leaves
    /// too: whatever the order, node 0 ends lent to node 2, the only node
    /// whose watcher is parked (the Dekker pair of the module docs), and
    /// so does node 1.
    #[test]
    fn a_lend_follows_a_parked_watcher() {
        loom::model(|| {
            let (m, l, roles) = setup();
            let (m1, l1, r1) = (m.clone(), l.clone(), roles.clone());
            let t = thread::spawn(move || leave(&m1, &l1, &r1, 1));
            leave(&m, &l, &roles, 0);
            t.join().unwrap();
            assert_eq!(l.lent_to(0), Some(2), "node 0 is watched by nobody");
            assert_eq!(l.lent_to(1), Some(2), "node 1 is watched by nobody");
            assert_consistent(&m, &l);
        });
    }

    /// Node 0 is lent to node 1; node 0's M parks again (takes its role
    /// back) while node 1's M leaves (moves what is lent to it): node 0 ends
    /// not lent, whatever the order, and nothing stays switched on for it.
    #[test]
    fn a_lend_ends_when_its_node_parks() {
        loom::model(|| {
            let (m, l, roles) = setup();
            leave(&m, &l, &roles, 0);
            assert_eq!(l.lent_to(0), Some(1));
            let (m1, l1, r1) = (m.clone(), l.clone(), roles.clone());
            let t = thread::spawn(move || leave(&m1, &l1, &r1, 1));
            m.parked[0].store(true, SeqCst);
            {
                let _role = roles[0].lock().unwrap();
                l.on_park(0, &*m);
            }
            t.join().unwrap();
            assert_eq!(l.lent_to(0), None, "node 0 watches itself");
            // Node 1 is lent to a parked watcher: node 0 (it parked) or,
            // if it looked before node 0 parked, node 2.
            assert!(matches!(l.lent_to(1), Some(0 | 2)));
            assert_consistent(&m, &l);
        });
    }
}
