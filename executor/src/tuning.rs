//! Every tuning constant of the executor, each with the reason for its
//! value: 15 independent numbers; every other value here is a formula of
//! them (or of the reactor's timer tick), with the reason it follows.
//! Settings a user can change (`global_queue_interval`, `event_interval`,
//! `blocking_keep_alive`, the stall and retake thresholds, ...) are
//! `Builder` methods, not here; sizes of data structures that are not
//! tuning (the ring's capacity, the hub table's slots, the batch queue's
//! bound, the registry's shards) sit beside their structures, each saying
//! why. The measurements behind the placement policy's values are in
//! docs/performance.md ("Placement rules") and the dated notes it lists.
//! The reactor's constants are in `reactor/src/tuning.rs`.
//!
//! This file imports nothing from this crate (one value from the reactor's):
//! every floor may read it.

use std::time::Duration;

// ---- The mechanism: the run loop and stealing (`scheduler/worker/`)

/// Consecutive `runnext` polls allowed before the ring gets a turn (tokio's
/// figure). A task run from `runnext` inherits the tick (Go's inheritTime),
/// so without this cap two tasks waking each other would starve the queue.
/// Past the cap, with the ring empty, the ring's turn is a tick (for the
/// node queue's 1-in-61 look) and the cap starts over.
pub(crate) const MAX_LIFO_POLLS: u32 = 3;

/// Passes over the victims when stealing (Go's `stealTries`).
pub(crate) const STEAL_PASSES: usize = 4;

/// How long a thief lets a running victim's `runnext` sit before taking it:
/// Go's 3 µs ("a sync chan send/recv takes ~50ns, so 3us gives ~50x overshoot").
pub(crate) const RUNNEXT_GRACE: Duration = Duration::from_micros(3);

/// Empty pre-park polls after which the node's watcher starts skipping
/// them, and how many it skips between two it still makes (step 5 of
/// `find_runnable`): at light load each is an empty `epoll_wait` per
/// request that the watcher's park repeats anyway.
pub(crate) const QUIET_POLLS: u8 = 8;

/// tokio's weight of one poll in a P's mean poll time (an exponential
/// moving average, `ProcCounters::record_busy`): the mean follows a change
/// of workload within a few tens of polls.
pub(crate) const EWMA_ALPHA: f64 = 0.1;

// ---- The placement policy (`scheduler/placement/`)

/// The reserve of a running P for its own M, in time: the tasks it reaches
/// within this long at its mean poll time (about four HTTP polls), for
/// which waking another P costs more than it saves.
pub(crate) const RESERVE_NS: u64 = 20_000;

/// The least time a queued task is taken to cost in [`RESERVE_NS`]'s count (a
/// fresh P's mean poll time is 0, and a queue of tiny tasks still costs its
/// dispatch).
pub(crate) const MIN_TASK_NS: u64 = 250;

/// Batch-queue polls before the ring gets a turn: a batch whose members
/// keep waking each other must not starve the P's other tasks.
pub(crate) const MAX_BATCH_RUN: u32 = 16;

/// A task whose last poll began longer ago than this (ms) has left its
/// batch: long next to a message round trip (µs), short next to a program
/// phase. Also how long a hub mark lasts, and what a hub measurement may
/// overrun before it counts as the hub's having stopped.
pub(crate) const BATCH_IDLE_MS: u32 = 100;

/// A poll that has woken this many different tasks is a hub's (a fan-in's
/// consumer waking its blocked producers); a pipeline's stage wakes only
/// its two neighbours, however often they block again during its poll.
pub(crate) const HUB_WAKES: u32 = 3;

/// Length of a hub batch's kept measurement (ms), after a warm-up of half
/// that: long enough for many hub wakes, short enough that a fan-in whose
/// producers compute runs serialized for little of its time.
pub(crate) const MEASURE_MS: u32 = 4;

/// Measurements in a row that may overrun (the hub stopped during them)
/// before the batch is spread anyway, the mode that never serializes work:
/// a hub that stops and starts again and again is not worth keeping, and
/// one overrun may be a single pause.
pub(crate) const MAX_RESTARTS: u32 = 3;

// ---- sysmon (`sysmon/`)

/// How long everything must stay asleep before the deadlock diagnostic
/// speaks: long enough for a foreign thread's usual reply (a test's 200 ms
/// sender), short enough to be seen by someone waiting at a terminal.
pub(crate) const DEADLOCK_GRACE: Duration = Duration::from_secs(1);

/// How soon `sysmon::judge_stall` looks again at a thread it could not judge (it
/// was waiting for a CPU, whose wait `schedstat` does not show yet), and
/// the fallback's shortest window: shorter ones are a handful of scheduler
/// ticks.
pub(crate) const STARVE_WINDOW: Duration = Duration::from_millis(2);

