//! The per-P drivers: each processor (P) owns an io poller and a timer set,
//! and an idle machine (M) parks in its P's driver.
//!
//! # Design
//!
//! Vyukov's NUMA scheduler gives every P its own netpoller so that a task's
//! I/O lives where the task runs. tokio tried exactly this in 2018 (a reactor
//! per worker) and reverted to one shared driver in 2019: an event on the
//! reactor of a worker that is busy inside a long poll sat there until that
//! worker came back. numa_rt keeps per-P pollers and answers that problem
//! with one *watcher* per node: the one idle M of the node that blocks on
//! every poller of the node, while every other idle M sleeps on its own
//! eventfd. One event wakes at most one thread.
//!
//! ## Per P
//! - An **io poller**: a `mio::Poll` (edge-triggered epoll). Sources register
//!   lazily, on first poll, with the poller of the P that polls them (or a P
//!   chosen round-robin outside a worker). Its `Registry` is cloned so
//!   registering never waits for a thread that is polling.
//! - A **timer set** ([`timers`]) and a **timerfd** armed to its earliest
//!   deadline, registered in the io poller. A due timer is therefore an io
//!   event like any other, visible to whoever watches that poller.
//! - A **park epoll** (raw, level-triggered, [`crate::sys`]) holding the P's
//!   unpark eventfd and — on the node's first few P's, switched off unless
//!   this M is the watcher — the node's watch epoll. This is the only place
//!   an idle M blocks.
//!
//! ## Per node
//! A **watch epoll** holding the io poller of every P of the node and the
//! unpark eventfd of each candidate P (switched off but the watcher's). An M
//! that holds the role as it parks blocks on the watch epoll itself; one
//! handed the role while asleep sees it through its park epoll, where the
//! watch is switched on ([`watch`] has the role protocol, its rules and its
//! loom models). The direct wait saves one `epoll_wait` per event: two (the
//! watch, the ready poller) instead of three.
//!
//! ## Hosting
//! Through the watch, an event on the holder's *own* P still costs two
//! `epoll_wait`s: the watch says which poller is ready, the poller says what.
//! At light load that is nearly every event, since sources follow their tasks
//! ([`registration`]) to the P of the M that runs them, the holder's. So a
//! holder whose recent wake-ups came from its own poller alone (a score: up
//! one per such wake-up, down two per wake-up that drained another P's; host
//! at 4, give back at 0) **hosts** the watch: its poller leaves the watch
//! (`EPOLL_CTL_DEL`) and takes the watch in (`EPOLL_CTL_ADD`, tagged
//! [`WATCH_IN_IO`]); the holder then blocks on its own poller, where its own
//! events arrive in one `epoll_wait` and the rest of the node (other pollers,
//! its own unpark eventfd) arrives through the nested watch, as before plus
//! one wait. The order matters: the kernel refuses the add while the poller
//! is still inside the watch (a loop).
//!
//! The invariant: a hosted poller belongs to the role holder. Every move of
//! the role first gives the watch back (`WatchOps::disarm`, under the role
//! lock: delete, then re-add the poller to the watch), so whoever watches
//! next sees that poller again; a parked holder is never unhosted under it
//! (nobody takes the role from a parked holder). A hosting holder that runs
//! tasks is not parked: the next M of the node to park takes the role and
//! the watch back, and the monitor gives the watch back for it after a whole
//! tick out of its park, so its rescue sees that poller's events the tick
//! after. Moving the watch runs the kernel's epoll loop check (the reason the
//! role itself moves by `EPOLL_CTL_MOD` only): hosting changes only when the
//! score crosses its bounds or the role moves, rarely at light load, where it
//! pays (one echo or HTTP connection: 2.1 → 1.1 `epoll_wait`s per request).
//!
//! Nesting is two levels (park epoll → watch epoll → io epolls, which hold
//! sockets and timerfds; or the host's io epoll → watch epoll → the other
//! io epolls), with no cycle, below the kernel's limit of 4. A
//! park epoll holds at most two entries and a watch epoll at most two per P
//! of its node, so building the drivers is linear in the P count.
//!
//! ## Who wakes for what
//! - An I/O event or due timer on any P of the node wakes the watcher alone.
//!   It drains that P's poller (try-lock: if another M holds it, that M is
//!   draining it right now), fires the wakers and the P's due timers on its
//!   own thread, so the woken tasks run on the watcher's P — whether the
//!   poller's own P is idle (its M sleeps on and costs nothing) or busy
//!   inside a long poll (tokio's 2018 problem: here the event is handled in
//!   microseconds by an idle M).
//! - An unpark (new work for this P, or a spinner wanted) wakes exactly the
//!   P's M through its eventfd.
//! - Everything else sleeps: an idle runtime makes no system call.
//! - A watcher that stays out of its park for a monitor tick loses the role
//!   to a parked M ([`monitor`]), so a long poll never leaves the node's
//!   pollers unwatched for more than ~10 ms (Go's sysmon bound); an M unparked
//!   for new work hands the role on at once.
//!
//! Wakers are never called under a lock; one dispatch fires due timers first
//! (Go runs timers before netpoll), then write-readiness wakers, then read,
//! then listener (accept) wakers: Vyukov's soft priorities, and since the
//! executor queues the wakes in order, dispatch order is run order.
//!
//! [`Driver::poll_now`] (every `event_interval` ticks of a busy P, and when
//! it runs out of work) polls only the P's own poller, with a try-lock, plus
//! its due timers: one syscall.
//!
//! ## Rejected alternatives (measured on hello_http and the echo bench, 2 CPUs)
//! - **Every idle M's park epoll nesting every poller of its node** (numa_rt's
//!   first design): one event woke every parked M of the node; 18.4 context
//!   switches and 102 µs of CPU per request at one connection on 16 P's.
//!   `EPOLLEXCLUSIVE` would have made it wake-one, but Linux refuses it
//!   (`EINVAL`) when the target is itself an epoll.
//! - **Each idle M on its own poller, the watcher on busy P's pollers only**
//!   (each P's entry in the watch switched off while it parks, on while it
//!   runs): one wake per event and the task goes home, but two
//!   `epoll_ctl`s per park, and a ping-pong between two tasks of the node
//!   (the echo round trip) costs two context switches: 19.0 µs against
//!   tokio's 11.4 µs. With one watcher for all pollers the watcher finds the
//!   next event already there when it parks: 12.1 µs against 11.1 µs.
//! - **Go's poller waking the owner of a ready P** ("the task goes home"): a
//!   second context switch for every event on a P whose M sleeps, which at
//!   light load is most of them. Locality within a node is cache warmth, not
//!   memory distance; under load every P is busy and drains its own poller.
//! - **One shared reactor** (tokio's choice since 2019): one epoll, so every
//!   registration contends on one driver; it loses "a connection lives where
//!   its task runs" under load and does not scale across NUMA nodes.
//! - **A dedicated reactor thread**: an extra hop (and a context switch) on
//!   every event.
//! - **Moving the watch epoll with `EPOLL_CTL_ADD`/`DEL`** instead of
//!   switching it with `EPOLL_CTL_MOD`: adding an epoll runs the kernel's loop
//!   check under a global mutex. The cost of switching instead is that the
//!   candidates' park epolls all hold the watch ([`watch::CANDIDATES`]).
//!
//! ## Shutdown
//! [`Reactor::shutdown`] marks every source shut down and wakes its waiters
//! (their next poll fails with "numa_rt runtime has shut down"), wakes every
//! timer's waiter (a task of the runtime is then dropped by the executor; a
//! waiter outside the runtime — a foreign `block_on` — polls its timer again
//! and gets a panic naming the shutdown), refuses new registrations and
//! timers, and unparks every driver. All descriptors are owned and close
//! when the last clone of the reactor (and every socket that registered with
//! it) is gone.
//!
//! ## Panicking wakers
//! Every waker is fired through `fault::wake`: a waker that panics is
//! reported on stderr and the dispatch goes on, so the M that fired it keeps
//! its P (see `crate::fault`).

