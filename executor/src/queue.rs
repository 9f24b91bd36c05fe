//! A processor's local run queue: a bounded ring plus the `runnext` LIFO slot.
//!
//! This is Go's `p.runq`/`p.runnext` (runtime/proc.go, `runqput`, `runqget`,
//! `runqgrab`). Only the processor's owner pushes and pops; any other
//! processor may steal. The ring holds raw task pointers in atomic slots, so a
//! thief may read slots speculatively and only commits by moving `head` with a
//! CAS: a failed CAS discards what it read.
//!
//! # Invariants
//! - `tail` is written only by the owner (Release, paired with the Acquire
//!   load of `tail` by thieves: a slot written before `tail` moved is visible
//!   to whoever sees the new `tail`).
//! - `head` only grows, by CAS from the owner (`pop`) or thieves (`steal`).
//!   A consumer owns the tasks in `[h, h+n)` only once its CAS `h -> h+n`
//!   succeeded (AcqRel: Release pairs with the owner's Acquire load of `head`
//!   in `push_back`, so the slots a thief read are not overwritten before it
//!   has read them; Acquire pairs with other consumers' Release CAS).
//! - `tail - head <= CAPACITY` at all times (wrapping u32 arithmetic).
//! - `runnext` holds at most one task; only the owner puts one there (a
//!   Release store into an empty slot, else a swap), and it takes one out
//!   with a swap; thieves may only take it with a CAS from the exact
//!   pointer they observed.

use crate::loom::atomic::{AtomicPtr, AtomicU32, Ordering::*};
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// Slots in the ring (Go and tokio use 256; loom models use 4 to reach the edges).
#[cfg(not(loom))]
pub(crate) const CAPACITY: usize = 256;
#[cfg(loom)]
pub(crate) const CAPACITY: usize = 4;
const MASK: u32 = CAPACITY as u32 - 1;

/// A task as the queue sees it: anything that converts to and from a raw pointer.
///
/// # Safety
/// `into_raw` must return a unique owning pointer that `from_raw` turns back
/// into the same value exactly once.
pub(crate) unsafe trait RawTask: Sized {
    fn into_raw(self) -> NonNull<()>;
    /// # Safety
    /// `ptr` came from `into_raw` and is converted back exactly once.
    unsafe fn from_raw(ptr: NonNull<()>) -> Self;
}

/// On its own cache lines (128 bytes: the pair of lines x86's adjacent-line
/// prefetcher moves together): the owner writes `head`, `tail` and
/// `runnext` on every push, pop and wake, and the queues of all P's are
/// allocated one after another at build. Unpadded, two P's queues could
/// share a line, and two P's each running their own tasks paid for each
/// other's pushes (`benches/channels.rs`, req_resp: the load of `head`
/// dominated the run loop). (Padding the `Core` and the M's `Seat` as
/// well gained nothing more and cost requests per second at one HTTP
/// connection: not done.)
#[repr(align(128))]
struct Inner {
    head: AtomicU32,
    tail: AtomicU32,
    buf: Box<[AtomicPtr<()>]>,
    runnext: AtomicPtr<()>,
}

/// The owner's end: push and pop. Exactly one exists per queue.
pub(crate) struct Local<T: RawTask> {
    inner: Arc<Inner>,
    _marker: std::marker::PhantomData<T>,
}

/// A thief's end: cheap to clone, usable from any thread.
pub(crate) struct Steal<T: RawTask> {
    inner: Arc<Inner>,
    _marker: std::marker::PhantomData<T>,
}

impl<T: RawTask> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Steal {
            inner: self.inner.clone(),
            _marker: std::marker::PhantomData,
        }
    }
}

// SAFETY: the queue moves `T`s between threads; it is Send/Sync when `T: Send`.
// Every access to the slots goes through atomics.
unsafe impl<T: RawTask + Send> Send for Local<T> {}
// SAFETY: as above.
unsafe impl<T: RawTask + Send> Send for Steal<T> {}
// SAFETY: as above; a `Steal` only performs atomic CAS-committed reads.
unsafe impl<T: RawTask + Send> Sync for Steal<T> {}

