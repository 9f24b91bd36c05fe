//! Pinned tasks (`spawn_local`, Go's LockOSThread): `!Send` futures that
//! always run on the thread that spawned them.
//!
//! Each M has a [`LocalQueue`], and so does each running `block_on` and
//! each `LocalSet`. The queue's schedule function pushes there and wakes the
//! owner: an M parked in its P's driver gets that driver unparked; a
//! `block_on` thread is unparked; a `LocalSet` wakes the task (or
//! `block_on`) that drives it. Pinned tasks are never stolen.
//!
//! When the owner ends (its M exits at shutdown, or its `block_on`
//! returns) it drops every queued pinned task on its own thread. A pinned
//! task that is woken after its owner ended cannot be dropped safely on the
//! waking thread (its future is `!Send`): it is leaked, and documented so.

use super::Shared;
use crate::loom::atomic::{fence, AtomicUsize as OwnerAtomic};
use crate::task::registry::Registry;
use crate::task::{self, JoinHandle, Runnable};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::thread::{Thread, ThreadId};

pub(crate) struct LocalQueue {
    owner: ThreadId,
    queue: Mutex<VecDeque<Runnable>>,
    /// Mirrors the queue's length; written under the lock (Release), read
    /// by the owner without it (Acquire) on every scheduling round.
    len: AtomicUsize,
    /// Set under the lock by the owner when it ends; pushes after it do not queue.
    closed: AtomicBool,
    wake: OwnerWake,
    /// The live pinned tasks of this thread, so that closing drops the
    /// futures of idle ones too (see `task::registry`).
    pub(crate) tasks: Arc<Registry>,
}

/// An M, as its pinned queue sees it: something that can ask a P of
/// `shared` back for itself (`Machine` implements it; the trait keeps this
/// module from importing the M's).
pub(crate) trait AsksForP: Send + Sync {
    /// Adds this M to P `p`'s askers.
    fn ask_back(self: Arc<Self>, shared: &Shared, p: usize);
}

/// Which P an M holds, as its pinned queue's wakers see it, and the
/// barrier between a waker and the M giving its P up (the M alone may run
/// its pinned tasks, so a task queued while it holds no P must get it one):
///
/// - the waker, after its push: fence, then the P the M holds ([`OwnerP::after_push`]);
///   none: it asks the M's last P back on the M's behalf;
/// - the M, after recording that it holds none ([`OwnerP::set`], SeqCst) and
///   waiting in its pool: fence, then its queue ([`OwnerP::after_leaving`]);
///   a task there: it asks for its last P itself.
///
/// Store, fence, load on both sides (Dekker): at least one of them sees the
/// other's store, so a queued task never waits for an M that waits for
/// nobody. The loom model `models::a_pinned_wake_is_never_lost` checks it.
struct OwnerP {
    /// The P the M holds, `usize::MAX` while it holds none.
    held: OwnerAtomic,
    /// The P it last held (`usize::MAX`: none yet).
    last: OwnerAtomic,
}

/// What a waker of a pinned task must do ([`OwnerP::after_push`]).
#[derive(Debug, PartialEq, Eq)]
enum OwnerWakes {
    /// The M holds this P: unpark it, if idle.
    Unpark(usize),
    /// The M holds none: ask this P (its last) back for it.
    AskFor(usize),
    /// The M never held a P: it finds the task when it first gets one.
    Nobody,
}

impl OwnerP {
    fn new() -> OwnerP {
        OwnerP {
            held: OwnerAtomic::new(usize::MAX),
            last: OwnerAtomic::new(usize::MAX),
        }
    }

    /// The M now holds `p` (`usize::MAX`: none).
    fn set(&self, p: usize) {
        if p != usize::MAX {
            self.last.store(p, Relaxed);
        }
        // SeqCst: one side of the barrier (see the type).
        self.held.store(p, SeqCst);
    }

    fn last(&self) -> Option<usize> {
        Some(self.last.load(Relaxed)).filter(|&p| p != usize::MAX)
    }

    fn holds(&self) -> bool {
        self.held.load(Relaxed) != usize::MAX
    }

    /// The waker's side, after its push.
    fn after_push(&self) -> OwnerWakes {
        // (barrier) Pairs with the fence in `after_leaving`.
        fence(SeqCst);
        match self.held.load(SeqCst) {
            usize::MAX => match self.last() {
                Some(p) => OwnerWakes::AskFor(p),
                None => OwnerWakes::Nobody,
            },
            p => OwnerWakes::Unpark(p),
        }
    }

    /// The M's side, waiting in its pool without a P: the P to ask back if
    /// `queued()` (a pinned task waits) — the waker may have seen the M
    /// still holding a P and asked no one.
    fn after_leaving(&self, queued: impl FnOnce() -> bool) -> Option<usize> {
        // (barrier) Pairs with the fence in `after_push`.
        fence(SeqCst);
        self.last().filter(|_| queued())
    }
}

