//! Keep or spread a hub's batch: measured, not guessed (issue 25; the
//! whole story is docs/architecture.md, "Batches").
//!
//! A hub is a task whose poll woke [`HUB_WAKES`](crate::tuning::HUB_WAKES) different
//! tasks: a fan-in's consumer releasing its blocked producers. Its batch
//! can run two ways, and neither is right for every program:
//!
//! - **keep**: the members a wake displaces from `runnext` wait in the
//!   waker's batch queue, which no thief takes from, so the producers run
//!   one after another on the hub's P. With cheap producers this is
//!   contention-aware scheduling (seed 000, section 6.2.2: tasks that
//!   contend on one channel run serially on one processor): spread over
//!   many cores, every producer's poll fights the others for the channel's
//!   cache lines.
//! - **spread**: they go to the ring, shared out, for any thief, as in Go
//!   and tokio. With producers that compute per value this is what runs
//!   them in parallel (the figures of both: docs/performance.md).
//!
//! What decides is how much work a thief could take per hand-off: the
//! runtime's busy time (every P's: a member may still run elsewhere, left
//! there from before the batch was kept; the kept P's `runnext` is no
//! thief's, `Policy::runnext_kept`) per hub wake while the batch is
//! kept (each wake releases a blocked member, which then runs until it
//! blocks again). Kept, that time is the members' own work, not inflated
//! by contention (spread, a contended poll is slow too, so spread times
//! cannot tell cheap work from expensive). Below [`KEEP_WORK_NS`] per wake
//! the batch is held kept: spread, the members would hand values over one
//! at a time across cores, and that costs more than the serial work they
//! carry. Other work running meanwhile counts too, which errs towards
//! spreading, the mode that never serializes anything. Each hub batch is
//! kept for [`WARMUP_MS`] and then measured kept for [`MEASURE_MS`]; the
//! decision is held for
//! [`HOLD_MIN_MS`], doubling while it repeats (up to [`HOLD_MAX_MS`]),
//! then measured again: a fan-in of producers that compute runs
//! serialized for at most one warm-up and measurement per hold.
//!
//! The table is small and approximate by design: [`SLOTS`] slots by batch
//! id, a slot taken over by the newest hub whose id maps to it. All its
//! fields are Relaxed hints, written at the end of the hub task's polls.
//! Those ends are not ordered one after another: a poll's end runs after
//! the poll returned, when the hub may already run again on another P, so
//! a lost count of wakes is possible, and a phase ends through a CAS on its
//! start time, which one P wins. A stale read places one displaced task the
//! other way.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::tuning::{
    BATCH_IDLE_MS, HOLD_MAX_MS, HOLD_MIN_MS, KEEP_WORK_NS, MAX_RESTARTS, MEASURE_MS,
    SITE_MEMORY_MS, WARMUP_MS,
};

/// Bits of a slot index: the top bits of a site's mixed address pick its
/// slot (`site_slot`).
const SLOT_BITS: u32 = 6;
/// Slots in each table; a hub batch maps to `id % SLOTS`. A table size, not
/// a tuning: a runtime rarely has more hubs than this at once, and one more
/// shares a slot (the newest takes it over) with no other cost.
const SLOTS: usize = 1 << SLOT_BITS;

/// A slot's phases (`ModeSlot::phase`); odd phases keep.
const MEASURE_KEEP: u32 = 1;
const HOLD_SPREAD: u32 = 2;
const HOLD_KEEP: u32 = 3;
/// Kept, before the measurement counts (see [`WARMUP_MS`]).
const WARM_KEEP: u32 = 5;
/// `ModeSlot::last_hold` before the first decision.
const NO_HOLD: u32 = u32::MAX;

/// A hub batch's mode, for diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Measuring, kept.
    Measuring,
    /// Holding the kept mode: the batch runs on the hub's P.
    Keep,
    /// Holding the spread mode: thieves take its members.
    Spread,
}

/// What a hub's poll end decided, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    None,
    Keep,
    Spread,
}

