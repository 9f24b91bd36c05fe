//! The set of live tasks, so that shutdown can drop every pending future.
//!
//! async-task frees a pending task whose wakers and handle are all gone
//! *without* dropping its future (nobody could ever poll it again). A runtime
//! that promises "shutdown drops every pending future" must therefore keep a
//! way to reach every live task: this registry holds one `Waker` per task
//! (tokio's OwnedTasks plays the same role). At shutdown every task is woken;
//! the schedule function, seeing shutdown, drops the `Runnable`, which drops
//! the future.
//!
//! Each tracked task's metadata points at the registry, and its harness
//! removes the task's entry right after it drops the future (on completion,
//! abort or shutdown), so the registry holds exactly the tasks whose futures
//! are alive and have been polled.
//!
//! **Who keeps a registry alive.** The runtime that owns it (its `Shared`,
//! or a pinned queue), and every task *with an entry*: a count of the
//! registry's `Arc`, taken as the entry is made and given back as the
//! task's allocation is freed. That count is for the one reader that may
//! outlive the runtime: a wake of an idle task on a thread outside the
//! runtime (a timer of another runtime, a plain thread), whose schedule
//! function looks the runtime up through the registry, finds it gone, and
//! drops the future, which takes the entry out. A task without an entry
//! (a `Send` task before its first `Pending`) holds no count, because
//! every thread that touches its registry keeps the runtime alive
//! already: the M polling it (which holds the runtime's `Arc`), the
//! spawner queueing it (a `Handle` or the M's runtime), and the
//! runtime's drain at shutdown, which drops queued tasks before the
//! registry (`Shared`'s fields drop the queues first). It cannot be woken
//! from outside: before its first `Pending` it is queued or being polled,
//! so a wake only marks it, and the M polling it queues it again. A count
//! per spawn was a locked increment and decrement on one line written by
//! every spawning and every freeing thread, for tasks that mostly finish
//! in their first poll.
//!
//! **A `Send` task enters at its first `Pending`, not at its spawn.** Until
//! its first poll a task is always in a run queue (or held by the thread
//! moving it there), where shutdown's drain finds it; only an idle task, one
//! that returned `Pending`, can be out of every queue with no waker anyone
//! will use. So the harness registers the task as its first poll returns
//! `Pending` (under the shard lock, refused once the registry is closed:
//! the harness then drops the future itself), and a task that finishes in
//! its first poll never takes a shard lock or clones a waker for the
//! registry: most spawned tasks of a fan-out. Such tasks are counted in
//! the registry's `unpolled` shares instead (one added at the spawn, one
//! taken at the first poll's end, each in the share of the thread doing
//! it: see [`Registry::add_unpolled`]), so [`Registry::len`] still counts
//! every live task. Pinned tasks
//! (`spawn_local`) still enter at spawn: their thread stays while its
//! registry has live tasks (see `LocalQueue::has_live_tasks`).
//!
//! Entries are sharded by task id block (each thread takes ids in
//! blocks of 256) to keep spawns on different P's off each other's locks
//! and cache lines; the entry's index within its shard is kept in
//! the task's `TaskMeta` (see `TaskMeta::slot`), so that a task carries
//! one word for its registry (the `Arc`), not three.

use super::{Runnable, TaskRef};
use std::any::Any;
use std::panic::Location;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::Waker;

/// The most shards a registry has: a runtime asks for four per P
/// (`Shared::build`), rounded up to a power of two so that picking one is a
/// mask, and gets at most this. A table size, not a tuning (tuning.rs):
/// beyond it, P's share shards.
const SHARDS: usize = 32;

/// Aligned as the shards are, so that in its `Arc` the fields sit on other
/// cache lines than the reference counts: every task holds a count (taken
/// by its spawner, given back by whichever thread frees it), and every
/// spawn and first poll reads `shards` and `closed`. Sharing a line, the
/// reads missed behind each count update (a profile of spawns from outside
/// onto 4 workers: a third of `spawn_tracked`'s samples on that read).
#[repr(align(128))]
pub(crate) struct Registry {
    shards: Box<[Shard]>,
    /// Set by `close`: later insertions are refused (the task is dropped).
    closed: std::sync::atomic::AtomicBool,
    /// The runtime whose tasks these are (its `Shared`), for a schedule
    /// function called where that runtime is not at hand (see
    /// [`Registry::owner`]). Weak: the runtime owns its registry.
    owner: OnceLock<Weak<dyn Any + Send + Sync>>,
    /// The count of `Send` tasks without an entry, in per-thread shares
    /// (see [`Share`]); empty in a pinned queue's registry, whose tasks
    /// get their entry at spawn.
    unpolled: Box<[Share]>,
}

