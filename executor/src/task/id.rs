//! Task ids: [`Id`]. The `id()` and `try_id()` functions live in the harness,
//! which sets the thread-local they read.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A task's id: unique among the tasks of the process for its whole life.
///
/// The same value is returned by [`JoinHandle::id`](super::JoinHandle::id),
/// [`AbortHandle::id`](super::AbortHandle::id), [`JoinError::id`](super::JoinError::id)
/// and, inside the task, by [`id()`](fn@super::id).
///
/// Stored as two 32-bit halves, high first (so the derived order is the
/// number's): 4-aligned, which lets a task's `TaskMeta` be five 32-bit
/// words and async-task's header one word smaller (see `TaskMeta`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id([u32; 2]);

/// Ids come in blocks of `1 << ID_BLOCK_BITS`, one block per thread at a
/// time (see [`Id::next`]); the task registry shards by block, so a P's
/// spawns take one shard's lock, not every shard's in turn.
pub(crate) const ID_BLOCK_BITS: u32 = 8;

impl Id {
    /// A fresh id: the next of this thread's block, and a new block (one
    /// atomic add on a process-wide counter) every 256 ids. One add per
    /// spawn, as before, put every spawning thread on one cache line
    /// (`spawn_many_remote_idle`). Ids stay unique; they no longer
    /// follow spawn order across threads (within one thread they still
    /// grow).
    pub(crate) fn next() -> Id {
        // std's atomic even under loom: ids are not part of any model.
        // Block 0 is never handed out: no id is 0.
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            // (next id, end of this thread's block); no destructor, so it
            // works while the thread exits too.
            static BLOCK: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
        }
        let n = BLOCK.with(|b| {
            let (mut next, mut end) = b.get();
            if next == end {
                // Relaxed: ids only need uniqueness, not ordering.
                next = NEXT_BLOCK.fetch_add(1, Relaxed) << ID_BLOCK_BITS;
                end = next + (1 << ID_BLOCK_BITS);
            }
            b.set((next + 1, end));
            next
        });
        Id([(n >> 32) as u32, n as u32])
    }

    /// The id as a number (never 0).
    pub fn as_u64(self) -> u64 {
        (u64::from(self.0[0]) << 32) | u64::from(self.0[1])
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Id").field(&self.as_u64()).finish()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_u64().fmt(f)
    }
}
