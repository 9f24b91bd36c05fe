//! The watcher role of a node: at most one idle M per node — the
//! **watcher** — blocks on the pollers of every P of its node; every other
//! idle M sleeps on its own eventfd (Go's "at most one M blocks in the
//! netpoller", per node). Where each M blocks, how park and wake fit
//! together and why no wake-up is lost are docs/architecture.md, "Idle P's
//! and parked M's: the park/unpark protocol"; the rules' measurements are
//! its "One event wakes one thread".
//!
//! This file owns the role's state (who holds it, under one lock per node,
//! taken by the node's M's once per park and by the monitor) and its rules,
//! one function each:
//!
//! - **Taking the role** ([`Role::on_park`]): a candidate about to block
//!   takes it if nobody holds it or the holder is not parked.
//! - **Keeping it** ([`Role::on_leave`] with `hand_off == false`): a watcher
//!   woken by I/O keeps the role while it runs the woken tasks.
//! - **Handing it on** (`hand_off == true`): a watcher woken by an unpark
//!   gives the role to a parked candidate, or keeps it if none is parked.
//! - **Rescuing it** ([`Role::rescue`], [`Role::release_host`]): the monitor
//!   ([`super::monitor`]) moves the role from a holder that stays out of its
//!   park, giving back the watch first if that holder hosts it.
//!
//! The epoll calls are behind [`WatchOps`] (implemented on the real
//! descriptors by `super::watch_ops`), so the loom models below run this
//! very code. The invariant under the lock: P `p` has entries switched on
//! (the watch epoll in its park epoll, or its unpark eventfd in the watch
//! epoll), or hosts the watch epoll in its own io poller, only if
//! `watcher == Some(p)`, and the watcher has one on; moving the role
//! therefore gives the watch back first ([`WatchOps::disarm`]). A move costs
//! two `epoll_ctl`s, one on and one off (two more if the old holder hosted
//! the watch). The race of a hand-off with an M that is waking up is closed
//! by order: an M marks itself unparked *before* it takes the lock to
//! leave, and parked *before* it takes the lock to park; the handing or
//! taking side reads the parked flags *under* the lock. The loom models
//! below check it.
//!
//! On a runtime with several nodes, the role's moments are also lending's
//! ([`super::lend`]): an M that parks holding the role takes its node's
//! watching back from another node ([`WatchOps::parks_holding`]), and a
//! candidate that leaves its park reports whether any candidate of its
//! node, and the holder, are still parked ([`WatchOps::left`]), so that a
//! node with no parked M is lent to the nearest node whose watcher is.

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

pub(super) use crate::tuning::CANDIDATES;

/// What the role protocol needs from the real world (the epoll calls and the
/// P's parked flags), so the loom model runs this very code.
pub(super) trait WatchOps {
    /// Arms P `p` for the role. `direct`: its M is about to block on the
    /// watch epoll itself, so its unpark eventfd is switched on there;
    /// otherwise its M sleeps in its park epoll, so the watch epoll is
    /// switched on in that. Only what is not on yet costs an `epoll_ctl`.
    fn arm(&self, p: usize, direct: bool) -> std::io::Result<()>;
    /// Switches off whatever [`WatchOps::arm`] switched on for P `p`, and
    /// gives the watch back if P `p`'s poller hosts it.
    fn disarm(&self, p: usize);
    /// Gives the watch back if P `p`'s poller hosts it (the driver's
    /// "Hosting"): its poller rejoins the watch. Returns whether it gave it
    /// back (false for a poller that did not host it, or whose give-back
    /// failed and so still hosts it).
    fn unhost(&self, p: usize) -> bool;
    /// Whether P `p`'s M is blocked (or about to block) in its park epoll.
    fn is_parked(&self, p: usize) -> bool;
    /// Whether the node can be lent to another node (the runtime has
    /// several; see `super::lend`). Without, a leave that keeps the role
    /// takes no lock.
    fn lends(&self) -> bool {
        false
    }
    /// Under the role lock: P `p`'s M is about to block holding the role
    /// (lending: its node watches itself again).
    fn parks_holding(&self, _p: usize) {}
    /// Under the role lock, when [`WatchOps::lends`]: P `p`'s M left its
    /// park; `any_parked`: a candidate of the node is still parked;
    /// `holder_parked`: the holder is (lending: lend the node, give it
    /// back, or move what is lent to it).
    fn left(&self, _p: usize, _any_parked: bool, _holder_parked: bool) {}
}

