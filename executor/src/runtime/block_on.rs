//! `Handle::block_on`: running a future on a thread that is not a
//! runtime worker, with a pinned queue for its `spawn_local` tasks, parked
//! on the thread's own waker between polls.

use super::Handle;
use crate::scheduler::context;
use crate::scheduler::local::LocalQueue;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

impl Handle {
    /// See [`Runtime::block_on`](super::Runtime::block_on). Works from any
    /// thread that is not a runtime worker.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if context::in_worker() {
            panic!(
                "Cannot start a runtime from within a runtime. This happens because a function \
                 (like `block_on`) attempted to block the current thread while the thread is \
                 being used to drive asynchronous tasks. If you are in an async function, use \
                 `.await` on the future instead of blocking on it. (numa_rt: \
                 Cannot block_on from inside a numa_rt worker thread: it would block the worker \
                 and can deadlock the runtime. Use `.await` in async code, or move the blocking \
                 part to numa_rt::spawn_blocking / numa_rt::block_in_place.)"
            );
        }
        // Not "a pinned queue is installed": `LocalSet::enter` and
        // `LocalRuntime::enter` install one outside any `block_on`.
        let Some(_in_block_on) = context::enter_block_on() else {
            // tokio's words first (code and tests match on them), then ours.
            panic!(
                "Cannot start a runtime from within a runtime. This happens because a function \
                 (like `block_on`) attempted to block the current thread while the thread is \
                 being used to drive asynchronous tasks. If you are in an async function, use \
                 `.await` on the future instead of blocking on it. (numa_rt: Cannot block_on \
                 inside another block_on on the same thread.)"
            );
        };
        let _enter = self.enter();
        // Inside the borrow of `self`, so `self.shared` outlives the guard.
        let _lent = context::lend_block_on(&self.shared);
        // The side tokio runtime's context for the duration (it nests
        // inside any context this thread has: tokio's guards are left in
        // reverse order, and this one drops when block_on returns).
        let _tokio = crate::scheduler::thread_life::enter_tokio(&self.shared);
        let notified = Arc::new(AtomicBool::new(true));
        let local = LocalQueue::for_block_on(notified.clone());
        self.shared.register_local(&local.tasks);
        let _local = context::set_local_queue(local.clone());
        let waker = Waker::from(Arc::new(ThreadWaker {
            thread: std::thread::current(),
            notified: notified.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        // Seen by sysmon's deadlock diagnostic (`crate::sysmon`).
        let block_ons = &self.shared.block_ons;
        struct Leave<'a>(&'a crate::scheduler::BlockOns, usize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave(self.1);
            }
        }
        let key = block_ons.enter();
        let _leave = Leave(block_ons, key);
        // Paused time's auto-advance must not run while this block_on has
        // been woken but not yet polled (see the reactor's `driver::paused`).
        let _registered = self.shared.reactor.register_block_on(notified.clone());
        let out = loop {
            // Acquire pairs with the Release store of whoever woke us.
            if notified.swap(false, Acquire) {
                block_ons.polls.fetch_add(1, Relaxed);
                if let Poll::Ready(v) = crate::task::enter_block_on(&waker, || {
                    numa_rt_reactor::coop::budget(|| future.as_mut().poll(&mut cx))
                }) {
                    break v;
                }
            }
            // Pinned tasks of this block_on: the ones queued now, then the
            // main future gets its turn again.
            let mut ran = false;
            for _ in 0..local.len() {
                match local.pop() {
                    Some(t) => {
                        t.metadata()
                            .note_polled(crate::task::epoch_ms(Instant::now()));
                        numa_rt_reactor::coop::budget(|| t.run());
                        ran = true;
                    }
                    None => break,
                }
            }
            // Acquire pairs with the wakers' Release store; a wake after this
            // check unparks the thread, so park returns at once.
            if !ran && !notified.load(Acquire) && local.is_empty() {
                block_ons.parked.fetch_add(1, Relaxed);
                // Paused time: if this thread is the last to go idle, it
                // unparks the M that moves the clock to the next deadline
                // (only M's advance: reactor `driver/paused.rs`). A timer of
                // its own future sets `notified` and unparks this thread.
                self.shared.reactor.auto_advance_parking();
                if self.shared.config.deadlock != crate::DeadlockMode::Off
                    || self.shared.reactor.is_clock_paused()
                {
                    // A monitor asleep since the runtime went idle must
                    // look again: this park may complete a deadlock, or
                    // let a paused clock auto-advance.
                    self.shared.reactor.kick_monitor();
                }
                std::thread::park();
                block_ons.parked.fetch_sub(1, Relaxed);
                if let Some(msg) = block_ons.failure(key) {
                    panic!("{msg}");
                }
            }
        };
        local.close_and_drain();
        out
    }
}

struct ThreadWaker {
    thread: std::thread::Thread,
    notified: Arc<AtomicBool>,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Release pairs with block_on's swap(Acquire).
        self.notified.store(true, Release);
        self.thread.unpark();
    }
}
