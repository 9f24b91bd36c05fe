//! The blocking pool: M's that hold no P and run blocking closures
//! (`spawn_blocking`).
//!
//! A blocking closure is wrapped in a one-poll task so its `JoinHandle` is
//! the ordinary one. Threads are created on demand up to
//! `max_blocking_threads` (default 512) and leave after `blocking_keep_alive`
//! (default 10 s) without work. Closures queue when all threads are busy.
//!
//! # Waking an idle thread
//!
//! `idle` counts the threads free to take a closure: those waiting and not
//! yet claimed. A push that finds one claims it under the lock (`idle`
//! down, a `wakeup` token up) and notifies; a waiter leaves its wait only
//! by taking a token (or at shutdown, or on its keep-alive timeout with no
//! token left). Decrementing `idle` only once the woken thread ran again
//! — the obvious way — lets two pushes in a row both count the same
//! sleeper: one closure then waits behind a closure that may block for
//! good, with no thread spawned for it (tokio's issue 8056, which its
//! rt_spawn_blocking test reproduces).

use super::context;
use super::Shared;
use crate::config::Config;
use crate::task::{self, JoinHandle, Runnable};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Signals queued work and shutdown to idle threads.
    work: Condvar,
    /// Signals a thread's exit to shutdown.
    exited: Condvar,
    max: usize,
    keep_alive: Duration,
    thread_name: Arc<dyn Fn() -> String + Send + Sync>,
    stack_size: Option<usize>,
    /// The runtime, for the context of blocking threads (set after build;
    /// weak so the pool does not keep the runtime alive).
    shared: OnceLock<Weak<Shared>>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Runnable>,
    /// Waiting threads not yet claimed by a push.
    idle: usize,
    /// Claims not yet taken: each lets one waiter leave its wait.
    wakeups: usize,
    threads: usize,
    shutdown: bool,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl BlockingPool {
    pub(crate) fn new(cfg: &Config) -> Self {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                exited: Condvar::new(),
                max: cfg.max_blocking_threads,
                keep_alive: cfg.blocking_keep_alive,
                thread_name: cfg.thread_name.clone(),
                stack_size: cfg.thread_stack_size,
                shared: OnceLock::new(),
            }),
        }
    }

    pub(crate) fn set_runtime(&self, shared: &Arc<Shared>) {
        let _ = self.inner.shared.set(Arc::downgrade(shared));
    }

    pub(crate) fn threads(&self) -> usize {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .threads
    }

    /// No closure queued or running, read under one lock: a closure moves
    /// from the queue to a thread under it, so it is never in neither.
    /// Threads waiting and not claimed by a queued closure.
    pub(crate) fn idle_threads(&self) -> usize {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .idle
    }

    pub(crate) fn is_idle(&self) -> bool {
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        st.threads == st.idle && st.queue.is_empty()
    }

    /// Closures waiting for a blocking thread.
    pub(crate) fn queue_depth(&self) -> usize {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .queue
            .len()
    }

    #[track_caller]
    pub(crate) fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let inner = self.inner.clone();
        let (runnable, handle) =
            task::spawn_untracked(Blocking(Some(f)), move |r| Inner::schedule(&inner, r));
        runnable.schedule();
        handle
    }

    /// Stops the pool: new closures are refused (dropped), queued and
    /// running ones are waited for until `deadline` (after it, the threads
    /// finish them on their own), idle threads leave.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shutdown = true;
        // Closures already queued still run (tokio's rule: a
        // `spawn_blocking` made before shutdown completes, and a file write
        // handed to the pool lands); only new ones are refused. The threads
        // take them before they leave.
        self.inner.work.notify_all();
        while st.threads > 0 {
            st = match deadline {
                None => self
                    .inner
                    .exited
                    .wait(st)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    self.inner
                        .exited
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        let handles = std::mem::take(&mut st.handles);
        drop(st);
        for h in handles {
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

impl Inner {
    fn schedule(this: &Arc<Inner>, task: Runnable) {
        let mut st = this.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.shutdown {
            drop(st);
            drop(task);
            return;
        }
        st.queue.push_back(task);
        if st.idle > 0 {
            st.idle -= 1;
            st.wakeups += 1;
            this.work.notify_one();
        } else if st.threads < this.max {
            st.threads += 1;
            let me = this.clone();
            let mut b =
                std::thread::Builder::new().name(crate::config::name_thread(&this.thread_name));
            if let Some(s) = this.stack_size {
                b = b.stack_size(s);
            }
            match b.spawn(move || me.run()) {
                Ok(h) => {
                    st.handles.retain(|h| !h.is_finished());
                    st.handles.push(h);
                }
                // The closure stays queued: a running thread will take it.
                Err(_) => st.threads -= 1,
            }
        }
    }

    fn run(self: Arc<Inner>) {
        let shared = self.shared.get().and_then(|w| w.upgrade());
        // Not its creator's node (an M's, or its one core): every node's.
        if let Some(sh) = &shared {
            super::thread_life::place_nodeless(sh);
        }
        // The builder's hooks and the tokio context, as on an M.
        let life = shared.as_deref().map(super::thread_life::started);
        let enter = shared.clone().map(context::enter);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(task) = st.queue.pop_front() {
                drop(st);
                task.run();
                st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            if st.shutdown {
                break;
            }
            st.idle += 1;
            // None: a keep-alive past what `Instant` holds, i.e. forever.
            let deadline = Instant::now().checked_add(self.keep_alive);
            let mut leave = false;
            loop {
                st = match deadline {
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        let waited = self.work.wait_timeout(st, left);
                        waited.unwrap_or_else(|e| e.into_inner()).0
                    }
                    None => self.work.wait(st).unwrap_or_else(|e| e.into_inner()),
                };
                if st.wakeups > 0 {
                    // Claimed (this thread or another sleeper: either way
                    // one waiter leaves per claim); `idle` already counts it out.
                    st.wakeups -= 1;
                    break;
                }
                if st.shutdown || deadline.is_some_and(|d| Instant::now() >= d) {
                    st.idle -= 1;
                    leave = st.queue.is_empty();
                    break;
                }
                // Spurious: wait on.
            }
            if leave && !st.shutdown {
                break;
            }
        }
        // Let go of the runtime before shutdown can see this thread gone, so
        // that the runtime (and its reactor's descriptors) can go with it.
        drop(st);
        if let Some(life) = life {
            life.stopping();
        }
        drop(enter);
        drop(shared);
        self.state.lock().unwrap_or_else(|e| e.into_inner()).threads -= 1;
        self.exited.notify_all();
    }
}

/// A closure as a future that completes on its first poll.
struct Blocking<F>(Option<F>);

impl<F> Unpin for Blocking<F> {}

impl<F: FnOnce() -> R, R> Future for Blocking<F> {
    type Output = R;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R> {
        let f = self.0.take().expect("a blocking task is polled once");
        Poll::Ready(f())
    }
}
