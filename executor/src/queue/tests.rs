//! Unit tests and loom models of the local run queue.

use super::*;
use std::cell::RefCell;

/// A test task: a boxed number.
struct T(Box<usize>);

// SAFETY: Box::into_raw/from_raw round-trip one unique allocation.
unsafe impl RawTask for T {
    fn into_raw(self) -> NonNull<()> {
        NonNull::new(Box::into_raw(self.0).cast()).unwrap()
    }
    unsafe fn from_raw(ptr: NonNull<()>) -> Self {
        // SAFETY: the caller passes a pointer from into_raw, once.
        T(unsafe { Box::from_raw(ptr.as_ptr().cast()) })
    }
}

#[derive(Default)]
struct Sink(RefCell<Vec<usize>>);
impl Overflow<T> for Sink {
    fn push_many(&self, tasks: Vec<T>) {
        self.0.borrow_mut().extend(tasks.into_iter().map(|t| *t.0));
    }
}

#[cfg(not(loom))]
mod plain {
    use super::*;

    #[test]
    fn fifo_ring_and_lifo_slot() {
        let (mut q, _s) = new::<T>();
        let sink = Sink::default();
        q.push_back(T(Box::new(1)), &sink);
        q.push_back(T(Box::new(2)), &sink);
        q.push_runnext(T(Box::new(3)), &sink);
        q.push_runnext(T(Box::new(4)), &sink); // displaces 3 to the tail
        let order: Vec<_> = std::iter::from_fn(|| q.pop(true).map(|(t, _)| *t.0)).collect();
        assert_eq!(order, vec![4, 1, 2, 3]);
    }

    #[test]
    fn pop_without_lifo_prefers_the_ring() {
        let (mut q, _s) = new::<T>();
        let sink = Sink::default();
        q.push_runnext(T(Box::new(9)), &sink);
        q.push_back(T(Box::new(1)), &sink);
        assert_eq!(q.pop(false).map(|(t, lifo)| (*t.0, lifo)), Some((1, false)));
        assert_eq!(q.pop(false).map(|(t, lifo)| (*t.0, lifo)), Some((9, true)));
        assert!(q.pop(false).is_none());
    }

    #[test]
    fn overflow_moves_half_plus_one_in_one_go() {
        let (mut q, _s) = new::<T>();
        let sink = Sink::default();
        for i in 0..CAPACITY + 1 {
            q.push_back(T(Box::new(i)), &sink);
        }
        let moved = sink.0.borrow().clone();
        assert_eq!(moved.len(), CAPACITY / 2 + 1);
        assert_eq!(&moved[..3], &[0, 1, 2], "oldest tasks leave first");
        assert_eq!(
            *moved.last().unwrap(),
            CAPACITY,
            "the new task goes with them"
        );
        assert_eq!(q.len(), CAPACITY / 2);
    }

    #[test]
    fn steal_takes_half_and_returns_one() {
        let (mut victim, steal) = new::<T>();
        let (mut thief, _) = new::<T>();
        let sink = Sink::default();
        for i in 0..10 {
            victim.push_back(T(Box::new(i)), &sink);
        }
        let (t, n) = thief.steal_from(&steal, false, || {}).unwrap();
        assert_eq!(n, 5);
        assert_eq!(*t.0, 4, "the last stolen task runs first");
        assert_eq!(thief.len(), 4);
        assert_eq!(victim.len(), 5);
    }

    /// A thief leaves the victim the tasks it reaches soon: half the ring
    /// or what lies beyond `keep`, whichever is less, and nothing (not
    /// `runnext` either) from a short ring.
    #[test]
    fn steal_leaves_the_owners_reserve() {
        let (mut victim, steal) = new::<T>();
        let (mut thief, _) = new::<T>();
        let sink = Sink::default();
        for i in 0..10 {
            victim.push_back(T(Box::new(i)), &sink);
        }
        victim.push_runnext(T(Box::new(99)), &sink);
        assert!(thief.steal_sparing(&steal, 10, true, || {}).is_none());
        assert_eq!(victim.len(), 10, "a ring of `keep` tasks is left whole");
        let (_, n) = thief.steal_sparing(&steal, 7, false, || {}).unwrap();
        assert_eq!(n, 3, "only what lies beyond `keep`");
        assert_eq!(victim.len(), 7);
        let (mut thief2, _) = new::<T>();
        let (_, n) = thief2.steal_sparing(&steal, 0, false, || {}).unwrap();
        assert_eq!(n, 4, "keep 0: half, as steal_from");
        assert!(victim.pop(true).is_some_and(|(t, lifo)| *t.0 == 99 && lifo));
    }