/// The watcher role of one node.
pub(super) struct Role {
    watcher: Mutex<Option<usize>>,
    /// A copy of `watcher` (`usize::MAX`: none), written under the lock,
    /// read without it by [`Role::holder_hint`]. std's atomic even under
    /// loom: it is advisory and no model reads it.
    hint: std::sync::atomic::AtomicUsize,
    /// The P's that may hold the role, in index order.
    candidates: Vec<usize>,
}

const NO_HOLDER: usize = usize::MAX;

impl Role {
    /// `procs`: the node's P's, in index order.
    pub(super) fn new(procs: &[usize]) -> Self {
        Role {
            watcher: Mutex::new(None),
            hint: std::sync::atomic::AtomicUsize::new(NO_HOLDER),
            candidates: procs.iter().copied().take(CANDIDATES).collect(),
        }
    }

    /// Whether P `p`'s park epoll holds the watch epoll at all.
    pub(super) fn is_candidate(&self, p: usize) -> bool {
        self.candidates.contains(&p)
    }

    /// Called by P `me`'s M after it marked itself parked, before it blocks:
    /// takes the role if nobody holds it or its holder is running. Returns
    /// whether `me` holds the role now; it then keeps it until it leaves
    /// its park (nobody takes the role from a parked holder), so it may
    /// block on the watch epoll itself (see the driver's `park`).
    pub(super) fn on_park(&self, me: usize, ops: &impl WatchOps) -> bool {
        if !self.is_candidate(me) {
            return false;
        }
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        let direct = match *w {
            // Already the holder (kept it, or was handed it while parked and
            // so armed through its park epoll, which still works if this
            // fails).
            Some(p) if p == me => ops.arm(me, true).is_ok(),
            Some(p) if ops.is_parked(p) => false,
            old => {
                if ops.arm(me, true).is_ok() {
                    if let Some(p) = old {
                        ops.disarm(p);
                    }
                    self.set(&mut w, Some(me));
                    true
                } else {
                    ops.disarm(me);
                    false
                }
            }
        };
        if *w == Some(me) {
            ops.parks_holding(me);
        }
        direct
    }

    /// Under the role lock: records the new holder (and its lock-free copy).
    fn set(&self, w: &mut Option<usize>, holder: Option<usize>) {
        *w = holder;
        // SeqCst: `holder_now` (lending's look at another node's watcher,
        // without this lock) reads it SeqCst, then the holder's parked
        // flag; `holder_hint` reads it Relaxed, as a hint.
        self.hint.store(
            holder.unwrap_or(NO_HOLDER),
            std::sync::atomic::Ordering::SeqCst,
        );
    }

    /// The holder, without the lock, for another node's lending (see
    /// `super::lend`): SeqCst, with the store in `set`.
    pub(super) fn holder_now(&self) -> Option<usize> {
        let h = self.hint.load(std::sync::atomic::Ordering::SeqCst);
        (h != NO_HOLDER).then_some(h)
    }

    /// Whether P `p`'s M held the role a moment ago, without the lock. A
    /// stale answer costs at most one needless (or one missed) non-blocking
    /// poll before a park; see `Driver::watches`.
    pub(super) fn holder_hint(&self, p: usize) -> bool {
        self.hint.load(std::sync::atomic::Ordering::Relaxed) == p
    }

    /// Called by P `me`'s M after it marked itself unparked, when it leaves
    /// its park to run tasks. With `hand_off` (it was unparked for new work),
    /// a watcher gives the role to a parked candidate, scanning from `me + 1`
    /// so the role moves away from busy P's. Without a parked candidate it
    /// keeps the role, as a watcher woken by I/O does: nobody could watch
    /// anyway, the next M to park takes the role from it (it is not parked),
    /// and most often that M is itself, which then pays no `epoll_ctl` at
    /// all. (Leaving the role free instead cost four `epoll_ctl`s per unpark
    /// of a watcher, which at light load is most requests; figures in
    /// docs/notes/2026-11-26-reactor-measurements.md.) Returns whether it was handed on.
    ///
    /// On a runtime with several nodes ([`WatchOps::lends`]) it then tells
    /// lending, under the lock, whether a candidate of the node and the
    /// holder are still parked ([`WatchOps::left`]).
    pub(super) fn on_leave(&self, me: usize, hand_off: bool, ops: &impl WatchOps) -> bool {
        if !self.is_candidate(me) {
            return false;
        }
        let lends = ops.lends();
        if !hand_off && !lends {
            return false;
        }
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        let moved = hand_off && *w == Some(me) && self.move_to_parked(&mut w, me, ops);
        if lends {
            let any_parked = self.candidates.iter().any(|&p| ops.is_parked(p));
            let holder_parked = w.is_some_and(|h| ops.is_parked(h));
            ops.left(me, any_parked, holder_parked);
        }
        moved
    }

