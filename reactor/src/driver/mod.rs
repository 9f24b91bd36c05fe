//! The per-P drivers: each processor (P) owns an io poller and a timer set,
//! and an idle machine (M) parks in its P's driver.
//!
//! # Design
//!
//! Vyukov's NUMA scheduler gives every P its own netpoller so that a task's
//! I/O lives where the task runs. tokio tried exactly this in 2018 (a reactor
//! per worker) and reverted to one shared driver in 2019: an event on the
//! reactor of a worker that is busy inside a long poll sat there until that
//! worker came back. numa_rt keeps per-P pollers and fixes that problem with
//! two levels of epoll.
//!
//! ## Per P
//! - An **io poller**: a `mio::Poll` (edge-triggered epoll). Sources register
//!   lazily, on first poll, with the poller of the P that polls them (or a P
//!   chosen round-robin outside a worker). Its `Registry` is cloned so
//!   registering never waits for a thread that is polling.
//! - A **timer set** ([`timers`]) and a **timerfd** armed to its earliest
//!   deadline, registered in the io poller. A due timer is therefore an io
//!   event like any other, visible to whoever watches that poller.
//! - A **park epoll** (raw, level-triggered, [`crate::sys`]) containing the
//!   P's own unpark eventfd, its own io poller's epoll fd, and the io poller
//!   epoll fds of every other P of the same node. This is the only place an
//!   idle M blocks.
//!
//! Nesting is exactly one level (park epolls watch io epolls; io epolls watch
//! sockets and timerfds), so the graph has no cycle and stays far below the
//! kernel's nesting limit.
//!
//! ## Park, poll_now and helping
//! [`Driver::park`] blocks in the P's park epoll. When it returns:
//! - the unpark eventfd is reset;
//! - if the P's own io poller is readable, the M locks it, polls it with a
//!   zero timeout, releases it, and fires the wakers;
//! - if **another** P's io poller `i` is readable, P_i's M is busy (or about
//!   to drain it): the parked M *helps*. It skips P_i if P_i's own M is parked
//!   (that M was woken by the same event and brings the tasks home), otherwise
//!   it try-locks P_i's poller (if someone holds it, they are draining it right
//!   now), polls it with a zero timeout, releases it, and fires the wakers and
//!   P_i's due timers **on its own thread**, so the woken tasks run on the
//!   helper's P. That is the promptness guarantee the issue asks for: an event
//!   or a due timer on a busy P is handled by any idle M of the node.
//!
//! Wakers are never called under a lock; one dispatch fires due timers first
//! (Go runs timers before netpoll), then write-readiness wakers, then read,
//! then listener (accept) wakers: Vyukov's soft priorities, and since the
//! executor queues the wakes in order, dispatch order is run order.
//!
//! [`Driver::poll_now`] (every `event_interval` ticks of a busy P) polls only
//! the P's own poller, with a try-lock, plus its due timers: one syscall.
//!
//! ## No wake-one
//! The plan was to add the io epolls to the park epolls with `EPOLLEXCLUSIVE`,
//! so one event wakes one parked M. Linux refuses that (`EINVAL`) when the
//! target is itself an epoll instance. So an event on P_i's poller wakes every
//! M parked in P_i's node. The losers find the poller locked or drained
//! (level-triggered: no longer readable) and block again; the cost is one
//! spurious wake-up per parked M of the node per burst of events, bounded by
//! the node's P count, and it only arises while M's are idle. The owner-parked
//! rule above keeps tasks home when their own M is idle.
//!
//! ## Rejected alternatives
//! - **One shared reactor** (tokio's choice since 2019): one epoll, so every
//!   wake-up crosses threads and every registration contends on one driver; it
//!   loses "a connection lives where its task runs" and does not scale across
//!   NUMA nodes.
//! - **A dedicated reactor thread**: an extra hop (and a context switch) on
//!   every event, and a thread the issue forbids.
//! - **Polling every P's poller from every idle M**: O(P) syscalls per park,
//!   and a parked M cannot block on several epolls at once anyway.
//! - **A runtime-level epoll nested inside each P's epoll** (the io pollers
//!   inside it, it inside each P's): the P's epoll would both contain and be
//!   contained by the same graph, a cycle the kernel rejects with `ELOOP`.
//! - **tokio's 2018 per-worker reactors**: readiness stuck behind a busy
//!   worker, the very problem the park epolls solve.
//!
//! ## Shutdown
//! [`Reactor::shutdown`] marks every source shut down and wakes its waiters
//! (their next poll fails with "numa_rt runtime has shut down"), drops every
//! timer's waker without waking it (the executor drops those tasks), refuses
//! new registrations and timers, and unparks every driver. All descriptors are
//! owned and close when the last clone of the reactor (and every socket that
//! registered with it) is gone.

