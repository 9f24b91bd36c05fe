//! One P's timer wheel: a hierarchical hashed timing wheel with O(1) insert
//! and cancel (Varghese & Lauck, "Hashed and Hierarchical Timing Wheels",
//! 1987; the shape of tokio's time driver). Only the data structure: the
//! lock, the timerfd and the clock are [`super::timers`]'.
//!
//! # Shape
//! Time is counted in **ticks** of [`RESOLUTION`] (1 ms) since `origin` (the
//! wheel's creation). [`LEVELS`] levels of [`SLOTS`] slots: a slot of level
//! `l` spans 64^l ticks, a level 64^(l+1), so level 0 covers 64 ms, level 1
//! about 4 s, level 2 about 4.4 min, level 3 about 4.7 h, level 4 about 12
//! days and level 5 about 2.2 years. `elapsed` is the tick the wheel has
//! been advanced to. A timer of tick `t` lives at the level of the highest
//! base-64 digit in which `t` differs from `elapsed` (level 0 when they are
//! equal), in the slot named by `t`'s digit there. So a level holds only
//! timers of the current block of the level above: every timer of level `l`
//! is due before every timer of a level above it, and within a level the
//! slots ahead of `elapsed`'s digit are in deadline order.
//!
//! Advancing to `now` repeatedly takes the earliest occupied slot (the first
//! set bit of the lowest non-empty level's occupancy mask, rotated to start
//! at `elapsed`'s digit): a level-0 slot holds one tick, whose timers fire;
//! a higher slot is *cascaded*: `elapsed` moves to its start and each of its
//! timers is linked again, now at a lower level. Each timer is therefore
//! touched at most once per level on its way down, and not at all when it
//! is cancelled first, which is the fate of nearly every timer on a request
//! path (hyper's 30-second header-read timeout, dropped within
//! microseconds): it goes into a level-2 slot and leaves it by [`Wheel::cancel`].
//!
//! Deadlines are kept exactly: a timer lives in the slot of the tick its
//! deadline falls in (rounded down), and the current tick's slot fires only
//! the timers whose deadline is at or before `now`; the rest stay until a
//! later advance. So paused time still jumps to a timer's exact deadline and
//! fires it there, and the timerfd is armed for the exact earliest deadline
//! ([`Wheel::next_deadline`], a scan of the earliest occupied slot), not for
//! the end of its millisecond nor for cascade points: a sleep costs one
//! timerfd expiry, as with an ordered map.
//!
//! A deadline beyond the top level's reach (2^36 ticks, 2.2 years ahead) is
//! placed as if it were due at the end of the top-level slot just behind
//! the current one, a turn ahead (2^36 − 2^30 to 2^36 ticks away); when
//! that slot comes up it is linked again from there, so it fires at its
//! true deadline.
//!
//! # Storage
//! Timers live in a slab (`nodes`), each slot's list doubly linked through
//! slab indexes; a cancelled or fired node goes on a free list and is reused
//! by the next insert, so a steady arm-and-cancel churn allocates nothing.
//! A [`Key`] is a node's index and its generation (bumped at every reuse),
//! so a stale key names nothing. All of it is safe code. The slab keeps its
//! high-water mark (64 bytes a timer) until the runtime drops.
//!
//! # Rejected
//! - **A `BTreeMap` keyed by deadline** (this module's predecessor), with
//!   a slab for deadlines more than 2 s ahead, promoted into the map by a
//!   scan of the whole slab a second before due: O(log n) insert and
//!   remove within 2 s, an allocation per B-tree node split, and two
//!   structures with a promotion protocol between them. (The slab already
//!   made hyper's 30 s timer O(1), slightly cheaper than the wheel: the
//!   `Instant` subtraction that finds a deadline's tick is most of the
//!   difference. See `super::timers` for the reference counts every P
//!   shared, which this change also removed. The figures:
//!   docs/notes/2026-11-26-reactor-measurements.md, "The timer wheel".)
//! - **Go's 4-ary heap with lazy deletion**: cancelling marks the timer
//!   (no lock on the heap), but insert stays O(log n), and a cancelled
//!   30-second timer stays in the heap until it reaches the top or the
//!   owner sweeps the heap once a quarter of it is dead: at 400,000 requests
//!   a second that is millions of dead entries to carry or sweep. Marking
//!   without the lock also needs each timer in its own shared allocation
//!   (an atomic status the canceller and the owner both see), an
//!   allocation per request that the slab here avoids.
//! - **Intrusive lists through the `Sleep` itself** (tokio): no slab, but
//!   `Sleep` would have to be `!Unpin` and its list links `unsafe`; the slab
//!   costs one index check per operation and keeps `Sleep: Unpin`.
//! - **A single-level wheel with a far list**: O(1) for near deadlines,
//!   but 30-second timers are the ones that matter here and would all be
//!   "far".

