//! `TaskMeta`, what the scheduler keeps in each task's header: its words,
//! the flags, the compressed spawn location, the registry reference, and
//! the process-wide epoch of task timestamps. The placement policy's batch
//! id, in the flags word's upper bits, is laid out in `batch_id`.

use super::registry::{self, Registry};
use super::{Id, Kind};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering::*};
use std::sync::Arc;

pub(crate) mod batch_id;

/// What the scheduler keeps in each task's header: five 32-bit words (the
/// id, the abort and finished flags, the task dump's state with the task's
/// registry index, the time of the last poll), the task's registry (its
/// address in two 32-bit halves: see `RegistryRef`), and with the
/// `tracing` feature the task's span. The spawn location is not here: it
/// sits in the task's registry entry, which the dump and the stall report
/// read.
///
/// **Size matters here.** A task is one allocation: async-task's header
/// (four words, a flag and this), the schedule function (nothing for a
/// `Send` task, one word for a pinned one), the harness (one word) and the
/// future. Up to 120 bytes, glibc's malloc
/// serves it from a fastbin, where a free by another thread (a task
/// spawned on one thread completes on another) takes no lock; above, every
/// such free takes the arena's lock against the spawning thread's mallocs,
/// often with a `futex` call (it slowed `spawn_many_local` and
/// `ping_pong`). 28 bytes, 4-aligned
/// (the registry's address split in two 32-bit halves: 8-aligned it would
/// cost 8 bytes of padding), leave the header at 64 bytes (with the flag),
/// so a `Send` task's future of up to 48 bytes, a pinned task's of up to
/// 40, fits in 120; the test `executor/tests/task_size.rs` keeps it so.
///
/// Uses std's atomics even under loom: no loom model covers abort flags.
pub(crate) struct TaskMeta {
    /// Unique per process; shown in panics, metrics and traces.
    pub(crate) id: Id,
    /// [`ABORTED`] and [`FINISHED`] in the low bits; from [`BATCH_SHIFT`](batch_id::BATCH_SHIFT)
    /// the task's batch id (14 bits, 0: none).
    flags: AtomicU16,
    /// The P that last polled the task, plus one (0: never polled, or a P
    /// index too large to record), for the `migrated_polls` metric and
    /// `spawn_near`. Beside `flags`, not in it, so that recording it is a
    /// plain store (only the polling thread writes it), where keeping the
    /// flags' bits made it a compare-and-swap on every first poll and
    /// every migration: a locked instruction per spawned task.
    last_p: AtomicU16,
    /// Bit 0, for the task dump (`Handle::dump`): set by the schedule
    /// functions each time the task is queued, cleared when a poll starts;
    /// set: woken since its last poll began (scheduled). Bit 1
    /// ([`REGISTERED`]): the task has its registry entry, whose index in its
    /// shard ([`TaskMeta::slot`]) is in the 30 bits above. Until then (a
    /// `Send` task before its first `Pending`, see `registry`) those 30 bits
    /// hold its spawn location, compressed ([`compress_location`]). Set at
    /// spawn, and at most once more by the first poll (the entry). Plain
    /// Relaxed loads and stores, no read-modify-write: async-task runs at
    /// most one schedule or poll of a task at a time, and its state word
    /// orders them; a dump reads only tasks with an entry (made under the
    /// shard lock it takes, after the store), and may be one step stale on
    /// bit 0.
    sched_slot: AtomicU32,
    /// When the last poll began, in milliseconds since [`epoch`] (0: never
    /// polled); the P's stretch clock, read once per busy stretch.
    last_poll_ms: AtomicU32,
    /// The registry holding the task's entry (none: an untracked
    /// blocking-pool task). Here rather than in the harness so that the
    /// schedule function of a `Send` task can find its runtime through it
    /// and capture nothing (see `Shared::spawn_placed`).
    pub(super) registry: RegistryRef,
    /// The task's `tracing` span (see trace.rs), entered by every poll;
    /// closed when async-task frees the allocation. Only with the feature.
    #[cfg(feature = "tracing")]
    pub(crate) span: tracing::Span,
}

