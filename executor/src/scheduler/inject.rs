//! A FIFO queue shared by many producers: a node's global run queue, or a
//! processor's inbox (tasks sent to that P by others).
//!
//! A mutex-protected deque plus an atomic length so that the common "is it
//! empty?" check on the scheduling path never takes the lock (Go's
//! `sched.runqsize`). Producers push one task or a batch under one lock;
//! consumers take a batch (Go's `globrunqget`).

use crate::loom::atomic::{AtomicUsize, Ordering::*};
use crate::loom::Mutex;
use crate::queue::Overflow;
use crate::task::Runnable;
use std::collections::VecDeque;

pub(crate) struct Inject {
    queue: Mutex<VecDeque<Runnable>>,
    /// Mirrors `queue.len()`. Written under the lock (Release), read without
    /// it (Acquire): a reader that sees `len > 0` and then locks finds the
    /// task; a stale 0 is covered by the park/unpark barrier (see
    /// docs/architecture.md, "Parking and the barrier").
    len: AtomicUsize,
}

impl Inject {
    pub(crate) fn new() -> Self {
        Inject {
            queue: Mutex::new(VecDeque::new()),
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
        q.push_back(task);
        self.len.store(q.len(), Release);
    }

    /// Takes up to `max` tasks, oldest first.
    pub(crate) fn pop_batch(&self, max: usize, out: &mut Vec<Runnable>) {
        if self.is_empty() || max == 0 {
            return;
        }
        let mut q = self.queue.lock().unwrap();
        let n = max.min(q.len());
        out.extend(q.drain(..n));
        self.len.store(q.len(), Release);
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

    /// Empties the queue (shutdown).
    pub(crate) fn drain(&self) -> Vec<Runnable> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.len.store(0, Release);
        q.drain(..).collect()
    }
}

impl Overflow<Runnable> for Inject {
    fn push_batch(&self, batch: Vec<Runnable>) {
        let mut q = self.queue.lock().unwrap();
        q.extend(batch);
        self.len.store(q.len(), Release);
    }
}