/// Creates a queue: the owner's end and a thief's end.
pub(crate) fn new<T: RawTask>() -> (Local<T>, Steal<T>) {
    let buf = (0..CAPACITY)
        .map(|_| AtomicPtr::new(ptr::null_mut()))
        .collect();
    let inner = Arc::new(Inner {
        head: AtomicU32::new(0),
        tail: AtomicU32::new(0),
        buf,
        runnext: AtomicPtr::new(ptr::null_mut()),
    });
    let local = Local {
        inner: inner.clone(),
        _marker: std::marker::PhantomData,
    };
    (
        local,
        Steal {
            inner,
            _marker: std::marker::PhantomData,
        },
    )
}

/// Where a `push_back` that found the ring full sends half of it.
pub(crate) trait Overflow<T> {
    /// Takes `tasks` (half the ring, oldest first, then the new task) in one go.
    fn push_many(&self, tasks: Vec<T>);
}

impl Inner {
    fn len(&self) -> usize {
        // A racy snapshot; Acquire pairs with the Release updates of head
        // (consumers' CAS) and tail (the owner's store).
        let h = self.head.load(Acquire);
        let t = self.tail.load(Acquire);
        t.wrapping_sub(h) as usize
    }
}

impl<T: RawTask> Local<T> {
    /// Tasks in the ring, not counting `runnext`.
    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the ring (not counting `runnext`) is empty.
    pub(crate) fn ring_is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// Whether the ring and `runnext` are both empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0 && self.inner.runnext.load(Relaxed).is_null()
    }

    /// Puts `task` in `runnext`; the task it displaces goes to the tail.
    #[cfg(test)]
    pub(crate) fn push_runnext(&mut self, task: T, overflow: &impl Overflow<T>) {
        if let Some(old) = self.swap_runnext(task) {
            self.push_back(old, overflow);
        }
    }

    /// Puts `task` in `runnext` and hands back the task it displaces, for
    /// the caller to queue (`push_runnext` sends it to the tail).
    ///
    /// An empty slot takes a plain store, not a swap: only the owner puts
    /// tasks in `runnext` (a thief only takes one out), so a slot this
    /// thread sees empty stays empty until it stores. (Its own last store
    /// comes first in the slot's modification order, and every later
    /// write is a thief's CAS to null: a Relaxed load that reads null
    /// reads the current value.) In a ping-pong, where the run loop has
    /// just taken the woken task's peer out of the slot, that is one
    /// locked instruction less per message (`benches/callgrind_atomics.py`).
    #[inline]
    pub(crate) fn swap_runnext(&mut self, task: T) -> Option<T> {
        let new = task.into_raw().as_ptr();
        if self.inner.runnext.load(Relaxed).is_null() {
            // Release: publishes the task to a thief's Acquire load and
            // CAS of `runnext`.
            self.inner.runnext.store(new, Release);
            return None;
        }
        // AcqRel: Release publishes the new task to a thief's CAS on
        // runnext; Acquire pairs with the Release store or swap that put
        // the old one there.
        let old = self.inner.runnext.swap(new, AcqRel);
        // SAFETY: a non-null runnext value came from `into_raw` and the swap
        // transferred its ownership to us.
        NonNull::new(old).map(|old| unsafe { T::from_raw(old) })
    }

    /// Takes the task in `runnext`, if any.
    pub(crate) fn pop_runnext(&mut self) -> Option<T> {
        // A plain load first, as in `pop`.
        if self.inner.runnext.load(Relaxed).is_null() {
            return None;
        }
        // AcqRel: Acquire pairs with the Release store or swap that put it
        // there.
        let next = self.inner.runnext.swap(ptr::null_mut(), AcqRel);
        // SAFETY: the swap gave us the only copy of this pointer.
        NonNull::new(next).map(|next| unsafe { T::from_raw(next) })
    }

    /// Takes the task at the head of the ring (not `runnext`), if any.
    pub(crate) fn pop_ring(&mut self) -> Option<T> {
        loop {
            let h = self.inner.head.load(Acquire);
            let t = self.inner.tail.load(Relaxed);
            if t == h {
                return None;
            }
            let p = self.inner.buf[(h & MASK) as usize].load(Relaxed);
            if self
                .inner
                .head
                .compare_exchange(h, h.wrapping_add(1), AcqRel, Relaxed)
                .is_ok()
            {
                let p = NonNull::new(p).expect("queue slot below tail is never null");
                // SAFETY: the CAS gave us ownership of the slot's task.
                return Some(unsafe { T::from_raw(p) });
            }
        }
    }

    /// Puts `task` at the tail; when the ring is full, half of it plus `task`
    /// go to `overflow` in one go (Go's `runqputslow`).
    pub(crate) fn push_back(&mut self, task: T, overflow: &impl Overflow<T>) {
        let mut task = task;
        loop {
            // Acquire pairs with consumers' Release CAS of head: slots they
            // consumed are free to overwrite.
            let h = self.inner.head.load(Acquire);
            let t = self.inner.tail.load(Relaxed); // only we write tail
            if t.wrapping_sub(h) < CAPACITY as u32 {
                self.inner.buf[(t & MASK) as usize].store(task.into_raw().as_ptr(), Relaxed);
                // Release pairs with the thieves' Acquire load of tail.
                self.inner.tail.store(t.wrapping_add(1), Release);
                return;
            }
            match self.push_overflow(task, h, overflow) {
                Ok(()) => return,
                // A consumer moved head meanwhile: there is room now.
                Err(t) => task = t,
            }
        }
    }

    fn push_overflow(&mut self, task: T, h: u32, overflow: &impl Overflow<T>) -> Result<(), T> {
        let n = (CAPACITY / 2) as u32;
        let mut half: Vec<NonNull<()>> = Vec::with_capacity(n as usize + 1);
        for i in 0..n {
            let p = self.inner.buf[(h.wrapping_add(i) & MASK) as usize].load(Relaxed);
            half.push(NonNull::new(p).expect("queue slot below tail is never null"));
        }
        // Claim the half; AcqRel as any consumer (see the module invariants).
        if self
            .inner
            .head
            .compare_exchange(h, h.wrapping_add(n), AcqRel, Relaxed)
            .is_err()
        {
            return Err(task);
        }
        let mut tasks: Vec<T> = Vec::with_capacity(n as usize + 1);
        // SAFETY: the CAS gave us ownership of exactly these pointers.
        tasks.extend(half.into_iter().map(|p| unsafe { T::from_raw(p) }));
        tasks.push(task);
        overflow.push_many(tasks);
        Ok(())
    }

    /// Takes `runnext` (when `lifo` is set) or else the head of the ring.
    /// The bool says whether the task came from `runnext`.
    pub(crate) fn pop(&mut self, lifo: bool) -> Option<(T, bool)> {
        if lifo {
            if let Some(t) = self.pop_runnext() {
                return Some((t, true));
            }
        }
        if let Some(t) = self.pop_ring() {
            return Some((t, false));
        }
        if !lifo {
            // The ring is empty: runnext is all that is left.
            return self.pop_runnext().map(|t| (t, true));
        }
        None
    }

    /// Moves up to half of `src`'s tasks into this (empty) queue and returns
    /// one to run now. `runnext` is taken only when `take_runnext` is set and
    /// the victim let it sit through `wait` (Go's 3 µs rule).
    #[cfg(test)]
    pub(crate) fn steal_from(
        &mut self,
        src: &Steal<T>,
        take_runnext: bool,
        wait: impl Fn(),
    ) -> Option<(T, usize)> {
        self.steal_sparing(src, 0, take_runnext, wait)
    }

    /// Steals as `steal_from` (a test helper) does, leaving the victim at
    /// its `reserve`, that many of its ring's tasks (the ones its own M
    /// reaches soon): it takes half the ring or what lies beyond the
    /// reserve, whichever is less, and nothing — not even `runnext` — from a
    /// ring of `reserve` tasks or fewer that is not empty.
    pub(crate) fn steal_sparing(
        &mut self,
        src: &Steal<T>,
        reserve: u32,
        take_runnext: bool,
        wait: impl Fn(),
    ) -> Option<(T, usize)> {
        let dst_tail = self.inner.tail.load(Relaxed);
        // Acquire pairs with consumers' Release CAS of our head (room check only).
        let dst_head = self.inner.head.load(Acquire);
        debug_assert!(
            dst_tail.wrapping_sub(dst_head) as usize <= CAPACITY / 2,
            "steal into a queue with no room"
        );
        let src = &src.inner;
        loop {
            let h = src.head.load(Acquire);
            // Acquire pairs with the victim's Release store of tail.
            let t = src.tail.load(Acquire);
            let avail = t.wrapping_sub(h);
            if avail > CAPACITY as u32 {
                // Read head and tail at different times: inconsistent, retry.
                continue;
            }
            let n = (avail - avail / 2).min(avail.saturating_sub(reserve));
            if n == 0 && avail != 0 {
                return None;
            }
            if n == 0 {
                if !take_runnext {
                    return None;
                }
                // Acquire pairs with the victim's Release swap into runnext.
                let next = src.runnext.load(Acquire);
                if next.is_null() {
                    return None;
                }
                // Give the victim the chance to run it itself first.
                wait();
                // AcqRel: Acquire pairs with the victim's Release swap;
                // only the exact task observed before the wait is taken.
                if src
                    .runnext
                    .compare_exchange(next, ptr::null_mut(), AcqRel, Relaxed)
                    .is_ok()
                {
                    // SAFETY: the CAS transferred ownership of `next` to us.
                    return Some((unsafe { T::from_raw(NonNull::new(next).unwrap()) }, 1));
                }
                continue;
            }
            let n = n.min(CAPACITY as u32 / 2);
            for i in 0..n {
                let p = src.buf[(h.wrapping_add(i) & MASK) as usize].load(Relaxed);
                self.inner.buf[(dst_tail.wrapping_add(i) & MASK) as usize].store(p, Relaxed);
            }
            // Commit; on failure another consumer got there first and the
            // copies in our (unpublished) slots are simply overwritten.
            if src
                .head
                .compare_exchange(h, h.wrapping_add(n), AcqRel, Relaxed)
                .is_err()
            {
                continue;
            }
            // Run the last stolen task now; publish the rest.
            let last = n - 1;
            let p = self.inner.buf[(dst_tail.wrapping_add(last) & MASK) as usize].load(Relaxed);
            if last > 0 {
                // Release pairs with thieves' Acquire load of our tail.
                self.inner.tail.store(dst_tail.wrapping_add(last), Release);
            }
            let p = NonNull::new(p).expect("stolen slot is never null");
            // SAFETY: the CAS gave us ownership of all n tasks; this one is
            // not published in our ring, so we hold the only copy.
            return Some((unsafe { T::from_raw(p) }, n as usize));
        }
    }

    /// Removes every task (ring and runnext), for shutdown.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        while let Some((t, _)) = self.pop(true) {
            out.push(t);
        }
        out
    }
}

impl<T: RawTask> Steal<T> {
    /// Tasks in the ring (a racy snapshot), not counting `runnext`.
    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the ring (not counting `runnext`) looks empty (a racy
    /// snapshot).
    pub(crate) fn ring_is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// Whether `runnext` holds a task (a racy snapshot, for diagnostics).
    pub(crate) fn has_runnext(&self) -> bool {
        // Relaxed: a snapshot printed by the schedtrace; it orders nothing.
        !self.inner.runnext.load(Relaxed).is_null()
    }

    /// Whether the ring and `runnext` look empty (a racy snapshot).
    pub(crate) fn is_empty(&self) -> bool {
        // Acquire pairs with the owner's Release swap into runnext.
        self.inner.len() == 0 && self.inner.runnext.load(Acquire).is_null()
    }
}

impl<T: RawTask> Drop for Local<T> {
    fn drop(&mut self) {
        // Tasks still queued are dropped with the queue (shutdown drains first).
        if !std::thread::panicking() {
            drop(self.drain());
        }
    }
}

#[cfg(test)]
mod tests;
