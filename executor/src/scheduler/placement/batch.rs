//! Batches: groups of tasks that wake each other (seed 000, sections 6.2,
//! 6.3 and 7; the occam-π runtime of Ritson et al., 2009). The full story —
//! what a batch is used for, the split rule, the decay and what was
//! rejected — is docs/architecture.md, "Batches"; this file owns the
//! learning.
//!
//! **Learning.** A wake edge is a task woken from inside another task's poll
//! on a worker (a channel send, a `Notify`, a completed task waking its
//! awaiter: any waker, any channel crate). `Shared::schedule` reports each
//! one here ([`Woken`](super::Woken)) with the task in the poll, which the
//! mechanism knows (`Core::polling`). The wakee joins the waker's batch; a waker in no
//! batch joins the wakee's; two tasks in none found one, named after the
//! waker's id. A task's batch id sits in 14 spare bits of its `TaskMeta`
//! flags, so a task stays one fastbin-sized allocation.
//!
//! **Decay.** A task not polled for [`BATCH_IDLE_MS`] has left its batch
//! (checked when an edge is learned, from the poll stamp the task dump
//! already keeps); a new edge moves a task to its waker's batch at once, so
//! groups follow the program's phases. Spawning is not an edge: a task
//! spawned from another starts in no batch (an accept loop would otherwise
//! gather every connection into one), unless `spawn_near` puts it in one.

use super::PolicyCore;
use crate::counters::ProcCounters;
use crate::task::{batch_id_for, BatchId, TaskMeta, BATCH_BITS, BATCH_MASK, BATCH_SHIFT};
use crate::tuning::{BATCH_IDLE_MS, HUB_WAKES};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Counts a wake of `wakee` by the poll in progress on `core` unless it is
/// one of the last two tasks this poll woke (`PolicyCore::poll_wakes`,
/// `PolicyCore::last_wakees`). True when this wake makes the poll a hub's
/// ([`HUB_WAKES`] different wakees). A few compares and plain stores, no
/// atomic: every wake inside a poll comes through here, so the hub rule
/// must stay a small share of a wake.
#[inline]
pub(crate) fn note_wake(core: &mut PolicyCore, wakee: &TaskMeta) -> bool {
    // Compared only, never dereferenced.
    let a = std::ptr::from_ref(wakee) as usize;
    if a == core.last_wakees[0] || a == core.last_wakees[1] {
        return false;
    }
    core.last_wakees = [a, core.last_wakees[0]];
    core.poll_wakes = core.poll_wakes.saturating_add(1);
    core.poll_wakes == HUB_WAKES
}

/// Whether the poll in progress on `core` is a hub's (see [`note_wake`]).
#[inline]
pub(crate) fn in_hub_poll(core: &PolicyCore) -> bool {
    core.poll_wakes >= HUB_WAKES
}

/// The batches that had a hub poll lately: per batch id, the P's stretch
/// clock (ms) + 1 at its last hub poll (0: never). A hub's batch, if
/// `hub_mode` holds it kept, keeps the members a wake displaces from
/// `runnext` in the batch queue, whoever wakes (a producer waking its
/// consumer displaces another producer): its members contend on what the
/// hub serves and run best one after another. Any other batch's displaced
/// members are split off to the ring for thieves
/// (`Shared::queue_displaced`; docs/architecture.md, "Batches").
/// 64 KiB per runtime; written at most once per stretch-clock ms per batch,
/// by a hub poll (Relaxed: a hint, like
/// the batch ids themselves; a stale answer places one task differently).
pub(crate) struct Hubs(Box<[AtomicU32]>);

impl Hubs {
    pub(crate) fn new() -> Hubs {
        Hubs(
            (0..1usize << BATCH_BITS)
                .map(|_| AtomicU32::new(0))
                .collect(),
        )
    }

    fn slot(&self, bits: u32) -> &AtomicU32 {
        &self.0[((bits & BATCH_MASK) >> BATCH_SHIFT) as usize]
    }

    /// Notes a hub poll of a member of the batch `bits` (`TaskMeta::batch_bits`).
    #[inline]
    pub(crate) fn mark(&self, bits: u32, now_ms: u32) {
        let slot = self.slot(bits);
        if slot.load(Relaxed) != now_ms.wrapping_add(1) {
            slot.store(now_ms.wrapping_add(1), Relaxed);
        }
    }

