//! Per-source readiness: what the poller learned about a socket, and which
//! tasks wait for it.
//!
//! Like tokio's `ScheduledIo`, a source keeps one readiness word and a list
//! of waiters per direction (read, write; see [`super::waiters`]): an event
//! wakes every task waiting in its direction. mio is edge-triggered, so readiness is
//! remembered here until an operation hits `WouldBlock`; a tick counter in the
//! same word stops a stale `WouldBlock` from erasing an event that arrived
//! after the operation started.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::waiters::{self, DirWaiters};

pub(crate) const READABLE: usize = 1 << 0;
pub(crate) const WRITABLE: usize = 1 << 1;
pub(crate) const READ_CLOSED: usize = 1 << 2;
pub(crate) const WRITE_CLOSED: usize = 1 << 3;
pub(crate) const ERROR: usize = 1 << 4;
/// The runtime shut down: every operation fails.
pub(crate) const SHUTDOWN: usize = 1 << 5;
/// The registration was dropped: waiters (if any) fail.
pub(crate) const CLOSED: usize = 1 << 6;
/// Urgent (out-of-band) data: `EPOLLPRI`.
pub(crate) const PRIORITY: usize = 1 << 7;
/// The bits a waiter in the read list may wait for (read, priority and
/// error interest all wait there; the write list holds write interest).
const READ_LIST: usize = READABLE | READ_CLOSED | PRIORITY | ERROR;
const BITS: usize = 0xffff;
const TICK_SHIFT: u32 = 16;

/// Which half of a source an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    /// The readiness bits that let an operation in this direction proceed.
    /// (`EPOLLERR` sets `READABLE | WRITABLE` as well as `ERROR`, so an
    /// operation still runs and reports the error; `ERROR` itself is not
    /// here, or a pending error would keep the direction ready forever.)
    pub(crate) fn mask(self) -> usize {
        match self {
            Direction::Read => READABLE | READ_CLOSED,
            Direction::Write => WRITABLE | WRITE_CLOSED,
        }
    }
}

/// A snapshot of readiness handed to an operation, used to clear it later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadyEvent {
    tick: usize,
    bits: usize,
}

impl ReadyEvent {
    /// The readiness bits seen (`READABLE` .. `PRIORITY`), for the public `Ready`.
    pub(crate) fn bits(&self) -> usize {
        self.bits
    }

    /// The same event, for the readiness bits `bits` only (the guards'
    /// `clear_ready_matching`).
    pub(crate) fn with_bits(self, bits: usize) -> ReadyEvent {
        ReadyEvent { bits, ..self }
    }
}

/// Where a fired waker goes in the dispatch order (Vyukov's soft priorities).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A connected socket: write wakers first, then read wakers.
    Stream,
    /// A listener: its (read) wakers go last.
    Listener,
}

#[derive(Default)]
struct Waiters {
    reader: DirWaiters,
    writer: DirWaiters,
}

/// Readiness and waiters of one registered source.
pub(crate) struct ScheduledIo {
    /// Readiness bits (low 16) and the event tick (the rest).
    readiness: AtomicUsize,
    waiters: Mutex<Waiters>,
    pub(crate) kind: Kind,
}

/// Wakers collected while dispatching one poll, fired in priority order.
#[derive(Default)]
pub(crate) struct Wakeups {
    pub(crate) writes: Vec<Waker>,
    pub(crate) reads: Vec<Waker>,
    pub(crate) accepts: Vec<Waker>,
}

impl Wakeups {
    /// Whether no waker was collected.
    pub(crate) fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.reads.is_empty() && self.accepts.is_empty()
    }

    /// Wakes writers, then readers, then acceptors, on the calling thread.
    /// A waker that panics is reported and the others still fire (see
    /// `crate::fault`).
    pub(crate) fn fire(&mut self) {
        for w in self
            .writes
            .drain(..)
            .chain(self.reads.drain(..))
            .chain(self.accepts.drain(..))
        {
            crate::fault::wake(w, "an I/O source's waker");
        }
    }
}

/// What I/O on a source of a runtime that has shut down fails with.
pub(crate) const SHUTDOWN_MESSAGE: &str = "numa_rt runtime has shut down";

