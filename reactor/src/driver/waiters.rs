//! The tasks waiting on one direction of a source, so that a readiness
//! event wakes every one of them (tokio's `ScheduledIo` keeps a list of
//! waiters per direction for the same reason: 50 tasks awaiting `accept`
//! on one shared listener must all be woken as connections arrive).
//!
//! Two kinds of waiter share a list:
//!
//! - A `poll_*` call (`poll_read`, `poll_accept`, …) is *unkeyed*: as in
//!   tokio, only the waker of the most recent such call is kept. It has no
//!   future of its own to name it, so key 0 stands for "the poll caller".
//! - A future made by an `async fn` (`accept`, `readable`, `recv`, …) wraps
//!   its polls in [`WaitFn`], which gives it a key of its own. Its entry is
//!   replaced when it polls again and removed when it is dropped, so a
//!   cancelled wait (a lost `select!` branch, a timeout) leaves nothing
//!   behind.
//!
//! The first waiter lives inline in [`DirWaiters::first`]; only a second
//! concurrent waiter touches the `Vec`, whose capacity is then kept for the
//! next round. The usual single waiter never allocates.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The key of unkeyed (`poll_*`) waiters.
pub(crate) const UNKEYED: u64 = 0;

/// One waiter: its key, the readiness bits it waits for, and its waker
/// (`None` once an event woke it: see [`DirWaiters::take_notified`]).
struct Entry {
    key: u64,
    mask: usize,
    waker: Option<Waker>,
}

/// The waiters of one direction of one source.
#[derive(Default)]
pub(crate) struct DirWaiters {
    /// The first waiter, inline: the common single-waiter case.
    first: Option<Entry>,
    /// Further concurrent waiters (shared listeners, shared `AsyncFd`s).
    rest: Vec<Entry>,
}

impl DirWaiters {
    /// Stores `waker` for `key`, waiting for any of the readiness bits in
    /// `mask`, replacing that key's earlier waker (or its notified mark).
    pub(crate) fn register(&mut self, key: u64, mask: usize, waker: &Waker) {
        let entry = match &mut self.first {
            None => {
                self.first = Some(Entry {
                    key,
                    mask,
                    waker: Some(waker.clone()),
                });
                return;
            }
            Some(e) if e.key == key => Some(e),
            Some(_) => self.rest.iter_mut().find(|e| e.key == key),
        };
        match entry {
            Some(e) => {
                e.mask = mask;
                match &mut e.waker {
                    Some(w) if w.will_wake(waker) => {}
                    w => *w = Some(waker.clone()),
                }
            }
            None => self.rest.push(Entry {
                key,
                mask,
                waker: Some(waker.clone()),
            }),
        }
    }

    /// Forgets `key`'s entry (waker or notified mark), if it is stored.
    pub(crate) fn remove(&mut self, key: u64) {
        if matches!(&self.first, Some(e) if e.key == key) {
            self.first = self.rest.pop();
        } else if let Some(i) = self.rest.iter().position(|e| e.key == key) {
            self.rest.swap_remove(i);
        }
    }

    /// Moves into `out` the wakers of the waiters whose mask meets `bits`
    /// (every waiter when `all`: the source is closing). A keyed waiter
    /// keeps its entry, marked notified, until its future polls again or is
    /// dropped; the unkeyed entry leaves.
    pub(crate) fn take_matching(&mut self, bits: usize, all: bool, out: &mut Vec<Waker>) {
        let mut unkeyed_woken = false;
        for e in self.first.iter_mut().chain(self.rest.iter_mut()) {
            if all || e.mask & bits != 0 {
                if let Some(w) = e.waker.take() {
                    out.push(w);
                    unkeyed_woken |= e.key == UNKEYED;
                }
            }
        }
        if unkeyed_woken {
            self.remove(UNKEYED);
        }
    }

    /// Whether an event woke `key`'s waiter since it last registered; the
    /// mark is consumed (the entry leaves).
    pub(crate) fn take_notified(&mut self, key: u64) -> bool {
        let notified = self
            .first
            .iter()
            .chain(self.rest.iter())
            .any(|e| e.key == key && e.waker.is_none());
        if notified {
            self.remove(key);
        }
        notified
    }

    /// Whether no waker is stored (notified marks do not count).
    pub(crate) fn is_empty(&self) -> bool {
        !self
            .first
            .iter()
            .chain(self.rest.iter())
            .any(|e| e.waker.is_some())
    }
}

/// A source whose waiter lists a [`WaitFn`] leaves on drop (the I/O
/// driver's `ScheduledIo`; a trait, so that this module need not import it).
pub(crate) trait WaiterSource: Send + Sync {
    /// Removes the waker stored under `key`, if any.
    fn remove_waiter(&self, key: u64);
}

thread_local! {
    /// The key of the [`WaitFn`] being polled on this thread (`UNKEYED`
    /// outside one), read by `ScheduledIo::poll_ready`.
    static KEY: Cell<u64> = const { Cell::new(UNKEYED) };
    /// The source that poll stored a keyed waker with, handed back to the
    /// `WaitFn` so that its drop can remove the entry.
    static STORED: RefCell<Option<Arc<dyn WaiterSource>>> = const { RefCell::new(None) };
}

/// The key under which a waker polled on this thread now should be stored.
pub(crate) fn current_key() -> u64 {
    KEY.with(Cell::get)
}

