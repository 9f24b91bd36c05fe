//! The node watch: at most one idle M per node watches the pollers of the
//! node's busy P's.
//!
//! Each node has a *watch epoll* (level-triggered) holding the io poller of
//! every P of the node. A P's entry is **exposed** (listening for input) only
//! while the P is not parked; a parked P's M watches its own poller directly
//! in its park epoll, so hiding the entry is what keeps one event from waking
//! two threads.
//!
//! The **watcher** is one parked M whose park epoll holds the watch epoll. It
//! wakes only for events on busy P's pollers (and due timers of busy P's,
//! which are timerfds in those pollers) and helps: it drains that poller and
//! runs the woken tasks on its own P. When the watcher stops parking (it found
//! work), it hands the role to another parked M of the node by moving the
//! watch epoll from its own park epoll into that M's one: an `epoll_ctl`, not
//! a wake-up. If no M of the node is parked, nobody watches until one parks;
//! busy P's poll their own poller every `event_interval` ticks meanwhile.
//!
//! The role's state lives under one lock per node, taken once per park and
//! once per wake (uncontended: only this node's M's take it). The invariant
//! under that lock: the watch epoll is in P `p`'s park epoll iff
//! `watcher == Some(p)`. The lost-watch race (a watcher hands the role to an M
//! that is waking up at that moment) is closed by the order of two steps on
//! each side: an M marks itself unparked *before* it takes the lock to leave,
//! and the handing M reads the parked flags *under* the lock. So either the
//! handing M sees the waking one as unparked and picks someone else, or the
//! waking M finds itself the watcher when it takes the lock and hands the role
//! on. The loom model below checks it.

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// What the role protocol needs from the real world (the epoll calls and the
/// P's parked flags), so the loom model runs this very code.
pub(super) trait WatchOps {
    /// Adds the watch epoll to P `p`'s park epoll.
    fn attach(&self, p: usize) -> std::io::Result<()>;
    /// Removes the watch epoll from P `p`'s park epoll.
    fn detach(&self, p: usize);
    /// Whether P `p`'s M is blocked (or about to block) in its park epoll.
    fn is_parked(&self, p: usize) -> bool;
}

/// The watcher role of one node.
pub(super) struct Role {
    watcher: Mutex<Option<usize>>,
    /// The node's P's, in index order.
    procs: Vec<usize>,
}

impl Role {
    pub(super) fn new(procs: Vec<usize>) -> Self {
        Role {
            watcher: Mutex::new(None),
            procs,
        }
    }

    /// Called by P `me`'s M after it marked itself parked, before it blocks:
    /// takes the role if nobody holds it.
    pub(super) fn on_park(&self, me: usize, ops: &impl WatchOps) {
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_none() && ops.attach(me).is_ok() {
            *w = Some(me);
        }
    }

    /// Called by P `me`'s M after it marked itself unparked, when it leaves
    /// its park to run tasks: if it is the watcher, hands the role to another
    /// parked M of the node (scanning from `me + 1`, so the role moves away
    /// from busy P's). Returns whether the role was handed on.
    pub(super) fn on_leave(&self, me: usize, ops: &impl WatchOps) -> bool {
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if *w != Some(me) {
            return false;
        }
        ops.detach(me);
        *w = None;
        let n = self.procs.len();
        let offset = self.procs.iter().position(|&p| p == me).unwrap_or(0);
        for k in 1..n {
            let p = self.procs[(offset + k) % n];
            if ops.is_parked(p) && ops.attach(p).is_ok() {
                *w = Some(p);
                return true;
            }
        }
        false
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

    /// Three P's of one node; `attached` is a bitmask standing in for "the
    /// watch epoll is in this P's park epoll".
    struct Model {
        parked: [AtomicBool; 3],
        attached: AtomicUsize,
    }

    impl WatchOps for Model {
        fn attach(&self, p: usize) -> std::io::Result<()> {
            let before = self.attached.fetch_or(1 << p, SeqCst);
            assert_eq!(before & (1 << p), 0, "watch epoll added twice to P{p}");
            Ok(())
        }
        fn detach(&self, p: usize) {
            let before = self.attached.fetch_and(!(1 << p), SeqCst);
            assert_ne!(before & (1 << p), 0, "watch epoll removed from P{p} twice");
        }
        fn is_parked(&self, p: usize) -> bool {
            self.parked[p].load(SeqCst)
        }
    }

    /// P0 is parked and watching, P1 is parked, P2 is busy. Concurrently P0
    /// and P1 wake up (leave) and P2 parks. At the end only P2 is parked, so
    /// P2 must be the watcher and the only park epoll holding the watch
    /// epoll: the role never ends with an M that is running, nor is lost
    /// while an M is parked.
    #[test]
    fn role_follows_parked_machines() {
        loom::model(|| {
            let m = Arc::new(Model {
                parked: [
                    AtomicBool::new(true),
                    AtomicBool::new(true),
                    AtomicBool::new(false),
                ],
                attached: AtomicUsize::new(0),
            });
            let role = Arc::new(Role::new(vec![0, 1, 2]));
            role.on_park(0, &*m);
            let leave = |p: usize| {
                let (m, role) = (m.clone(), role.clone());
                thread::spawn(move || {
                    m.parked[p].store(false, SeqCst);
                    role.on_leave(p, &*m);
                })
            };
            let a = leave(0);
            let b = leave(1);
            // P2 parks.
            m.parked[2].store(true, SeqCst);
            role.on_park(2, &*m);
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(role.watcher(), Some(2), "the only parked M must watch");
            assert_eq!(m.attached.load(SeqCst), 1 << 2);
        });
    }

    /// The watcher leaves while the only other M is waking up too: the role
    /// must end with nobody (both run), never with a running M.
    #[test]
    fn role_never_left_with_a_running_machine() {
        loom::model(|| {
            let m = Arc::new(Model {
                parked: [
                    AtomicBool::new(true),
                    AtomicBool::new(true),
                    AtomicBool::new(false),
                ],
                attached: AtomicUsize::new(0),
            });
            let role = Arc::new(Role::new(vec![0, 1, 2]));
            role.on_park(0, &*m);
            let (m1, r1) = (m.clone(), role.clone());
            let t = thread::spawn(move || {
                m1.parked[1].store(false, SeqCst);
                r1.on_leave(1, &*m1);
            });
            m.parked[0].store(false, SeqCst);
            role.on_leave(0, &*m);
            t.join().unwrap();
            assert_eq!(role.watcher(), None);
            assert_eq!(m.attached.load(SeqCst), 0);
        });
    }
}