pub(crate) mod io;
mod monitor;
mod notify;
mod paused;
pub(crate) mod registration;
pub(crate) mod timers;
mod watch;
mod wheel;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

use mio::{Interest, Poll, Registry, Token};

use self::io::{Slab, Wakeups};
use self::timers::Timers;
use self::watch::{Role, WatchOps};
use crate::clock::Clock;
use crate::sys;

/// The mio token of each P's timerfd (slab tokens never reach it).
const TIMER_TOKEN: Token = Token(usize::MAX);
/// In a P's io poller, the tag of its node's watch epoll while that P
/// hosts it (see "Hosting" in the module docs; slab tokens never reach it).
const WATCH_IN_IO: u64 = u64::MAX - 1;
/// The park epoll tag of the unpark eventfd (P tags are P indexes).
const UNPARK_TAG: u64 = u64::MAX;
/// The park epoll tag of the node's watch epoll (held by the watcher only).
const WATCH_TAG: u64 = u64::MAX - 1;
/// In the watch epoll, the tag of P `p`'s unpark eventfd is `UNPARK_IN_WATCH
/// | p` (switched on for the watcher's P only); a P's io poller is tagged `p`.
const UNPARK_IN_WATCH: u64 = 1 << 62;
/// Descriptors each P's driver holds: its io poller (mio's epoll) and the
/// registry's duplicate of it, the timerfd, the park epoll and the unpark
/// eventfd. Each node adds its watch epoll.
pub const FDS_PER_PROC: usize = 5;
/// Events taken from an io poller per drain.
const EVENTS_PER_DRAIN: usize = 256;

/// The runtime-wide set of per-P drivers. Cheap to clone.
#[derive(Clone)]
pub struct Reactor {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) ps: Box<[PState]>,
    /// One watch per NUMA node (indexed by node; nodes without P's included).
    nodes: Box<[NodeWatch]>,
    /// Round-robin cursor for registrations made outside a worker.
    next_p: AtomicUsize,
    shutdown: AtomicBool,
    monitor: Arc<monitor::Monitor>,
    /// The runtime's one clock: every P's timers read it (paused time).
    pub(crate) clock: Arc<Clock>,
    /// Auto-advance's lock and the `block_on` wake flags it reads.
    pub(crate) paused: paused::Paused,
}

