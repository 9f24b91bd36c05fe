//! sysmon: the runtime watching itself (Go's `sysmon`, `schedtrace` and
//! "all goroutines are asleep").
//!
//! One monitor thread per runtime, the reactor's (`numa_rt-monitor`, see
//! `numa_rt_reactor`'s `driver::monitor`): it sleeps 20 µs, doubling to
//! 10 ms while nothing happens, and sleeps until kicked once every M is
//! parked. At every round it moves the watcher role away from a busy M (the
//! reactor's part) and calls `Sysmon::tick` (this module), which
//!
//! - **reports stalls**: a P whose M has been inside one poll for longer
//!   than the stall threshold (default 10 ms; `Builder::stall_threshold`,
//!   `NUMA_RT_STALL_MS`) gets one line on stderr per task and stall, naming
//!   the task, the P, the M and how many tasks wait behind it (with the
//!   `tracing` feature and a subscriber that wants it, a `warn!` event with
//!   target `numa_rt::sysmon` and those as fields instead). A stall is
//!   seen without any cost to the poll: the P's poll counter has not moved
//!   since the previous round while the P is inside a task (Go's
//!   `schedtick` test), so no clock is read per poll. A stall counts only
//!   the time the poll held its thread: the wall time (from the second
//!   round that finds it) less the time the M thread was runnable but
//!   waiting for a CPU, from the kernel's per-thread `schedstat`. A task that burns CPU
//!   or sleeps in a system call is reported once that reaches the
//!   threshold; a poll slow only because its thread was preempted (an
//!   oversubscribed machine, busy neighbours on its CPU, a container
//!   throttled by its CPU quota) is not. Where `schedstat` cannot be read,
//!   a CPU-share rule stands in: runnable and under a fifth of the time on
//!   a CPU is starvation, which still blames a thread left more than a
//!   fifth (`judge_stall` has both);
//! - **prints the schedtrace** every `NUMA_RT_SCHEDTRACE` milliseconds
//!   (`Builder::schedtrace`): Go's `SCHED` line plus one line per node, and
//!   with `,detail` one line per P (Go's `scheddetail`);
//! - **diagnoses deadlocks**: when a `block_on` is parked, every P is idle,
//!   no timer is pending, no I/O source has a waiter, no `block_in_place`
//!   closure runs and the blocking pool is empty, nothing inside the
//!   runtime can ever wake anything. Unless a foreign thread holds a waker,
//!   that is a deadlock. After a grace period
//!   (1 s) with no wake-up it prints `numa_rt: all tasks are asleep -
//!   possible deadlock` once (`warn`), or makes every parked `block_on`
//!   panic with that message (`panic`), or does nothing (`off`);
//!   `NUMA_RT_DEADLOCK` or `Builder::deadlock`. The default is `warn` in
//!   debug builds and `off` in release builds.
//! - **auto-advances paused time**: while the runtime's clock is paused
//!   (`numa_rt::time::pause`, `Builder::start_paused`) and every task is
//!   idle (every M parked, every P idle with empty queues, every `block_on`
//!   parked, no `block_in_place` or blocking-pool work), it unparks the M
//!   of the P with the earliest timer, which moves the clock there as it
//!   parks again (`Reactor::auto_advance`; only M's advance, so an event an
//!   M has just taken from its poller is delivered first). This is the
//!   fallback: the thread that makes the runtime idle (an M about to park,
//!   a parking `block_on`) starts the advance by itself, asking
//!   [`runtime_idle`] through the hook's `runtime_idle`;
//!   the round catches idleness nobody parked into (a blocking-pool task
//!   that ends without waking anything). A paused runtime with timers is therefore
//!   never diagnosed as deadlocked. docs/architecture.md, "Paused time
//!   (tests)", has the design and its races.
//!
//! - **retakes stuck P's** (Go's `retake`): a P whose M has been inside one
//!   poll longer than the retake threshold (default 10 ms;
//!   `Builder::retake_threshold`, `NUMA_RT_RETAKE_MS`) while the P has other
//!   work is handed, with its queue, reactor and timers, to another M, as
//!   `block_in_place` would; the protocol that lets the monitor take the
//!   core from under a running M is in `scheduler::seat`.
//! - **offers queues kept behind long polls**, whatever else is configured:
//!   a P whose polls since the last round ran longer than 100 µs on
//!   average, or that is still in the same poll 100 µs on, while tasks
//!   wait in its ring and a P is idle, has its poll marked long for
//!   thieves and an idle P woken (`offer_queue`); while such a P stays in
//!   one poll with tasks queued, the next round comes within 250 µs. Thieves leave a
//!   running P's short queue to it on the promise that it reaches the
//!   tasks soon; a poll that does not end breaks it
//!   (docs/architecture.md, "Stealing"). A task alone in `runnext`
//!   behind the same poll for two rounds at least 100 µs apart, beside an
//!   idle P, gets an idle P woken once per poll (`offer_runnext`; every
//!   placement): queuing it woke nobody.
//! - **re-reads the CPU quota** about once a second when `max_procs` was
//!   left to its default: P's above a shrunk quota retire (take no work)
//!   until it grows back, never leaving fewer than 2
//!   (`Worker::retired_round`).
//!
//! Every figure comes from the counters `RuntimeMetrics` reads: one source.
//! The network poll of Go's sysmon is the reactor's part of the round
//! (`driver::monitor`); docs/architecture.md, "sysmon", has all of it.
//!
//! Files: this one is the round (`Sysmon::tick`); `stall` judges and
//! retakes stuck P's, `offer` offers queues kept behind long polls,
//! `deadlock` says whether the runtime is asleep (for the diagnostic and
//! paused time), `trace` formats the schedtrace and the task dump.