use std::task::Waker;
use std::time::{Duration, Instant};

/// The length of one tick (`tuning::TIMER_TICK`).
pub(crate) const RESOLUTION: Duration = crate::tuning::TIMER_TICK;
/// Nanoseconds per tick.
const TICK_NS: u64 = RESOLUTION.as_nanos() as u64;
/// Levels of the wheel.
pub(crate) const LEVELS: usize = 6;
/// Slots per level (one bit each in a `u64` occupancy mask).
pub(crate) const SLOTS: usize = 64;
/// Bits of a tick per level (log2 of [`SLOTS`]).
const BITS: u32 = 6;
/// Ticks the top level reaches: a deadline further ahead is placed as if
/// it were due this far ahead and linked again when its slot comes up.
pub(crate) const MAX_AHEAD: u64 = (1 << (BITS * LEVELS as u32)) - 1;

/// No node (end of a list; the empty free list).
const NIL: u32 = u32::MAX;
/// The `slot` of a node that is on the free list.
const FREE: u16 = u16::MAX;

/// Names one timer in its wheel: a slab index and that node's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    index: u32,
    gen: u32,
}

/// One timer, or a free node.
struct Node {
    deadline: Instant,
    /// `None` only while the node is free.
    waker: Option<Waker>,
    /// The tick of `deadline` (rounded down), kept for cascading.
    tick: u64,
    /// Insertion order: breaks ties between equal deadlines when fired.
    seq: u64,
    /// List links (slab indexes); `next` also links the free list.
    prev: u32,
    next: u32,
    /// Bumped whenever the node is freed, so old keys stop matching.
    gen: u32,
    /// `level * SLOTS + slot` of the list holding it, or [`FREE`].
    slot: u16,
}

/// A doubly linked list of nodes.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

/// A fired timer: its deadline, insertion order and waker.
pub(crate) type Fired = (Instant, u64, Waker);

/// The earliest occupied slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expiration {
    level: usize,
    slot: usize,
    /// The first tick the slot covers.
    start: u64,
}

/// A hierarchical timing wheel of wakers (module docs).
pub(crate) struct Wheel {
    /// Tick 0.
    origin: Instant,
    /// Every tick before this one has been processed; timers of this tick
    /// with a deadline after the last advance's `now` may remain in level 0.
    elapsed: u64,
    /// Bit `s` of `occupied[l]`: slot `s` of level `l` is not empty.
    occupied: [u64; LEVELS],
    slots: Box<[List; LEVELS * SLOTS]>,
    nodes: Vec<Node>,
    /// Head of the free list (linked through `Node::next`).
    free: u32,
    len: usize,
    next_seq: u64,
}

impl Wheel {
    pub(crate) fn new(origin: Instant) -> Wheel {
        Wheel {
            origin,
            elapsed: 0,
            occupied: [0; LEVELS],
            slots: Box::new([EMPTY; LEVELS * SLOTS]),
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            next_seq: 0,
        }
    }