impl Shared {
    /// Every P's io poller (epoll) fd: paused time peeks at them.
    pub(crate) fn io_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.ps.iter().map(|p| p.io_fd).collect()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The monitor holds the reactor weakly; tell it to end.
        self.monitor.signal_stop();
    }
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
    io_fd: std::os::fd::RawFd,
    /// This P's io poller holds the node's watch epoll instead of being
    /// held by it ("Hosting" in the module docs). Written under the node's
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
    /// Which of this P's role entries are switched on ([`ARMED_DIRECT`],
    /// [`ARMED_NESTED`]); only read and written under the node's role lock.
    armed: std::sync::atomic::AtomicU8,
    /// The NUMA node of this P (index into `Shared::nodes`).
    node: usize,
    stats: Stats,
}

/// A node's watch epoll and its watcher role (see [`watch`]).
struct NodeWatch {
    epoll: OwnedFd,
    role: Role,
    /// The node's P count (sizes the watcher's event buffer).
    procs: usize,
}

/// Counters of one driver, written by whichever M is in it (Relaxed: they
/// order nothing).
#[derive(Default)]
struct Stats {
    wakeups: AtomicU64,
    helps: AtomicU64,
    handoffs: AtomicU64,
    /// Drains of the P's io poller (by its M, a watcher or the monitor),
    /// counted under the poller's lock: the monitor polls a poller whose
    /// count stays still while nobody watches it (see `monitor`).
    drains: AtomicU64,
    /// Sources moved to this P's poller because their task runs here (see
    /// `registration`, "A source follows its task").
    pub(crate) moves_in: AtomicU64,
    /// Times this P's io poller took its node's watch epoll in (see
    /// "Hosting" in the module docs).
    hostings: AtomicU64,
}

/// The executor's part of the monitor thread (Go's sysmon): called at every
/// monitor tick, between 20 µs and 10 ms apart while the runtime runs.
pub trait SysmonHook: Send + Sync {
    /// One round. `idle`: every M is parked and none woke during the last
    /// tick, so the monitor is about to sleep until an M leaves its park.
    /// Returns the longest the monitor may sleep before the next round
    /// (`None`: no limit of the hook's own), e.g. for a periodic trace.
    fn tick(&self, idle: bool) -> Option<Duration>;

    /// Whether the executor's side of the runtime is idle for paused time's
    /// auto-advance: no task runnable or running, no `block_on` awake, no
    /// blocking work. Called by whichever thread auto-advances, under the
    /// advance lock (see `driver::paused`). The default says yes: only the
    /// M's parked flags then decide.
    fn runtime_idle(&self) -> bool {
        true
    }
}

/// What one P's driver did since the reactor was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverStats {
    /// Times the M parked in this driver woke from its blocking wait.
    pub wakeups: u64,
    /// Times the M parked here, as its node's watcher, drained another P's
    /// poller on its behalf.
    pub helps: u64,
    /// Times this P's M, unparked for new work while it was its node's
    /// watcher, handed the role to another parked M.
    pub watch_handoffs: u64,
    /// Sources moved into this P's poller from another P's because the task
    /// using them kept running here (see the reactor's registration docs).
    pub sources_moved_in: u64,
    /// Times this P's io poller took its node's watch epoll in, so that its
    /// M, holding the watcher role, blocks on its own poller (one
    /// `epoll_wait` per event on it instead of two; see the reactor's
    /// driver docs, "Hosting").
    pub watch_hostings: u64,
}

/// The role protocol's view of one node's P's (see [`watch::WatchOps`]).
struct Ops<'a> {
    shared: &'a Shared,
    watch: &'a NodeWatch,
    /// Whether the M arming itself direct wants its P to host the watch
    /// (only `arm(me, true)` from its own park reads it).
    host: bool,
}

/// P `p`'s unpark eventfd is switched on in the watch epoll (`PState::armed`).
const ARMED_DIRECT: u8 = 1;
/// The watch epoll is switched on in P `p`'s park epoll (`PState::armed`).
const ARMED_NESTED: u8 = 2;

impl Ops<'_> {
    /// Switches one of P `p`'s two role entries on or off.
    fn set(&self, p: usize, bit: u8, on: bool) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        if bit == ARMED_DIRECT {
            sys::epoll_set_level(
                &self.watch.epoll,
                ps.unpark.as_raw_fd(),
                UNPARK_IN_WATCH | p as u64,
                on,
            )
        } else {
            sys::epoll_set_level(&ps.park, self.watch.epoll.as_raw_fd(), WATCH_TAG, on)
        }
    }
}

impl Ops<'_> {
    /// Moves the watch epoll into P `p`'s io poller: out of the watch
    /// first (the kernel refuses a loop), then in. Under the role lock, for
    /// the holder. On failure everything is as it was.
    fn host(&self, p: usize) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        let watch = self.watch.epoll.as_raw_fd();
        sys::epoll_unnest(watch, ps.io_fd)?;
        if let Err(e) = sys::epoll_nest(ps.io_fd, watch, WATCH_IN_IO) {
            self.rejoin(p);
            return Err(e);
        }
        // Relaxed: under the role lock (see `PState::hosted`).
        ps.hosted.store(true, Ordering::Relaxed);
        ps.stats.hostings.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Puts P `p`'s io poller back into the watch (it no longer holds it).
    fn rejoin(&self, p: usize) -> bool {
        let ps = &self.shared.ps[p];
        match sys::epoll_nest(self.watch.epoll.as_raw_fd(), ps.io_fd, p as u64) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => true,
            Err(e) => {
                // Only ENOMEM/ENOSPC: the watcher cannot see this poller
                // until a later unhost succeeds; the monitor polls it every
                // 10 ms meanwhile (`monitor::poll_unwatched`).
                eprintln!(
                    "numa_rt: P{p}'s io poller could not rejoin its node's watch ({e}); \
                     its events are polled by the monitor until it does"
                );
                false
            }
        }
    }
}