    #[test]
    fn runnext_is_stolen_only_when_asked() {
        let (mut victim, steal) = new::<T>();
        let (mut thief, _) = new::<T>();
        let sink = Sink::default();
        victim.push_runnext(T(Box::new(7)), &sink);
        assert!(thief.steal_from(&steal, false, || {}).is_none());
        let waited = std::cell::Cell::new(false);
        let (t, n) = thief.steal_from(&steal, true, || waited.set(true)).unwrap();
        assert_eq!((*t.0, n), (7, 1));
        assert!(waited.get(), "the thief waits before taking runnext");
        assert!(victim.is_empty());
    }

    #[test]
    fn concurrent_steals_lose_and_duplicate_nothing() {
        use std::sync::atomic::AtomicBool;
        const N: usize = 20_000;
        let (mut owner, steal) = new::<T>();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let steal = steal.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let (mut mine, _) = new::<T>();
                    let mut got = Vec::new();
                    loop {
                        let finished = done.load(Acquire);
                        if let Some((t, _)) = mine.steal_from(&steal, true, || {}) {
                            got.push(*t.0);
                            while let Some((t, _)) = mine.pop(true) {
                                got.push(*t.0);
                            }
                        } else if finished {
                            return got;
                        }
                    }
                })
            })
            .collect();
        let sink = Sink::default();
        let mut got = Vec::new();
        for i in 0..N {
            if i % 3 == 0 {
                owner.push_runnext(T(Box::new(i)), &sink);
            } else {
                owner.push_back(T(Box::new(i)), &sink);
            }
            if i % 5 == 0 {
                if let Some((t, _)) = owner.pop(i % 2 == 0) {
                    got.push(*t.0);
                }
            }
        }
        while let Some((t, _)) = owner.pop(true) {
            got.push(*t.0);
        }
        done.store(true, Release);
        for th in thieves {
            got.extend(th.join().unwrap());
        }
        got.extend(sink.0.borrow().iter().copied());
        got.sort_unstable();
        assert_eq!(got, (0..N).collect::<Vec<_>>());
    }
}

#[cfg(loom)]
mod models {
    use super::*;
    use loom::thread;