pub(crate) fn shutdown_error() -> io::Error {
    io::Error::other(SHUTDOWN_MESSAGE)
}

/// Whether `err` is the error `shutdown_error` makes (tokio's `is_rt_shutdown_err`).
pub fn is_shutdown_error(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::Other
        && err
            .get_ref()
            .is_some_and(|e| e.source().is_none() && e.to_string() == SHUTDOWN_MESSAGE)
}

impl ScheduledIo {
    /// A source assumed ready both ways: the first operation tries the
    /// syscall at once instead of waiting for the registration's first event
    /// (what a `PollEvented` starts with unless told otherwise).
    #[cfg(test)]
    pub(crate) fn new(kind: Kind) -> ScheduledIo {
        ScheduledIo::with_readiness(kind, READABLE | WRITABLE)
    }

    /// A source that is ready in no direction until the poller says so:
    /// edge-triggered `EPOLL_CTL_ADD` reports what is ready at once, so the
    /// first event tells the truth (a socket is writable, not readable).
    #[cfg(test)]
    pub(crate) fn reported(kind: Kind) -> ScheduledIo {
        ScheduledIo::with_readiness(kind, 0)
    }

    /// A source that starts with the readiness bits `bits`.
    pub(crate) fn with_readiness(kind: Kind, bits: usize) -> ScheduledIo {
        ScheduledIo {
            readiness: AtomicUsize::new(bits),
            waiters: Mutex::new(Waiters::default()),
            kind,
        }
    }

    /// Records `bits` from an event (bumping the tick) and moves the wakers
    /// that can now proceed into `out`.
    pub(crate) fn set_readiness(&self, bits: usize, out: &mut Wakeups) {
        // Release: publishes the readiness to the task that observes it in
        // `poll_ready` (Acquire load); the waiters mutex below orders this
        // store before that task's re-check if it is registering concurrently.
        let _ = self
            .readiness
            .fetch_update(Ordering::Release, Ordering::Relaxed, |cur| {
                let tick = (cur >> TICK_SHIFT).wrapping_add(1);
                Some((tick << TICK_SHIFT) | ((cur | bits) & BITS))
            });
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        let closing = bits & (SHUTDOWN | CLOSED) != 0;
        w.writer.take_matching(bits, closing, &mut out.writes);
        let reads = match self.kind {
            Kind::Stream => &mut out.reads,
            Kind::Listener => &mut out.accepts,
        };
        w.reader.take_matching(bits, closing, reads);
    }

