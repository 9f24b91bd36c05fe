//! The per-P drivers: each processor (P) owns an io poller and a timer set,
//! and an idle machine (M) parks in its P's driver.
//!
//! The design — per-P pollers, one *watcher* per node blocking on all of
//! the node's pollers so that one event wakes one thread, hosting, the
//! rejected alternatives and the measurements — is docs/architecture.md,
//! "The per-P reactor"; the park and wake protocol that the executor and
//! these drivers share is its "Idle P's and parked M's: the park/unpark
//! protocol". What each file here owns:
//!
//! - this file: the types ([`Reactor`], [`Driver`], [`Unparker`], a P's
//!   [`PState`], a node's [`NodeWatch`]) and the epoll tags they share;
//! - [`setup`]: building a P's io poller, timerfd, unpark eventfd and park
//!   epoll and each node's watch epoll; the reactor's small API; shutdown;
//! - [`park`]: [`Driver::park`] (the only place an idle M blocks),
//!   [`Driver::poll_now`] and unpark;
//! - [`dispatch`]: draining an io poller — epoll events to readiness and
//!   due timers — and helping another P's poller;
//! - [`watch`]: the watcher role's rules and their loom models;
//!   [`watch_ops`]: the epoll operations the role makes (arming, hosting);
//!   [`lend`]: lending a node whose M's are all busy to the nearest node
//!   whose watcher is parked (readiness across NUMA nodes), and its loom
//!   models;
//! - [`monitor`]: the monitor thread (the role's rescue, sysmon's network
//!   poll, the executor's [`SysmonHook`]);
//! - [`notify`]: the unpark flag in front of each eventfd, and its loom model;
//! - [`stats`]: the drivers' counters and the reactor's diagnostics;
//! - [`io`] and [`registration`]: sources, their readiness, and which P's
//!   poller holds them; [`waiters`]: the tasks waiting on a source; [`timers`] and [`wheel`]: a P's timers; [`paused`]:
//!   paused time.
//!
//! Every waker is fired through `fault::wake`, never under a lock: a waker
//! that panics is reported on stderr and the dispatch goes on, so the M that
//! fired it keeps its P (see `crate::fault`).

mod dispatch;
pub(crate) mod io;
mod lend;
mod monitor;
mod notify;
mod park;
mod paused;
pub(crate) mod registration;
mod setup;
mod stats;
pub(crate) mod timers;
pub(crate) mod waiters;
mod watch;
mod watch_ops;
mod wheel;

use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use mio::{Poll, Registry, Token};

use self::io::{Slab, Wakeups};
use self::timers::Timers;
use self::watch::Role;
use crate::clock::Clock;

pub use self::monitor::SysmonHook;
pub use self::stats::DriverStats;

/// The mio token of each P's timerfd (slab tokens never reach it).
const TIMER_TOKEN: Token = Token(usize::MAX);
/// In a P's io poller, the tag of its node's watch epoll while that P
/// hosts it (see [`watch_ops`]; slab tokens never reach it).
const WATCH_IN_IO: u64 = u64::MAX - 1;
/// The park epoll tag of the unpark eventfd (P tags are P indexes).
const UNPARK_TAG: u64 = u64::MAX;
/// The park epoll tag of the node's watch epoll (held by the watcher only).
const WATCH_TAG: u64 = u64::MAX - 1;
/// In the watch epoll, the tag of P `p`'s unpark eventfd is `UNPARK_IN_WATCH
/// | p` (switched on for the watcher's P only); a P's io poller is tagged `p`.
const UNPARK_IN_WATCH: u64 = 1 << 62;
/// In a watch epoll, the tag of node `n`'s lend epoll is `LEND_IN_WATCH |
/// n` (switched on while node `n` is lent to this node, see [`lend`]).
const LEND_IN_WATCH: u64 = 1 << 61;
/// Descriptors each P's driver holds: its io poller (mio's epoll) and the
/// registry's duplicate of it, the timerfd, the park epoll and the unpark
/// eventfd. Each node adds its watch epoll.
pub const FDS_PER_PROC: usize = 5;
/// Events taken from an io poller per look, by default (tokio's figure).
pub const EVENTS_PER_TICK: usize = 256;

/// How many I/O events one look at a P's poller takes at most (tokio's
/// `max_io_events_per_tick` and `max_io_events_per_busy_tick`): events
/// past the limit stay in the kernel for the next look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventsPerTick {
    /// When the P waits for events (its M parks in the poller).
    pub waiting: usize,
    /// When it looks without waiting (a busy P every `event_interval`
    /// ticks, a P running out of work, a helper draining another P):
    /// each event found wakes a task into the P's queue, so a smaller
    /// take keeps an overloaded P's queue from overflowing.
    pub busy: usize,
}

