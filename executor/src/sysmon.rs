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
//!   (docs/architecture.md, "Stealing").
//! - **re-reads the CPU quota** about once a second when `max_procs` was
//!   left to its default: P's above a shrunk quota retire (take no work)
//!   until it grows back, never leaving fewer than 2
//!   (`Worker::retired_round`).
//!
//! Every figure comes from the counters `RuntimeMetrics` reads: one source.
//! The network poll of Go's sysmon is the reactor's part of the round
//! (`driver::monitor`); docs/architecture.md, "sysmon", has all of it.

use crate::config::{DeadlockMode, DEADLOCK_ENV};
use crate::metrics::RuntimeMetrics;
use crate::scheduler::placement::hub_mode::Mode;
use crate::scheduler::{lifecycle, Shared};
use crate::task::{TaskDump, TaskInfo, TaskState};
use crate::tuning::{
    DEADLOCK_GRACE, OFFER_POLL, OFFER_ROUND, PAUSED_RECHECK, QUOTA_REREAD, STARVED_RUN_SHARE,
    STARVE_WINDOW,
};
use numa_rt_numa::sys::SchedStatFile;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The executor's half of the monitor thread.
pub(crate) struct Sysmon {
    shared: Weak<Shared>,
    state: Mutex<State>,
    /// Whether this kernel keeps `schedstat` (read once, on the building
    /// thread): where it does not, [`judge_stall`] uses its fallback
    /// without trying to open a file per stall.
    schedstat: bool,
}

#[derive(Default)]
struct State {
    /// Per P: its poll count when first seen inside the same poll, when,
    /// and whether that stall was reported.
    stalls: Vec<Option<Stall>>,
    /// Per P: its M's `schedstat`, kept open (see [`judge_stall`]); `None`
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
}

#[derive(Clone, Copy)]
struct Stall {
    polls: u64,
    since: Instant,
    reported: bool,
    /// The M thread's figures when the stall was seen a second time (see
    /// [`judge_stall`]).
    base: BaseRead,
    /// The fallback's: past the stall threshold, when the M thread's CPU
    /// time was first read, and its value (see [`judge_stall`]).
    probe: Option<(Instant, Duration)>,
}

/// [`Stall::base`].
#[derive(Clone, Copy)]
enum BaseRead {
    /// Not yet: the stall was seen once.
    Unread,
    Read(Base),
    /// `schedstat` could not be read: the fallback judges this stall.
    Unavailable,
}

/// What [`judge_stall`] measures from: when, and the M thread's id,
/// run-queue wait (`schedstat`) and CPU time then.
#[derive(Clone, Copy)]
struct Base {
    at: Instant,
    tid: i32,
    waiting: Duration,
    cpu: Duration,
}

/// What [`judge_stall`] found.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    /// The task holds its thread (it runs, or it sleeps in a system call):
    /// report it.
    Task,
    /// The poll outlasted the threshold only because its thread waited for
    /// a CPU: the machine, or the process's CPU quota, is oversubscribed,
    /// and the poll is slow through no fault of the task. Not reported;
    /// looked at again after `again` (the soonest the task can have held
    /// its thread for the threshold).
    Starved { again: Duration },
    /// Not known yet: the thread is waiting for a CPU right now, or (the
    /// fallback) the first look, or a window too short.
    Later,
}