/// One hub batch's slot. Two 128-byte halves: what every P reads (on each
/// poll that woke anyone, `may_follow`; on each displacement, `keeps`),
/// written only when the slot changes hands or phase, apart from what the
/// followed hub writes at the end of each of its polls (`wakes`): spread
/// over 16 cores, a producer's poll reading a line the consumer's P writes
/// per value would miss in cache every time.
#[repr(C, align(128))]
#[derive(Default)]
struct ModeSlot {
    /// The batch this slot follows (`TaskMeta::batch_bits`; 0: none).
    bits: AtomicU32,
    /// The hub task (its id, `TaskId::as_u64`; 0: none, no task's id).
    hub: AtomicU64,
    /// One of the phases above.
    phase: AtomicU32,
    /// The hub's spawn site (its `Location`'s address; 0: unknown), where
    /// the decisions are remembered for the next hub spawned there.
    site: AtomicUsize,
    _apart: [u64; 12],
    /// The hub's wakes in this phase.
    wakes: AtomicU32,
    /// The clock (ms) when the phase began.
    since: AtomicU32,
    /// The runtime's busy time (ns, all P's) when the phase began.
    busy0: AtomicU64,
    /// Measurements in a row that could not be used (see `advance`).
    restarts: AtomicU32,
    /// The next hold's length (ms).
    hold: AtomicU32,
    /// The phase held before this measurement (`NO_HOLD`: none yet), so a
    /// decision that repeats holds twice as long.
    last_hold: AtomicU32,
    /// The runtime's busy time per hub wake (ns) the last measurement read
    /// (diagnostics: `ProcMetrics::batch_last_work_per_wake`).
    last_work: AtomicU64,
}

const _: () = assert!(std::mem::offset_of!(ModeSlot, wakes) == 128);

/// What the last hub spawned at one site was held as (see [`SITE_MEMORY_MS`]).
#[derive(Default)]
struct SiteSlot {
    site: AtomicUsize,
    held: AtomicU32,
    /// Clock (ms) of the decision.
    at: AtomicU32,
}

/// Where a hub's poll ended: readers of the clock (ms since
/// `task::epoch`) and of the busy time (ns) of every P so far, called
/// only for the followed hub's polls. The clock is read, not taken from the
/// P's stretch clock: a P that runs long polls advances that clock only
/// every `event_interval` polls (tens of ms), and P's disagree.
pub(crate) struct At<N: Fn() -> u32, F: Fn() -> u64> {
    pub(crate) now_ms: N,
    pub(crate) busy: F,
}

/// Per-runtime table of hub batches and their modes (16 KiB), and the
/// spawn sites' last decisions.
pub(crate) struct HubModes(Box<[ModeSlot; SLOTS]>, Box<[SiteSlot; SLOTS]>);

impl Default for HubModes {
    fn default() -> Self {
        HubModes(
            Box::new(std::array::from_fn(|_| ModeSlot::default())),
            Box::new(std::array::from_fn(|_| SiteSlot::default())),
        )
    }
}

fn site_slot(sites: &[SiteSlot; SLOTS], site: usize) -> &SiteSlot {
    // Locations are statics a few words apart: mix the address bits.
    &sites[(site.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - SLOT_BITS)) % SLOTS]
}

impl HubModes {
    #[inline]
    fn slot(&self, bits: u32) -> &ModeSlot {
        &self.0[((bits >> crate::task::BATCH_SHIFT) as usize) % SLOTS]
    }

