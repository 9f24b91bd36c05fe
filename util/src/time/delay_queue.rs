//! [`DelayQueue`]: values that come out of a queue once their deadline
//! has passed.
//!
//! # Design
//!
//! tokio-util keeps its entries in a hierarchical timer wheel of its own,
//! with deadlines rounded up to the millisecond, on top of one tokio
//! `Sleep`. This one keeps them ordered by (deadline, key) in a B-tree,
//! with exact deadlines, on top of one numa_rt [`Sleep`] armed for the
//! earliest: numa_rt's timers already live in a wheel per processor, and a
//! second wheel would only add the cascading wake-ups tokio-util documents.
//! Inserting, resetting and removing cost O(log n); popping an expired entry
//! O(log n). Values sit in a slab; a [`Key`] is an id never reused (a map
//! from ids to slab slots lets [`compact`](DelayQueue::compact) move values
//! without invalidating keys).

use futures_core::Stream;
use numa_rt::time::{sleep_until, Duration, Instant, Sleep};
use slab::Slab;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A queue of values, each returned once its deadline has passed.
///
/// [`insert`](Self::insert) (or [`insert_at`](Self::insert_at)) gives a
/// [`Key`], with which the value can be [removed](Self::remove) or its
/// deadline [reset](Self::reset) before it expires. Expired values come out
/// of [`poll_expired`](Self::poll_expired) (or the `Stream`), earliest
/// deadline first; values with the same deadline in insertion order.
/// When the queue is empty the stream yields `None`, and can be polled
/// again after more inserts.
///
/// Typical use: a cache whose entries expire.
///
/// ```
/// use futures::StreamExt;
/// use numa_rt::time::{Duration, Instant};
/// use numa_rt_util::time::DelayQueue;
///
/// # #[numa_rt::main(max_procs = 1, start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let mut queue = DelayQueue::new();
/// let slow = queue.insert("slow", Duration::from_secs(30));
/// queue.insert("fast", Duration::from_secs(5));
/// queue.reset(&slow, Duration::from_secs(10));
///
/// let first = queue.next().await.unwrap();
/// assert_eq!(first.into_inner(), "fast");
/// let second = queue.next().await.unwrap();
/// assert_eq!(second.key(), slow);
/// assert_eq!(second.deadline(), start + Duration::from_secs(10));
/// assert!(queue.next().await.is_none()); // empty
/// # }
/// ```
///
/// The timer is made on the first poll that needs one, so the queue can be
/// built and filled outside a runtime but must be polled inside one (a
/// numa_rt task, `block_on`, or with a handle entered).
pub struct DelayQueue<T> {
    /// The values.
    slab: Slab<Entry<T>>,
    /// Where each key's value is in `slab`.
    slot_of: HashMap<Key, usize>,
    /// Every value's (deadline, key): the first is the next to expire.
    order: BTreeSet<(Instant, Key)>,
    /// Armed for the earliest deadline while a poll waits for it.
    delay: Option<Pin<Box<Sleep>>>,
    /// The last poller, woken when a change may let it make progress.
    waker: Option<Waker>,
    next_key: u64,
}

/// The most values a queue holds (tokio-util's limit, kept: a larger
/// `reserve` is a mistake better caught than an allocation failure).
pub const MAX_ENTRIES: usize = (1 << 30) - 1;

/// The furthest deadline a queue takes, from now: 2^36 - 1 ms, about 2.2
/// years (tokio-util's wheel's limit, kept so that code tested on tokio
/// behaves the same).
pub const MAX_DELAY: Duration = Duration::from_millis((1 << 36) - 1);

#[track_caller]
fn check_room(len: usize, additional: usize) {
    assert!(
        additional <= MAX_ENTRIES - len,
        "DelayQueue: max entries exceeded ({len} + {additional} > {MAX_ENTRIES})"
    );
}

#[track_caller]
fn check_deadline(when: Instant) {
    let now = Instant::now();
    assert!(
        when.saturating_duration_since(now) <= MAX_DELAY,
        "DelayQueue: invalid deadline, {:?} from now is more than {MAX_DELAY:?}",
        when - now
    );
}