/// One shard's lock and slab, on its own cache lines (128 bytes, as the
/// run queues): P's spawning at once into neighbouring shards must not
/// share a line.
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    slab: Mutex<Slab>,
}

impl std::ops::Deref for Shard {
    type Target = Mutex<Slab>;
    fn deref(&self) -> &Mutex<Slab> {
        &self.slab
    }
}

/// One thread's share of a registry's count of live `Send` tasks not yet
/// polled to `Pending` nor finished (see the module docs), signed: a task
/// is added where it is spawned and taken where its first poll ends, often
/// on two threads, so only the sum of all shares means anything. On its
/// own cache lines, written by one thread (see [`Home`]).
#[repr(align(128))]
#[derive(Default)]
struct Share(AtomicI64);

/// Shares with one writer each: a thread claims one index (see [`Home`])
/// and is the only thread to write that share, in every registry.
const OWN_SHARES: usize = 64;
/// Shares for threads beyond [`OWN_SHARES`] (and a thread whose locals are
/// gone), written with atomic read-modify-writes.
const COMMON_SHARES: usize = 8;

/// Which share of every registry this thread writes: one it alone writes
/// (a plain load and store per update, no locked instruction), or, when
/// all [`OWN_SHARES`] are taken, a common one (an atomic add).
enum Home {
    Own(Claim),
    Common(usize),
}

/// A claimed index of [`OWN_SHARES`], given back as the thread exits.
struct Claim(u32);

/// The claimed indexes, one bit each.
static CLAIMED: AtomicU64 = AtomicU64::new(0);

impl Home {
    fn new() -> Home {
        let mut cur = CLAIMED.load(Relaxed);
        while cur != u64::MAX {
            let bit = (!cur).trailing_zeros();
            // Acquire: pairs with the Release of the `Claim` drop that gave
            // this index back, so this thread's first load of each share
            // sees the last store of the thread that wrote it before.
            match CLAIMED.compare_exchange_weak(cur, cur | 1 << bit, Acquire, Relaxed) {
                Ok(_) => return Home::Own(Claim(bit)),
                Err(now) => cur = now,
            }
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Home::Common(NEXT.fetch_add(1, Relaxed) % COMMON_SHARES)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next claim of this index
        // (see `Home::new`). After this, this thread's updates go to a
        // common share (its `HOME` is gone).
        CLAIMED.fetch_and(!(1u64 << self.0), Release);
    }
}

thread_local! {
    static HOME: Home = Home::new();
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
}

impl Slab {
    /// A free entry's index (a new one if none is free).
    ///
    /// # Panics
    /// If the shard already holds [`MAX_INDEX`] live tasks.
    fn free_index(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => i,
            None => {
                assert!(
                    self.entries.len() < MAX_INDEX,
                    "numa_rt: more than {MAX_INDEX} live tasks in one registry shard"
                );
                self.entries.push(None);
                self.entries.len() - 1
            }
        }
    }
}

/// A live task: a waker (which keeps its allocation alive), its metadata
/// and its spawn location, read by the task dump. The location lives here,
/// written once under the lock the spawn takes anyway, rather than in the
/// task's allocation (see `TaskMeta` on why every word there counts).
struct Entry {
    waker: Waker,
    meta: std::ptr::NonNull<super::TaskMeta>,
    location: &'static Location<'static>,
}

// SAFETY: `meta` points into the task's header, which the entry's waker
// keeps alive; it is only read (an id, a `&'static Location` and atomics,
// all Sync) while the entry exists, under the shard lock.
unsafe impl Send for Entry {}

/// The most entries one shard holds: an entry's index is kept in 30 bits
/// of its task's `TaskMeta` (see `TaskMeta::slot`). A billion live tasks
/// per shard (at least 128 GB of tasks) is beyond any machine.
pub(crate) const MAX_INDEX: usize = (u32::MAX >> 2) as usize;

impl Registry {
    /// A pinned queue's registry: its tasks get their entry at spawn
    /// ([`Registry::insert`]), never counted unpolled.
    pub(crate) fn new(shards: usize) -> Arc<Registry> {
        Registry::build(shards, 0)
    }

    /// A runtime's registry, for `Send` tasks, which get their entry at
    /// their first `Pending` and are counted unpolled until then (9 KB of
    /// per-thread shares).
    pub(crate) fn for_runtime(shards: usize) -> Arc<Registry> {
        Registry::build(shards, OWN_SHARES + COMMON_SHARES)
    }