    /// Pending timers.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The tick `at` falls in (rounded down; 0 before `origin`).
    #[inline]
    fn tick_of(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.origin);
        d.as_secs()
            .saturating_mul(1000)
            .saturating_add(u64::from(d.subsec_nanos()) / TICK_NS)
    }

    /// Where a timer of tick `tick` (not before `elapsed`) belongs now:
    /// `(level, slot)`.
    #[inline]
    fn place(&self, tick: u64) -> (usize, usize) {
        // Beyond the reach: the last tick of the top-level slot just behind
        // the current one, a turn ahead. Not `elapsed + MAX_AHEAD`, which
        // can land in the current top slot itself: that slot then comes
        // first in `next_expiration`'s rotation while starting a whole turn
        // later, and hides every timer in the slots after it (tokio's
        // time_sleep test long_wait_sleep_does_not_break_other_timers hung).
        let top = BITS * (LEVELS as u32 - 1);
        let cap = ((self.elapsed >> top) << top).saturating_add(MAX_AHEAD);
        let tick = tick.min(cap);
        // The highest differing bit names the level; bits 0-5 all mean 0.
        let differ = (self.elapsed ^ tick) | (SLOTS as u64 - 1);
        let level = ((63 - differ.leading_zeros()) / BITS) as usize;
        let level = level.min(LEVELS - 1);
        let slot = ((tick >> (BITS * level as u32)) as usize) & (SLOTS - 1);
        (level, slot)
    }

    /// The first tick of slot `slot` of level `level`, as the wheel stands.
    #[inline]
    fn slot_start(&self, level: usize, slot: usize) -> u64 {
        let slot_range = 1u64 << (BITS * level as u32);
        let level_range = slot_range << BITS;
        let level_start = self.elapsed & !(level_range - 1);
        let start = level_start + slot as u64 * slot_range;
        if level > 0 && start <= self.elapsed {
            // Only the top level, holding a timer placed at the reach's
            // end: that slot comes up in the next turn of the level.
            debug_assert_eq!(level, LEVELS - 1, "a slot behind elapsed below the top");
            start + level_range
        } else {
            start
        }
    }

    /// The earliest occupied slot (module docs: the lowest non-empty level
    /// holds the earliest timers).
    fn next_expiration(&self) -> Option<Expiration> {
        let level = self.occupied.iter().position(|&o| o != 0)?;
        let digit = ((self.elapsed >> (BITS * level as u32)) & (SLOTS as u64 - 1)) as u32;
        let rotated = self.occupied[level].rotate_right(digit);
        let slot = ((rotated.trailing_zeros() + digit) as usize) & (SLOTS - 1);
        Some(Expiration {
            level,
            slot,
            start: self.slot_start(level, slot),
        })
    }

    #[inline]
    fn link(&mut self, index: u32, level: usize, slot: usize) {
        let s = level * SLOTS + slot;
        let tail = self.slots[s].tail;
        {
            let n = &mut self.nodes[index as usize];
            n.prev = tail;
            n.next = NIL;
            n.slot = s as u16;
        }
        if tail == NIL {
            self.slots[s].head = index;
            self.occupied[level] |= 1 << slot;
        } else {
            self.nodes[tail as usize].next = index;
        }
        self.slots[s].tail = index;
    }

    #[inline]
    fn unlink(&mut self, index: u32) {
        let (prev, next, s) = {
            let n = &self.nodes[index as usize];
            (n.prev, n.next, n.slot as usize)
        };
        if prev == NIL {
            self.slots[s].head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.slots[s].tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        if self.slots[s].head == NIL {
            self.occupied[s / SLOTS] &= !(1 << (s % SLOTS));
        }
    }

    /// Unlinks node `index` and puts it on the free list; returns its
    /// deadline, order and waker.
    #[inline]
    fn release(&mut self, index: u32) -> Fired {
        self.unlink(index);
        self.len -= 1;
        let n = &mut self.nodes[index as usize];
        n.slot = FREE;
        n.gen = n.gen.wrapping_add(1);
        n.next = self.free;
        self.free = index;
        let waker = n.waker.take().expect("a linked node holds a waker");
        (n.deadline, n.seq, waker)
    }

    /// The node `key` names, if it is still pending.
    fn get(&self, key: Key) -> Option<&Node> {
        self.nodes
            .get(key.index as usize)
            .filter(|n| n.gen == key.gen && n.slot != FREE)
    }

    /// Adds a timer; returns its key.
    pub(crate) fn insert(&mut self, deadline: Instant, waker: Waker) -> Key {
        // A deadline already behind `elapsed` (a clock read that lost a race
        // with another thread's advance) goes to the current tick's slot,
        // which the next advance fires.
        let tick = self.tick_of(deadline).max(self.elapsed);
        let seq = self.next_seq;
        self.next_seq += 1;
        let index = if self.free != NIL {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            n.deadline = deadline;
            n.waker = Some(waker);
            n.tick = tick;
            n.seq = seq;
            i
        } else {
            let i = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("more than 4 billion timers on one processor");
            self.nodes.push(Node {
                deadline,
                waker: Some(waker),
                tick,
                seq,
                prev: NIL,
                next: NIL,
                gen: 0,
                slot: FREE,
            });
            i
        };
        self.len += 1;
        self.link_at(index, tick);
        let gen = self.nodes[index as usize].gen;
        Key { index, gen }
    }

    /// Moves a pending timer to `deadline`, keeping its key and waker;
    /// `false` if it is no longer pending.
    pub(crate) fn reset(&mut self, key: Key, deadline: Instant) -> bool {
        if self.get(key).is_none() {
            return false;
        }
        self.unlink(key.index);
        let tick = self.tick_of(deadline).max(self.elapsed);
        let seq = self.next_seq;
        self.next_seq += 1;
        let n = &mut self.nodes[key.index as usize];
        n.deadline = deadline;
        n.tick = tick;
        n.seq = seq;
        self.link_at(key.index, tick);
        true
    }

    /// Links node `index` where tick `tick` belongs.
    #[inline]
    fn link_at(&mut self, index: u32, tick: u64) {
        let (level, slot) = self.place(tick);
        self.link(index, level, slot);
    }

    /// Refreshes a pending timer's waker; `false` if it is no longer
    /// pending (fired, or cancelled).
    pub(crate) fn poll(&mut self, key: Key, waker: &Waker) -> bool {
        let Some(n) = self
            .nodes
            .get_mut(key.index as usize)
            .filter(|n| n.gen == key.gen && n.slot != FREE)
        else {
            return false;
        };
        let w = n.waker.as_mut().expect("a linked node holds a waker");
        if !w.will_wake(waker) {
            w.clone_from(waker);
        }
        true
    }

    /// Cancels a timer; returns its waker (to be dropped outside any lock),
    /// or `None` if it already fired.
    pub(crate) fn cancel(&mut self, key: Key) -> Option<Waker> {
        self.get(key)?;
        Some(self.release(key.index).2)
    }

    /// Advances the wheel to `now`, appending every timer due by then to
    /// `out` (in slot order; the caller sorts by deadline and order).
    pub(crate) fn advance(&mut self, now: Instant, out: &mut Vec<Fired>) {
        // Clock reads on different threads may arrive out of order: the
        // wheel never goes back.
        let now_tick = self.tick_of(now).max(self.elapsed);
        while let Some(e) = self.next_expiration() {
            if e.start > now_tick {
                break;
            }
            let s = e.level * SLOTS + e.slot;
            if e.level == 0 {
                // Every timer here is of tick `e.start`.
                let whole = e.start < now_tick;
                let mut i = self.slots[s].head;
                while i != NIL {
                    let next = self.nodes[i as usize].next;
                    if whole || self.nodes[i as usize].deadline <= now {
                        out.push(self.release(i));
                    }
                    i = next;
                }
                self.elapsed = e.start;
                if !whole {
                    // The current tick: what is left is due later in it,
                    // and nothing else is due before it.
                    break;
                }
            } else {
                self.elapsed = e.start;
                let mut i = self.slots[s].head;
                self.slots[s] = EMPTY;
                self.occupied[e.level] &= !(1 << e.slot);
                while i != NIL {
                    let next = self.nodes[i as usize].next;
                    let (level, slot) = self.place(self.nodes[i as usize].tick);
                    debug_assert!(level < e.level || e.level == LEVELS - 1);
                    self.link(i, level, slot);
                    i = next;
                }
            }
        }
        self.elapsed = now_tick;
    }

    /// The earliest pending deadline, exactly (scans the earliest occupied
    /// slot, or the top level when only it holds timers): where the timerfd
    /// is armed. A slot starts at or before each of its timers' deadlines,
    /// so advancing there also does every cascade due by then; no cascade
    /// needs a wake-up of its own.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let e = self.next_expiration()?;
        if e.level < LEVELS - 1 {
            return self.min_deadline(e.level * SLOTS + e.slot);
        }
        // The top level may hold timers placed at the reach's end, whose
        // slots do not follow their deadlines: look at all of them.
        (0..SLOTS)
            .filter_map(|slot| self.min_deadline(e.level * SLOTS + slot))
            .min()
    }

    fn min_deadline(&self, s: usize) -> Option<Instant> {
        let mut i = self.slots[s].head;
        let mut min: Option<Instant> = None;
        while i != NIL {
            let n = &self.nodes[i as usize];
            min = Some(min.map_or(n.deadline, |m| m.min(n.deadline)));
            i = n.next;
        }
        min
    }

    /// Removes every timer, appending their wakers to `out`.
    pub(crate) fn drain(&mut self, out: &mut Vec<Waker>) {
        for n in self.nodes.iter_mut() {
            if n.slot != FREE {
                n.slot = FREE;
                n.gen = n.gen.wrapping_add(1);
                out.extend(n.waker.take());
            }
        }
        self.nodes.clear();
        self.free = NIL;
        self.len = 0;
        self.occupied = [0; LEVELS];
        self.slots.fill(EMPTY);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::task::Wake;

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    fn waker() -> Waker {
        Waker::from(Arc::new(Noop))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Advances to `now` and returns the fired deadlines as offsets from
    /// `t0`, sorted as the timer set sorts them.
    fn advance(w: &mut Wheel, t0: Instant, now: Instant) -> Vec<Duration> {
        let mut out = Vec::new();
        w.advance(now, &mut out);
        out.sort_by_key(|f| (f.0, f.1));
        out.into_iter().map(|f| f.0 - t0).collect()
    }

    /// A timer beyond the reach, placed while `elapsed` sits at the end of
    /// a top-level slot, must not hide a nearer timer in the next slot.
    #[test]
    fn a_far_timer_placed_late_in_a_top_slot_hides_nothing() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let late = (1u64 << 30) - 1; // the last tick of top slot 0
        assert!(advance(&mut w, t0, t0 + ms(late)).is_empty());
        w.insert(t0 + ms(late + (10 << 36)), waker());
        w.insert(t0 + ms(late + 10), waker());
        assert_eq!(w.next_deadline(), Some(t0 + ms(late + 10)));
        assert_eq!(
            advance(&mut w, t0, t0 + ms(late + 10)),
            [ms(late + 10)],
            "the near timer fires at its deadline"
        );
        assert_eq!(w.next_deadline(), Some(t0 + ms(late + (10 << 36))));
    }

    /// A timer goes down level by level and fires at its deadline, not a
    /// tick before, from each level it can start in.
    #[test]
    fn cascades_across_every_level() {
        for level in 0..LEVELS {
            let t0 = Instant::now();
            let mut w = Wheel::new(t0);
            // Past the reach of the levels below, inside this one's.
            let ahead = (1u64 << (BITS * level as u32)) * 3 + 7;
            w.insert(t0 + ms(ahead), waker());
            assert_eq!(w.next_expiration().unwrap().level, level, "ahead {ahead}");
            assert_eq!(w.next_deadline(), Some(t0 + ms(ahead)));
            // Step through every slot start on the way: each cascade moves
            // it down a level, and it fires only at its deadline.
            let mut steps = 0;
            while let Some(e) = w.next_expiration().filter(|e| e.level > 0) {
                let start = w.origin + ms(e.start);
                assert!(start <= t0 + ms(ahead) && start > t0, "a cascade point");
                assert!(advance(&mut w, t0, start).is_empty());
                assert!(w.next_expiration().unwrap().level < e.level, "moved down");
                steps += 1;
            }
            assert!(steps <= level, "one cascade per level at most");
            let just_before = t0 + ms(ahead) - Duration::from_nanos(1);
            assert!(advance(&mut w, t0, just_before).is_empty());
            assert_eq!(advance(&mut w, t0, t0 + ms(ahead)), vec![ms(ahead)]);
            assert_eq!(w.len(), 0);
            // In one jump to the deadline: every cascade and the firing.
            w.insert(t0 + ms(ahead) * 2, waker());
            assert_eq!(advance(&mut w, t0, t0 + ms(ahead) * 2), vec![ms(ahead) * 2]);
        }
    }

    /// Cancelling works from whichever level the timer is in, and clears
    /// the slot's occupancy bit.
    #[test]
    fn cancel_from_every_level() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let keys: Vec<Key> = (0..LEVELS)
            .map(|l| w.insert(t0 + ms((1u64 << (BITS * l as u32)) * 2), waker()))
            .collect();
        for (l, o) in w.occupied.iter().enumerate() {
            assert_eq!(o.count_ones(), 1, "level {l}");
        }
        for (l, k) in keys.iter().enumerate() {
            assert!(w.cancel(*k).is_some(), "level {l}");
            assert_eq!(w.occupied[l], 0, "level {l} emptied");
            assert!(w.cancel(*k).is_none(), "a second cancel finds nothing");
        }
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_deadline(), None);
        // A cancelled timer half way down fires nothing either.
        let k = w.insert(t0 + ms(10_000), waker());
        assert!(advance(&mut w, t0, t0 + ms(9_990)).is_empty());
        assert_eq!(w.next_expiration().unwrap().level, 0, "cascaded to level 0");
        assert!(w.cancel(k).is_some());
        assert!(advance(&mut w, t0, t0 + ms(20_000)).is_empty());
    }

    /// Deadlines past the top level's reach (years ahead, or `far_future`'s
    /// 30) stay pending until their true deadline and then fire.
    #[test]
    fn deadlines_far_beyond_the_wheel() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let reach = ms(MAX_AHEAD);
        let far = [reach * 3 + ms(5), Duration::from_secs(86400 * 365 * 30)];
        for d in far {
            w.insert(t0 + d, waker());
        }
        assert_eq!(w.next_deadline(), Some(t0 + far[0]), "exact, not the clamp");
        assert!(advance(&mut w, t0, t0 + reach * 3).is_empty());
        assert_eq!(w.len(), 2);
        assert_eq!(advance(&mut w, t0, t0 + far[0]), vec![far[0]]);
        assert!(advance(&mut w, t0, t0 + far[1] - ms(1)).is_empty());
        assert_eq!(w.next_deadline(), Some(t0 + far[1]));
        assert_eq!(advance(&mut w, t0, t0 + far[1]), vec![far[1]]);
        assert_eq!(w.len(), 0);
    }

    /// Thousands of timers in one slot: all fire, in deadline and then
    /// insertion order once sorted, and the slab is reused afterwards.
    #[test]
    fn many_timers_in_one_slot() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let n = 5000;
        let mut keys = Vec::new();
        for i in 0..n {
            // All within tick 7.
            let d = ms(7) + Duration::from_nanos((n - i) as u64 * 100);
            keys.push(w.insert(t0 + d, waker()));
        }
        assert_eq!(w.occupied[0].count_ones(), 1);
        // Cancel every third, from the middle of the list.
        for k in keys.iter().step_by(3) {
            assert!(w.cancel(*k).is_some());
        }
        let left = w.len();
        let fired = advance(&mut w, t0, t0 + ms(8));
        assert_eq!(fired.len(), left);
        assert!(fired.windows(2).all(|p| p[0] <= p[1]), "in deadline order");
        assert_eq!(w.len(), 0);
        let slab = w.nodes.len();
        for _ in 0..n {
            w.insert(t0 + ms(100), waker());
        }
        assert_eq!(w.nodes.len(), slab, "the freed nodes are reused");
    }

    /// Within one tick, a timer fires once `now` reaches its exact deadline
    /// and not before; timers of different ticks fire in their order.
    #[test]
    fn firing_order_within_resolution() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let us = Duration::from_micros;
        for d in [ms(5) + us(700), ms(5) + us(200), ms(3), ms(5) + us(200)] {
            w.insert(t0 + d, waker());
        }
        assert_eq!(w.next_deadline(), Some(t0 + ms(3)));
        assert_eq!(advance(&mut w, t0, t0 + ms(5) + us(100)), vec![ms(3)]);
        assert_eq!(w.next_deadline(), Some(t0 + ms(5) + us(200)), "exact");
        assert_eq!(
            advance(&mut w, t0, t0 + ms(5) + us(200)),
            vec![ms(5) + us(200); 2]
        );
        assert!(advance(&mut w, t0, t0 + ms(5) + us(699)).is_empty());
        assert_eq!(
            advance(&mut w, t0, t0 + ms(5) + us(700)),
            vec![ms(5) + us(700)]
        );
        // Equal deadlines keep their insertion order.
        let mut out = Vec::new();
        let a = w.insert(t0 + ms(9), waker());
        let b = w.insert(t0 + ms(9), waker());
        w.advance(t0 + ms(9), &mut out);
        out.sort_by_key(|f| (f.0, f.1));
        assert!(out[0].1 < out[1].1);
        assert!(w.cancel(a).is_none() && w.cancel(b).is_none(), "fired");
    }

    /// A paused clock jumps: one advance over hours fires everything due in
    /// order and cascades the rest exactly; an advance that goes back (a
    /// stale clock read) changes nothing; a deadline behind the wheel fires
    /// at the next advance.
    #[test]
    fn clock_jumps() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let ds = [ms(1), ms(70), ms(5_000), ms(300_000), ms(3_600_000 * 5)];
        for d in ds.iter().rev() {
            w.insert(t0 + *d, waker());
        }
        assert_eq!(
            advance(&mut w, t0, t0 + ms(3_600_000)),
            ds[..4].to_vec(),
            "one jump of an hour"
        );
        assert!(advance(&mut w, t0, t0 + ms(10)).is_empty(), "going back");
        assert_eq!(w.next_deadline(), Some(t0 + ds[4]));
        w.insert(t0 + ms(20), waker());
        assert_eq!(
            w.next_deadline(),
            Some(t0 + ms(20)),
            "behind the wheel: due now"
        );
        assert_eq!(advance(&mut w, t0, t0 + ms(3_600_000)), vec![ms(20)]);
        assert_eq!(advance(&mut w, t0, t0 + ds[4]), vec![ds[4]]);
    }

    /// Random inserts, cancels and advances against a `BTreeMap` model:
    /// the same timers fire at the same advances, and the earliest deadline
    /// (where the timerfd is armed) is always known exactly.
    #[test]
    fn matches_an_ordered_map() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let t0 = Instant::now();
        let mut w = Wheel::new(t0);
        let mut model: BTreeMap<(Instant, u64), Key> = BTreeMap::new();
        let mut now = t0;
        let (mut fired, mut cancelled) = (0, 0);
        for round in 0..20_000 {
            match next(10) {
                0..=4 => {
                    // Spread over every level, in nanoseconds.
                    let scale = 10u64.pow(next(12) as u32 + 3);
                    let d = Duration::from_nanos(next(scale));
                    let k = w.insert(now + d, waker());
                    let seq = w.nodes[k.index as usize].seq;
                    model.insert((now + d, seq), k);
                }
                5..=6 if !model.is_empty() => {
                    let i = next(model.len() as u64) as usize;
                    let (&mk, &k) = model.iter().nth(i).unwrap();
                    model.remove(&mk);
                    assert!(w.cancel(k).is_some(), "round {round}");
                    cancelled += 1;
                }
                _ => {
                    let to = if next(3) == 0 {
                        w.next_deadline().unwrap_or(now)
                    } else {
                        let scale = 10u64.pow(next(10) as u32 + 3);
                        now + Duration::from_nanos(next(scale))
                    };
                    now = now.max(to);
                    let mut out = Vec::new();
                    w.advance(now, &mut out);
                    out.sort_by_key(|f| (f.0, f.1));
                    let got: Vec<(Instant, u64)> = out.iter().map(|f| (f.0, f.1)).collect();
                    let due: Vec<(Instant, u64)> =
                        model.range(..(now, u64::MAX)).map(|(k, _)| *k).collect();
                    for k in &due {
                        model.remove(k);
                    }
                    assert_eq!(got, due, "round {round}");
                    fired += due.len();
                }
            }
            assert_eq!(w.len(), model.len());
            let first = model.keys().next().map(|k| k.0);
            assert_eq!(w.next_deadline(), first, "round {round}");
        }
        assert!(
            fired > 1000 && cancelled > 1000,
            "{fired} fired, {cancelled} cancelled"
        );
        assert!(w.nodes.len() < 10_000, "nodes are reused");
    }
}