enum OwnerWake {
    /// An M: wake the driver of the P it holds; when it holds none, ask
    /// the P it last held to come back to it (see `wake_owner`).
    Machine {
        shared: std::sync::Weak<Shared>,
        /// The P the M holds and the one it last held.
        p: OwnerP,
        /// The M itself, for asking a P back on its behalf (weak: the M
        /// owns this queue).
        owner: std::sync::OnceLock<std::sync::Weak<dyn AsksForP>>,
    },
    /// A thread in `block_on`.
    Thread {
        thread: Thread,
        notified: std::sync::Arc<AtomicBool>,
    },
    /// A `LocalSet`: the waker of whoever polled it last (`run_until`, or
    /// the set awaited as a future).
    Set { driver: Mutex<Option<Waker>> },
}

impl LocalQueue {
    /// The queue of a new M; call it on the M's own thread (the caller
    /// becomes the owner).
    pub(crate) fn for_machine(shared: &Arc<Shared>) -> Arc<LocalQueue> {
        let q = Arc::new(LocalQueue {
            owner: std::thread::current().id(),
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wake: OwnerWake::Machine {
                shared: Arc::downgrade(shared),
                p: OwnerP::new(),
                owner: std::sync::OnceLock::new(),
            },
            tasks: Registry::new(1),
        });
        shared.register_local(&q.tasks);
        q
    }

    /// The queue of a `block_on` on the current thread.
    pub(crate) fn for_block_on(notified: std::sync::Arc<AtomicBool>) -> Arc<LocalQueue> {
        Arc::new(LocalQueue {
            owner: std::thread::current().id(),
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wake: OwnerWake::Thread {
                thread: std::thread::current(),
                notified,
            },
            tasks: Registry::new(1),
        })
    }

    /// The queue of a `LocalSet` created on the current thread (its owner:
    /// a `LocalSet` is `!Send`).
    pub(crate) fn for_set() -> Arc<LocalQueue> {
        Arc::new(LocalQueue {
            owner: std::thread::current().id(),
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wake: OwnerWake::Set {
                driver: Mutex::new(None),
            },
            tasks: Registry::new(1),
        })
    }

    /// A `LocalSet`'s driver: `waker` is woken by the next push. Stored
    /// before the driver looks at the queue, so a push after that look
    /// finds it (both go through the `driver` lock).
    pub(crate) fn set_driver(&self, waker: &Waker) {
        if let OwnerWake::Set { driver } = &self.wake {
            let mut d = driver.lock().unwrap_or_else(|e| e.into_inner());
            match &*d {
                Some(w) if w.will_wake(waker) => {}
                _ => *d = Some(waker.clone()),
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Acquire) == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Acquire)
    }

    /// Whether pinned tasks of this thread are still alive (queued or idle).
    pub(crate) fn has_live_tasks(&self) -> bool {
        self.tasks.len() > 0
    }