/// The process-wide origin of task timestamps (`TaskMeta::last_poll_ms`).
pub(crate) fn epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// `t` in milliseconds since [`epoch`], at least 1 (0 means "never").
pub(crate) fn epoch_ms(t: std::time::Instant) -> u32 {
    ms_of_epoch_ns(epoch_ns(t))
}

/// `t` in nanoseconds since [`epoch`].
#[inline]
pub(crate) fn epoch_ns(t: std::time::Instant) -> u64 {
    t.saturating_duration_since(epoch())
        .as_nanos()
        .min(u128::from(u64::MAX)) as u64
}

/// [`epoch_ms`] of a time given by [`epoch_ns`] (one clock conversion for
/// both, where a caller needs both).
#[inline]
pub(crate) fn ms_of_epoch_ns(ns: u64) -> u32 {
    ((ns / 1_000_000).min(u64::from(u32::MAX)) as u32).max(1)
}

/// `sched_slot`'s bit 1: the task has its registry entry.
const REGISTERED: u32 = 0b10;
/// Where `sched_slot`'s entry index (or compressed location) starts.
const SLOT_SHIFT: u32 = 2;
/// The 30 bits a compressed location has.
const LOCATION_BITS: u32 = 32 - SLOT_SHIFT;
/// A location too far to compress (never a real offset: the most negative).
const FAR_LOCATION: u32 = 1 << (LOCATION_BITS - 1);