impl WatchOps for Ops<'_> {
    fn arm(&self, p: usize, direct: bool) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        let bit = if direct { ARMED_DIRECT } else { ARMED_NESTED };
        // Relaxed: only read and written under the role lock.
        let armed = ps.armed.load(Ordering::Relaxed);
        if armed & bit == 0 {
            let r = self.set(p, bit, true);
            debug_assert!(r.is_ok(), "arming the watch for P{p}: {r:?}");
            r?;
            ps.armed.store(armed | bit, Ordering::Relaxed);
        }
        if direct {
            // Relaxed: as above.
            let hosted = ps.hosted.load(Ordering::Relaxed);
            if self.host && !hosted {
                // Best effort: not hosting is correct, one wait slower.
                let _ = self.host(p);
            } else if !self.host && hosted {
                self.unhost(p);
            }
        }
        Ok(())
    }
    fn disarm(&self, p: usize) {
        self.unhost(p);
        let ps = &self.shared.ps[p];
        // Relaxed: as in `arm`.
        let armed = ps.armed.load(Ordering::Relaxed);
        let mut left = 0;
        for bit in [ARMED_DIRECT, ARMED_NESTED] {
            if armed & bit != 0 {
                let r = self.set(p, bit, false);
                debug_assert!(r.is_ok(), "disarming the watch for P{p}: {r:?}");
                // An entry that could not be switched off stays recorded,
                // so the next disarm tries again.
                if r.is_err() {
                    left |= bit;
                }
            }
        }
        ps.armed.store(left, Ordering::Relaxed);
    }
    fn unhost(&self, p: usize) {
        let ps = &self.shared.ps[p];
        // Relaxed: under the role lock (see `PState::hosted`).
        if !ps.hosted.load(Ordering::Relaxed) {
            return;
        }
        let watch = self.watch.epoll.as_raw_fd();
        match sys::epoll_unnest(ps.io_fd, watch) {
            Ok(()) => {}
            // A previous attempt got this far.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => {
                debug_assert!(false, "taking the watch out of P{p}'s poller: {e}");
                return;
            }
        }
        if self.rejoin(p) {
            ps.hosted.store(false, Ordering::Relaxed);
        } else {
            // Keep hosting rather than leave the poller in neither; `hosted`
            // stays set, so the next unhost tries again.
            let _ = sys::epoll_nest(ps.io_fd, watch, WATCH_IN_IO);
        }
    }
    fn is_parked(&self, p: usize) -> bool {
        // SeqCst pairs with the stores around the owner's epoll_wait; read
        // under the role lock (see `watch`).
        self.shared.ps[p].parked.load(Ordering::SeqCst)
    }
}

impl Reactor {
    /// Builds the drivers of `procs` processors, all in one node.
    pub fn new(procs: usize) -> std::io::Result<Reactor> {
        Reactor::with_nodes(&vec![0; procs.max(1)])
    }

    /// Builds one driver per entry of `node_of_p` (the NUMA node of each P).
    /// The watcher of a node helps busy P's of that node only.
    ///
    /// Each P takes [`FDS_PER_PROC`] descriptors and each node one. An error
    /// from the OS names the limit that caused it: `RLIMIT_NOFILE` (with the
    /// number of descriptors needed), the system-wide `fs.file-max`, or
    /// `fs.epoll.max_user_watches`.
    pub fn with_nodes(node_of_p: &[usize]) -> std::io::Result<Reactor> {
        assert!(!node_of_p.is_empty(), "a reactor needs at least one P");
        let nnodes = node_of_p.iter().max().map_or(1, |&m| m + 1);
        Reactor::build(node_of_p, nnodes).map_err(|e| {
            let procs = node_of_p.len();
            let need = procs * FDS_PER_PROC + nnodes;
            let limit = match e.raw_os_error() {
                Some(libc::EMFILE) => format!(
                    "the process's descriptor limit: {procs} processors need {need} file \
                     descriptors ({FDS_PER_PROC} per processor, 1 per node) besides those already \
                     open, and RLIMIT_NOFILE allows {}; raise it (ulimit -n) or lower max_procs",
                    sys::nofile_limit().map_or("no more".to_owned(), |l| l.to_string())
                ),
                Some(libc::ENFILE) => format!(
                    "the system-wide descriptor limit (fs.file-max): {procs} processors need \
                     {need} file descriptors; raise it or lower max_procs"
                ),
                Some(libc::ENOSPC) => format!(
                    "the epoll watch limit (fs.epoll.max_user_watches): {procs} processors need \
                     about {} watches; raise it or lower max_procs",
                    procs * 4
                ),
                _ => {
                    return std::io::Error::new(
                        e.kind(),
                        format!("cannot create the reactor of {procs} processors: {e}"),
                    )
                }
            };
            std::io::Error::new(
                e.kind(),
                format!("cannot create the reactor of {procs} processors ({e}): it hit {limit}"),
            )
        })
    }