/// Tells the polling [`WaitFn`] (if any) that its waker is stored in `io`.
pub(crate) fn stored_in<S: WaiterSource + 'static>(io: &Arc<S>) {
    if current_key() != UNKEYED {
        STORED.with(|s| {
            let mut s = s.borrow_mut();
            if !matches!(&*s, Some(prev) if same(prev, io)) {
                *s = Some(io.clone());
            }
        });
    }
}

/// Whether `a` and `b` are the same source (addresses only: a `dyn`
/// pointer's vtable may differ between codegen units).
fn same<S: ?Sized>(a: &Arc<dyn WaiterSource>, b: &Arc<S>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// `std::future::poll_fn` for the `async fn`s that wait on a source: their
/// wakers are kept beside those of other tasks waiting on the same source,
/// and removed when the future is dropped (see the module docs).
pub(crate) fn wait_fn<T, F: FnMut(&mut Context<'_>) -> Poll<T>>(f: F) -> WaitFn<F> {
    WaitFn {
        f,
        key: UNKEYED,
        stored: None,
    }
}

pub(crate) struct WaitFn<F> {
    f: F,
    /// Assigned on the first poll; unique for the process's life.
    key: u64,
    /// The source holding this future's waker, to remove it from on drop.
    stored: Option<Arc<dyn WaiterSource>>,
}

// `f` is only ever called through `&mut`, never pinned.
impl<F> Unpin for WaitFn<F> {}

/// Restores the enclosing `WaitFn`'s key (a nested or panicking poll).
struct Restore(u64, Option<Arc<dyn WaiterSource>>);

impl Drop for Restore {
    fn drop(&mut self) {
        KEY.with(|k| k.set(self.0));
        STORED.with(|s| *s.borrow_mut() = self.1.take());
    }
}

impl<T, F: FnMut(&mut Context<'_>) -> Poll<T>> Future for WaitFn<F> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let this = self.get_mut();
        if this.key == UNKEYED {
            // Relaxed: only uniqueness matters.
            this.key = NEXT.fetch_add(1, Relaxed);
        }
        let outer = KEY.with(|k| k.replace(this.key));
        let outer_stored = STORED.with(|s| s.borrow_mut().take());
        let restore = Restore(outer, outer_stored);
        let r = (this.f)(cx);
        if let Some(io) = STORED.with(|s| s.borrow_mut().take()) {
            match &this.stored {
                Some(prev) if same(prev, &io) => {}
                prev => {
                    if let Some(prev) = prev {
                        prev.remove_waiter(this.key);
                    }
                    this.stored = Some(io);
                }
            }
        }
        drop(restore);
        r
    }
}

impl<F> Drop for WaitFn<F> {
    fn drop(&mut self) {
        if let Some(io) = self.stored.take() {
            io.remove_waiter(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn keys_replace_their_own_entry_and_leave_on_remove() {
        const R: usize = 1;
        let a = Waker::from(Arc::new(Noop));
        let b = Waker::from(Arc::new(Noop));
        let mut w = DirWaiters::default();
        w.register(1, R, &a);
        w.register(2, R, &b);
        w.register(1, R, &b);
        w.register(UNKEYED, R, &a);
        w.register(UNKEYED, R, &b);
        let mut out = Vec::new();
        w.take_matching(R, false, &mut out);
        assert_eq!(out.len(), 3, "one entry per key");
        assert!(w.is_empty(), "notified marks hold no waker");
        assert!(w.take_notified(1), "key 1 was woken");
        assert!(!w.take_notified(1), "the mark is consumed");
        assert!(!w.take_notified(UNKEYED), "the unkeyed entry left");
        w.remove(2);
        w.register(1, R, &a);
        w.register(2, R, &a);
        w.remove(1);
        assert!(!w.is_empty(), "the second waiter moves up");
        w.remove(2);
        assert!(w.is_empty());
    }

    #[test]
    fn only_waiters_whose_mask_meets_the_event_are_woken() {
        let a = Waker::from(Arc::new(Noop));
        let mut w = DirWaiters::default();
        w.register(1, 0b01, &a);
        w.register(2, 0b10, &a);
        let mut out = Vec::new();
        w.take_matching(0b10, false, &mut out);
        assert_eq!(out.len(), 1);
        assert!(!w.take_notified(1), "key 1 still waits");
        assert!(w.take_notified(2));
        w.take_matching(0, true, &mut out);
        assert_eq!(out.len(), 2, "closing wakes everyone");
    }

    #[test]
    fn a_dropped_wait_leaves_no_waker_behind() {
        use super::super::io::{Direction, Kind, ScheduledIo};
        let io = Arc::new(ScheduledIo::new(Kind::Listener));
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        // A new source starts ready; clear that so the wait stores a waker.
        let Poll::Ready(Ok(ev)) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!()
        };
        io.clear_readiness(ev);
        let mut a = wait_fn(|cx| io.poll_ready(cx, Direction::Read));
        let mut b = wait_fn(|cx| io.poll_ready(cx, Direction::Read));
        assert!(Pin::new(&mut a).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut b).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut a).poll(&mut cx).is_pending(), "re-polled");
        drop(a);
        assert!(io.has_waiters(), "b still waits");
        drop(b);
        assert!(!io.has_waiters(), "both entries left with their futures");
        assert_eq!(current_key(), UNKEYED, "the key is restored after a poll");
    }
}