    /// Under the role lock: moves the role from `from` to the first parked
    /// candidate after it (so the role moves away from busy P's). False,
    /// with nothing changed, if no candidate is parked.
    fn move_to_parked(&self, w: &mut Option<usize>, from: usize, ops: &impl WatchOps) -> bool {
        let n = self.candidates.len();
        let offset = self.candidates.iter().position(|&p| p == from).unwrap_or(0);
        for k in 1..n {
            let p = self.candidates[(offset + k) % n];
            if !ops.is_parked(p) {
                continue;
            }
            // Parked: it sees the watch through its park epoll.
            if ops.arm(p, false).is_ok() {
                ops.disarm(from);
                self.set(w, Some(p));
                return true;
            }
        }
        false
    }

    /// Called by the monitor: if `holder` still holds the role and is still
    /// running (not parked), gives the role to a parked candidate. Returns
    /// whether it moved. The parked check is under the lock, so a holder
    /// that is parking again at the same moment keeps it.
    pub(super) fn rescue(&self, holder: usize, ops: &impl WatchOps) -> bool {
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if *w != Some(holder) || ops.is_parked(holder) {
            return false;
        }
        self.move_to_parked(&mut w, holder, ops)
    }

    /// Called by the monitor: if `holder` still holds the role and is still
    /// running, its poller gives the watch back (if it hosts it), so that
    /// the next tick's rescue sees that poller's events in the watch.
    /// Returns whether the watch was given back.
    pub(super) fn release_host(&self, holder: usize, ops: &impl WatchOps) -> bool {
        let w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        *w == Some(holder) && !ops.is_parked(holder) && ops.unhost(holder)
    }

    /// The current watcher (diagnostics and tests).
    pub(super) fn watcher(&self) -> Option<usize> {
        *self.watcher.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(all(test, loom))]
mod models {
    use super::*;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use loom::thread;
    use std::sync::Arc;

    /// Three P's of one node; `on` is a bitmask standing in for "the watch
    /// epoll is switched on in this P's park epoll", `hosted` for "this P's
    /// io poller hosts the watch" (every direct arm hosts: the driver's most
    /// eager policy).
    struct Model {
        parked: [AtomicBool; 3],
        on: AtomicUsize,
        hosted: AtomicUsize,
    }

    impl WatchOps for Model {
        fn arm(&self, p: usize, direct: bool) -> std::io::Result<()> {
            self.on.fetch_or(1 << p, SeqCst);
            if direct {
                self.hosted.fetch_or(1 << p, SeqCst);
            }
            Ok(())
        }
        fn disarm(&self, p: usize) {
            self.on.fetch_and(!(1 << p), SeqCst);
            self.unhost(p);
        }
        fn unhost(&self, p: usize) -> bool {
            self.hosted.fetch_and(!(1 << p), SeqCst) & (1 << p) != 0
        }
        fn is_parked(&self, p: usize) -> bool {
            self.parked[p].load(SeqCst)
        }
    }

    fn model(parked: [bool; 3]) -> Arc<Model> {
        Arc::new(Model {
            parked: parked.map(AtomicBool::new),
            on: AtomicUsize::new(0),
            hosted: AtomicUsize::new(0),
        })
    }

    /// Only the holder's poller may host the watch: every other P's poller
    /// must be back in it, or the holder would miss its events.
    fn assert_only_the_holder_hosts(m: &Model, role: &Role) {
        let mask = role.watcher().map_or(0, |w| 1 << w);
        assert_eq!(
            m.hosted.load(SeqCst) & !mask,
            0,
            "a P that does not hold the role still hosts the watch"
        );
    }

