//! Every tuning constant of the reactor, each with the reason for its
//! value: 12 independent numbers, and two values written as formulas of
//! them. Settings a user can change are `Builder` methods of the executor
//! (`io_events_per_tick`, whose default is [`EVENTS_PER_TICK`](crate::EVENTS_PER_TICK)),
//! not here; sizes that are not tuning (the timer wheel's levels and slots,
//! the signal table, the descriptors per processor) sit beside their
//! structures. The executor's constants are in `executor/src/tuning.rs`.
//!
//! This file imports nothing from the crate: every module may read it.

use std::time::Duration;

// ---- Tasks and timers

/// Operations a task may perform per poll before it is made to yield
/// (`coop`): tokio's figure, tuned on real servers.
pub const BUDGET: u8 = 128;

/// The length of one tick of the timer wheel (`driver/wheel.rs`): timers
/// fire on a tick's boundary. tokio's 1 ms: finer costs a wheel turn per
/// tick for no program we know of; coarser is visible in latency.
pub const TIMER_TICK: Duration = Duration::from_millis(1);

/// A late `Interval` tick counts as "missed" only beyond this slack, so
/// scheduling jitter does not change the schedule (tokio uses the same 5 ms).
pub(crate) const MISSED_SLACK: Duration = Duration::from_millis(5);

/// How long a listener waits before retrying after running out of
/// descriptors: long enough for some connection to close meanwhile, short
/// next to a client's connect timeout.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// At most one line on stderr per this long about listeners out of
/// descriptors (the next one counts those held back): a service in trouble
/// says so without flooding its log.
pub(crate) const ACCEPT_REPORT_EVERY: Duration = Duration::from_secs(10);

// ---- Where a source is polled (`driver/registration.rs`)

/// Polls in a row from one other P after which a source moves to that P's
/// poller the first time (see the module docs). Each move doubles it for
/// that source, up to `MOVE_AFTER << MAX_BACKOFF`.
pub(crate) const MOVE_AFTER: u32 = 3;

/// The most doublings of [`MOVE_AFTER`]: a source that keeps moving waits
/// for a streak of ~3,000 polls before it moves again, so a connection
/// whose tasks wander costs a move per few thousand polls at most.
pub(crate) const MAX_BACKOFF: u32 = 10;

// ---- The node's watch (`driver/park.rs`, `driver/watch.rs`)

/// `Driver::host_score` at which a holder takes the watch into its own
/// poller (the score rises by one a round of its own events, falls by two
/// a round of foreign ones); it gives the watch back once the score is 0.
pub(crate) const HOST_AT: u8 = 4;

/// The score's ceiling: twice [`HOST_AT`], so that a settled host (at the
/// ceiling) keeps the watch through `HOST_AT` foreign rounds in a row, as
/// many as the own rounds it took to climb there from `HOST_AT`.
pub(crate) const HOST_SCORE_MAX: u8 = 2 * HOST_AT;

/// The P's of a node whose park epolls can take the watch: the first ones of
/// the node. Each candidate's park epoll holds the watch epoll (switched off
/// unless it is the watcher), and every event on the node's pollers walks the
/// watch epoll's waiters, so the count is bounded; more than enough for the
/// role to find a parked M whenever the node has idle P's to speak of.
pub(crate) const CANDIDATES: usize = 8;

/// How many of a node's nearest other nodes can watch it while all its M's
/// run (`driver/lend.rs`): its lend epoll sits, switched off until lent, in
/// their watch epolls. The kernel counts the paths from a socket to a top
/// epoll (at most 50 of the deepest length) and each target multiplies them
/// by `CANDIDATES`: 3 stays under the limit, and the nearest three nodes
/// cover a 2–8 node machine's neighbours.
pub(crate) const LEND_TARGETS: usize = 3;

// ---- The monitor thread (`driver/monitor.rs`)

/// The monitor's first sleep between two looks (Go's sysmon: 20 µs),
/// doubled while it finds nothing to do.
pub(crate) const MIN_DELAY: Duration = Duration::from_micros(20);

/// The monitor's longest sleep between two looks (Go's sysmon: 10 ms).
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(10);

/// How long a P's io poller may go undrained, while no parked watcher
/// watches its node, before the monitor polls it itself: its longest sleep
/// ([`MAX_DELAY`]), as Go's sysmon polls the network when nobody has for
/// 10 ms. A shorter one would be seen only every `MAX_DELAY` anyway.
pub(crate) const UNWATCHED_POLL: Duration = MAX_DELAY;