    /// A hub poll of task `hub` in batch `bits`: the slot follows this
    /// batch from now (a new batch starts with a kept measurement).
    /// `site` gives the hub's spawn site (0: unknown), asked only for a
    /// batch the slot did not follow yet: a site whose last hub was decided
    /// within [`SITE_MEMORY_MS`] starts held that way.
    pub(crate) fn claim<N: Fn() -> u32, F: Fn() -> u64>(
        &self,
        bits: u32,
        hub: u64,
        site: impl FnOnce() -> usize,
        at: &At<N, F>,
    ) {
        let s = self.slot(bits);
        if s.bits.load(Relaxed) != bits {
            let site = site();
            let now = (at.now_ms)();
            let remembered = (site != 0)
                .then(|| site_slot(&self.1, site))
                .filter(|m| {
                    m.site.load(Relaxed) == site
                        && now.wrapping_sub(m.at.load(Relaxed)) <= SITE_MEMORY_MS
                })
                .map(|m| m.held.load(Relaxed));
            s.hold.store(HOLD_MIN_MS, Relaxed);
            s.last_hold.store(remembered.unwrap_or(NO_HOLD), Relaxed);
            s.restarts.store(0, Relaxed);
            s.site.store(site, Relaxed);
            s.hub.store(hub, Relaxed);
            s.bits.store(bits, Relaxed);
            start(s, remembered.unwrap_or(WARM_KEEP), now, at);
        } else if s.hub.load(Relaxed) != hub {
            s.hub.store(hub, Relaxed);
        }
    }

    /// Whether members of batch `bits` displaced by a wake stay on the
    /// waker's P (kept: measuring, or held kept).
    #[inline]
    pub(crate) fn keeps(&self, bits: u32) -> bool {
        let s = self.slot(bits);
        s.bits.load(Relaxed) == bits && s.phase.load(Relaxed) & 1 == 1
    }

    /// The busy time per hub wake (ns) that batch `bits`'s last measurement
    /// read, if it is followed (diagnostics).
    pub(crate) fn last_work(&self, bits: u32) -> Option<u64> {
        let s = self.slot(bits);
        (s.bits.load(Relaxed) == bits).then(|| s.last_work.load(Relaxed))
    }

    /// The mode of batch `bits`, if it is followed (diagnostics).
    pub(crate) fn mode(&self, bits: u32) -> Option<Mode> {
        let s = self.slot(bits);
        if s.bits.load(Relaxed) != bits {
            return None;
        }
        Some(match s.phase.load(Relaxed) {
            HOLD_KEEP => Mode::Keep,
            HOLD_SPREAD => Mode::Spread,
            _ => Mode::Measuring,
        })
    }

    /// Whether the task with id `task` (in batch `bits`) may be a followed hub:
    /// the cheap look before [`HubModes::note_wakes`] (one load), inline
    /// after every poll that woke anyone.
    #[inline]
    pub(crate) fn may_follow(&self, bits: u32, task: u64) -> bool {
        self.slot(bits).hub.load(Relaxed) == task
    }

    /// A poll of the task with id `task` (in batch `bits`) woke `wakes` tasks
    /// and ended `at`. Counts them if it is the followed hub, and moves the
    /// slot's phase on when its time is up.
    #[inline]
    pub(crate) fn note_wakes<N: Fn() -> u32, F: Fn() -> u64>(
        &self,
        bits: u32,
        task: u64,
        wakes: u32,
        at: &At<N, F>,
    ) -> Decision {
        let s = self.slot(bits);
        if s.hub.load(Relaxed) != task || s.bits.load(Relaxed) != bits {
            return Decision::None;
        }
        let total = s.wakes.load(Relaxed).saturating_add(wakes);
        s.wakes.store(total, Relaxed);
        let phase = s.phase.load(Relaxed);
        let len = match phase {
            MEASURE_KEEP => MEASURE_MS,
            WARM_KEEP => WARMUP_MS,
            _ => s.hold.load(Relaxed),
        };
        let now = (at.now_ms)();
        let since = s.since.load(Relaxed);
        let elapsed = now.wrapping_sub(since);
        if elapsed < len || elapsed > u32::MAX / 2 {
            return Decision::None; // running, or a lagging clock of another P
        }
        // One phase end per phase: this runs after the hub's poll returned,
        // when the hub may already be polled again on another P, whose poll
        // end can read the same phase (seen: one measurement decided more
        // than once, its hold doubled each time). The CAS picks one;
        // Relaxed: an RMW on one word needs no ordering to have one winner.
        if s.since
            .compare_exchange(since, now, Relaxed, Relaxed)
            .is_err()
        {
            return Decision::None;
        }
        let d = advance(s, phase, total, elapsed, now, at);
        if d != Decision::None {
            let site = s.site.load(Relaxed);
            if site != 0 {
                let m = site_slot(&self.1, site);
                m.site.store(site, Relaxed);
                m.held.store(s.phase.load(Relaxed), Relaxed);
                m.at.store(now, Relaxed);
            }
        }
        d
    }
}