/// The fallback's (no `schedstat`): the share of the time since
/// `sysmon::judge_stall`'s first look below which a runnable M counts as starved
/// of CPU rather than held by its task. A task that spins on a CPU it
/// shares with one other busy thread runs ~50% of the time: still reported.
pub(crate) const STARVED_RUN_SHARE: f64 = 0.2;

// ---- Derived: moving work to another core

/// Work or a wait this long is worth moving to another core: five
/// reserves ([`RESERVE_NS`]), well past what a wake-up or a steal costs.
/// One quantity under three names below, each the point where the
/// runtime stops keeping work local.
const WORTH_MOVING_NS: u64 = 5 * RESERVE_NS;

/// How long a node's queue must go unserved before an M of another node
/// takes from it (every P of the node is then inside a task, see
/// `Shared::saturated`): a task that has just woken its awaiter and is
/// about to return still counts as running, and the awaiter's next
/// `spawn_on` to that node must not go to a remote spinner in that moment.
/// [`WORTH_MOVING_NS`] (100 µs, ~30x Go's runnext grace): long enough for
/// the node's own M, short next to the CPU a starved node wastes.
pub(crate) const REMOTE_GRACE: Duration = Duration::from_nanos(WORTH_MOVING_NS);

/// Polls this long on average get a P's queue offered ([`WORTH_MOVING_NS`]):
/// between the reserve window and this, the P's mean poll time catches up
/// by itself within `event_interval` polls and its reserve shrinks;
/// beyond, that wait grows to many milliseconds. Closer to the reserve
/// window, a fan-in's long polls before its hub was measured were offered
/// and its batch spread.
pub(crate) const OFFER_POLL: Duration = Duration::from_nanos(WORTH_MOVING_NS);

/// The most busy time per hub wake (ns) at which a measured batch stays
/// kept ([`WORTH_MOVING_NS`]): below it, its members hand values over
/// faster one after another on one P than across cores (a spread fan-in
/// costs microseconds per value in contention on many cores, whatever its
/// producers do).
pub(crate) const KEEP_WORK_NS: u64 = WORTH_MOVING_NS;

/// How soon the next round comes while a P seen in one poll at the last
/// round is still in it and reserves queued tasks from an idle P: about how
/// long tasks queued behind a long poll wait before they are offered
/// (two and a half [`OFFER_POLL`]s; a round costs the monitor thread a few
/// µs).
pub(crate) const OFFER_ROUND: Duration = Duration::from_nanos(5 * WORTH_MOVING_NS / 2);

// ---- Derived: a hub's keep-or-spread decision (`scheduler/placement/hub_mode.rs`)

/// Kept time before a measurement counts: members that a spread mode left
/// running elsewhere send a value, block and come back to the hub's P
/// first, and counted from the start they read as one value per wake.
pub(crate) const WARMUP_MS: u32 = MEASURE_MS / 2;

/// The first hold after a decision: a program phase, as long as a batch
/// lives without polls; doubled while the same mode wins.
pub(crate) const HOLD_MIN_MS: u32 = BATCH_IDLE_MS;

/// The longest hold: 16 first holds, so a settled program runs a wrong
/// mode for at most one warm-up and measurement (~0.4% of its time).
pub(crate) const HOLD_MAX_MS: u32 = 16 * HOLD_MIN_MS;

/// How long a spawn site's last decision stands for a new hub spawned
/// there (six longest holds): it starts held that way for [`HOLD_MIN_MS`]
/// instead of measured kept (a program that builds a fan-in per request
/// would otherwise measure every one, serializing producers that compute).
pub(crate) const SITE_MEMORY_MS: u32 = 6 * HOLD_MAX_MS;

// ---- Derived: sysmon's slow looks

/// How often sysmon looks again while a paused clock has pending timers: the
/// latency of one auto-advance step (after a step, the woken M's kick the
/// monitor; this bounds the wait when nothing kicks it). One timer tick:
/// timers fire at that granularity on the real clock too, so a shorter
/// recheck buys nothing and a longer one makes paused time slower than real.
pub(crate) const PAUSED_RECHECK: Duration = numa_rt_reactor::TIMER_TICK;

/// How often the CPU quota is re-read (Go re-reads it about once a second):
/// sysmon's slow look, [`DEADLOCK_GRACE`]. A container's quota changes
/// rarely and a read costs microseconds, so every period from a tenth of a
/// second to ten seconds behaves the same; this one adds no number.
pub(crate) const QUOTA_REREAD: Duration = DEADLOCK_GRACE;