    fn build(node_of_p: &[usize], nnodes: usize) -> std::io::Result<Reactor> {
        let mut nodes = Vec::with_capacity(nnodes);
        for n in 0..nnodes {
            let procs: Vec<usize> = (0..node_of_p.len())
                .filter(|&i| node_of_p[i] == n)
                .collect();
            nodes.push(NodeWatch {
                epoll: sys::epoll_create()?,
                procs: procs.len(),
                role: Role::new(&procs),
            });
        }
        let clock = Arc::new(Clock::new());
        let mut ps = Vec::with_capacity(node_of_p.len());
        for (i, &node) in node_of_p.iter().enumerate() {
            let poll = Poll::new()?;
            let registry = poll.registry().try_clone()?;
            let timerfd = sys::timerfd()?;
            registry.register(
                &mut mio::unix::SourceFd(&timerfd.as_raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )?;
            let watch = &nodes[node];
            sys::epoll_add_level(&watch.epoll, poll.as_raw_fd(), i as u64)?;
            let park = sys::epoll_create()?;
            let unpark = sys::eventfd()?;
            sys::epoll_add_level(&park, unpark.as_raw_fd(), UNPARK_TAG)?;
            if watch.role.is_candidate(i) {
                // Registered switched off: the role switches them on.
                sys::epoll_add_level(&park, watch.epoll.as_raw_fd(), WATCH_TAG)?;
                sys::epoll_set_level(&park, watch.epoll.as_raw_fd(), WATCH_TAG, false)?;
                let tag = UNPARK_IN_WATCH | i as u64;
                sys::epoll_add_level(&watch.epoll, unpark.as_raw_fd(), tag)?;
                sys::epoll_set_level(&watch.epoll, unpark.as_raw_fd(), tag, false)?;
            }
            let io_fd = poll.as_raw_fd();
            ps.push(PState {
                io: Mutex::new(IoPoller {
                    _poll: poll,
                    events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_DRAIN],
                }),
                io_fd,
                hosted: AtomicBool::new(false),
                registry,
                sources: Mutex::new(Slab::default()),
                timers: Arc::new(Timers::new(timerfd, clock.clone())),
                park,
                unpark,
                notified: notify::Notify::new(),
                parked: AtomicBool::new(false),
                armed: std::sync::atomic::AtomicU8::new(0),
                node,
                stats: Stats::default(),
            });
        }
        let monitor = monitor::Monitor::new();
        // The role can only move where a node has two candidates.
        let movable = nodes.iter().any(|w| w.procs >= 2);
        let shared = Arc::new(Shared {
            ps: ps.into_boxed_slice(),
            nodes: nodes.into_boxed_slice(),
            next_p: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            monitor: monitor.clone(),
            clock,
            paused: paused::Paused::default(),
        });
        if movable {
            monitor.start(&shared)?;
        }
        Ok(Reactor { shared })
    }

    /// The number of P's.
    pub fn procs(&self) -> usize {
        self.shared.ps.len()
    }