    pub(crate) fn pop(&self) -> Option<Runnable> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.queue.lock().unwrap();
        let t = q.pop_front();
        self.len.store(q.len(), Release);
        t
    }

    fn push(&self, task: Runnable) {
        task.metadata().note_scheduled();
        let mut q = self.queue.lock().unwrap();
        if self.closed.load(Relaxed) {
            drop(q);
            if std::thread::current().id() == self.owner {
                drop(task);
            } else {
                // A `!Send` future may not be dropped here; see the module docs.
                std::mem::forget(task);
            }
            return;
        }
        q.push_back(task);
        self.len.store(q.len(), Release);
        drop(q);
        self.wake_owner();
    }

    fn wake_owner(&self) {
        match &self.wake {
            OwnerWake::Thread { thread, notified } => {
                notified.store(true, Release); // pairs with block_on's swap(Acquire)
                thread.unpark();
            }
            OwnerWake::Set { driver } => {
                // Cloned out of the lock: the wake may run arbitrary code
                // (another executor's waker), which may push here again.
                let w = driver.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(w) = w {
                    w.wake();
                }
            }
            OwnerWake::Machine { shared, p, owner } => {
                if std::thread::current().id() == self.owner {
                    return; // the owner looks at its queue before parking
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                let p = match p.after_push() {
                    OwnerWakes::Unpark(p) => p,
                    // The owner holds no P (retaken, lent, or it gave its P
                    // back): only it may run the task, so it must get one.
                    // It asks the P it last held; the P's holder hands the
                    // P over when it would park (an asker with pinned tasks
                    // queued first), a retake hands it over at once.
                    OwnerWakes::AskFor(p) => {
                        match owner.get().and_then(std::sync::Weak::upgrade) {
                            Some(m) => m.ask_back(&shared, p),
                            None => return,
                        }
                        p
                    }
                    OwnerWakes::Nobody => return,
                };
                // (barrier) The holder releases its P under the idle lock
                // before its re-check; `take_specific` takes that lock
                // after our push (and ask), so one of the two sees the other.
                if shared.idle.take_specific(p) {
                    shared.unpark(p);
                }
            }
        }
    }

    /// Records the P the owning M now holds (`usize::MAX`: none).
    pub(crate) fn set_machine_p(&self, p: usize) {
        if let OwnerWake::Machine { p: owner_p, .. } = &self.wake {
            owner_p.set(p);
        }
    }

    /// The P the owning M last held (an M's queue only).
    pub(crate) fn last_p(&self) -> Option<usize> {
        match &self.wake {
            OwnerWake::Machine { p, .. } => p.last(),
            _ => None,
        }
    }

    /// Whether the owning M holds a P now (an M's queue only).
    pub(crate) fn holds_p(&self) -> bool {
        matches!(&self.wake, OwnerWake::Machine { p, .. } if p.holds())
    }

    /// Records the M owning this queue (once, right after it is built).
    pub(crate) fn set_owner(&self, m: std::sync::Weak<dyn AsksForP>) {
        if let OwnerWake::Machine { owner, .. } = &self.wake {
            let _ = owner.set(m);
        }
    }

    /// Called by the owning M once it waits in its pool without a P: if a
    /// pinned task was queued meanwhile, the P it last held (the one to ask
    /// back) — the waker may have seen it still holding a P and asked no one.
    pub(crate) fn note_no_p(&self) -> Option<usize> {
        let OwnerWake::Machine { p, .. } = &self.wake else {
            return None;
        };
        p.after_leaving(|| !self.is_empty())
    }

    /// Closes the queue and drops every pinned task's future: the queued
    /// ones, then the idle ones (woken through the registry, their schedule
    /// function finds the queue closed and drops them here, on the owner).
    pub(crate) fn close_and_drain(&self) {
        debug_assert_eq!(std::thread::current().id(), self.owner);
        let drained: Vec<Runnable> = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            self.closed.store(true, Relaxed);
            self.len.store(0, Release);
            q.drain(..).collect()
        };
        drop(drained);
        self.tasks.close_and_wake_all();
    }
}

/// Spawns a pinned task on the current thread's queue.
#[track_caller]
pub(crate) fn spawn_local<F>(queue: &Arc<LocalQueue>, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let q = queue.clone();
    let new = task::spawn_local_tracked(future, &queue.tasks, move |r| q.push(r));
    if new.live {
        queue.push(new.runnable);
    }
    new.handle
}

#[cfg(loom)]
mod models {
    use super::{OwnerP, OwnerWakes};
    use crate::loom::atomic::{AtomicBool, AtomicUsize};
    use loom::thread;
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    use std::sync::Arc;

    /// The lost wake-up `OwnerP`'s barrier prevents: a pinned task is
    /// queued (the queue's length, Release, as `LocalQueue::push` stores
    /// it) while its M gives its P up and waits in its pool. Either the
    /// waker sees the M without a P and asks for one on its behalf, or the
    /// M sees the task and asks itself. `keeps_p`: the M keeps its P (the
    /// waker then unparks that P and nobody needs to ask).
    fn model(keeps_p: bool) {
        loom::model(move || {
            let p = Arc::new(OwnerP::new());
            p.set(3);
            let queued = Arc::new(AtomicUsize::new(0));
            let waker_asked = Arc::new(AtomicBool::new(false));
            let (p2, q2, w2) = (p.clone(), queued.clone(), waker_asked.clone());
            let waker = thread::spawn(move || {
                q2.store(1, Release);
                match p2.after_push() {
                    OwnerWakes::AskFor(p) => {
                        assert_eq!(p, 3, "the P it last held");
                        w2.store(true, Relaxed);
                    }
                    OwnerWakes::Unpark(p) => assert_eq!(p, 3),
                    OwnerWakes::Nobody => panic!("the M held a P before"),
                }
            });
            let m_asked = if keeps_p {
                false
            } else {
                p.set(usize::MAX);
                p.after_leaving(|| queued.load(Acquire) != 0).is_some()
            };
            waker.join().unwrap();
            if !keeps_p {
                assert!(
                    waker_asked.load(Relaxed) || m_asked,
                    "lost wake-up: a pinned task queued, its M without a P, nobody asked"
                );
            }
        });
    }

    #[test]
    fn a_pinned_wake_is_never_lost() {
        model(false);
    }

    #[test]
    fn an_m_that_keeps_its_p_is_unparked() {
        model(true);
    }
}
