//! A FIFO queue shared by many producers: a node's global run queue, or a
//! processor's inbox (tasks sent to that P by others).
//!
//! A mutex-protected deque plus an atomic length so that the common "is it
//! empty?" check on the scheduling path never takes the lock (Go's
//! `sched.runqsize`). Producers push one task or many under one lock;
//! a consumer takes several at once, a *take* (Go's `globrunqget`).

use crate::loom::atomic::{AtomicUsize, Ordering::*};
use crate::loom::Mutex;
use crate::queue::Overflow;
use crate::task::Runnable;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub(crate) struct Inject {
    queue: Mutex<Queue>,
    /// Mirrors `queue.len()`. Written under the lock (Release), read without
    /// it (Acquire): a reader that sees `len > 0` and then locks finds the
    /// task; a stale 0 is covered by the park/unpark barrier (see
    /// docs/architecture.md, "Why no wake-up is lost").
    len: AtomicUsize,
}

struct Queue {
    tasks: VecDeque<Runnable>,
    /// When the queue was last served (a pop) or went from empty to
    /// non-empty: how long its head has gone unserved. M's of other nodes
    /// take from it only once this is older than a grace period.
    served: Instant,
}

impl Queue {
    fn served_now(&mut self) {
        self.served = Instant::now();
    }
}

impl Inject {
    pub(crate) fn new() -> Self {
        Inject {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                served: Instant::now(),
            }),
            len: AtomicUsize::new(0),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn push(&self, task: Runnable) {
        let mut q = self.queue.lock().unwrap();
        if q.tasks.is_empty() {
            q.served_now();
        }
        q.tasks.push_back(task);
        self.len.store(q.tasks.len(), Release);
    }

    /// A take: up to `max` tasks, oldest first.
    pub(crate) fn take(&self, max: usize, out: &mut Vec<Runnable>) {
        if self.is_empty() || max == 0 {
            return;
        }
        let mut q = self.queue.lock().unwrap();
        let n = max.min(q.tasks.len());
        out.extend(q.tasks.drain(..n));
        q.served_now();
        self.len.store(q.tasks.len(), Release);
    }

    /// Takes the oldest task, but only if the queue has gone unserved for
    /// `grace`: how an M of another node steals from this node's queue.
    pub(crate) fn pop_unserved(&self, grace: Duration) -> Option<Runnable> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.queue.lock().unwrap();
        if q.served.elapsed() < grace {
            return None;
        }
        let t = q.tasks.pop_front();
        q.served_now();
        self.len.store(q.tasks.len(), Release);
        t
    }

    /// Empties the queue (shutdown).
    pub(crate) fn drain(&self) -> Vec<Runnable> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.len.store(0, Release);
        q.tasks.drain(..).collect()
    }
}

impl Overflow<Runnable> for Inject {
    fn push_many(&self, tasks: Vec<Runnable>) {
        let mut q = self.queue.lock().unwrap();
        if q.tasks.is_empty() {
            q.served_now();
        }
        q.tasks.extend(tasks);
        self.len.store(q.tasks.len(), Release);
    }
}