    fn check(cur: usize, mask: usize) -> Option<io::Result<ReadyEvent>> {
        if cur & SHUTDOWN != 0 {
            return Some(Err(shutdown_error()));
        }
        if cur & CLOSED != 0 {
            return Some(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the socket's registration was dropped",
            )));
        }
        let bits = cur & mask;
        (bits != 0).then_some(Ok(ReadyEvent {
            tick: cur >> TICK_SHIFT,
            bits,
        }))
    }

    /// Whether a task waits on this source (a stored reader or writer waker).
    pub(crate) fn has_waiters(&self) -> bool {
        let w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        !w.reader.is_empty() || !w.writer.is_empty()
    }

    /// Ready when the direction has readiness; otherwise stores the waker,
    /// beside those of other tasks waiting in `dir` (under the polling
    /// `WaitFn`'s key, or as the one unkeyed `poll_*` waiter).
    pub(crate) fn poll_ready(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        self.poll_mask(cx, dir.mask(), false)
    }

    /// Ready when any of the readiness bits in `mask` is set; otherwise
    /// stores the waker (in the write list for write-only interest, else in
    /// the read list), to be woken by an event that meets `mask`.
    ///
    /// With `woken_is_ready`, a keyed waiter that such an event woke is
    /// ready on its next poll even if another task has cleared the
    /// readiness since (the event then reads as empty): as in tokio, every
    /// task awaiting `AsyncFd::readable` sees the event that woke them all.
    pub(crate) fn poll_mask(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        mask: usize,
        woken_is_ready: bool,
    ) -> Poll<io::Result<ReadyEvent>> {
        // Acquire pairs with the Release in `set_readiness`.
        if let Some(r) = Self::check(self.readiness.load(Ordering::Acquire), mask) {
            return Poll::Ready(r);
        }
        let key = waiters::current_key();
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        let list = if mask & READ_LIST == 0 {
            &mut w.writer
        } else {
            &mut w.reader
        };
        if woken_is_ready && key != waiters::UNKEYED && list.take_notified(key) {
            let cur = self.readiness.load(Ordering::Acquire);
            drop(w);
            return Poll::Ready(Self::check(cur, mask).unwrap_or(Ok(ReadyEvent {
                tick: cur >> TICK_SHIFT,
                bits: 0,
            })));
        }
        list.register(key, mask, cx.waker());
        // Re-check under the lock: an event dispatched before we took the
        // lock is visible now (its store precedes its own lock of `waiters`);
        // one dispatched after will find the waker stored above.
        let r = Self::check(self.readiness.load(Ordering::Acquire), mask);
        drop(w);
        waiters::stored_in(self);
        match r {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }

    /// The readiness in `dir` right now, without storing a waker (`None`
    /// when not ready): what the `try_*` operations check before their
    /// syscall.
    pub(crate) fn ready_now(&self, dir: Direction) -> Option<io::Result<ReadyEvent>> {
        self.ready_now_mask(dir.mask())
    }

    /// [`ready_now`](Self::ready_now) for any readiness bits.
    pub(crate) fn ready_now_mask(&self, mask: usize) -> Option<io::Result<ReadyEvent>> {
        // Acquire pairs with the Release in `set_readiness`.
        Self::check(self.readiness.load(Ordering::Acquire), mask)
    }

    /// Forgets the readiness `ev` reported (after `WouldBlock`), unless an
    /// event arrived since (the tick moved on).
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        // The closed states are final: never cleared.
        let clear = ev.bits & (READABLE | WRITABLE | PRIORITY | ERROR);
        // Relaxed suffices: only bits this thread already observed are
        // cleared, and a concurrent event changes the tick, failing the CAS.
        let _ = self
            .readiness
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (cur >> TICK_SHIFT == ev.tick).then_some(cur & !clear)
            });
    }
}

/// A slot table of a P's registered sources; tokens carry a generation so a
/// stale event for a freed slot is ignored.
#[derive(Default)]
pub(crate) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Default)]
struct Slot {
    generation: u32,
    io: Option<Arc<ScheduledIo>>,
}

impl Slab {
    /// Stores `io`, returning its token.
    pub(crate) fn insert(&mut self, io: Arc<ScheduledIo>) -> usize {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.generation = slot.generation.wrapping_add(1);
        slot.io = Some(io);
        self.len += 1;
        ((slot.generation as usize) << 32) | index
    }

    pub(crate) fn get(&self, token: usize) -> Option<&Arc<ScheduledIo>> {
        let slot = self.slots.get(token & 0xffff_ffff)?;
        (slot.generation as usize == token >> 32).then_some(slot.io.as_ref()?)
    }

    pub(crate) fn remove(&mut self, token: usize) -> Option<Arc<ScheduledIo>> {
        let index = token & 0xffff_ffff;
        let slot = self.slots.get_mut(index)?;
        if slot.generation as usize != token >> 32 {
            return None;
        }
        let io = slot.io.take()?;
        self.free.push(index as u32);
        self.len -= 1;
        Some(io)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<ScheduledIo>> {
        self.slots.iter().filter_map(|s| s.io.as_ref())
    }
}

impl waiters::WaiterSource for ScheduledIo {
    /// Forgets the wakers a dropped [`waiters::WaitFn`] stored under `key`.
    fn remove_waiter(&self, key: u64) {
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        w.reader.remove(key);
        w.writer.remove(key);
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
    fn slab_tokens_go_stale_when_a_slot_is_reused() {
        let mut slab = Slab::default();
        let a = slab.insert(Arc::new(ScheduledIo::new(Kind::Stream)));
        assert!(slab.get(a).is_some());
        assert!(slab.remove(a).is_some());
        let b = slab.insert(Arc::new(ScheduledIo::new(Kind::Stream)));
        assert_eq!(a & 0xffff_ffff, b & 0xffff_ffff, "the slot is reused");
        assert!(slab.get(a).is_none(), "an old token no longer resolves");
        assert!(slab.remove(a).is_none());
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn a_stale_would_block_does_not_erase_a_newer_event() {
        let io = Arc::new(ScheduledIo::new(Kind::Stream));
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let Poll::Ready(Ok(ev)) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!()
        };
        // An event arrives between the operation's WouldBlock and the clear.
        io.set_readiness(READABLE, &mut Wakeups::default());
        io.clear_readiness(ev);
        assert!(
            io.poll_ready(&mut cx, Direction::Read).is_ready(),
            "the new event survives"
        );
        let Poll::Ready(Ok(ev)) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!()
        };
        io.clear_readiness(ev);
        assert!(io.poll_ready(&mut cx, Direction::Read).is_pending());
    }