/// Whether P `p`'s stall past the threshold is its task's doing. The poll
/// counter cannot tell a task that holds its thread from a thread the OS
/// does not run: with more runnable threads than CPUs (`wrk` beside the
/// server, a noisy neighbour), or in a container throttled by its CPU quota
/// (CFS throttles for up to a period, 100 ms by default), any poll can
/// outlast the threshold, and blaming its task then sends the task's author
/// after a bug that is not there.
///
/// The measure is the time the poll held its thread: its wall time less
/// the time the thread was runnable but waiting for a CPU. Linux keeps that
/// wait per thread, in `/proc/self/task/<tid>/schedstat` (its second field;
/// a CFS throttle counts in it too): read, with the thread's CPU-time
/// clock, when the stall is seen the second time (`Stall::base`), and again
/// at each look past the threshold. The poll is the task's doing once
/// `wall − wait` since the base reaches the threshold. That covers a task that
/// burns CPU (it holds its thread while it runs) and one that blocks in a
/// system call (sleeping counts against the task: it is not waiting for a
/// CPU), while a poll slowed only by preemption is not blamed however long
/// it lasts, and one that is both (a task spinning on a shared CPU) is
/// blamed once its own part reaches the threshold.
///
/// The kernel adds a wait up only when it ends, as the thread gets a CPU:
/// for a thread waiting right now (`SchedLook::settled` false: runnable,
/// and its CPU clock not ahead of the scheduler's figure) the wait in
/// progress is missing, and `wall − wait` would blame the task for it.
/// Such a look counts only the CPU time since the base, a lower bound of
/// the time held (its sleeps cannot be told from the wait in progress).
/// It cannot just wait for a settled look: this thread waking on the M's
/// CPU preempts the M, so every look can find it waiting (seen: a task
/// spinning beside a busy thread was never reported).
///
/// The base is read at the second sighting, not the first, so that only a
/// poll that outlasts a whole round costs reads: under load the monitor
/// can go round every 20 µs while every P is inside some short poll. The
/// time before the base counts as not held, so a real stall is reported up
/// to one round (at most 10 ms) later than its wall time alone would say,
/// never earlier; so does a wait in progress at the base, which is counted
/// whole when it ends.
///
/// Cost: one `pread` of an open file and one clock read per poll
/// that outlasts a round (no path lookup; the file is reopened when the
/// P's M changes), three or four reads per look past the threshold, none
/// per poll.
///
/// Where `schedstat` cannot be read (a kernel without `CONFIG_SCHED_INFO`,
/// or one that prints `0 0 0`), the fallback is a CPU-share rule: the M
/// thread's CPU-time clock at the first look past the threshold and at each
/// later one, and its state (`R` runnable, `S`/`D` asleep). A thread that
/// is runnable and has used under a fifth of the time since the first look
/// was waiting for a CPU; anything else is reported. The share is taken
/// over the whole time since the first look, not since the last round: a
/// starved thread still gets a slice now and then, and a short window that
/// catches one would blame the task. It blames a poll preempted by busy
/// threads that leave it more than a fifth of its CPU (seen in a soak with
/// `wrk` on the same CPUs), which `schedstat` does not.
/// Where neither can be read the stall is reported.
fn judge_stall(
    shared: &Shared,
    p: usize,
    s: &mut Stall,
    schedstats: &mut [Option<SchedStatFile>],
    threshold: Duration,
    now: Instant,
) -> Judged {
    let Some(m) = shared.procs[p].holder() else {
        return Judged::Task;
    };
    if let BaseRead::Read(base) = s.base {
        let file = &mut schedstats[p];
        // (Another M than the base's, or no file: the fallback.)
        match file
            .as_ref()
            .filter(|f| f.tid() == base.tid && base.tid == m.tid)
            .map(|f| f.look())
        {
            Some(Ok(look)) => {
                let held = if look.settled {
                    // The wall time now, after the reads: every wait that
                    // ended before them is in `look.stat`.
                    let wall = Instant::now().saturating_duration_since(base.at);
                    wall.saturating_sub(look.stat.waiting.saturating_sub(base.waiting))
                } else {
                    look.cpu_time.saturating_sub(base.cpu)
                };
                return match threshold.checked_sub(held) {
                    Some(left) if !left.is_zero() && look.settled => Judged::Starved {
                        again: left.max(STARVE_WINDOW),
                    },
                    Some(left) if !left.is_zero() => Judged::Later,
                    _ => Judged::Task,
                };
            }
            // The thread is gone, or the file unreadable: the fallback.
            Some(Err(_)) => *file = None,
            None => {}
        }
        s.base = BaseRead::Unavailable;
    }
    let Ok(cpu) = numa_rt_numa::sys::thread_cpu_time(m.tid) else {
        return Judged::Task;
    };
    let Some((at, before)) = s.probe else {
        s.probe = Some((now, cpu));
        return Judged::Later;
    };
    let window = now.saturating_duration_since(at);
    if window < STARVE_WINDOW {
        return Judged::Later;
    }
    let ran = cpu.saturating_sub(before).as_secs_f64();
    let runnable = numa_rt_numa::sys::thread_state(m.tid).is_ok_and(|c| c == 'R');
    if runnable && ran < STARVED_RUN_SHARE * window.as_secs_f64() {
        Judged::Starved {
            again: STARVE_WINDOW,
        }
    } else {
        Judged::Task
    }
}