fn start<N: Fn() -> u32, F: Fn() -> u64>(s: &ModeSlot, phase: u32, now: u32, at: &At<N, F>) {
    s.since.store(now, Relaxed);
    s.wakes.store(0, Relaxed);
    s.busy0.store((at.busy)(), Relaxed);
    s.phase.store(phase, Relaxed);
}

/// Ends phase `phase` of slot `s`: a measurement decides, a hold ends in
/// a new measurement.
#[cold]
fn advance<N: Fn() -> u32, F: Fn() -> u64>(
    s: &ModeSlot,
    phase: u32,
    wakes: u32,
    elapsed: u32,
    now: u32,
    at: &At<N, F>,
) -> Decision {
    if phase == WARM_KEEP {
        start(s, MEASURE_KEEP, now, at);
        return Decision::None;
    }
    if phase != MEASURE_KEEP {
        // A hold ended: measure again (kept, after the warm-up).
        s.last_hold.store(phase, Relaxed);
        start(s, WARM_KEEP, now, at);
        return Decision::None;
    }
    // A measurement that ran far past its end measured a hub that stopped
    // (or a program that changed): not trusted, measured again, unless
    // that keeps happening.
    let busy = (at.busy)().saturating_sub(s.busy0.load(Relaxed));
    // (`wakes` is at least 1: only polls that woke anyone are counted.)
    s.last_work.store(busy / u64::from(wakes.max(1)), Relaxed);
    let keep = if elapsed > 2 * MEASURE_MS + BATCH_IDLE_MS {
        if s.restarts.fetch_add(1, Relaxed) + 1 < MAX_RESTARTS {
            start(s, MEASURE_KEEP, now, at);
            return Decision::None;
        }
        false
    } else {
        busy <= KEEP_WORK_NS.saturating_mul(u64::from(wakes))
    };
    s.restarts.store(0, Relaxed);
    let held = if keep { HOLD_KEEP } else { HOLD_SPREAD };
    let hold = if s.last_hold.load(Relaxed) == held {
        s.hold.load(Relaxed).saturating_mul(2).min(HOLD_MAX_MS)
    } else {
        HOLD_MIN_MS
    };
    s.hold.store(hold, Relaxed);
    start(s, held, now, at);
    if keep {
        Decision::Keep
    } else {
        Decision::Spread
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::BATCH_SHIFT;

    fn at(now_ms: u32, busy_ns: u64) -> At<impl Fn() -> u32, impl Fn() -> u64> {
        At {
            now_ms: move || now_ms,
            busy: move || busy_ns,
        }
    }

    const HUB: u64 = 0x1000;

    #[test]
    fn cheap_work_per_wake_keeps_and_holds_longer_each_time() {
        let m = HubModes::default();
        let bits = 7 << BATCH_SHIFT;
        assert!(!m.keeps(bits), "not followed yet");
        m.claim(bits, HUB, || 0, &at(1_000, 0));
        assert!(m.keeps(bits), "a new hub is measured kept");
        assert_eq!(m.mode(bits), Some(Mode::Measuring));
        // The warm-up's wakes and busy time do not count.
        let d = m.note_wakes(bits, HUB, 5, &at(1_002, 9_000_000));
        assert_eq!(d, Decision::None);
        assert!(m.keeps(bits));
        // 4 ms busy, 200 wakes: 20 µs per wake.
        let d = m.note_wakes(bits, HUB, 200, &at(1_006, 13_000_000));
        assert_eq!(d, Decision::Keep);
        assert_eq!(m.last_work(bits), Some(20_000));
        assert_eq!(m.mode(bits), Some(Mode::Keep));
        assert!(m.keeps(bits));
        // The hold runs 100 ms, then a new measurement, kept again: 200 ms.
        assert_eq!(m.note_wakes(bits, HUB, 1, &at(1_105, 0)), Decision::None);
        assert_eq!(m.mode(bits), Some(Mode::Keep));
        let d = m.note_wakes(bits, HUB, 1, &at(1_106, 20_000_000));
        assert_eq!(d, Decision::None);
        assert_eq!(m.mode(bits), Some(Mode::Measuring));
        let d = m.note_wakes(bits, HUB, 1, &at(1_108, 20_000_000));
        assert_eq!(d, Decision::None, "warmed up");
        let d = m.note_wakes(bits, HUB, 200, &at(1_112, 24_000_000));
        assert_eq!(d, Decision::Keep);
        assert_eq!(m.note_wakes(bits, HUB, 1, &at(1_311, 0)), Decision::None);
        assert_eq!(
            m.mode(bits),
            Some(Mode::Keep),
            "held 200 ms the second time"
        );
    }

    #[test]
    fn expensive_work_per_wake_spreads() {
        let m = HubModes::default();
        let bits = 9 << BATCH_SHIFT;
        m.claim(bits, HUB, || 0, &at(0, 0));
        assert_eq!(m.note_wakes(bits, HUB, 1, &at(2, 1_000)), Decision::None);
        // 4 ms busy for 10 wakes: 400 µs of work per wake.
        let d = m.note_wakes(bits, HUB, 10, &at(6, 4_001_000));
        assert_eq!(d, Decision::Spread);
        assert_eq!(m.last_work(bits), Some(400_000));
        assert!(!m.keeps(bits));
        assert_eq!(m.mode(bits), Some(Mode::Spread));
    }

    #[test]
    fn only_the_followed_hub_counts() {
        let m = HubModes::default();
        let bits = 3 << BATCH_SHIFT;
        let never = || At {
            now_ms: || -> u32 { unreachable!() },
            busy: || -> u64 { unreachable!() },
        };
        m.claim(bits, HUB, || 0, &at(0, 0));
        assert_eq!(
            m.note_wakes(bits, HUB + 64, 1_000, &never()),
            Decision::None
        );
        let other = bits + ((SLOTS as u32) << BATCH_SHIFT);
        assert_eq!(m.note_wakes(other, HUB, 1, &never()), Decision::None);
        // Another batch mapping to the same slot takes it over.
        m.claim(other, HUB + 64, || 0, &at(20, 0));
        assert_eq!(m.mode(bits), None);
        assert!(m.keeps(other));
    }

    #[test]
    fn a_hub_that_keeps_stopping_is_spread() {
        let m = HubModes::default();
        let bits = 5 << BATCH_SHIFT;
        m.claim(bits, HUB, || 0, &at(0, 0));
        assert_eq!(m.note_wakes(bits, HUB, 1, &at(2, 0)), Decision::None);
        let mut now = 2;
        for _ in 1..MAX_RESTARTS {
            now += 1_000; // each measurement ends a second late: unused
            assert_eq!(m.note_wakes(bits, HUB, 1, &at(now, 0)), Decision::None);
            assert_eq!(m.mode(bits), Some(Mode::Measuring));
        }
        assert_eq!(
            m.note_wakes(bits, HUB, 1, &at(now + 1_000, 0)),
            Decision::Spread
        );
    }

    /// A phase ends once even when two P's end it at the same moment (the
    /// hub's poll end on one P racing its next poll's end on another): one
    /// decision, not two with the hold doubled. The two threads meet inside
    /// the clock read (each has read the phase, neither its start), and a
    /// thread that goes on to decide waits there, inside its busy-time
    /// read, up to 50 ms for the other: without the CAS in `note_wakes`
    /// both get there and both decide (every round, checked by hand); with
    /// it the other has returned and the wait times out.
    #[test]
    fn a_phase_end_raced_by_two_ps_decides_once() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::{Arc, Barrier};
        use std::time::{Duration, Instant};
        const ROUNDS: usize = 10;
        let bits = 21 << BATCH_SHIFT;
        let mut twice = 0;
        for _ in 0..ROUNDS {
            let m = Arc::new(HubModes::default());
            m.claim(bits, HUB, || 0, &at(0, 0));
            assert_eq!(m.note_wakes(bits, HUB, 1, &at(2, 0)), Decision::None);
            let gate = Arc::new(Barrier::new(2));
            let deciding = Arc::new(AtomicUsize::new(0));
            let end = |m: Arc<HubModes>, gate: Arc<Barrier>, deciding: Arc<AtomicUsize>| {
                std::thread::spawn(move || {
                    let first = std::cell::Cell::new(true);
                    let at = At {
                        now_ms: move || {
                            gate.wait();
                            6
                        },
                        busy: move || {
                            if first.replace(false) {
                                deciding.fetch_add(1, Relaxed);
                                let t0 = Instant::now();
                                while deciding.load(Relaxed) < 2
                                    && t0.elapsed() < Duration::from_millis(50)
                                {
                                    std::thread::yield_now();
                                }
                            }
                            1_000_000
                        },
                    };
                    m.note_wakes(bits, HUB, 100, &at)
                })
            };
            let a = end(m.clone(), gate.clone(), deciding.clone());
            let b = end(m.clone(), gate, deciding);
            let decided = [a.join().unwrap(), b.join().unwrap()]
                .iter()
                .filter(|d| **d != Decision::None)
                .count();
            assert!(decided >= 1, "the measurement ended without a decision");
            if decided == 2 {
                twice += 1;
            }
            assert_eq!(m.mode(bits), Some(Mode::Keep));
        }
        assert_eq!(twice, 0, "{twice} of {ROUNDS} phase ends decided twice");
    }

    #[test]
    fn a_new_hub_from_a_decided_site_starts_held_that_way() {
        static SITE: u8 = 0;
        let site = std::ptr::addr_of!(SITE) as usize;
        let m = HubModes::default();
        let a = 11 << BATCH_SHIFT;
        m.claim(a, HUB, || site, &at(0, 0));
        assert_eq!(m.mode(a), Some(Mode::Measuring), "nothing remembered yet");
        // 400 µs of work per wake: spread, and remembered for the site.
        assert_eq!(m.note_wakes(a, HUB, 1, &at(2, 0)), Decision::None);
        assert_eq!(
            m.note_wakes(a, HUB, 10, &at(6, 4_000_000)),
            Decision::Spread
        );
        let b = 12 << BATCH_SHIFT;
        m.claim(b, HUB + 64, || site, &at(500, 0));
        assert_eq!(m.mode(b), Some(Mode::Spread), "starts as its site's last");
        assert!(!m.keeps(b));
        // Measured after the first hold, kept this time: the hold restarts
        // at its minimum (the decision changed), then it is remembered.
        assert_eq!(m.note_wakes(b, HUB + 64, 1, &at(600, 0)), Decision::None);
        assert_eq!(m.note_wakes(b, HUB + 64, 1, &at(602, 0)), Decision::None);
        assert_eq!(
            m.note_wakes(b, HUB + 64, 400, &at(606, 4_000_000)),
            Decision::Keep
        );
        let c = 13 << BATCH_SHIFT;
        m.claim(c, HUB + 128, || site, &at(700, 0));
        assert_eq!(m.mode(c), Some(Mode::Keep));
        // Too old a decision is not used.
        let d = 14 << BATCH_SHIFT;
        m.claim(d, HUB + 192, || site, &at(700 + SITE_MEMORY_MS + 1, 0));
        assert_eq!(m.mode(d), Some(Mode::Measuring));
    }
}