    #[test]
    fn a_woken_waiter_is_ready_once_even_if_the_readiness_was_cleared() {
        use super::super::waiters::wait_fn;
        use std::future::Future;
        use std::pin::Pin;
        let io = Arc::new(ScheduledIo::reported(Kind::Stream));
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let read = Direction::Read.mask();
        let mut a = wait_fn(|cx| io.poll_mask(cx, read, true));
        let mut b = wait_fn(|cx| io.poll_mask(cx, read, true));
        let mut error = wait_fn(|cx| io.poll_mask(cx, ERROR, true));
        assert!(
            Pin::new(&mut a).poll(&mut cx).is_pending(),
            "reported: not ready"
        );
        assert!(Pin::new(&mut b).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut error).poll(&mut cx).is_pending());
        let mut out = Wakeups::default();
        io.set_readiness(READABLE, &mut out);
        assert_eq!(out.reads.len(), 2, "both readers, not the error waiter");
        let Poll::Ready(Ok(ev)) = Pin::new(&mut a).poll(&mut cx) else {
            panic!("a sees the event")
        };
        io.clear_readiness(ev);
        let Poll::Ready(Ok(ev)) = Pin::new(&mut b).poll(&mut cx) else {
            panic!("b was woken by the event a cleared")
        };
        assert_eq!(ev.bits(), 0, "b's event reads as empty");
        assert!(
            Pin::new(&mut error).poll(&mut cx).is_pending(),
            "readable does not wake an error wait"
        );
        let mut c = wait_fn(|cx| io.poll_mask(cx, read, true));
        assert!(
            Pin::new(&mut c).poll(&mut cx).is_pending(),
            "a new wait waits"
        );
    }

    #[test]
    fn wakers_fire_writes_then_reads_then_accepts() {
        use std::sync::Mutex as StdMutex;
        struct Log(Arc<StdMutex<Vec<&'static str>>>, &'static str);
        impl Wake for Log {
            fn wake(self: Arc<Self>) {
                self.0.lock().unwrap().push(self.1);
            }
        }
        let log = Arc::new(StdMutex::new(Vec::new()));
        let waker = |name| Waker::from(Arc::new(Log(log.clone(), name)));
        let listener = Arc::new(ScheduledIo::new(Kind::Listener));
        let stream = Arc::new(ScheduledIo::new(Kind::Stream));
        // Start from "not ready" so the wakers get stored.
        for (io, dir) in [
            (&listener, Direction::Read),
            (&stream, Direction::Read),
            (&stream, Direction::Write),
        ] {
            let Poll::Ready(Ok(ev)) = io.poll_ready(&mut Context::from_waker(&waker("x")), dir)
            else {
                panic!()
            };
            io.clear_readiness(ev);
        }
        assert!(listener
            .poll_ready(&mut Context::from_waker(&waker("accept")), Direction::Read)
            .is_pending());
        assert!(stream
            .poll_ready(&mut Context::from_waker(&waker("read")), Direction::Read)
            .is_pending());
        assert!(stream
            .poll_ready(&mut Context::from_waker(&waker("write")), Direction::Write)
            .is_pending());
        let mut out = Wakeups::default();
        listener.set_readiness(READABLE, &mut out);
        stream.set_readiness(READABLE | WRITABLE, &mut out);
        out.fire();
        assert_eq!(*log.lock().unwrap(), ["write", "read", "accept"]);
    }
}
