//! Stall judging and retake: the P's stuck inside one poll, reported and handed on.

use super::offer::{
    long_poll, long_polls, may_offer, offer_queue, offer_runnext, runnext_stranded,
};
use super::trace::dump;
use super::State;
use crate::scheduler::{lifecycle, Shared};
use crate::tuning::{OFFER_POLL, OFFER_ROUND, STARVED_RUN_SHARE, STARVE_WINDOW};
use numa_rt_numa::sys::SchedStatFile;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
pub(super) struct Stall {
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

/// Finds the P's stuck inside one poll: reports them past the stall
/// threshold, and past the retake threshold hands their core to another M
/// if they have other work. Before either, offers the queue of a P running
/// long polls to an idle P (`offer_queue`). Returns how soon the next
/// round is wanted: a retake may be due, a stall's judgement
/// (`judge_stall`) waits on it, or a P stuck in one poll keeps a queue.
/// `schedstat`: whether the kernel keeps it (`judge_stall`).
pub(super) fn check_stalls(
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
    st.runnext_offered.resize(shared.procs.len(), 0);
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
        if in_task && may_offer(shared, p) {
            let long = last.and_then(|l| long_polls(l, (polls, busy, now)));
            match long_poll(shared, i, polls, long) {
                Some(true) => offer_queue(shared, i),
                Some(_) => {}
                // Too soon to say, and still in the poll the last round
                // saw: look again soon. (Not for every P that keeps a
                // ring beside an idle P: that raised the context switches
                // per request under HTTP load.)
                None if last.is_some_and(|l| l.0 == polls) => soon(OFFER_ROUND),
                None => {}
            }
        }
        // A task alone in `runnext` behind the same poll since the last
        // round, at least `OFFER_POLL` ago: wake an idle P to take it.
        if in_task
            && st.runnext_offered[i] != polls
            && last
                .is_some_and(|l| l.0 == polls && now.saturating_duration_since(l.2) >= OFFER_POLL)
            && runnext_stranded(shared, p)
        {
            st.runnext_offered[i] = polls;
            offer_runnext(shared, i);
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
        || shared
            .reactor
            .next_timer_of(i)
            .is_some_and(|t| t <= timers_now(shared, now))
        || (!shared.nodes[p.node].inject.is_empty() && shared.idle.node_npidle(p.node) == 0)
}

/// The now timers are due by: `now`, or the paused clock's (a virtual
/// deadline is not due because real time passed it: in a slow guest a
/// paused test's 1 s timer looked due and made a stuck poll's P retaken).
fn timers_now(shared: &Shared, now: Instant) -> Instant {
    if shared.reactor.is_clock_paused() {
        shared.reactor.clock_now()
    } else {
        now
    }
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
            // The stuck poll goes on without a P: every P may be idle
            // while it runs, and auto-advance must not jump the paused
            // clock past what it is about to do (issue 45: the delay
            // queue's earlier insert, in the 4-node guest). Counted as a
            // `block_in_place` closure until the poll returns (its M
            // clears it, after seeing `TAKEN`, which follows this).
            shared.in_place.fetch_add(1, Relaxed);
            m.retaken.store(true, Relaxed);
            lifecycle::handoff(shared, core).inspect_err(|_| {
                m.retaken.store(false, Relaxed);
                shared.in_place.fetch_sub(1, Relaxed);
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