impl Default for EventsPerTick {
    fn default() -> EventsPerTick {
        EventsPerTick {
            waiting: EVENTS_PER_TICK,
            busy: EVENTS_PER_TICK,
        }
    }
}

/// The runtime-wide set of per-P drivers. Cheap to clone.
#[derive(Clone)]
pub struct Reactor {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) ps: Box<[PState]>,
    /// One watch per NUMA node (indexed by node; nodes without P's included).
    nodes: Box<[NodeWatch]>,
    /// Which node is lent to which (see [`lend`]).
    lending: lend::Lending,
    /// Round-robin cursor for registrations made outside a worker.
    next_p: AtomicUsize,
    shutdown: AtomicBool,
    monitor: Arc<monitor::Monitor>,
    /// The runtime's one clock: every P's timers read it (paused time).
    pub(crate) clock: Arc<Clock>,
    /// Auto-advance's lock and the `block_on` wake flags it reads.
    pub(crate) paused: paused::Paused,
    /// Events per look at a poller (the drivers' buffers are this long).
    events: EventsPerTick,
}

struct IoPoller {
    /// Owns the epoll (`PState::io_fd`); its registry clone registers.
    _poll: Poll,
    events: Vec<libc::epoll_event>,
}

/// Everything one P owns.
pub(crate) struct PState {
    io: Mutex<IoPoller>,
    /// The io poller's epoll, owned by `io`'s `Poll` (which lives as long
    /// as this `PState`): waited on without the lock by a hosting watcher.
    io_fd: RawFd,
    /// This P's io poller holds the node's watch epoll instead of being
    /// held by it (hosting, see [`watch_ops`]). Written under the node's
    /// role lock; read by its own M after `Role::on_park` made it the
    /// parked holder (nobody changes it then), and by the monitor.
    hosted: AtomicBool,
    pub(crate) registry: Registry,
    pub(crate) sources: Mutex<Slab>,
    /// Shared with every `Sleep` registered here (`time::Sleep`).
    pub(crate) timers: Arc<Timers>,
    park: OwnedFd,
    unpark: OwnedFd,
    /// Set by `unpark` before signalling the eventfd, cleared by the parked M.
    notified: notify::Notify,
    /// True while the owner M blocks (or is about to block) in the park
    /// epoll: the watcher role may be handed to it, and is not taken from it.
    parked: AtomicBool,
    /// Which of this P's role entries are switched on
    /// ([`watch_ops::ARMED_DIRECT`], [`watch_ops::ARMED_NESTED`]); only
    /// read and written under the node's role lock.
    armed: AtomicU8,
    /// The NUMA node of this P (index into `Shared::nodes`).
    node: usize,
    stats: stats::Stats,
}

/// A node's watch epoll and its watcher role (see [`watch`]).
struct NodeWatch {
    epoll: OwnedFd,
    /// The node's lend epoll: its io pollers but the hosting one, nested
    /// (switched off) in the watch epolls of its nearest other nodes; `None`
    /// on a one-node runtime (see [`lend`]).
    lend: Option<OwnedFd>,
    role: Role,
    /// The node's P count (sizes the watcher's event buffer).
    procs: usize,
}

/// One P's poller and timers. Owned by whichever M holds the P.
pub struct Driver {
    shared: Arc<Shared>,
    index: usize,
    buf: Vec<libc::epoll_event>,
    tags: Vec<u64>,
    /// The watcher's buffers for reading which pollers of the node are ready.
    watch_buf: Vec<libc::epoll_event>,
    watch_tags: Vec<u64>,
    /// The hosting holder's buffer for its own poller's events.
    io_buf: Vec<libc::epoll_event>,
    /// The watcher's buffers for reading which pollers of a node lent to
    /// its own are ready (see [`lend`]).
    lend_buf: Vec<libc::epoll_event>,
    lend_tags: Vec<u64>,
    /// How strongly this M's recent wake-ups as the holder were for its
    /// own P's poller alone (up one per such wake-up, down two per wake-up
    /// that drained another P's): decides hosting ([`park::HOST_AT`]).
    host_score: u8,
    wakeups: Wakeups,
    timer_wakers: Vec<Waker>,
}

/// Wakes the M parked in a [`Driver`]; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Unparker {
    shared: Arc<Shared>,
    index: usize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The monitor holds the reactor weakly; tell it to end.
        self.monitor.signal_stop();
    }
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("procs", &self.procs())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unparker")
            .field("index", &self.index)
            .finish()
    }
}