    /// The driver of P `index`; called once per P when the runtime is built.
    pub fn driver(&self, index: usize) -> Driver {
        assert!(index < self.procs(), "P {index} out of range");
        let node_procs = self.shared.nodes[self.shared.ps[index].node].procs;
        let empty = libc::epoll_event { events: 0, u64: 0 };
        Driver {
            shared: self.shared.clone(),
            index,
            buf: vec![empty; 3],
            tags: Vec::with_capacity(3),
            // Every poller of the node and the watcher's own eventfd.
            watch_buf: vec![empty; node_procs + 1],
            watch_tags: Vec::with_capacity(node_procs),
            io_buf: vec![empty; EVENTS_PER_DRAIN],
            host_score: 0,
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
        self.shared.monitor.stop();
    }

    /// Whether this reactor owns `shared`.
    pub(crate) fn shares(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    /// Whether [`Reactor::shutdown`] was called.
    pub fn is_shutdown(&self) -> bool {
        // Relaxed: advisory; the shutdown protocol itself is ordered by locks.
        self.shared.shutdown.load(Ordering::Relaxed)
    }

    /// What P `index`'s driver did: wake-ups, helps, watcher hand-offs.
    pub fn driver_stats(&self, index: usize) -> DriverStats {
        let st = &self.shared.ps[index].stats;
        DriverStats {
            wakeups: st.wakeups.load(Ordering::Relaxed),
            helps: st.helps.load(Ordering::Relaxed),
            watch_handoffs: st.handoffs.load(Ordering::Relaxed),
            sources_moved_in: st.moves_in.load(Ordering::Relaxed),
            watch_hostings: st.hostings.load(Ordering::Relaxed),
        }
    }

    /// The P whose M holds `node`'s watcher role now, if any.
    pub fn watcher(&self, node: usize) -> Option<usize> {
        self.shared.nodes.get(node).and_then(|w| w.role.watcher())
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

    /// Diagnostics: P `index`'s registered sources and pending timers.
    pub fn proc_sources_and_timers(&self, index: usize) -> (usize, usize) {
        let p = &self.shared.ps[index];
        let sources = p.sources.lock().unwrap_or_else(|e| e.into_inner()).len();
        (sources, p.timers.len())
    }

    /// The earliest pending timer of P `index` (sysmon: a due timer on a
    /// stuck P is work waiting for it).
    pub fn next_timer_of(&self, index: usize) -> Option<Instant> {
        self.shared.ps[index].timers.next_deadline()
    }

    /// Diagnostics: sources on which a task waits (a stored waker), across
    /// all P's. Locks every source in turn: for rare checks (the deadlock
    /// diagnostic), not for hot paths.
    pub fn io_waiters(&self) -> usize {
        let mut n = 0;
        for p in self.shared.ps.iter() {
            let sources = p.sources.lock().unwrap_or_else(|e| e.into_inner());
            n += sources.iter().filter(|io| io.has_waiters()).count();
        }
        n
    }

    /// Installs the runtime's sysmon: `hook` runs on the monitor thread at
    /// every tick (see [`SysmonHook`]), and the monitor thread is started if
    /// the watcher alone did not need it.
    pub fn set_sysmon(&self, hook: std::sync::Weak<dyn SysmonHook>) -> std::io::Result<()> {
        self.shared.monitor.set_hook(hook);
        self.shared.monitor.start(&self.shared)
    }

    /// Installs the runtime's sysmon without starting the monitor thread:
    /// `hook` runs once the thread runs, because the watcher role needs it
    /// or the clock is paused ([`Reactor::pause_clock`]).
    pub fn set_sysmon_hook(&self, hook: std::sync::Weak<dyn SysmonHook>) {
        self.shared.monitor.set_hook(hook);
    }

    /// Wakes the monitor thread if it sleeps until an M leaves its park: a
    /// thread outside the runtime (a parking `block_on`) has news for the
    /// sysmon hook. One SeqCst load when it is awake.
    pub fn kick_monitor(&self) {
        self.shared.monitor.kick();
    }

    /// The P new sources and timers of this thread go to: the thread's own P,
    /// or one chosen round-robin when the thread holds none.
    pub(crate) fn pick_p(&self) -> usize {
        let n = self.procs();
        match crate::current::current_p() {
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
        let n = match sys::epoll_wait_events(self.io_fd, &mut io.events, Some(Duration::ZERO)) {
            Ok(n) => n,
            Err(e) => {
                // Only EBADF/EINVAL, which would be a bug of ours.
                debug_assert!(false, "epoll_wait(io): {e}");
                return false;
            }
        };
        self.count_drain();
        let found = self.dispatch(&io.events[..n], out);
        drop(io);
        if found.timer {
            sys::drain_counter(self.timers.timerfd());
        }
        found.timer
    }

    /// Counts a drain of the io poller (the monitor's "nobody looked").
    /// Called under the poller's lock, so a plain load and store (no RMW).
    fn count_drain(&self) {
        let drains = &self.stats.drains;
        drains.store(
            drains.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }

    /// Hands the readiness in `events` (taken from this P's io poller) to
    /// the sources, collecting their wakers; says what else was there.
    fn dispatch(&self, events: &[libc::epoll_event], out: &mut Wakeups) -> Found {
        let mut found = Found::default();
        if events.is_empty() {
            return found;
        }
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events {
            // Copies out of the (packed) struct.
            let (tag, flags) = (ev.u64, ev.events);
            if tag == TIMER_TOKEN.0 as u64 {
                found.timer = true;
            } else if tag == WATCH_IN_IO {
                found.watch = true;
            } else if let Some(sio) = sources.get(tag as usize) {
                found.io = true;
                sio.set_readiness(readiness(flags), out);
            }
        }
        found
    }
}

/// What one look at an io poller found besides readiness for its sources.
#[derive(Default)]
struct Found {
    /// The P's timerfd fired.
    timer: bool,
    /// The node's watch epoll is ready (the P hosts it).
    watch: bool,
    /// At least one source of the P got readiness.
    io: bool,
}

/// The readiness bits of an epoll event's flags, read as mio reads them
/// (mio registers the sources, edge-triggered, with `EPOLLRDHUP`).
fn readiness(flags: u32) -> usize {
    let f = flags as libc::c_int;
    let mut bits = 0;
    if f & (libc::EPOLLIN | libc::EPOLLPRI) != 0 {
        bits |= io::READABLE;
    }
    if f & libc::EPOLLOUT != 0 {
        bits |= io::WRITABLE;
    }
    // Both halves closed, or a FIN received (shutdown(SHUT_RD) included).
    if f & libc::EPOLLHUP != 0 || (f & libc::EPOLLIN != 0 && f & libc::EPOLLRDHUP != 0) {
        bits |= io::READ_CLOSED;
    }
    // Both halves closed, or a pipe's read end gone.
    if f & libc::EPOLLHUP != 0
        || (f & libc::EPOLLOUT != 0 && f & libc::EPOLLERR != 0)
        || f == libc::EPOLLERR
    {
        bits |= io::WRITE_CLOSED;
    }
    if f & libc::EPOLLERR != 0 {
        // Let both directions retry: the operation reports the error.
        bits |= io::READABLE | io::WRITABLE;
    }
    bits
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
    /// How strongly this M's recent wake-ups as the holder were for its
    /// own P's poller alone (up one per such wake-up, down two per wake-up
    /// that drained another P's): decides hosting ("Hosting").
    host_score: u8,
    wakeups: Wakeups,
    timer_wakers: Vec<Waker>,
}

/// `Driver::host_score` at which a holder takes the watch into its own
/// poller, and its ceiling; it gives the watch back once the score is 0.
const HOST_AT: u8 = 4;
const HOST_SCORE_MAX: u8 = 8;

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

    /// Blocks until unparked, or — while this M is its node's watcher — an
    /// I/O event or due timer on any P of the node, or `timeout`; then fires
    /// what is ready on the calling thread.
    pub fn park(&mut self, timeout: Option<Duration>) {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let shared = self.shared.clone();
        let me = &shared.ps[self.index];
        let watch = &shared.nodes[me.node];
        let mut unparked = false;
        loop {
            // Whether this M, if it holds the role as it blocks, wants its
            // own poller to host the watch ("Hosting" in the module docs).
            let ops = Ops {
                shared: &shared,
                watch,
                host: self.host_score >= HOST_AT
                    || (self.host_score > 0 && me.hosted.load(Ordering::Relaxed)),
            };
            if shared.clock.is_paused() {
                // Paused time: if this M is the last to go idle, it moves
                // the clock to the next deadline itself instead of waiting
                // for the monitor (see `paused`). SeqCst: the store the
                // advance's checks pair with, as below.
                me.parked.store(true, Ordering::SeqCst);
                if paused::advance_if_idle(&shared, Some(self.index)) > 0 {
                    // The advance cleared the flag before it woke anything;
                    // the woken tasks are queued on this P.
                    unparked = true;
                    break;
                }
            }
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // SeqCst (both stores and the loads in `Ops::is_parked`): an M
            // that reads `true` under the role lock knows this M is in, or
            // about to enter, its epoll_wait (see `watch`).
            me.parked.store(true, Ordering::SeqCst);
            // The holder blocks on the watch epoll itself, which holds every
            // poller of the node and, while it holds the role, its own
            // eventfd: one level (and one epoll_wait per event) less than
            // through its park epoll. Nobody takes the role from a parked
            // holder, so it holds it until this wait returns.
            let direct = watch.role.on_park(self.index, &ops);
            // Relaxed: written under the role lock, which `on_park` just
            // took; nobody else changes it while this M is the parked holder.
            let hosted = direct && me.hosted.load(Ordering::Relaxed);
            let mut own = false;
            let waited = if hosted {
                // Its own poller, which holds the watch: an event on its own
                // P costs this one wait.
                self.tags.clear();
                let r = sys::epoll_wait_events(me.io_fd, &mut self.io_buf, remaining);
                if let Ok(n @ 1..) = r {
                    let io = me.io.lock().unwrap_or_else(|e| e.into_inner());
                    me.count_drain();
                    let found = me.dispatch(&self.io_buf[..n], &mut self.wakeups);
                    drop(io);
                    if found.timer {
                        sys::drain_counter(me.timers.timerfd());
                    }
                    own = found.timer || found.io;
                    if found.watch {
                        self.tags.push(WATCH_TAG);
                    }
                }
                r.map(drop)
            } else if direct {
                sys::epoll_wait(&watch.epoll, &mut self.watch_buf, remaining, &mut self.tags)
            } else {
                sys::epoll_wait(&me.park, &mut self.buf, remaining, &mut self.tags)
            };
            me.parked.store(false, Ordering::SeqCst);
            debug_assert!(waited.is_ok(), "epoll_wait(park): {waited:?}");
            me.stats.wakeups.fetch_add(1, Ordering::Relaxed);
            if shared.is_shutdown() {
                // A hosted wait may have taken wakers out of their sources
                // already: fire them, or shutdown's pass over the sources
                // would not find them.
                self.wakeups.fire();
                break;
            }
            let mut round = Round {
                progressed: waited.is_err() || self.tags.is_empty() || own,
                own,
                ..Round::default()
            };
            let tags = std::mem::take(&mut self.tags);
            for &tag in &tags {
                self.on_tag(tag, watch, &mut round);
            }
            self.tags = tags;
            if direct {
                self.host_score = if round.foreign {
                    self.host_score.saturating_sub(2)
                } else if round.own {
                    (self.host_score + 1).min(HOST_SCORE_MAX)
                } else {
                    self.host_score
                };
            }
            unparked |= round.unparked;
            self.fire_own();
            if round.progressed || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if round.contended {
                // Another M is draining that poller right now; its readiness
                // (level-triggered) clears within microseconds.
                std::thread::yield_now();
            }
        }
        // Unparked for new work: this M may stay busy, so the role goes to
        // a parked M if there is one. Woken by I/O: it keeps the role (see
        // `watch`).
        let ops = Ops {
            shared: &shared,
            watch,
            host: false,
        };
        if watch.role.on_leave(self.index, unparked, &ops) {
            me.stats.handoffs.fetch_add(1, Ordering::Relaxed);
        }
        shared.monitor.kick();
    }

    /// Whether this P's M held its node's watcher role a moment ago (no
    /// lock; may be stale). Its park then blocks on every poller of the
    /// node, its own included, so a non-blocking poll of its own poller just
    /// before parking would only repeat what the park does: the executor
    /// skips it (one `epoll_wait` per light-load request).
    pub fn watches(&self) -> bool {
        let me = self.me();
        self.shared.nodes[me.node].role.holder_hint(self.index)
    }

    /// Acts on one tag from a park's wait: this P's unpark (from its park
    /// epoll or, as the holder, from the watch epoll), the watch (through
    /// the park epoll: ask it which pollers are ready), or a ready poller
    /// (the holder's direct wait).
    fn on_tag(&mut self, tag: u64, watch: &NodeWatch, round: &mut Round) {
        let me = &self.shared.ps[self.index];
        if tag == UNPARK_TAG || tag == UNPARK_IN_WATCH | self.index as u64 {
            if !round.unparked {
                // Drain, then clear the flag: see `notify` for why the
                // order matters (the other one lost wake-ups for good).
                me.notified.consume(|| sys::drain_counter(&me.unpark));
            }
            round.unparked = true;
            round.progressed = true;
        } else if tag == WATCH_TAG {
            let waited = sys::epoll_wait(
                &watch.epoll,
                &mut self.watch_buf,
                Some(Duration::ZERO),
                &mut self.watch_tags,
            );
            debug_assert!(waited.is_ok(), "epoll_wait(watch): {waited:?}");
            let tags = std::mem::take(&mut self.watch_tags);
            for &t in &tags {
                // Never WATCH_TAG again: the watch epoll does not hold itself.
                self.on_tag(t, watch, round);
            }
            self.watch_tags = tags;
        } else if tag & UNPARK_IN_WATCH != 0 {
            // Another P's eventfd, switched on in the watch until a moment
            // ago (the role moved under the lock since): its own M takes it.
            // Level-triggered, it may report again until then: yield rather
            // than spin on it.
            round.contended = true;
        } else {
            let p = tag as usize;
            match help(
                &self.shared.ps[p],
                &mut self.wakeups,
                &mut self.timer_wakers,
            ) {
                Help::Drained => {
                    if p != self.index {
                        me.stats.helps.fetch_add(1, Ordering::Relaxed);
                        round.foreign = true;
                    } else {
                        round.own = true;
                    }
                    round.progressed = true;
                }
                Help::Busy => round.contended = true,
            }
        }
    }
}

/// What one wake-up of a park found.
#[derive(Default)]
struct Round {
    /// This P was unparked (its eventfd consumed).
    unparked: bool,
    /// Something was done: unparked, a poller drained, or the wait failed.
    progressed: bool,
    /// A ready poller was being drained by another M.
    contended: bool,
    /// This P's own poller had events (timers included).
    own: bool,
    /// Another P's poller was drained.
    foreign: bool,
}

/// Polls `other`'s io poller on behalf of its M (busy, or asleep on its
/// eventfd), collecting wakers for the calling watcher to fire.
fn help(other: &PState, wakeups: &mut Wakeups, timer_wakers: &mut Vec<Waker>) -> Help {
    let io = match other.io.try_lock() {
        Ok(io) => io,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return Help::Busy,
    };
    if other.drain(io, wakeups) {
        other.timers.fire_expired(timer_wakers);
    }
    Help::Drained
}

impl Driver {
    /// Fires this P's due timers and every waker collected so far.
    fn fire_own(&mut self) {
        self.shared.ps[self.index]
            .timers
            .fire_expired(&mut self.timer_wakers);
        for w in self.timer_wakers.drain(..) {
            crate::fault::wake(w, "a timer's waker");
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

#[cfg(test)]
mod tests {
    use super::{io, readiness};

    /// The raw-flag reading matches mio's `Event` accessors on Linux, which
    /// the drain used before it read the epoll events itself.
    #[test]
    fn readiness_reads_epoll_flags_as_mio_does() {
        let f = |flags: libc::c_int| readiness(flags as u32);
        assert_eq!(f(libc::EPOLLIN), io::READABLE);
        assert_eq!(f(libc::EPOLLPRI), io::READABLE);
        assert_eq!(f(libc::EPOLLOUT), io::WRITABLE);
        assert_eq!(
            f(libc::EPOLLIN | libc::EPOLLRDHUP),
            io::READABLE | io::READ_CLOSED
        );
        // RDHUP alone (no data to read) is not read-closed for mio.
        assert_eq!(f(libc::EPOLLRDHUP), 0);
        assert_eq!(f(libc::EPOLLHUP), io::READ_CLOSED | io::WRITE_CLOSED);
        // A pipe whose reader is gone: EPOLLERR alone.
        assert_eq!(
            f(libc::EPOLLERR),
            io::WRITE_CLOSED | io::READABLE | io::WRITABLE
        );
        assert_eq!(
            f(libc::EPOLLOUT | libc::EPOLLERR),
            io::WRITE_CLOSED | io::READABLE | io::WRITABLE
        );
        assert_eq!(
            f(libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR),
            io::READABLE | io::WRITABLE | io::READ_CLOSED | io::WRITE_CLOSED
        );
    }
}