    /// Owner pushes (one via runnext) and pops while a thief steals with
    /// runnext allowed: every task is taken exactly once.
    #[test]
    fn push_pop_steal_exactly_once() {
        loom::model(|| {
            let (mut owner, steal) = new::<T>();
            let thief = thread::spawn(move || {
                let (mut mine, _) = new::<T>();
                let mut got = Vec::new();
                if let Some((t, _)) = mine.steal_from(&steal, true, || {}) {
                    got.push(*t.0);
                    while let Some((t, _)) = mine.pop(true) {
                        got.push(*t.0);
                    }
                }
                got
            });
            let sink = Sink::default();
            owner.push_back(T(Box::new(0)), &sink);
            owner.push_runnext(T(Box::new(1)), &sink);
            owner.push_runnext(T(Box::new(2)), &sink);
            let mut got = Vec::new();
            if let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            got.extend(thief.join().unwrap());
            while let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            got.extend(sink.0.borrow().iter().copied());
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2]);
        });
    }

    /// A ping-pong on `runnext` (a store into the empty slot, a swap out,
    /// another store) while a thief takes `runnext`: each task is taken
    /// exactly once, whichever side gets it.
    #[test]
    fn runnext_stores_into_an_empty_slot_race_a_thief() {
        loom::model(|| {
            let (mut owner, steal) = new::<T>();
            let thief = thread::spawn(move || {
                let (mut mine, _) = new::<T>();
                let mut got = Vec::new();
                for _ in 0..2 {
                    if let Some((t, _)) = mine.steal_from(&steal, true, || {}) {
                        got.push(*t.0);
                    }
                }
                got
            });
            let sink = Sink::default();
            let mut got = Vec::new();
            owner.push_runnext(T(Box::new(1)), &sink);
            if let Some(t) = owner.pop_runnext() {
                got.push(*t.0);
            }
            owner.push_runnext(T(Box::new(2)), &sink);
            got.extend(thief.join().unwrap());
            while let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            got.extend(sink.0.borrow().iter().copied());
            got.sort_unstable();
            assert_eq!(got, vec![1, 2]);
        });
    }

    /// A thief that leaves the owner `keep` tasks races the owner's pops and
    /// pushes: every task is taken exactly once, and the thief never takes
    /// from a ring it saw at or below `keep` (then it takes nothing, not even
    /// `runnext`).
    #[test]
    fn steal_sparing_races_the_owner() {
        loom::model(|| {
            let (mut owner, steal) = new::<T>();
            let sink = Sink::default();
            for i in 0..3 {
                owner.push_back(T(Box::new(i)), &sink);
            }
            let thief = thread::spawn(move || {
                let (mut mine, _) = new::<T>();
                let mut got = Vec::new();
                if let Some((t, n)) = mine.steal_sparing(&steal, 1, true, || {}) {
                    assert!(n <= 2, "took {n} of a ring of at most 3 keeping 1");
                    got.push(*t.0);
                    while let Some((t, _)) = mine.pop(true) {
                        got.push(*t.0);
                    }
                }
                got
            });
            let mut got = Vec::new();
            if let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            owner.push_runnext(T(Box::new(3)), &sink);
            got.extend(thief.join().unwrap());
            while let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            got.extend(sink.0.borrow().iter().copied());
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2, 3]);
        });
    }

    /// Overflow races a steal: nothing is lost or duplicated.
    #[test]
    fn overflow_races_steal() {
        loom::model(|| {
            let (mut owner, steal) = new::<T>();
            let sink = Sink::default();
            for i in 0..CAPACITY {
                owner.push_back(T(Box::new(i)), &sink);
            }
            let thief = thread::spawn(move || {
                let (mut mine, _) = new::<T>();
                let mut got = Vec::new();
                if let Some((t, _)) = mine.steal_from(&steal, false, || {}) {
                    got.push(*t.0);
                    while let Some((t, _)) = mine.pop(true) {
                        got.push(*t.0);
                    }
                }
                got
            });
            owner.push_back(T(Box::new(CAPACITY)), &sink);
            let mut got = thief.join().unwrap();
            while let Some((t, _)) = owner.pop(true) {
                got.push(*t.0);
            }
            got.extend(sink.0.borrow().iter().copied());
            got.sort_unstable();
            assert_eq!(got, (0..=CAPACITY).collect::<Vec<_>>());
        });
    }

    /// The batch split (docs/architecture.md, "Batches"): wakes displace
    /// tasks from `runnext` into the owner's private batch queue; a thief
    /// that finds the ring empty but batch work queued asks for a split;
    /// the owner, at its next batch-queue pop, sees the request and moves
    /// the batch queue to its ring, where the thief may steal. Whatever the
    /// interleaving, every task is taken exactly once, and a thief never
    /// takes from the batch queue itself.
    #[test]
    fn batch_split_races_a_thief() {
        use loom::sync::atomic::{AtomicBool, AtomicUsize};
        use loom::sync::Arc;
        use std::collections::VecDeque;
        loom::model(|| {
            let (mut owner, steal) = new::<T>();
            let split = Arc::new(AtomicBool::new(false));
            let bq_len = Arc::new(AtomicUsize::new(0));
            let sink = Sink::default();
            let mut bq = VecDeque::new();
            // 0 in runnext; the wake of 1 displaces 0, that of 2 displaces 1.
            for i in 0..3 {
                if let Some(old) = owner.swap_runnext(T(Box::new(i))) {
                    bq.push_back(old);
                    bq_len.store(bq.len(), Relaxed);
                }
            }
            let thief = {
                let (split, bq_len) = (split.clone(), bq_len.clone());
                thread::spawn(move || {
                    let (mut mine, _) = new::<T>();
                    let mut got = Vec::new();
                    for _ in 0..2 {
                        if let Some((t, _)) = mine.steal_from(&steal, false, || {}) {
                            got.push(*t.0);
                            while let Some((t, _)) = mine.pop(true) {
                                got.push(*t.0);
                            }
                            break;
                        }
                        if bq_len.load(Relaxed) != 0 {
                            split.store(true, Relaxed);
                        }
                        thread::yield_now();
                    }
                    got
                })
            };
            // The owner's order: runnext, the batch queue (split first when
            // asked), the ring.
            let mut got = Vec::new();
            loop {
                if let Some(t) = owner.pop_runnext() {
                    got.push(*t.0);
                    continue;
                }
                if !bq.is_empty() {
                    if split.swap(false, Relaxed) {
                        while let Some(t) = bq.pop_front() {
                            owner.push_back(t, &sink);
                        }
                        bq_len.store(0, Relaxed);
                    } else if let Some(t) = bq.pop_front() {
                        bq_len.store(bq.len(), Relaxed);
                        got.push(*t.0);
                        continue;
                    }
                }
                match owner.pop(false) {
                    Some((t, _)) => got.push(*t.0),
                    None => break,
                }
            }
            got.extend(thief.join().unwrap());
            got.extend(sink.0.borrow().iter().copied());
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2]);
        });
    }
}
