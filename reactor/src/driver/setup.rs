//! Building the reactor: per P, an io poller (mio's epoll, its `Registry`
//! cloned so that registering never waits for a thread that is polling), a
//! timerfd registered in it (a due timer is an io event like any other), an
//! unpark eventfd and a park epoll; per node, a watch epoll holding every
//! io poller of the node. The node's first [`CANDIDATES`] P's (the ones that
//! may hold the watcher role) also get the watch epoll in their park epoll
//! and their eventfd in the watch epoll, both registered switched off: the
//! role switches them on ([`super::watch`]).
//!
//! Nesting is two levels (park epoll → watch epoll → io epolls, which hold
//! sockets and timerfds; or a hosting P's io epoll → watch epoll → the other
//! io epolls), with no cycle, below the kernel's limit of 4. A park epoll
//! holds at most two entries and a watch epoll at most two per P of its
//! node, so building the drivers is linear in the P count.
//!
//! On a runtime with several nodes, each node also gets a *lend epoll*
//! holding its io pollers, added switched off to the watch epolls of its
//! nearest other nodes ([`super::lend`]): a chain of four epolls at most
//! (a park epoll or hosting poller → a watch → a lend epoll → an io
//! poller), the kernel's limit, and no cycle.
//!
//! Also here: the reactor's small API (which P a new source goes to,
//! whether it is shut down) and [`Reactor::shutdown`].
//!
//! [`CANDIDATES`]: super::watch::CANDIDATES

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mio::{Interest, Poll};

use super::io::{self, Slab, Wakeups};
use super::lend::{Lending, LEND_TARGETS};
use super::stats::Stats;
use super::timers::Timers;
use super::watch::Role;
use super::watch_ops::LendEpolls;
use super::{
    monitor, notify, paused, Driver, EventsPerTick, IoPoller, NodeWatch, PState, Reactor, Shared,
    FDS_PER_PROC, LEND_IN_WATCH, TIMER_TOKEN, UNPARK_IN_WATCH, UNPARK_TAG, WATCH_TAG,
};
use crate::clock::Clock;
use crate::sys;

impl Reactor {
    /// Builds the drivers of `procs` processors, all in one node.
    pub fn new(procs: usize) -> std::io::Result<Reactor> {
        Reactor::with_nodes(&vec![0; procs.max(1)])
    }

    /// Builds one driver per entry of `node_of_p` (the NUMA node of each P).
    /// The watcher of a node helps busy P's of that node only.
    ///
    /// Each P takes [`FDS_PER_PROC`] descriptors and each node one (two on
    /// a runtime of several nodes: its watch and lend epolls). An error
    /// from the OS names the limit that caused it: `RLIMIT_NOFILE` (with the
    /// number of descriptors needed), the system-wide `fs.file-max`, or
    /// `fs.epoll.max_user_watches`.
    pub fn with_nodes(node_of_p: &[usize]) -> std::io::Result<Reactor> {
        Reactor::with_nodes_and_events(node_of_p, EventsPerTick::default())
    }

    /// [`Reactor::with_nodes`], each look at a poller taking at most
    /// `events` (both at least 1).
    pub fn with_nodes_and_events(
        node_of_p: &[usize],
        events: EventsPerTick,
    ) -> std::io::Result<Reactor> {
        let nnodes = node_of_p.iter().max().map_or(1, |&m| m + 1);
        // Without a distance table: nearer by index.
        let order: Vec<Vec<usize>> = (0..nnodes)
            .map(|n| {
                let mut o: Vec<usize> = (0..nnodes).filter(|&k| k != n).collect();
                o.sort_by_key(|&k| k.abs_diff(n));
                o
            })
            .collect();
        Reactor::with_nodes_events_and_order(node_of_p, events, &order)
    }