    /// `shards` is rounded up to a power of two (at most [`SHARDS`]), so
    /// that picking a shard is a mask, not a division, on every spawn;
    /// `shares`: how many unpolled shares (0 or all of them).
    fn build(shards: usize, shares: usize) -> Arc<Registry> {
        let n = shards.clamp(1, SHARDS).next_power_of_two();
        Arc::new(Registry {
            shards: (0..n).map(|_| Shard::default()).collect(),
            closed: std::sync::atomic::AtomicBool::new(false),
            owner: OnceLock::new(),
            unpolled: (0..shares).map(|_| Share::default()).collect(),
        })
    }

    /// Records the runtime these tasks belong to (once, as it starts).
    pub(crate) fn set_owner(&self, owner: Weak<dyn Any + Send + Sync>) {
        let _ = self.owner.set(owner);
    }

    /// The runtime these tasks belong to, while it exists and is a `T`.
    /// An `Arc` count taken and later given back (two atomic updates): for
    /// the schedule functions' path off the runtime's own threads.
    pub(crate) fn owner<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.owner.get()?.upgrade()?.downcast().ok()
    }

    /// The shard of the task with id `id`: by id block (`Id::next` hands
    /// each thread a block of 256), so one P's spawns, and usually their
    /// completions, take one shard's lock while other P's take others. A
    /// power of two (see `new`): a shift and a mask.
    fn shard_of(&self, id: u64) -> usize {
        ((id >> super::id::ID_BLOCK_BITS) as usize) & (self.shards.len() - 1)
    }

    /// Spawns a task through `spawn` (given its entry's index in the shard
    /// of task id `id`) and records its waker and spawn `location`, under
    /// one lock of one shard.
    /// Also returns the waker's raw parts, for the task's `JoinHandle` (see
    /// `TaskRef`): no extra waker clone per spawn. `live` is false if the
    /// registry is closed: the caller drops the runnable, whose harness
    /// then frees the entry.
    ///
    /// # Panics
    /// If the shard already holds [`MAX_INDEX`] live tasks.
    pub(crate) fn insert<T>(
        &self,
        id: u64,
        location: &'static Location<'static>,
        spawn: impl FnOnce(u32) -> (Runnable, T),
    ) -> (Runnable, T, TaskRef, bool) {
        let mut s = self.shards[self.shard_of(id)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let index = s.free_index();
        // Allocating the task under the lock is fine: `spawn` only builds the
        // future, it never wakes or drops a task (which could re-enter here).
        // The cast is lossless: `index < MAX_INDEX`.
        let (runnable, task) = spawn(index as u32);
        let waker = runnable.waker();
        let raw = TaskRef::new(&waker, runnable.metadata());
        // Checked under the shard lock that `close_and_wake_all` also takes.
        if self.closed.load(Relaxed) {
            drop(s);
            drop(waker);
            return (runnable, task, raw, false);
        }
        let meta = std::ptr::NonNull::from(runnable.metadata());
        s.entries[index] = Some(Entry {
            waker,
            meta,
            location,
        });
        (runnable, task, raw, true)
    }

    /// Whether shutdown has closed the registry (a spawn then drops its
    /// task). Relaxed: a spawn racing with the close is caught by the
    /// drain of the queues, or by the first poll's registration.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// Counts a `Send` task spawned without an entry (see the module docs).
    #[inline]
    pub(crate) fn count_unpolled(&self) {
        self.add_unpolled(1);
    }

    /// Takes back a [`Registry::count_unpolled`]: the task got its entry,
    /// or its future is gone without one.
    #[inline]
    pub(crate) fn uncount_unpolled(&self) {
        self.add_unpolled(-1);
    }

    /// Adds `delta` to this thread's share of the unpolled count: with a
    /// plain load and store (Relaxed) in a share only this thread writes,
    /// where an atomic add was a locked instruction per spawn and per first
    /// poll (two per task). Readers ([`Registry::unpolled`]) sum the shares
    /// with Relaxed loads, a snapshot as before.
    ///
    /// # Panics
    /// On a pinned queue's registry (no shares: its tasks never count).
    #[inline]
    fn add_unpolled(&self, delta: i64) {
        let home = HOME
            .try_with(|h| match h {
                Home::Own(c) => Ok(c.0 as usize),
                Home::Common(i) => Err(*i),
            })
            // This thread's locals are gone (a task dropped as it exits:
            // its claim may be someone else's now).
            .unwrap_or(Err(0));
        match home {
            Ok(i) => {
                // This thread alone writes share `i` (its claim): the load
                // and store cannot lose another thread's update.
                let share = &self.unpolled[i].0;
                share.store(share.load(Relaxed).wrapping_add(delta), Relaxed);
            }
            Err(i) => {
                self.unpolled[OWN_SHARES + i].0.fetch_add(delta, Relaxed);
            }
        }
    }

    /// Gives a `Send` task its entry as its first poll returns `Pending`
    /// (see the module docs): `waker` is its own (cloned for the entry),
    /// `meta` its metadata. `None`: the registry is closed (checked under
    /// the shard lock that `close_and_wake_all` also takes), and the caller
    /// must drop the future itself.
    ///
    /// # Panics
    /// If the shard already holds [`MAX_INDEX`] live tasks.
    pub(crate) fn register(
        &self,
        meta: &super::TaskMeta,
        location: &'static Location<'static>,
        waker: &Waker,
    ) -> Option<u32> {
        let mut s = self.shards[self.shard_of(meta.id.as_u64())]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Relaxed) {
            return None;
        }
        let index = s.free_index();
        s.entries[index] = Some(Entry {
            waker: waker.clone(),
            meta: std::ptr::NonNull::from(meta),
            location,
        });
        // The cast is lossless: `index < MAX_INDEX`.
        Some(index as u32)
    }

    /// Frees the entry `index` of task `id` (its harness, once the future
    /// is gone).
    pub(crate) fn remove(&self, id: u64, index: u32) {
        let index = index as usize;
        let waker = {
            let mut s = self.shards[self.shard_of(id)]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let w = s
                .entries
                .get_mut(index)
                .and_then(Option::take)
                .map(|e| e.waker);
            s.free.push(index);
            w
        };
        // Dropped outside the lock: dropping a waker may run task code.
        drop(waker);
    }

    /// Live tasks: entries filled, and `Send` tasks not polled yet.
    pub(crate) fn len(&self) -> usize {
        let listed: usize = self
            .shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entries
                    .iter()
                    .flatten()
                    .count()
            })
            .sum();
        listed + self.unpolled()
    }

    /// Live `Send` tasks without an entry yet (not polled to `Pending`):
    /// the sum of the shards' shares, read without locks, so a snapshot
    /// (never below 0).
    pub(crate) fn unpolled(&self) -> usize {
        let n: i64 = self.unpolled.iter().map(|s| s.0.load(Relaxed)).sum();
        usize::try_from(n).unwrap_or(0)
    }

    /// Calls `f` with the metadata and spawn location of every live task,
    /// under each shard's lock in turn (the task dump).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&super::TaskMeta, &'static Location<'static>)) {
        for shard in self.shards.iter() {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            for e in s.entries.iter().flatten() {
                // SAFETY: the entry's waker keeps the header alive while the
                // entry exists, and we hold the lock that removes it.
                f(unsafe { e.meta.as_ref() }, e.location);
            }
        }
    }

    /// The spawn location of task `id` at entry `index`, if the entry is
    /// filled (for a message about the task).
    pub(crate) fn location(&self, id: u64, index: u32) -> Option<&'static Location<'static>> {
        let s = self.shards[self.shard_of(id)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        s.entries.get(index as usize)?.as_ref().map(|e| e.location)
    }

    /// Closes the registry (later spawns are refused) and wakes every live
    /// task (outside the locks), so that its schedule function drops it.
    ///
    /// Entries stay until their future is dropped: shutdown calls this again
    /// once every M has stopped, for tasks that were in a run queue during
    /// the first pass (a wake is a no-op then) and got polled back to idle by
    /// an M that had not yet seen the shutdown flag.
    pub(crate) fn close_and_wake_all(&self) {
        let mut wakers = Vec::new();
        for shard in self.shards.iter() {
            let s = shard.lock().unwrap_or_else(|e| e.into_inner());
            self.closed.store(true, Relaxed);
            wakers.extend(s.entries.iter().flatten().map(|e| e.waker.clone()));
        }
        for w in wakers {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// More threads at once than there are own shares (some update common
    /// ones), then as many again after those exit (reusing the claims they
    /// gave back): the shares always add up.
    #[test]
    fn unpolled_shares_add_up_across_claims_and_exits() {
        let registry = Registry::for_runtime(4);
        let threads = OWN_SHARES + 2 * COMMON_SHARES + 4;
        let run = |delta: i64| {
            let barrier = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (registry, barrier) = (registry.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        // All alive at once: the claims run out.
                        barrier.wait();
                        for _ in 0..1_000 {
                            registry.add_unpolled(delta);
                        }
                        barrier.wait();
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        };
        run(1);
        assert_eq!(registry.unpolled(), threads * 1_000);
        run(-1);
        assert_eq!(registry.unpolled(), 0);
        // This thread's updates, claimed or common, count too.
        registry.count_unpolled();
        assert_eq!(registry.unpolled(), 1);
        registry.uncount_unpolled();
        assert_eq!(registry.unpolled(), 0);
    }
}