    /// The monitor gives the watch back from a holder it saw running while
    /// that holder parks again: whatever the order, a holder that parked
    /// hosting (and so blocks on its own poller) still hosts when the
    /// monitor is done, since nobody unhosts a parked holder.
    #[test]
    fn a_parked_host_keeps_the_watch() {
        loom::model(|| {
            let m = model([true, false, false]);
            let role = Arc::new(Role::new(&[0, 1, 2]));
            role.on_park(0, &*m);
            // P 0 leaves its park and runs; the monitor saw it running.
            m.parked[0].store(false, SeqCst);
            role.on_leave(0, false, &*m);
            let (m1, r1) = (m.clone(), role.clone());
            let monitor = thread::spawn(move || r1.release_host(0, &*m1));
            m.parked[0].store(true, SeqCst);
            let direct = role.on_park(0, &*m);
            let hosts = direct && m.hosted.load(SeqCst) & 1 != 0;
            monitor.join().unwrap();
            assert!(direct, "nobody else parked: P 0 keeps the role");
            assert!(hosts, "a direct arm hosts in this model");
            assert_eq!(
                m.hosted.load(SeqCst) & 1,
                1,
                "the watch was taken from a parked host"
            );
            assert_only_the_holder_hosts(&m, &role);
        });
    }

    /// P0 is parked and watching, P1 is parked, P2 is busy. Concurrently P0
    /// and P1 are unparked for new work (they hand the role on) and P2 parks.
    /// At the end only P2 is parked, so P2 must be the watcher and the only
    /// park epoll with the watch switched on: the role never ends with a
    /// running M while an M is parked.
    #[test]
    fn role_follows_parked_machines() {
        loom::model(|| {
            let m = model([true, true, false]);
            let role = Arc::new(Role::new(&[0, 1, 2]));
            role.on_park(0, &*m);
            let leave = |p: usize| {
                let (m, role) = (m.clone(), role.clone());
                thread::spawn(move || {
                    m.parked[p].store(false, SeqCst);
                    role.on_leave(p, true, &*m);
                })
            };
            let a = leave(0);
            let b = leave(1);
            m.parked[2].store(true, SeqCst);
            role.on_park(2, &*m);
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(role.watcher(), Some(2), "the only parked M must watch");
            assert_eq!(m.on.load(SeqCst), 1 << 2);
            assert_only_the_holder_hosts(&m, &role);
        });
    }

    /// A watcher woken by I/O keeps the role while another M parks: the
    /// parker takes it over if it sees the watcher running, or else sleeps;
    /// either way exactly one park epoll has the watch switched on, and it
    /// is the watcher's.
    #[test]
    fn role_is_held_by_exactly_one() {
        loom::model(|| {
            let m = model([true, false, false]);
            let role = Arc::new(Role::new(&[0, 1, 2]));
            role.on_park(0, &*m);
            let (m1, r1) = (m.clone(), role.clone());
            let t = thread::spawn(move || {
                m1.parked[1].store(true, SeqCst);
                r1.on_park(1, &*m1)
            });
            m.parked[0].store(false, SeqCst);
            role.on_leave(0, false, &*m);
            let took = t.join().unwrap();
            let w = role.watcher().expect("somebody holds the role");
            assert_eq!(m.on.load(SeqCst), 1 << w);
            assert_only_the_holder_hosts(&m, &role);
            // What `on_park` answered is what the parker may act on (block
            // on the watch epoll itself): it must be the truth.
            assert_eq!(took, w == 1);
        });
    }

    /// The watcher is unparked for work while the only other M is unparked
    /// too, then one of them parks again: whichever it is, it must end up
    /// the watcher (a running holder keeps the role only until an M parks),
    /// with only its entries switched on.
    #[test]
    fn role_comes_back_to_the_next_parker() {
        loom::model(|| {
            let m = model([true, true, false]);
            let role = Arc::new(Role::new(&[0, 1, 2]));
            role.on_park(0, &*m);
            let (m1, r1) = (m.clone(), role.clone());
            let t = thread::spawn(move || {
                m1.parked[1].store(false, SeqCst);
                r1.on_leave(1, true, &*m1);
                m1.parked[1].store(true, SeqCst);
                r1.on_park(1, &*m1)
            });
            m.parked[0].store(false, SeqCst);
            role.on_leave(0, true, &*m);
            // P1 took it in `on_park`, or was handed it while parked (P0
            // saw it parked in `on_leave`): either way it holds it now.
            t.join().unwrap();
            assert_eq!(
                role.watcher(),
                Some(1),
                "the only parked M must hold the role"
            );
            assert_eq!(m.on.load(SeqCst), 1 << 1);
            assert_only_the_holder_hosts(&m, &role);
        });
    }
}