mod deadlock;
mod offer;
mod stall;
mod trace;

pub(crate) use trace::{dump, schedtrace};

use crate::config::DeadlockMode;
use crate::scheduler::Shared;
use crate::tuning::{DEADLOCK_GRACE, PAUSED_RECHECK, QUOTA_REREAD};
use deadlock::{looks_deadlocked, report_deadlock, runtime_idle};
use numa_rt_numa::sys::SchedStatFile;
use stall::{check_stalls, Stall};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

/// The executor's half of the monitor thread.
pub(crate) struct Sysmon {
    shared: Weak<Shared>,
    state: Mutex<State>,
    /// Whether this kernel keeps `schedstat` (read once, on the building
    /// thread): where it does not, `stall::judge_stall` uses its fallback
    /// without trying to open a file per stall.
    schedstat: bool,
    /// Whether the monitor thread was placed on every node's CPUs (at its
    /// first round: it may have been started by a thread bound to a node).
    placed: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Per P: its poll count when first seen inside the same poll, when,
    /// and whether that stall was reported.
    stalls: Vec<Option<Stall>>,
    /// Per P: its M's `schedstat`, kept open (see `stall::judge_stall`); `None`
    /// until needed, or where it cannot be read.
    schedstats: Vec<Option<SchedStatFile>>,
    /// When the next schedtrace is due.
    next_trace: Option<Instant>,
    /// When the CPU quota is re-read next.
    next_quota: Option<Instant>,
    /// Since when the runtime has looked deadlocked, and whether this
    /// episode was reported.
    asleep_since: Option<Instant>,
    /// `block_on` polls when the runtime was first seen asleep: a
    /// `block_on` woken from outside in between is progress.
    asleep_polls: u64,
    reported_deadlock: bool,
    /// `membarrier` failed at a retake although it was registered: retake
    /// stays off.
    retake_failed: bool,
    /// Per P: its poll count, busy time (ns) and the time at the last
    /// round, for the queue offer (`offer_queue`).
    rates: Vec<Option<(u64, u64, Instant)>>,
    /// Per P: the poll during which its lone `runnext` task was last
    /// offered to an idle P (`offer_runnext`; once per poll).
    runnext_offered: Vec<u64>,
}