struct Entry<T> {
    value: T,
    deadline: Instant,
    key: Key,
}

/// A value's handle in its [`DelayQueue`] (from [`DelayQueue::insert`]).
///
/// Keys are never reused within a queue: a key whose value has expired or
/// been removed names nothing (the methods that take one panic for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    id: u64,
}

/// A value that left its [`DelayQueue`]: expired
/// ([`poll_expired`](DelayQueue::poll_expired)) or removed.
#[derive(Debug)]
pub struct Expired<T> {
    data: T,
    deadline: Instant,
    key: Key,
}

impl<T> Expired<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        &self.data
    }

    /// The value, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.data
    }

    /// The value, by value.
    pub fn into_inner(self) -> T {
        self.data
    }

    /// Its deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Its key (which no longer names anything in the queue).
    pub fn key(&self) -> Key {
        self.key
    }
}

impl<T> DelayQueue<T> {
    /// An empty queue; nothing is allocated until the first insert.
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_capacity(0)
    }

    /// An empty queue with room for `capacity` values.
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue {
            slab: Slab::with_capacity(capacity),
            slot_of: HashMap::with_capacity(capacity),
            order: BTreeSet::new(),
            delay: None,
            waker: None,
            next_key: 0,
        }
    }

    /// Inserts `value`, to expire at `when` (at once if `when` has passed).
    ///
    /// # Panics
    /// If `when` is more than [`MAX_DELAY`] from now, or the queue holds
    /// [`MAX_ENTRIES`] values.
    #[track_caller]
    pub fn insert_at(&mut self, value: T, when: Instant) -> Key {
        check_room(self.len(), 1);
        check_deadline(when);
        let key = Key { id: self.next_key };
        self.next_key += 1;
        let head_before = self.head();
        let slot = self.slab.insert(Entry {
            value,
            deadline: when,
            key,
        });
        self.slot_of.insert(key, slot);
        self.order.insert((when, key));
        if head_before.is_none_or(|(first, _)| when < first) {
            self.head_changed();
        }
        key
    }

    /// Inserts `value`, to expire `timeout` from now.
    ///
    /// # Panics
    /// If `timeout` is more than [`MAX_DELAY`], or the queue holds
    /// [`MAX_ENTRIES`] values.
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        assert!(
            timeout <= MAX_DELAY,
            "DelayQueue: invalid deadline, {timeout:?} from now is more than {MAX_DELAY:?}"
        );
        self.insert_at(value, Instant::now() + timeout)
    }

    /// The next expired value: `Ready(Some)` once the earliest deadline has
    /// passed, `Ready(None)` if the queue is empty, `Pending` otherwise
    /// (the task is woken when a value expires, or the queue changes so
    /// that it should poll again).
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        let Some((when, key)) = self.head() else {
            self.delay = None;
            return Poll::Ready(None);
        };
        if when > Instant::now() {
            let delay = match &mut self.delay {
                Some(delay) => {
                    if delay.deadline() != when {
                        delay.as_mut().reset(when);
                    }
                    delay
                }
                None => self.delay.insert(Box::pin(sleep_until(when))),
            };
            if delay.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The timer fired: the head has expired.
        }
        Poll::Ready(Some(self.take(&key)))
    }

    /// The earliest (deadline, key).
    fn head(&self) -> Option<(Instant, Key)> {
        self.order.first().copied()
    }

    /// After the earliest deadline changed: move the armed timer to it and
    /// wake the poller (which re-arms, or finds a value already expired).
    fn head_changed(&mut self) {
        match (self.head(), &mut self.delay) {
            (None, _) => self.delay = None,
            (Some((when, _)), Some(delay)) => delay.as_mut().reset(when),
            (Some(_), None) => {}
        }
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    /// Removes `key`'s value, whose key is known to be there.
    fn take(&mut self, key: &Key) -> Expired<T> {
        let slot = self.slot_of.remove(key).expect("a queued key has a slot");
        let entry = self.slab.remove(slot);
        self.order.remove(&(entry.deadline, entry.key));
        Expired {
            data: entry.value,
            deadline: entry.deadline,
            key: entry.key,
        }
    }

    #[track_caller]
    fn slot(&self, key: &Key) -> usize {
        match self.slot_of.get(key) {
            Some(&slot) => slot,
            None => {
                panic!("DelayQueue: invalid key {key:?} (expired, removed, or of another queue)")
            }
        }
    }

    /// `key`'s deadline.
    ///
    /// # Panics
    /// If `key` is not in the queue.
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        self.slab[self.slot(key)].deadline
    }

    /// Removes `key`'s value before it expires.
    ///
    /// # Panics
    /// If `key` is not in the queue.
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        self.slot(key);
        let head_before = self.head();
        let expired = self.take(key);
        if self.head() != head_before || self.is_empty() {
            self.head_changed();
        }
        expired
    }

    /// Removes `key`'s value if it is still in the queue.
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        if self.slot_of.contains_key(key) {
            Some(self.remove(key))
        } else {
            None
        }
    }

    /// Moves `key`'s deadline to `when` (at once if `when` has passed).
    ///
    /// # Panics
    /// If `key` is not in the queue, or `when` is more than [`MAX_DELAY`]
    /// from now.
    #[track_caller]
    pub fn reset_at(&mut self, key: &Key, when: Instant) {
        check_deadline(when);
        let slot = self.slot(key);
        let entry = &mut self.slab[slot];
        self.order.remove(&(entry.deadline, *key));
        entry.deadline = when;
        self.order.insert((when, *key));
        self.head_changed();
    }

    /// Moves `key`'s deadline to `timeout` from now.
    ///
    /// # Panics
    /// If `key` is not in the queue, or `timeout` is more than
    /// [`MAX_DELAY`].
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        assert!(
            timeout <= MAX_DELAY,
            "DelayQueue: invalid deadline, {timeout:?} from now is more than {MAX_DELAY:?}"
        );
        self.reset_at(key, Instant::now() + timeout);
    }

    /// The key that expires next (already expired ones first), without
    /// removing it.
    pub fn peek(&self) -> Option<Key> {
        self.head().map(|(_, key)| key)
    }

    /// Removes every value (and wakes the poller, which then gets `None`).
    pub fn clear(&mut self) {
        self.slab.clear();
        self.slot_of.clear();
        self.order.clear();
        self.head_changed();
    }

    /// How many values the queue holds without reallocating.
    pub fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// The number of values in the queue.
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    /// Makes room for `additional` more values.
    ///
    /// # Panics
    /// If that would be more than [`MAX_ENTRIES`].
    #[track_caller]
    pub fn reserve(&mut self, additional: usize) {
        check_room(self.len(), additional);
        self.slab.reserve(additional);
        self.slot_of.reserve(additional);
    }

    /// Frees the storage it can without moving values (see
    /// [`compact`](Self::compact), which moves them).
    pub fn shrink_to_fit(&mut self) {
        self.slab.shrink_to_fit();
        self.slot_of.shrink_to_fit();
    }

    /// Moves the values together and frees the rest of the storage: the
    /// capacity becomes the length. Keys stay valid.
    pub fn compact(&mut self) {
        let mut packed = Slab::with_capacity(self.slab.len());
        for entry in self.slab.drain() {
            let key = entry.key;
            let slot = packed.insert(entry);
            self.slot_of.insert(key, slot);
        }
        self.slab = packed;
        self.slot_of.shrink_to_fit();
    }
}

impl<T> Default for DelayQueue<T> {
    fn default() -> Self {
        DelayQueue::new()
    }
}

// No value is ever pinned: they sit in the slab and move freely.
impl<T> Unpin for DelayQueue<T> {}

impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// [`DelayQueue::poll_expired`]: `None` while the queue is empty.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}

impl<T: fmt::Debug> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.order.iter().map(|(when, key)| {
                let entry = &self.slab[self.slot_of[key]];
                ((key, when), &entry.value)
            }))
            .finish()
    }
}