pub(crate) mod io;
mod notify;
pub(crate) mod registration;
pub(crate) mod timers;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Registry, Token};

use self::io::{Slab, Wakeups};
use self::timers::Timers;
use crate::sys;

/// The mio token of each P's timerfd (slab tokens never reach it).
const TIMER_TOKEN: Token = Token(usize::MAX);
/// The park epoll tag of the unpark eventfd (P tags are P indexes).
const UNPARK_TAG: u64 = u64::MAX;
/// Events taken from an io poller per drain.
const EVENTS_PER_DRAIN: usize = 256;

/// The runtime-wide set of per-P drivers. Cheap to clone.
#[derive(Clone)]
pub struct Reactor {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) ps: Box<[PState]>,
    /// Round-robin cursor for registrations made outside a worker.
    next_p: AtomicUsize,
    shutdown: AtomicBool,
}

struct IoPoller {
    poll: Poll,
    events: Events,
}

/// Everything one P owns.
pub(crate) struct PState {
    io: Mutex<IoPoller>,
    pub(crate) registry: Registry,
    pub(crate) sources: Mutex<Slab>,
    pub(crate) timers: Timers,
    park: OwnedFd,
    unpark: OwnedFd,
    /// Set by `unpark` before signalling the eventfd, cleared by the parked M.
    notified: notify::Notify,
    /// True while the owner M blocks in the park epoll (helpers then skip it).
    parked: AtomicBool,
    /// The P's indexes this park epoll watches (same node, itself included).
    watched: usize,
}

impl Reactor {
    /// Builds the drivers of `procs` processors, all in one node.
    pub fn new(procs: usize) -> std::io::Result<Reactor> {
        Reactor::with_nodes(&vec![0; procs.max(1)])
    }

    /// Builds one driver per entry of `node_of_p` (the NUMA node of each P).
    /// A P's park epoll watches the io pollers of the P's of its own node, so
    /// idle M's help busy P's of their node only.
    pub fn with_nodes(node_of_p: &[usize]) -> std::io::Result<Reactor> {
        assert!(!node_of_p.is_empty(), "a reactor needs at least one P");
        let mut ps = Vec::with_capacity(node_of_p.len());
        for _ in node_of_p {
            let poll = Poll::new()?;
            let registry = poll.registry().try_clone()?;
            let timerfd = sys::timerfd()?;
            registry.register(
                &mut mio::unix::SourceFd(&timerfd.as_raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )?;
            let park = sys::epoll_create()?;
            let unpark = sys::eventfd()?;
            sys::epoll_add_level(&park, unpark.as_raw_fd(), UNPARK_TAG)?;
            ps.push(PState {
                io: Mutex::new(IoPoller {
                    poll,
                    events: Events::with_capacity(EVENTS_PER_DRAIN),
                }),
                registry,
                sources: Mutex::new(Slab::default()),
                timers: Timers::new(timerfd),
                park,
                unpark,
                notified: notify::Notify::new(),
                parked: AtomicBool::new(false),
                watched: 0,
            });
        }
        for (j, node) in node_of_p.iter().enumerate() {
            for (i, other) in node_of_p.iter().enumerate() {
                if node == other {
                    let io_fd = ps[i]
                        .io
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .poll
                        .as_raw_fd();
                    sys::epoll_add_level(&ps[j].park, io_fd, i as u64)?;
                    ps[j].watched += 1;
                }
            }
        }
        Ok(Reactor {
            shared: Arc::new(Shared {
                ps: ps.into_boxed_slice(),
                next_p: AtomicUsize::new(0),
                shutdown: AtomicBool::new(false),
            }),
        })
    }

    /// The number of P's.
    pub fn procs(&self) -> usize {
        self.shared.ps.len()
    }

    /// The driver of P `index`; called once per P when the runtime is built.
    pub fn driver(&self, index: usize) -> Driver {
        assert!(index < self.procs(), "P {index} out of range");
        let watched = self.shared.ps[index].watched;
        Driver {
            shared: self.shared.clone(),
            index,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; watched + 1],
            tags: Vec::with_capacity(watched + 1),
            wakeups: Wakeups::default(),
            timer_wakers: Vec::new(),
        }
    }