    /// [`Hubs::is_hub`] by batch id (`TaskInfo::batch`), for diagnostics.
    pub(crate) fn is_hub_id(&self, id: u16, now_ms: u32) -> bool {
        self.is_hub(u32::from(id) << BATCH_SHIFT, now_ms)
    }

    /// Whether the batch `bits` had a hub poll within [`BATCH_IDLE_MS`].
    #[inline]
    pub(crate) fn is_hub(&self, bits: u32, now_ms: u32) -> bool {
        match self.slot(bits).load(Relaxed) {
            0 => false,
            s => now_ms.saturating_sub(s - 1) <= BATCH_IDLE_MS,
        }
    }
}

/// The task's batch, unless it has decayed by `now_ms`.
#[inline]
pub(crate) fn live_batch(t: &TaskMeta, now_ms: u32) -> Option<BatchId> {
    let b = t.batch()?;
    // Never polled (placed by spawn_near): live. A stamp newer than this
    // P's stretch clock (another P's fresher clock) is live too.
    match t.last_poll_ms() {
        Some(ms) if now_ms.saturating_sub(ms) > BATCH_IDLE_MS => None,
        _ => Some(b),
    }
}

/// Learns from a wake edge: `waker`, in a poll on this P, woke `wakee`.
/// Returns the bits of the batch both are in now (`TaskMeta::batch_bits`;
/// 0: none). `now_ms`: the P's busy clock.
#[inline]
pub(crate) fn learn_edge(waker: &TaskMeta, wakee: &TaskMeta, now_ms: u32, m: &ProcCounters) -> u32 {
    // The common case, tasks that keep talking: already one batch. Two
    // loads and a compare (a member polled within the decay window is live
    // by definition, and one that was not is re-joined just the same).
    let bits = waker.batch_bits();
    if bits != 0 && wakee.batch_bits() == bits {
        m.batch_wakes.incr();
        return bits;
    }
    join(waker, wakee, now_ms, m)
}

/// The rest of [`learn_edge`]: someone joins a batch.
#[inline(never)]
fn join(waker: &TaskMeta, wakee: &TaskMeta, now: u32, m: &ProcCounters) -> u32 {
    if std::ptr::eq(waker, wakee) {
        return waker.batch_bits(); // a task waking itself says nothing
    }
    match (waker.batch(), live_batch(wakee, now)) {
        (Some(a), _) => wakee.set_batch(a),
        (None, Some(b)) => waker.set_batch(b),
        (None, None) => {
            let id = batch_id_for(waker.id);
            waker.set_batch(id);
            wakee.set_batch(id);
        }
    }
    m.batch_joins.incr();
    waker.batch_bits()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::Kind;
    use std::panic::Location;

    #[test]
    fn a_hub_mark_lasts_as_long_as_a_batch() {
        let hubs = Hubs::new();
        let t = TaskMeta::new(Kind::Task, Location::caller());
        t.set_batch(batch_id_for(t.id));
        let bits = t.batch_bits();
        let other = TaskMeta::new(Kind::Task, Location::caller());
        other.set_batch(BatchId::new(batch_id_for(t.id).get() % 16_000 + 1).unwrap());
        assert!(!hubs.is_hub(bits, 0), "never marked");
        hubs.mark(bits, 1_000);
        assert!(hubs.is_hub(bits, 1_000));
        assert!(hubs.is_hub(bits, 1_000 + BATCH_IDLE_MS));
        assert!(!hubs.is_hub(bits, 1_001 + BATCH_IDLE_MS), "decayed");
        assert!(hubs.is_hub(bits, 900), "a fresher stamp than our clock");
        assert!(!hubs.is_hub(other.batch_bits(), 1_000), "another batch");
        hubs.mark(bits, 0);
        assert!(hubs.is_hub(bits, 0), "clock 0 is a stamp too");
    }

    #[test]
    fn a_batch_decays_when_its_task_is_not_polled() {
        let t = TaskMeta::new(Kind::Task, Location::caller());
        let b = batch_id_for(t.id);
        t.set_batch(b);
        assert_eq!(live_batch(&t, 5_000), Some(b), "never polled: live");
        t.note_polled(1_000);
        assert_eq!(live_batch(&t, 1_000 + BATCH_IDLE_MS), Some(b));
        assert_eq!(live_batch(&t, 1_001 + BATCH_IDLE_MS), None, "decayed");
        assert_eq!(
            live_batch(&t, 900),
            Some(b),
            "a fresher stamp than our clock"
        );
    }
}