impl Sysmon {
    pub(crate) fn new(shared: Weak<Shared>) -> Sysmon {
        let tid = numa_rt_numa::sys::gettid();
        Sysmon {
            shared,
            state: Mutex::new(State::default()),
            schedstat: SchedStatFile::open(tid).is_ok(),
            placed: AtomicBool::new(false),
        }
    }
}

impl numa_rt_reactor::SysmonHook for Sysmon {
    /// Paused time's auto-advance asks this from whichever thread goes idle
    /// last (an M in its park, a parking `block_on`, the monitor).
    fn runtime_idle(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|shared| !shared.is_shutdown() && runtime_idle(&shared))
    }

    fn tick(&self, idle: bool) -> Option<Duration> {
        let shared = self.shared.upgrade()?;
        if shared.is_shutdown() {
            return None;
        }
        if !self.placed.swap(true, Relaxed) {
            crate::scheduler::thread_life::place_nodeless(&shared);
        }
        let paused = shared.reactor.is_clock_paused();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut limit: Option<Duration> = None;
        let mut bound = |d: Duration| limit = Some(limit.map_or(d, |l| l.min(d)));

        let cfg = &shared.config;
        // Always, whatever is configured: besides stalls and retakes, it
        // offers queues kept behind long polls (`offer_queue`).
        if !idle {
            if let Some(d) = check_stalls(&shared, &mut st, self.schedstat, now) {
                bound(d);
            }
        } else {
            st.stalls.clear();
        }

        // The CPU quota may change while the process runs (Go 1.25 re-reads
        // it too): P's above it retire until it grows back. Only while the
        // monitor is awake: an idle runtime does not care, and its next
        // round after a wake-up re-reads at once.
        if let Some(source) = &cfg.procs_source {
            if st.next_quota.is_none_or(|t| now >= t) {
                st.next_quota = Some(now + QUOTA_REREAD);
                let n = shared.nprocs();
                // Never fewer than 2 (Go's floor for a quota), or all if fewer.
                let target = source().clamp(n.min(2), n);
                if target != shared.active_procs() {
                    shared.set_active_procs(target);
                }
            }
        }

        if let Some(trace) = shared.config.schedtrace {
            let due = *st.next_trace.get_or_insert(now + trace.every);
            if now >= due {
                eprint!("{}", schedtrace(&shared, trace.detail));
                st.next_trace = Some(now + trace.every);
            }
            bound(st.next_trace.unwrap_or(now).saturating_duration_since(now));
        }

        if paused {
            if idle && runtime_idle(&shared) && shared.reactor.auto_advance() {
                // Timers fired: their tasks run, and nothing is asleep.
                st.asleep_since = None;
            }
            if shared.reactor.pending_timers() > 0 {
                // Look again soon: a blocking-pool task or a `block_on`
                // that was running may finish without waking any M (so
                // without a kick), leaving only auto-advance to go on.
                bound(PAUSED_RECHECK);
            }
        }

        if shared.config.deadlock != DeadlockMode::Off {
            // A paused runtime with timers is not deadlocked: auto-advance
            // fires them (`looks_deadlocked` requires no pending timer).
            if idle && looks_deadlocked(&shared) {
                let polls = shared.block_ons.polls.load(Relaxed);
                if st.asleep_since.is_none() || st.asleep_polls != polls {
                    st.asleep_since = Some(now);
                    st.asleep_polls = polls;
                    st.reported_deadlock = false;
                }
                let since = st.asleep_since.unwrap_or(now);
                let waited = now.saturating_duration_since(since);
                if waited >= DEADLOCK_GRACE {
                    if !st.reported_deadlock {
                        st.reported_deadlock = true;
                        report_deadlock(&shared);
                    }
                } else {
                    bound(DEADLOCK_GRACE - waited);
                }
            } else if !idle {
                st.asleep_since = None;
                st.reported_deadlock = false;
            } else {
                st.asleep_since = None;
            }
        }
        limit
    }
}