    /// Closes every driver: pending I/O fails, timers are dropped.
    pub fn shutdown(&self) {
        // SeqCst: registrations check the flag under the sources lock; taking
        // every sources lock below after this store orders the two.
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for p in self.shared.ps.iter() {
            let mut wakeups = Wakeups::default();
            {
                let sources = p.sources.lock().unwrap_or_else(|e| e.into_inner());
                for io in sources.iter() {
                    io.set_readiness(io::SHUTDOWN, &mut wakeups);
                }
            }
            wakeups.fire();
            p.timers.shutdown();
            p.unpark();
        }
    }

    /// Whether [`Reactor::shutdown`] was called.
    pub fn is_shutdown(&self) -> bool {
        // Relaxed: advisory; the shutdown protocol itself is ordered by locks.
        self.shared.shutdown.load(Ordering::Relaxed)
    }

    /// Diagnostics: sources currently registered across all P's.
    pub fn registered_sources(&self) -> usize {
        let lock = |p: &PState| p.sources.lock().unwrap_or_else(|e| e.into_inner()).len();
        self.shared.ps.iter().map(lock).sum()
    }

    /// Diagnostics: timers currently pending across all P's.
    pub fn pending_timers(&self) -> usize {
        self.shared.ps.iter().map(|p| p.timers.len()).sum()
    }

    /// The P new sources and timers of this thread go to: the thread's own P,
    /// or one chosen round-robin when the thread holds none.
    pub(crate) fn pick_p(&self) -> usize {
        let n = self.procs();
        match crate::context::current_p() {
            Some(p) if p < n => p,
            // Relaxed: only spreads load; any interleaving is acceptable.
            _ => self.shared.next_p.fetch_add(1, Ordering::Relaxed) % n,
        }
    }
}

impl Shared {
    pub(crate) fn is_shutdown(&self) -> bool {
        // SeqCst pairs with the store in `Reactor::shutdown` (see there).
        self.shutdown.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("procs", &self.procs())
            .finish_non_exhaustive()
    }
}

impl PState {
    fn unpark(&self) {
        // The orderings and the protocol are in `notify`.
        self.notified.unpark(|| sys::eventfd_signal(&self.unpark));
    }

    /// Polls the io poller (whose lock is held) without blocking and collects
    /// wakers; returns whether the timerfd fired.
    fn drain(&self, mut io: std::sync::MutexGuard<'_, IoPoller>, out: &mut Wakeups) -> bool {
        let IoPoller { poll, events } = &mut *io;
        if let Err(e) = poll.poll(events, Some(Duration::ZERO)) {
            // EINTR: nothing lost, the events stay queued for the next drain.
            debug_assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "epoll_wait: {e}");
            return false;
        }
        let mut timer = false;
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events.iter() {
            if ev.token() == TIMER_TOKEN {
                timer = true;
                continue;
            }
            let Some(sio) = sources.get(ev.token().0) else {
                continue;
            };
            let mut bits = 0;
            if ev.is_readable() {
                bits |= io::READABLE;
            }
            if ev.is_writable() {
                bits |= io::WRITABLE;
            }
            if ev.is_read_closed() {
                bits |= io::READ_CLOSED;
            }
            if ev.is_write_closed() {
                bits |= io::WRITE_CLOSED;
            }
            if ev.is_error() {
                // Let both directions retry: the operation reports the error.
                bits |= io::READABLE | io::WRITABLE;
            }
            sio.set_readiness(bits, out);
        }
        drop(sources);
        drop(io);
        if timer {
            sys::drain_counter(self.timers.timerfd());
        }
        timer
    }
}

/// One P's poller and timers. Owned by whichever M holds the P.
pub struct Driver {
    shared: Arc<Shared>,
    index: usize,
    buf: Vec<libc::epoll_event>,
    tags: Vec<u64>,
    wakeups: Wakeups,
    timer_wakers: Vec<Waker>,
}

/// Wakes the M parked in a [`Driver`]; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Unparker {
    shared: Arc<Shared>,
    index: usize,
}