/// [`Stall::base`] for P `p`, whose stall is seen the second time now:
/// its M's thread id, `schedstat` wait and CPU time, through the P's open
/// file (opened for a new M). `None` where there is no M or they cannot be
/// read: that stall is judged by the fallback.
fn stall_base(
    shared: &Shared,
    p: usize,
    schedstats: &mut [Option<SchedStatFile>],
    now: Instant,
) -> Option<Base> {
    let m = shared.procs[p].holder()?;
    let file = &mut schedstats[p];
    if file.as_ref().is_none_or(|f| f.tid() != m.tid) {
        *file = SchedStatFile::open(m.tid).ok();
    }
    let read = file.as_ref()?.read().and_then(|stat| {
        let cpu = numa_rt_numa::sys::thread_cpu_time(m.tid)?;
        Ok(Base {
            at: now,
            tid: m.tid,
            waiting: stat.waiting,
            cpu,
        })
    });
    if read.is_err() {
        *file = None;
    }
    read.ok()
}

impl Sysmon {
    pub(crate) fn new(shared: Weak<Shared>) -> Sysmon {
        let tid = numa_rt_numa::sys::gettid();
        Sysmon {
            shared,
            state: Mutex::new(State::default()),
            schedstat: SchedStatFile::open(tid).is_ok(),
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

/// Finds the P's stuck inside one poll: reports them past the stall
/// threshold, and past the retake threshold hands their core to another M
/// if they have other work. Before either, offers the queue of a P running
/// long polls to an idle P (`offer_queue`). Returns how soon the next
/// round is wanted: a retake may be due, a stall's judgement
/// (`judge_stall`) waits on it, or a P stuck in one poll keeps a queue.
/// `schedstat`: whether the kernel keeps it (`judge_stall`).
fn check_stalls(
    shared: &Arc<Shared>,
    st: &mut State,
    schedstat: bool,
    now: Instant,
) -> Option<Duration> {
    let cfg = &shared.config;
    let retake = cfg.retake_threshold.filter(|_| !st.retake_failed);
    let mut due: Option<Duration> = None;
    let mut soon = |d: Duration| due = Some(due.map_or(d, |x| x.min(d)));
    st.stalls.resize(shared.procs.len(), None);
    st.rates.resize(shared.procs.len(), None);
    let now_ns = crate::task::epoch_ns(now);
    st.schedstats.resize_with(shared.procs.len(), || None);
    for (i, p) in shared.procs.iter().enumerate() {
        // Relaxed: both are hints read between rounds (see module docs);
        // a stale value delays a report by one round. A retake checks
        // the poll counter again under its protocol (`seat`).
        let in_task = p.in_task.load(Relaxed);
        let polls = p.metrics.polls.get();
        let busy = p.metrics.busy_now(now_ns);
        let last = st.rates[i].replace((polls, busy, now));
        if in_task && wants_offer(shared, p) {
            match last.and_then(|l| long_polls(l, (polls, busy, now))) {
                Some(true) if !shared.policy.marked_long(&p.hints, polls) => {
                    offer_queue(shared, i, polls)
                }
                Some(_) => {}
                // Too soon to say, and still in the poll the last round
                // saw: look again soon. (Not for every P that keeps a
                // ring beside an idle P: that raised the context switches
                // per request under HTTP load.)
                None if last.is_some_and(|l| l.0 == polls) => soon(OFFER_ROUND),
                None => {}
            }
        }
        let slot = &mut st.stalls[i];
        match slot {
            Some(s) if in_task && s.polls == polls => {
                if matches!(s.base, BaseRead::Unread) {
                    // A poll that outlasted a round: the wait and CPU time
                    // so far of a thread that may be stalling.
                    s.base = match stall_base(shared, i, &mut st.schedstats, now) {
                        Some(b) => BaseRead::Read(b),
                        None => BaseRead::Unavailable,
                    };
                }
                let ran = now.saturating_duration_since(s.since);
                if let Some(threshold) = cfg.stall_threshold {
                    if !s.reported && ran >= threshold {
                        match judge_stall(shared, i, s, &mut st.schedstats, threshold, now) {
                            Judged::Task => {
                                s.reported = true;
                                report_stall(shared, i, ran);
                            }
                            // Look again: the report waits on it.
                            Judged::Later => soon(STARVE_WINDOW),
                            Judged::Starved { again } => soon(again),
                        }
                    }
                }
                let Some(threshold) = retake else { continue };
                if ran < threshold {
                    soon(threshold - ran);
                } else if has_other_work(shared, i, now) {
                    match retake_p(shared, i, polls) {
                        Ok(true) => *slot = None,
                        Ok(false) => {}
                        Err(e) => {
                            // Registered at build, so this is unexpected:
                            // stop trying, say so once.
                            st.retake_failed = true;
                            eprintln!("numa_rt: sysmon's retake is off from now on: membarrier failed ({e})");
                        }
                    }
                }
            }
            _ if in_task => {
                *slot = Some(Stall {
                    polls,
                    since: now,
                    reported: false,
                    base: if schedstat && cfg.stall_threshold.is_some() {
                        BaseRead::Unread
                    } else {
                        BaseRead::Unavailable
                    },
                    probe: None,
                });
            }
            _ => *slot = None,
        }
    }
    due
}

/// Whether P `p`, in a poll, reserves queued tasks from an idle P: tasks in
/// its ring (a task alone in `runnext` is taken by a thief's last pass
/// after Go's grace, and ping-pong pairs keep one there nearly always),
/// a P idle, and the running task not a member of a batch held (or
/// measured) kept on this P: those polls are long by nature (a consumer
/// draining 128 values, its producers filling them), the batch was
/// measured to run best here, and offering its queue made the no-work
/// fan-in spread, many times slower.
fn wants_offer(shared: &Shared, p: &crate::scheduler::processor::Processor) -> bool {
    !p.steal.ring_is_empty()
        && shared.idle.npidle() != 0
        && shared.policy.wants_offer(&p.running_batch)
}

/// Whether a P's polls between two rounds (`(polls, busy ns, when)` each)
/// ran longer than [`OFFER_POLL`] on average: its busy time per poll, or,
/// still in the same poll, the time since. `None`: too soon to say.
fn long_polls(last: (u64, u64, Instant), now: (u64, u64, Instant)) -> Option<bool> {
    let waited = now.2.saturating_duration_since(last.2);
    if waited < OFFER_POLL {
        return None;
    }
    let window = OFFER_POLL.as_nanos() as u64;
    Some(match now.0.wrapping_sub(last.0) {
        0 => true,
        polls => now.1.saturating_sub(last.1) / polls >= window,
    })
}

/// A P runs polls longer than [`OFFER_POLL`] on average while tasks wait in its
/// ring and a P is idle: its thieves looked while its mean poll time
/// (folded every `event_interval` polls) was short, left the queue to
/// it and went to sleep. Marks the poll in progress (number `polls`) for
/// thieves (`Policy::mark_long`) and wakes an idle P, which now
/// takes half the ring. Go and tokio steal any queue and need no such
/// step; it is what reserving a short queue for its owner costs to do
/// safely. No clock is read per poll: a TSC stamp at each poll's start and
/// end slowed the shortest polls (ping_pong) measurably.
fn offer_queue(shared: &Shared, i: usize, polls: u64) {
    let p = &shared.procs[i];
    shared.policy.mark_long(&p.hints, polls);
    p.metrics.long_poll_offers.incr_shared();
    if shared.steal_look(p, false).stealable() {
        shared.wake_idle_p(p.node);
    }
}

/// Whether P `i` has work other than the task its M is stuck in: its
/// `runnext`, local ring or inbox; a due timer (its events are otherwise
/// handled by a parked watcher, if there is one; see `driver::monitor`);
/// or its node's queue while the node has no idle P to take it. Pinned
/// tasks do not count: they belong to the stuck thread and cannot move.
fn has_other_work(shared: &Shared, i: usize, now: Instant) -> bool {
    let p = &shared.procs[i];
    p.steal.has_runnext()
        || !p.steal.is_empty()
        || !p.inbox.is_empty()
        || shared.reactor.next_timer_of(i).is_some_and(|t| t <= now)
        || (!shared.nodes[p.node].inject.is_empty() && shared.idle.node_npidle(p.node) == 0)
}

/// Go's `retake` + `handoffp` for a P stuck in poll number `polls`: takes
/// its core from the seat of the M holding it and hands it to another M
/// (`lifecycle::handoff`, as `block_in_place` does). The protocol is in
/// `scheduler::seat`. `Ok(false)`: the M was touching the core, or has
/// moved on, or no M could be started: the next round tries again.
fn retake_p(shared: &Arc<Shared>, i: usize, polls: u64) -> std::io::Result<bool> {
    let p = &shared.procs[i];
    let Some(m) = p.holder() else {
        return Ok(false);
    };
    let taken = m.seat.try_take(
        // Still this P's core, still the same poll (the counter is bumped
        // before the core enters the seat, which our Acquire load of the
        // owner's flag orders before this read).
        |core| core.index == i && p.metrics.polls.get() == polls,
        |core| {
            // The stuck M no longer writes the P's flags (its poll's end
            // finds the seat empty); the M taking over owns them, and may
            // set this one before `handoff` returns. Nor is it the P's
            // holder any more: no later round asks it for this P's core.
            p.in_task.store(false, Relaxed);
            let was_holder = p.clear_holder(&m);
            // Counted before the hand-off: once it is done, the P's work
            // (and whoever waits on it, then reads the metrics) may run
            // before this thread gets here again.
            p.metrics.retakes.incr_shared();
            lifecycle::handoff(shared, core).inspect_err(|_| {
                p.metrics.retakes.decr_shared();
                p.in_task.store(true, Relaxed);
                if was_holder {
                    p.set_holder(&m);
                }
            })
        },
    )?;
    Ok(taken)
}

fn report_stall(shared: &Shared, p: usize, ran: Duration) {
    let proc = &shared.procs[p];
    let task = proc.current_task.load(Relaxed);
    // The location is looked up here, once per stall, rather than stored
    // by every poll: the running task is in the dump's registries.
    // A task in its first poll has no entry yet: the P keeps its location.
    let location = dump(shared)
        .tasks()
        .iter()
        .find(|t| t.id.as_u64() == task)
        .map(|t| t.location)
        .or_else(|| crate::task::site_location(proc.current_site.load(Relaxed)));
    let queued = proc.steal.len() + usize::from(proc.steal.has_runnext()) + proc.inbox.len();
    let machine = proc.metrics.machine.load(Relaxed);
    #[cfg(feature = "tracing")]
    if stall_event(task, location, p, machine, ran, queued) {
        return;
    }
    let spawned = match location {
        Some(loc) => format!(", spawned at {loc},"),
        None => String::new(),
    };
    eprintln!(
        "numa_rt: task {task}{spawned} has been running for at least {} ms without yielding \
         on P{p} (thread M{machine}); {queued} task(s) wait behind it on that P. Move blocking \
         work to spawn_blocking or block_in_place, or yield in long loops.",
        ran.as_millis(),
    );
}

/// Whether auto-advance may move a paused clock: every M is parked (the
/// caller's `idle`), every P idle with empty queues, every `block_on`
/// parked, no `block_in_place` closure running, the blocking pool idle
/// with an empty queue (tokio refuses to auto-advance while a
/// `spawn_blocking` task runs too). I/O sources may have waiters, as in
/// tokio: an event that is ready would have woken the node's watcher, which
/// the monitor's quiet tick rules out. Every read is Relaxed: a snapshot
/// checked again by the reactor (every M still parked) right before it
/// advances; see docs/architecture.md, "Paused time (tests)", for the races
/// left and why they are acceptable.
fn runtime_idle(shared: &Shared) -> bool {
    let b = &shared.block_ons;
    b.parked.load(Relaxed) == b.running.load(Relaxed)
        && shared.idle.npidle() + shared.idle.nretired() == shared.nprocs()
        && shared.in_place.load(Relaxed) == 0
        && shared.blocking.is_idle()
        && shared.nodes.iter().all(|n| n.inject.is_empty())
        && shared
            .procs
            .iter()
            .all(|p| p.steal.is_empty() && p.inbox.is_empty() && !shared.policy.queued(&p.hints))
}

/// With the `tracing` feature, the stall report is a `warn!` event (target
/// `numa_rt::sysmon`) *instead of* the stderr line when a subscriber wants
/// it, so that it lands where the program's logs go, once, with fields a
/// log pipeline can filter on. With no subscriber interested it returns
/// false and the stderr line is printed: a stall is never reported nowhere.
#[cfg(feature = "tracing")]
fn stall_event(
    task: u64,
    location: Option<&'static std::panic::Location<'static>>,
    p: usize,
    machine: usize,
    ran: Duration,
    queued: usize,
) -> bool {
    if !tracing::event_enabled!(target: "numa_rt::sysmon", tracing::Level::WARN) {
        return false;
    }
    tracing::warn!(
        target: "numa_rt::sysmon",
        elapsed_ms = ran.as_millis() as u64,
        task.id = task,
        loc.file = location.map(|l| l.file()),
        loc.line = location.map(|l| l.line()),
        loc.col = location.map(|l| l.column()),
        p,
        m = machine,
        queued,
        "task has been running without yielding; move blocking work to spawn_blocking or \
         block_in_place, or yield in long loops",
    );
    true
}

/// Every M parked, a `block_on` parked, and nothing that could ever wake a
/// task: no pending timer, no I/O waiter, nothing in the blocking pool.
/// Never with the side tokio runtime (`Builder::enable_tokio_compat`): its
/// timers and sockets hold wakers this runtime cannot count, so a task
/// asleep on `tokio::time::sleep` would look deadlocked.
fn looks_deadlocked(shared: &Shared) -> bool {
    #[cfg(feature = "tokio-compat")]
    if shared.tokio.is_some() {
        return false;
    }
    let b = &shared.block_ons;
    let parked = b.parked.load(Relaxed);
    parked > 0
        && parked == b.running.load(Relaxed)
        && shared.idle.npidle() + shared.idle.nretired() == shared.nprocs()
        && shared.in_place.load(Relaxed) == 0
        && shared.blocking.is_idle()
        && shared.reactor.pending_timers() == 0
        && shared.reactor.io_waiters() == 0
}

fn report_deadlock(shared: &Shared) {
    let dump = dump(shared);
    let mut msg = format!(
        "numa_rt: all tasks are asleep - possible deadlock: {} live task(s), every processor \
         idle, no timer pending, no I/O awaited, and block_on is waiting. Nothing in the \
         runtime can wake them; only a waker held outside it could (set {DEADLOCK_ENV}=off \
         if that is expected).",
        dump.len()
    );
    let locations = dump.locations(10);
    if !locations.is_empty() {
        msg.push_str(" Spawned at:");
        for (loc, n) in locations {
            let _ = write!(msg, "\n  {loc} ({n} task(s))");
        }
    }
    match shared.config.deadlock {
        DeadlockMode::Off => {}
        DeadlockMode::Warn => eprintln!("{msg}"),
        DeadlockMode::Panic => shared.block_ons.fail_all(msg),
    }
}

/// Go's `SCHED` line for this runtime, one line per node, and with
/// `detail` one line per P.
pub(crate) fn schedtrace(shared: &Arc<Shared>, detail: bool) -> String {
    let m = RuntimeMetrics {
        shared: shared.clone(),
    };
    let ms = shared.started.elapsed().as_millis();
    let pooled: usize = shared
        .nodes
        .iter()
        .map(|n| {
            n.idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len()
        })
        .sum();
    let mut out = String::new();
    let _ = write!(
        out,
        "SCHED {ms}ms: gomaxprocs={} idleprocs={} threads={} spinningthreads={} idlethreads={} \
         blockingthreads={} runqueue={} [",
        m.num_procs(),
        m.idle_procs(),
        m.num_machines() + m.blocking_threads() + 1,
        m.spinning_machines(),
        m.idle_procs() + pooled,
        m.blocking_threads(),
        m.global_queue_depth(),
    );
    for (i, p) in shared.procs.iter().enumerate() {
        let _ = write!(out, "{}{}", if i > 0 { " " } else { "" }, p.steal.len());
    }
    out.push_str("]\n");
    for n in 0..m.num_nodes() {
        let node = m.node(n);
        let procs = match (node.procs.first(), node.procs.last()) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "none".into(),
        };
        let watcher = node.watcher.map_or("none".into(), |p| format!("P{p}"));
        let _ = writeln!(
            out,
            "  node={n} procs={procs} idleprocs={} spinningthreads={} runqueue={} watcher={watcher} \
             busy={}ms polls={} steals={} migrated={} remotesteals={} parks={} unparks={} spurious={} \
             unparklat={}us",
            node.idle_procs,
            node.spinning_machines,
            node.queue_depth,
            node.busy_duration.as_millis(),
            node.tasks_polled,
            node.tasks_stolen,
            node.migrated_polls,
            node.remote_steals,
            node.parks,
            node.unparks,
            node.spurious_wakeups,
            // The mean over the run so far (0 before the first timed wake-up).
            node.unpark_latency_sum
                .as_micros()
                .checked_div(u128::from(node.unpark_latency_count))
                .unwrap_or(0),
        );
    }
    if detail {
        for (i, p) in shared.procs.iter().enumerate() {
            let pm = m.proc(i);
            let status = if p.in_task.load(Relaxed) {
                "intask"
            } else if p.running.load(Relaxed) {
                "running"
            } else {
                "idle"
            };
            let (sources, timers) = shared.reactor.proc_sources_and_timers(i);
            let curtask = if p.in_task.load(Relaxed) {
                p.current_task.load(Relaxed).to_string()
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "  P{i}: node={} status={status} m=M{} runqsize={} runnext={} inbox={} timers={timers} \
                 sources={sources} curtask={curtask} polls={} stolen={} migrated={} \
                 batchwakes={} batchjoins={} batchq={} batchqueued={} batchpolls={} batchsplits={} \
                 batchhubs={} batchkeeps={} batchspreads={} batchhomes={} busy={}ms",
                p.node,
                pm.machine,
                pm.local_queue_depth,
                u8::from(p.steal.has_runnext()),
                pm.inbox_depth,
                pm.tasks_polled,
                pm.tasks_stolen,
                pm.migrated_polls,
                pm.batch_wakes,
                pm.batch_joins,
                shared.policy.bq_len(&p.hints),
                pm.batch_queued,
                pm.batch_polls,
                pm.batch_splits,
                pm.batch_hub_polls,
                pm.batch_keeps,
                pm.batch_spreads,
                pm.batch_hub_homes,
                pm.busy_duration.as_millis(),
            );
        }
        let tasks = dump(shared);
        let _ = writeln!(out, "  tasks: {} live", tasks.len());
        let batches = tasks.batch_sizes();
        if !batches.is_empty() {
            let now_ms = crate::task::epoch_ms(std::time::Instant::now());
            let shown: Vec<String> = batches
                .iter()
                .take(8)
                .map(|&(b, n)| {
                    let hub = if !shared.policy.hubs.is_hub_id(b, now_ms) {
                        ""
                    } else {
                        match shared
                            .policy
                            .hub_modes
                            .mode(u32::from(b) << crate::task::BATCH_SHIFT)
                        {
                            Some(Mode::Keep) => "(hub,kept)",
                            Some(Mode::Spread) => "(hub,spread)",
                            Some(Mode::Measuring) => "(hub,measuring)",
                            None => "(hub)",
                        }
                    };
                    format!("{b}:{n}{hub}")
                })
                .collect();
            let _ = writeln!(
                out,
                "  batches: {} live, {} tasks in them; largest (batch:tasks, (hub,<mode>): a hub's) {}",
                batches.len(),
                batches.iter().map(|(_, n)| n).sum::<usize>(),
                shown.join(" ")
            );
        }
        for t in tasks.tasks().iter().take(20) {
            let _ = writeln!(out, "    {t}");
        }
        for (n, node) in shared.nodes.iter().enumerate() {
            for mach in node
                .idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let _ = writeln!(out, "  M{}: node={n} p=none (pooled, no P)", mach.id);
            }
        }
    }
    out
}

/// The live tasks of the runtime, `Send` and pinned (`Handle::dump`).
pub(crate) fn dump(shared: &Shared) -> TaskDump {
    let now = crate::task::epoch_ms(Instant::now());
    // The task each P is polling now.
    let running: Vec<(u64, usize)> = shared
        .procs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.in_task.load(Relaxed))
        .map(|(i, p)| (p.current_task.load(Relaxed), i))
        .collect();
    let mut tasks = Vec::new();
    let mut add = |meta: &crate::task::TaskMeta, location, pinned: bool| {
        // Read before the finished check below: a task finished (its future
        // dropped) but not yet out of the registry (the harness removes the
        // entry right after) is not live, and its flags no longer hold a
        // batch or a P, so a dump that listed it showed a task in no batch
        // that had been in one (a test saw it under load). Both read the
        // same atomic, so if the later load finds it unfinished, the
        // earlier one read its flags before they were cleared.
        let batch = crate::scheduler::placement::batch::live_batch(meta, now).map(|b| b.get());
        if meta.is_finished() {
            return;
        }
        let state = match running.iter().find(|(id, _)| *id == meta.id.as_u64()) {
            Some(&(_, proc)) => TaskState::Running { proc },
            None if meta.is_scheduled() => TaskState::Scheduled,
            None => TaskState::Idle,
        };
        tasks.push(TaskInfo {
            id: meta.id,
            location,
            state,
            since_last_poll: meta
                .last_poll_ms()
                .map(|t| Duration::from_millis(u64::from(now.saturating_sub(t)))),
            pinned,
            batch,
        });
    };
    shared.tasks.for_each(|m, l| add(m, l, false));
    let locals: Vec<_> = shared
        .local_registries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|w| w.upgrade())
        .collect();
    for reg in locals {
        reg.for_each(|m, l| add(m, l, true));
    }
    // Longest-unpolled first; never-polled tasks after those polled.
    tasks.sort_by_key(|t| std::cmp::Reverse(t.since_last_poll));
    TaskDump {
        tasks,
        unpolled: shared.tasks.unpolled(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_are_long_by_their_mean_busy_time_or_by_not_ending() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        // Too soon to say: under OFFER_POLL since the last round.
        assert_eq!(long_polls((5, 0, at(0)), (5, 50_000, at(50))), None);
        // Still in the same poll 100 µs on: long.
        assert_eq!(long_polls((5, 0, at(0)), (5, 100_000, at(100))), Some(true));
        // Four polls in 1 ms of busy time (250 µs each): long.
        assert_eq!(
            long_polls((5, 0, at(0)), (9, 1_000_000, at(1000))),
            Some(true)
        );
        // Forty polls in 1 ms (25 µs each, the no-work fan-in's on 16
        // cores): not long; the mean poll time catches up by itself.
        assert_eq!(
            long_polls((5, 0, at(0)), (45, 1_000_000, at(1000))),
            Some(false)
        );
        // Busy 20 µs of 1 ms in one poll that began just now (the P
        // idled in between): its mean is what counts, not the wall time.
        assert_eq!(
            long_polls((5, 0, at(0)), (6, 20_000, at(1000))),
            Some(false)
        );
    }
}