/// Where compressed locations are measured from: an address in this
/// crate's read-only data, near the `Location`s the compiler emits, aligned
/// at least as a `Location` is (so every distance is a whole number of
/// alignment units).
static LOCATION_BASE: LocationBase = LocationBase(0);
#[repr(align(64))]
struct LocationBase(#[allow(dead_code)] u8);
const _: () = assert!(std::mem::align_of::<Location<'static>>() <= 64);

/// A `&'static Location` in 30 bits, for a task's metadata before its
/// registry entry holds the location (see `registry`): its distance from
/// [`LOCATION_BASE`] in units of `Location`'s alignment, signed (±4 GiB
/// with 8-byte alignment: every location of a statically linked program).
/// Farther (a location in a distant shared object): [`FAR_LOCATION`].
fn compress_location(location: &'static Location<'static>) -> u32 {
    let align = std::mem::align_of::<Location<'static>>() as isize;
    // Exposed: `expand_location` makes a pointer from the address again.
    let addr = std::ptr::from_ref(location).expose_provenance() as isize;
    let base = std::ptr::addr_of!(LOCATION_BASE) as isize;
    let distance = addr.wrapping_sub(base);
    let units = distance / align;
    let limit = 1isize << (LOCATION_BITS - 1);
    if distance % align != 0 || units <= -limit || units >= limit {
        return FAR_LOCATION;
    }
    (units as u32) & ((1 << LOCATION_BITS) - 1)
}

/// The location [`compress_location`] compressed, unless it was too far.
fn expand_location(bits: u32) -> Option<&'static Location<'static>> {
    if bits == FAR_LOCATION {
        return None;
    }
    let align = std::mem::align_of::<Location<'static>>() as isize;
    // Sign-extend the 30 bits.
    let units = ((bits << SLOT_SHIFT) as i32 >> SLOT_SHIFT) as isize;
    let base = std::ptr::addr_of!(LOCATION_BASE) as isize;
    let addr = base.wrapping_add(units * align) as usize;
    // SAFETY: `bits` came from `compress_location` of a `&'static Location`
    // whose address it exposed, as an exact distance from the base (it
    // refuses any other): `addr` is that reference's address, and the
    // location lives forever.
    Some(unsafe { &*std::ptr::with_exposed_provenance::<Location<'static>>(addr) })
}

/// A [`TaskMeta::site_bits`] value that names no location.
pub(crate) const NO_SITE: u32 = REGISTERED;

/// The spawn location in what [`TaskMeta::site_bits`] gave of a tracked
/// `Send` task: `None` once the task has its registry entry (which holds
/// the location then).
pub(crate) fn site_location(bits: u32) -> Option<&'static Location<'static>> {
    if bits & REGISTERED != 0 {
        return None;
    }
    expand_location(bits >> SLOT_SHIFT)
}

/// Set by `abort`: the next poll drops the future instead of polling it.
pub(super) const ABORTED: u32 = 0b01;
/// Set by the harness once the future has been dropped (completed, aborted,
/// panicked, or dropped by the runtime).
pub(super) const FINISHED: u32 = 0b10;
/// How P `p` is written in `TaskMeta::last_p` (`p + 1`; 0 is "never
/// polled"); `None` for an index too large for 16 bits (not recorded).
#[inline]
fn p_tag(p: usize) -> Option<u16> {
    u16::try_from(p.checked_add(1)?).ok()
}
/// A `TaskMeta`'s registry: the address of an `Arc<Registry>`'s registry
/// (or none) as two 32-bit halves, so that the metadata stays 4-aligned
/// (see `TaskMeta` on size).
///
/// **It holds no count of the `Arc` of its own.** A task holds one count
/// while it has its registry entry (from the entry's making to the
/// freeing of its allocation: [`TaskMeta::hold_registry`] and `TaskMeta`'s
/// `Drop`). Before its entry, a `Send` task's registry is read only by
/// threads that keep its runtime, and so the registry, alive: the M
/// polling or dropping it, the spawner queueing it, the runtime's drain
/// at shutdown (see `registry`, "Who keeps a registry alive"). A count
/// per spawn was a locked increment at the spawn and a decrement where
/// the task is freed, on a line every spawning and every freeing thread
/// wrote: the most shared of a spawn's locked instructions, for a task
/// that completes in its first poll and never needs it.
pub(super) struct RegistryRef([u32; 2]);

impl RegistryRef {
    const NONE: RegistryRef = RegistryRef([0, 0]);

    pub(super) fn new(registry: &Arc<Registry>) -> RegistryRef {
        // Exposed: `ptr` makes a pointer from the address again.
        let p = Arc::as_ptr(registry).expose_provenance() as u64;
        RegistryRef([p as u32, (p >> 32) as u32])
    }

    #[inline]
    fn ptr(&self) -> *const Registry {
        let addr = u64::from(self.0[0]) | (u64::from(self.0[1]) << 32);
        std::ptr::with_exposed_provenance(addr as usize)
    }
}

impl Drop for TaskMeta {
    /// Gives back the registry count a task with an entry holds (see
    /// `RegistryRef`). Runs as async-task frees the allocation, after
    /// every other use of the task (its state word's last decrement orders
    /// them before this), so the plain load sees the final bits.
    fn drop(&mut self) {
        let p = self.registry.ptr();
        if !p.is_null() && *self.sched_slot.get_mut() & REGISTERED != 0 {
            // SAFETY: `REGISTERED` is set only with the count taken
            // (`set_slot`, `set_registered`: `hold_registry`), and never
            // cleared; this gives it back, once.
            unsafe { Arc::decrement_strong_count(p) };
        }
    }
}

impl TaskMeta {
    /// A fresh id. `kind` and `location` (the spawn's caller, through
    /// `#[track_caller]` chains from the public spawn functions) only name
    /// the task's span (the `tracing` feature); without it, unused.
    pub(crate) fn new(kind: Kind, location: &'static Location<'static>) -> TaskMeta {
        let id = Id::next();
        #[cfg(not(feature = "tracing"))]
        let _ = (kind, location);
        TaskMeta {
            id,
            flags: AtomicU16::new(0),
            last_p: AtomicU16::new(0),
            sched_slot: AtomicU32::new(0),
            last_poll_ms: AtomicU32::new(0),
            registry: RegistryRef::NONE,
            #[cfg(feature = "tracing")]
            span: super::trace::spawn_span(kind, id, location),
        }
    }

    /// Records the task's registry entry (its index in the shard of its
    /// id), before the task is built. `index` fits in 30 bits
    /// (`registry::MAX_INDEX`).
    pub(super) fn set_slot(&mut self, index: u32) {
        debug_assert!(index as usize <= registry::MAX_INDEX);
        self.hold_registry();
        *self.sched_slot.get_mut() = (index << SLOT_SHIFT) | REGISTERED;
    }

    /// Records the spawn location of a task that gets its registry entry
    /// at its first `Pending` (see `registry`), before the task is built.
    pub(super) fn set_unregistered(&mut self, location: &'static Location<'static>) {
        *self.sched_slot.get_mut() = compress_location(location) << SLOT_SHIFT;
    }

    /// [`TaskMeta::set_slot`] for a task that got its entry in its first
    /// poll (the poll in progress, so no schedule runs meanwhile: see
    /// `sched_slot`).
    pub(super) fn set_registered(&self, index: u32) {
        debug_assert!(index as usize <= registry::MAX_INDEX);
        self.hold_registry();
        let scheduled = self.sched_slot.load(Relaxed) & 1;
        self.sched_slot
            .store((index << SLOT_SHIFT) | REGISTERED | scheduled, Relaxed);
    }

    /// The task's registry entry index, if it has an entry (see
    /// [`TaskMeta::set_slot`]).
    #[inline]
    pub(crate) fn slot(&self) -> Option<u32> {
        let v = self.sched_slot.load(Relaxed);
        (v & REGISTERED != 0).then_some(v >> SLOT_SHIFT)
    }

    /// The word that holds the spawn location of a tracked task without a
    /// registry entry (see [`site_location`], which reads it); one load,
    /// for a store per poll.
    #[inline]
    pub(crate) fn site_bits(&self) -> u32 {
        self.sched_slot.load(Relaxed)
    }

    /// Where the task was spawned: from its registry entry, or from this
    /// word before it has one. `None` for an untracked (blocking-pool)
    /// task, or a location too far from this crate's code to compress.
    pub(crate) fn location(&self) -> Option<&'static Location<'static>> {
        let registry = self.registry()?;
        let v = self.sched_slot.load(Relaxed);
        if v & REGISTERED != 0 {
            registry.location(self.id.as_u64(), v >> SLOT_SHIFT)
        } else {
            expand_location(v >> SLOT_SHIFT)
        }
    }

    /// The registry holding the task's entry, if it is tracked.
    ///
    /// Called only where the registry is known to be alive (see
    /// `RegistryRef`): by a task with its entry, which holds a count, or
    /// on a thread that keeps the task's runtime alive.
    #[inline]
    pub(crate) fn registry(&self) -> Option<&Registry> {
        // SAFETY: a non-null address is an `Arc<Registry>`'s (`RegistryRef::
        // new`), alive for this borrow: the task holds a count once it has
        // its entry (`hold_registry`, given back only as the metadata
        // drops), and before that every caller runs on a thread that
        // keeps the task's runtime, which owns the registry, alive (its M,
        // its spawner, its drain: `registry`, "Who keeps a registry alive").
        unsafe { self.registry.ptr().as_ref() }
    }

    /// Takes the count of the registry's `Arc` that a task holds while it
    /// has its entry (see `RegistryRef`), as the entry is made; `TaskMeta`'s
    /// `Drop` gives it back. The registry is alive here: the entry is made
    /// by the spawner or by the task's first poll, on its runtime's M.
    fn hold_registry(&self) {
        let p = self.registry.ptr();
        if !p.is_null() {
            // SAFETY: `p` is an `Arc<Registry>`'s pointer (`RegistryRef::
            // new`), alive now (see above); the count is given back once,
            // by `Drop`, which sees the `REGISTERED` bit set next to it.
            unsafe { Arc::increment_strong_count(p) };
        }
    }

    /// The address of [`TaskMeta::registry`] (null if untracked), for a
    /// comparison that reads nothing.
    #[inline]
    pub(crate) fn registry_ptr(&self) -> *const Registry {
        self.registry.ptr()
    }

    /// Called by a schedule function as it queues the task (dump state).
    #[inline]
    pub(crate) fn note_scheduled(&self) {
        // Relaxed load and store: see `sched_slot`.
        let v = self.sched_slot.load(Relaxed);
        self.sched_slot.store(v | 1, Relaxed);
    }

    /// Called as a poll begins, `now_ms` from [`epoch_ms`] (dump state).
    #[inline]
    pub(crate) fn note_polled(&self, now_ms: u32) {
        let v = self.sched_slot.load(Relaxed);
        self.sched_slot.store(v & !1, Relaxed);
        self.last_poll_ms.store(now_ms, Relaxed);
    }

    /// Whether the task was woken since its last poll began.
    pub(crate) fn is_scheduled(&self) -> bool {
        self.sched_slot.load(Relaxed) & 1 != 0
    }

    /// When its last poll began (ms since [`epoch`]), if it was ever polled.
    pub(crate) fn last_poll_ms(&self) -> Option<u32> {
        Some(self.last_poll_ms.load(Relaxed)).filter(|&ms| ms != 0)
    }

    /// Marks the task aborted. True if this call did it and the future is
    /// still alive: the caller must then wake the task so it gets polled.
    ///
    /// Relaxed: the flag publishes nothing else; the poll that must see it
    /// comes after the wake that follows, whose AcqRel update of the task
    /// state (read with Acquire by async-task's `run`) orders it.
    pub(crate) fn set_aborted(&self) -> bool {
        u32::from(self.flags.fetch_or(ABORTED as u16, Relaxed)) & (ABORTED | FINISHED) == 0
    }

    /// Records that P `p` polls the task now, for a caller that found the
    /// task last polled elsewhere or never (`TaskMeta::polled_last_on`): a
    /// plain store (see `last_p`). Relaxed: a placement hint and a
    /// statistic; async-task's state word orders the polls of one task.
    /// An index too large for the bits is not recorded.
    #[inline]
    pub(crate) fn record_ran_on(&self, p: usize) {
        if let Some(tag) = p_tag(p) {
            self.last_p.store(tag, Relaxed);
        }
    }

    /// Where the task was polled last, seen from P `p` about to poll it:
    /// `Ok(())` on `p` (one load), `Err(None)` never polled, `Err(Some(q))`
    /// on another P `q` (a migration; [`TaskMeta::record_ran_on`] records
    /// the new P). Relaxed: a placement hint.
    #[inline]
    pub(crate) fn polled_last_on(&self, p: usize) -> Result<(), Option<usize>> {
        let Some(tag) = p_tag(p) else {
            return Err(None);
        };
        match self.last_p.load(Relaxed) {
            last if last == tag => Ok(()),
            0 => Err(None),
            last => Err(Some(last as usize - 1)),
        }
    }

    /// The P that polled the task last, if it was polled.
    #[inline]
    pub(crate) fn last_p(&self) -> Option<usize> {
        self.last_p.load(Relaxed).checked_sub(1).map(usize::from)
    }

    /// [`ABORTED`] and [`FINISHED`], read with one plain load per poll.
    /// Relaxed: `ABORTED` as explained in [`TaskMeta::set_aborted`];
    /// `FINISHED` is only written by the harness, on the thread reading it.
    #[inline]
    pub(super) fn flags(&self) -> u32 {
        u32::from(self.flags.load(Relaxed))
    }

    #[cfg(test)]
    fn is_aborted(&self) -> bool {
        self.flags() & ABORTED != 0
    }

    /// Called by the harness after the future was dropped. A plain store
    /// (no read-modify-write): clearing a concurrent `ABORTED` is harmless
    /// once the future is gone. Release pairs with `is_finished`'s Acquire,
    /// so whoever sees the flag also sees the future's drop.
    #[inline]
    pub(crate) fn set_finished(&self) {
        self.flags.store(FINISHED as u16, Release);
    }

    /// Acquire: pairs with the Release store in [`TaskMeta::set_finished`].
    #[inline]
    pub(crate) fn is_finished(&self) -> bool {
        u32::from(self.flags.load(Acquire)) & FINISHED != 0
    }
}

impl fmt::Debug for TaskMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskMeta")
            .field("id", &self.id)
            .field("flags", &self.flags())
            .finish()
    }
}

#[cfg(test)]
mod tests;