/// What helping another P's poller achieved.
enum Help {
    Drained,
    /// Someone else holds or owns it right now; it is being handled.
    Busy,
}

impl Driver {
    /// The index of this driver's P.
    pub fn index(&self) -> usize {
        self.index
    }

    /// A handle that wakes this driver's [`Driver::park`].
    pub fn unparker(&self) -> Unparker {
        Unparker {
            shared: self.shared.clone(),
            index: self.index,
        }
    }

    /// The earliest pending timer of this P.
    pub fn next_timer(&self) -> Option<Instant> {
        self.me().timers.next_deadline()
    }

    fn me(&self) -> &PState {
        &self.shared.ps[self.index]
    }

    /// Blocks until unparked, an I/O event, a due timer (of this P or, when
    /// their M's are busy, of the other P's of the node) or `timeout`, then
    /// fires what is ready on the calling thread.
    pub fn park(&mut self, timeout: Option<Duration>) {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let me = &self.shared.ps[self.index];
            // SeqCst (both stores and the helpers' load): a helper that reads
            // `true` knows this M is blocked in, or about to enter, an
            // epoll_wait that reports its own poller, and will drain it.
            me.parked.store(true, Ordering::SeqCst);
            let waited = sys::epoll_wait(&me.park, &mut self.buf, remaining, &mut self.tags);
            me.parked.store(false, Ordering::SeqCst);
            debug_assert!(waited.is_ok(), "epoll_wait(park): {waited:?}");
            if self.shared.is_shutdown() {
                return;
            }
            let mut progressed = waited.is_err() || self.tags.is_empty();
            let mut contended = false;
            let tags = std::mem::take(&mut self.tags);
            for &tag in &tags {
                if tag == UNPARK_TAG {
                    // Drain, then clear the flag: see `notify` for why the
                    // order matters (the other one lost wake-ups for good).
                    me.notified.consume(|| sys::drain_counter(&me.unpark));
                    progressed = true;
                } else if tag as usize == self.index {
                    let io = me.io.lock().unwrap_or_else(|e| e.into_inner());
                    me.drain(io, &mut self.wakeups);
                    progressed = true;
                } else {
                    match help(
                        &self.shared.ps[tag as usize],
                        &mut self.wakeups,
                        &mut self.timer_wakers,
                    ) {
                        Help::Drained => progressed = true,
                        Help::Busy => contended = true,
                    }
                }
            }
            self.tags = tags;
            self.fire_own();
            if progressed || deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            if contended {
                // The owner or another helper is draining that poller; its
                // readiness (level-triggered) clears within microseconds.
                std::thread::yield_now();
            }
        }
    }
}

/// Polls `other`'s io poller on behalf of its busy M, collecting wakers for
/// the calling (helping) M to fire.
fn help(other: &PState, wakeups: &mut Wakeups, timer_wakers: &mut Vec<Waker>) -> Help {
    // SeqCst pairs with the stores around the owner's epoll_wait.
    if other.parked.load(Ordering::SeqCst) {
        return Help::Busy;
    }
    let io = match other.io.try_lock() {
        Ok(io) => io,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return Help::Busy,
    };
    if other.drain(io, wakeups) {
        other.timers.fire_expired(Instant::now(), timer_wakers);
    }
    Help::Drained
}

impl Driver {
    /// Fires this P's due timers and every waker collected so far.
    fn fire_own(&mut self) {
        self.shared.ps[self.index]
            .timers
            .fire_expired(Instant::now(), &mut self.timer_wakers);
        for w in self.timer_wakers.drain(..) {
            w.wake();
        }
        self.wakeups.fire();
    }

    /// Fires ready I/O and due timers of this P without blocking.
    pub fn poll_now(&mut self) {
        let me = &self.shared.ps[self.index];
        match me.io.try_lock() {
            Ok(io) => {
                me.drain(io, &mut self.wakeups);
            }
            Err(TryLockError::Poisoned(e)) => {
                me.drain(e.into_inner(), &mut self.wakeups);
            }
            // A helper is draining it right now.
            Err(TryLockError::WouldBlock) => {}
        }
        self.fire_own();
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Unparker {
    /// Wakes the M parked in the driver, or makes its next park return at once.
    pub fn unpark(&self) {
        self.shared.ps[self.index].unpark();
    }
}

impl std::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unparker")
            .field("index", &self.index)
            .finish()
    }
}