    /// [`Reactor::with_nodes_and_events`], with each node's other nodes
    /// nearest first (`remote_order[n]`, by the distance table): a node
    /// whose M's are all busy lends its pollers to the nearest node whose
    /// watcher is parked (see the driver's `lend`).
    pub fn with_nodes_events_and_order(
        node_of_p: &[usize],
        events: EventsPerTick,
        remote_order: &[Vec<usize>],
    ) -> std::io::Result<Reactor> {
        assert!(!node_of_p.is_empty(), "a reactor needs at least one P");
        assert!(
            events.waiting > 0 && events.busy > 0,
            "a look at a poller takes at least one event"
        );
        let nnodes = node_of_p.iter().max().map_or(1, |&m| m + 1);
        Reactor::build(node_of_p, nnodes, events, remote_order).map_err(|e| {
            let procs = node_of_p.len();
            let per_node = if nnodes > 1 { 2 } else { 1 };
            let need = procs * FDS_PER_PROC + nnodes * per_node;
            let limit = match e.raw_os_error() {
                Some(libc::EMFILE) => format!(
                    "the process's descriptor limit: {procs} processors need {need} file \
                     descriptors ({FDS_PER_PROC} per processor, {per_node} per node) besides those already \
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

    fn build(
        node_of_p: &[usize],
        nnodes: usize,
        events: EventsPerTick,
        remote_order: &[Vec<usize>],
    ) -> std::io::Result<Reactor> {
        let has_procs = |n: usize| node_of_p.contains(&n);
        // Per node with P's: the nearest other nodes with P's that can watch
        // it (see `lend`); none on a one-node runtime.
        let targets: Vec<Vec<usize>> = (0..nnodes)
            .map(|n| {
                if !has_procs(n) {
                    return Vec::new();
                }
                let order = remote_order.get(n).map_or(&[][..], |o| &o[..]);
                order
                    .iter()
                    .copied()
                    .filter(|&k| k != n && k < nnodes && has_procs(k))
                    .take(LEND_TARGETS)
                    .collect()
            })
            .collect();
        let mut nodes = Vec::with_capacity(nnodes);
        for (n, targets) in targets.iter().enumerate() {
            let procs: Vec<usize> = (0..node_of_p.len())
                .filter(|&i| node_of_p[i] == n)
                .collect();
            nodes.push(NodeWatch {
                epoll: sys::epoll_create()?,
                lend: match targets.is_empty() {
                    true => None,
                    false => Some(sys::epoll_create()?),
                },
                procs: procs.len(),
                role: Role::new(&procs),
            });
        }
        // Each lend epoll into its targets' watches, switched off.
        for (n, targets) in targets.iter().enumerate() {
            if let Some(lend) = &nodes[n].lend {
                for &t in targets {
                    let tag = LEND_IN_WATCH | n as u64;
                    sys::epoll_add_level(&nodes[t].epoll, lend.as_raw_fd(), tag)?;
                    sys::epoll_set_level(&nodes[t].epoll, lend.as_raw_fd(), tag, false)?;
                }
            }
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
            if let Some(lend) = &watch.lend {
                sys::epoll_add_level(lend, poll.as_raw_fd(), i as u64)?;
            }
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
                    events: vec![libc::epoll_event { events: 0, u64: 0 }; events.busy],
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
                armed: AtomicU8::new(0),
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
            lending: Lending::new(targets),
            next_p: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            monitor: monitor.clone(),
            clock,
            paused: paused::Paused::default(),
            events,
        });
        // No M is parked yet: every node starts lent (see `lend`).
        shared.lending.lend_all(&LendEpolls(&shared));
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
            // Every poller of the node, the watcher's own eventfd and the
            // lend epolls of the nodes lent to it.
            watch_buf: vec![empty; node_procs + 1 + self.shared.nodes.len()],
            watch_tags: Vec::with_capacity(node_procs),
            io_buf: vec![empty; self.shared.events.waiting],
            lend_buf: Vec::new(),
            lend_tags: Vec::new(),
            host_score: 0,
            wakeups: Wakeups::default(),
            timer_wakers: Vec::new(),
        }
    }

    /// Closes every driver: pending I/O fails, timers are dropped.
    ///
    /// Every source is marked shut down and its waiters woken (their next
    /// poll fails with "numa_rt runtime has shut down"); every timer's
    /// waiter is woken (a task of the runtime is then dropped by the
    /// executor; a waiter outside the runtime — a foreign `block_on` —
    /// polls its timer again and gets a panic naming the shutdown); new
    /// registrations and timers are refused; every driver is unparked. All
    /// descriptors are owned and close when the last clone of the reactor
    /// (and every socket that registered with it) is gone.
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

    /// Every P's io poller (epoll) fd: paused time peeks at them.
    pub(crate) fn io_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.ps.iter().map(|p| p.io_fd).collect()
    }
}
