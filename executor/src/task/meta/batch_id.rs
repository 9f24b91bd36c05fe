//! The placement policy's batch id in a task's header: 14 bits of
//! `TaskMeta`'s flags word above the two flags (seed 000's batches;
//! docs/architecture.md, "Batches"). The layout, the id a task founds, and
//! the accessors.

use super::{TaskMeta, FINISHED};
use crate::task::Id;
use std::sync::atomic::Ordering::Relaxed;

/// Where the task's batch id starts in `flags` (the 14 bits above the two
/// flags; 0: in no batch). See [`TaskMeta::batch`].
pub(crate) const BATCH_SHIFT: u32 = 2;
pub(crate) const BATCH_BITS: u32 = 16 - BATCH_SHIFT;
pub(crate) const BATCH_MASK: u32 = ((1 << BATCH_BITS) - 1) << BATCH_SHIFT;

/// A batch id: which group of tasks that wake each other a task belongs to
/// (seed 000's batches; docs/architecture.md, "Batches"). 14 bits, never 0.
pub(crate) type BatchId = std::num::NonZeroU16;

/// The batch id a task founds when it wakes another while in no batch:
/// derived from its own id, so no shared counter is touched. Two live
/// batches may share an id (one in 16,383): they are then treated as one,
/// which costs locality at worst, never correctness.
pub(crate) fn batch_id_for(id: Id) -> BatchId {
    let n = (id.as_u64() % ((1 << BATCH_BITS) - 1)) as u16 + 1;
    BatchId::new(n).expect("1..=16383")
}

impl TaskMeta {
    /// The batch the task belongs to, if any: set when another task's poll
    /// woke it (it joins the waker's batch) or by `spawn_near`. Relaxed: a
    /// placement hint; a stale id costs locality, never correctness.
    #[inline]
    pub(crate) fn batch(&self) -> Option<BatchId> {
        BatchId::new(((self.flags() & BATCH_MASK) >> BATCH_SHIFT) as u16)
    }

    /// The batch id's bits as they sit in the flags word (0: none): two
    /// tasks are in one batch when these are equal and not 0. One load, no
    /// decoding: the wake path's fast check (see `batch::learn_edge`).
    #[inline]
    pub(crate) fn batch_bits(&self) -> u32 {
        self.flags() & BATCH_MASK
    }

    /// Puts the task in batch `b` (a read-modify-write that keeps the flags;
    /// callers check [`TaskMeta::batch`] first, so a task
    /// that stays in its batch costs one load). A finished task keeps no
    /// batch. Relaxed: see [`TaskMeta::batch`].
    #[inline]
    pub(crate) fn set_batch(&self, b: BatchId) {
        // Lossless: 14 bits of id above the 2 flag bits.
        let bits = (u32::from(b.get()) << BATCH_SHIFT) as u16;
        let (finished, mask) = (FINISHED as u16, BATCH_MASK as u16);
        let _ = self.flags.fetch_update(Relaxed, Relaxed, |f| {
            (f & finished == 0).then_some((f & !mask) | bits)
        });
    }
}
