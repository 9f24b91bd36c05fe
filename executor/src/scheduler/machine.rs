//! A machine (Go's M): an OS thread that runs tasks while it holds a P.
//!
//! The loop (docs/architecture.md, "The scheduling loop"):
//! 1. every `global_queue_interval`-th tick: this M's pinned tasks, the P's
//!    inbox, the node queue — one task, for fairness;
//! 2. every `event_interval`-th tick: poll the P's driver without blocking;
//! 3. `runnext` (at most `MAX_LIFO_POLLS` in a row), then the local ring;
//! 4. pinned tasks, the inbox, a batch from the node queue;
//! 5. the driver without blocking;
//! 6. steal (if spinning is allowed): same-node P's, then remote node
//!    queues, then remote P's;
//! 7. park in the P's driver, after the barrier.
//!
//! Invariant: every P has exactly one M at any time — running it, parked in
//! its driver, or being handed it. M's without a P wait in their node's pool.
//!
//! A new M first binds its thread to its node (`bind_machine`).

use super::context::{self, Worker};
use super::local::LocalQueue;
use super::processor::Core;
use super::seat::Seat;
use super::{BoxCore, Shared};
use crate::task::Runnable;
use numa_rt_reactor::coop;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Consecutive `runnext` polls allowed before the ring gets a turn (tokio's
/// figure). A task run from `runnext` inherits the tick (Go's inheritTime),
/// so without this cap two tasks waking each other would starve the queue.
/// Empty pre-park polls after which the node's watcher starts skipping
/// them, and how many it skips between two it still makes (step 5 of
/// `find_runnable`).
const QUIET_POLLS: u8 = 8;
const MAX_LIFO_POLLS: u32 = 3;

/// Passes over the victims when stealing (Go's `stealTries`).
const STEAL_PASSES: usize = 4;

/// How long a thief lets a running victim's `runnext` sit before taking it:
/// Go's 3 µs ("a sync chan send/recv takes ~50ns, so 3us gives ~50x overshoot").
const RUNNEXT_GRACE: Duration = Duration::from_micros(3);

/// How long a node's queue must go unserved before an M of another node
/// takes from it (every P of the node is then inside a task, see
/// `Shared::saturated`): a task that has just woken its awaiter and is
/// about to return still counts as running, and the awaiter's next
/// `spawn_on` to that node must not go to a remote spinner in that moment.
/// 100 µs is ~30x Go's runnext grace: long enough for the node's own M,
/// short next to the CPU a starved node wastes.
const REMOTE_GRACE: Duration = Duration::from_micros(100);

/// What a retired P's M does next (`Worker::retired_round`).
enum Retired {
    /// The quota grew back (or shutdown): the P works again.
    Resume(BoxCore),
    /// Run this pinned task of the M.
    Run(BoxCore, Runnable),
    /// The P went back to the M that lent it away.
    Gone,
}

/// How long an M without a P waits in its node's pool before exiting.
const M_KEEP_ALIVE: Duration = Duration::from_secs(10);

pub(crate) struct Machine {
    pub(crate) id: usize,
    pub(crate) node: usize,
    /// The thread's kernel id: sysmon reads its scheduler statistics to
    /// tell a task that blocks from a thread that waits for a CPU.
    pub(crate) tid: i32,
    /// Tasks pinned to this thread (`spawn_local`); it also records the P
    /// this M holds, so their wakers can unpark the right driver.
    pub(crate) local: Arc<LocalQueue>,
    /// Where the P's core sits while this M polls a task or runs the
    /// driver; sysmon's retake takes it from there (see `seat`).
    pub(crate) seat: Seat<BoxCore>,
    handoff: Mutex<Option<BoxCore>>,
    cv: Condvar,
}

/// All M threads of a runtime, for shutdown.
#[derive(Default)]
pub(crate) struct Registry {
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Live M threads. Its own `Arc`, so an exiting M can signal it after
    /// dropping every reference it held to the runtime (see `LiveGuard`).
    live: Arc<Live>,
    next_id: AtomicUsize,
}

/// A count of live M threads and the condition signalled when one ends.
#[derive(Default)]
struct Live {
    count: Mutex<usize>,
    exited: Condvar,
}

impl Registry {
    pub(crate) fn live(&self) -> usize {
        *self.live.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn wake_pooled(&self, nodes: &[super::Node]) {
        for n in nodes {
            for m in n
                .idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let _g = m.handoff.lock().unwrap_or_else(|e| e.into_inner());
                m.cv.notify_all();
            }
        }
    }

    /// Waits for every M to exit, or until `deadline`; `except` is one M
    /// thread not to wait for (shutdown called from a worker). Returns
    /// whether all exited.
    pub(crate) fn wait_all(&self, deadline: Option<Instant>, except: usize) -> bool {
        let mut live = self.live.count.lock().unwrap_or_else(|e| e.into_inner());
        while *live > except {
            match deadline {
                None => {
                    live = self
                        .live
                        .exited
                        .wait(live)
                        .unwrap_or_else(|e| e.into_inner())
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    live = self
                        .live
                        .exited
                        .wait_timeout(live, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        drop(live);
        // Reap the threads that have ended; others are detached.
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        for t in std::mem::take(&mut *threads) {
            if t.is_finished() {
                let _ = t.join();
            }
        }
        true
    }
}

/// Starts an M on `node`, holding `core` if given. If the thread cannot be
/// created, the core comes back with the error.
pub(crate) fn start(
    shared: &Arc<Shared>,
    node: usize,
    core: Option<BoxCore>,
) -> Result<(), (std::io::Error, Option<BoxCore>)> {
    let id = shared.machines.next_id.fetch_add(1, Relaxed);
    let mut b = std::thread::Builder::new().name(shared.config.name_thread());
    if let Some(s) = shared.config.thread_stack_size {
        b = b.stack_size(s);
    }
    let first_p = core.as_ref().map(|c| c.index);
    // The core travels through a slot we keep a handle on: a failed spawn
    // drops the closure, and the core must not be dropped with it.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(core));
    let theirs = slot.clone();
    *shared.machines.live.count.lock().unwrap() += 1;
    let s = shared.clone();
    let spawned = b.spawn(move || {
        let core = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(theirs);
        // Built on its own thread: the pinned queue records its owner.
        let machine = Arc::new(Machine {
            id,
            node,
            tid: numa_rt_numa::sys::gettid(),
            local: LocalQueue::for_machine(&s),
            seat: Seat::new(),
            handoff: Mutex::new(None),
            cv: Condvar::new(),
        });
        run(s, machine, core, first_p)
    });
    match spawned {
        Ok(h) => {
            let mut threads = shared.machines.threads.lock().unwrap();
            // Reap finished threads only when the list would grow: a scan
            // per start made starting N M's quadratic (build at 1,024 P's).
            if threads.len() == threads.capacity() {
                threads.retain(|t| !t.is_finished());
            }
            threads.push(h);
            Ok(())
        }
        Err(e) => {
            *shared.machines.live.count.lock().unwrap() -= 1;
            let core = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            Err((e, core))
        }
    }
}

/// Hands `core` to an idle M of its node, or a new one (Go's `handoffp`).
/// If no thread can be started the core comes back.
pub(crate) fn handoff(shared: &Arc<Shared>, core: BoxCore) -> Result<(), BoxCore> {
    let node = core.node;
    let m = shared.nodes[node].idle_machines.lock().unwrap().pop();
    if let Some(m) = m {
        *m.handoff.lock().unwrap() = Some(core);
        m.cv.notify_one();
        return Ok(());
    }
    start(shared, node, Some(core)).map_err(|(_, c)| c.expect("a failed start returns its core"))
}

/// Signals the M's exit to shutdown. It must drop after everything else the
/// thread held (the runtime's `Arc`s, its reactor context), so that when
/// `Runtime::drop` returns the M's references are gone and the reactor's
/// descriptors close with the runtime.
struct LiveGuard(Arc<Live>);
impl Drop for LiveGuard {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.0.exited.notify_all();
    }
}

fn run(shared: Arc<Shared>, machine: Arc<Machine>, core: Option<BoxCore>, first_p: Option<usize>) {
    let live = LiveGuard(shared.machines.live.clone());
    run_machine(shared, machine, core, first_p);
    drop(live);
}

fn run_machine(
    shared: Arc<Shared>,
    machine: Arc<Machine>,
    core: Option<BoxCore>,
    first_p: Option<usize>,
) {
    bind_machine(&shared, machine.node, first_p);
    // The hooks (a panicking one is contained) and the tokio context.
    let life = super::thread_life::started(&shared);
    let worker = Worker::new(shared.clone(), machine.clone());
    let _cx = context::enter_worker(&worker);
    let _reactor = numa_rt_reactor::context::enter(&shared.reactor);
    let mut core = core;
    let mut last_p = None;
    loop {
        let c = match core.take() {
            Some(c) => c,
            None => match wait_for_core(&shared, &machine, last_p) {
                Some(c) => c,
                None => break,
            },
        };
        let index = c.index;
        // Ask for the P back only if block_in_place lent it away; a P this
        // M gave back (or left at shutdown) stays where it went.
        last_p = worker.run_core(c).then_some(index);
        if shared.is_shutdown() {
            break;
        }
    }
    // Pinned tasks die on their own thread.
    machine.local.close_and_drain();
    life.stopping();
}

/// Binds the calling M's thread to its node's CPUs (the node, not a core,
/// so the OS balances within it — Vyukov), or to one core with
/// `Builder::pin_cores`, and prefers the node's memory. Failures (e.g. a
/// container without permission) are reported once per process and the
/// runtime carries on.
fn bind_machine(shared: &Arc<Shared>, node: usize, first_p: Option<usize>) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let report = |what: &str, e: std::io::Error| {
        if !REPORTED.swap(true, Relaxed) {
            eprintln!("numa_rt: {what} failed ({e}); continuing without it");
        }
    };
    let n = &shared.topology.nodes()[node];
    if shared.config.pin_cores {
        let cpus: Vec<usize> = n.cpus().iter().collect();
        let k = first_p.map_or(0, |p| p - shared.nodes[node].procs.start);
        if let Some(&cpu) = cpus.get(k % cpus.len().max(1)) {
            if !numa_rt_numa::sys::pin_to_core(cpu) {
                report(
                    "pinning a worker to a core",
                    std::io::Error::other(format!("core {cpu}")),
                );
            }
        }
    } else if let Err(e) = numa_rt_numa::sys::set_thread_affinity(n.cpus()) {
        report("binding a worker to its node's CPUs", e);
    }
    if shared.topology.nodes().len() > 1 {
        if let Err(e) = numa_rt_numa::sys::set_preferred_node(n.os_id()) {
            report("set_mempolicy(MPOL_PREFERRED)", e);
        }
    }
}

/// An M without a P waits in its node's pool for one (or exits after
/// `M_KEEP_ALIVE`, or at shutdown). If it lost P `last_p` (block_in_place),
/// it also asks for that P back: the P's holder returns it when it would
/// otherwise park (Go's exitsyscall reacquiring its old P). That keeps
/// P↔M affinity, and it is how an M with pinned tasks gets to run them again.
fn wait_for_core(
    shared: &Arc<Shared>,
    machine: &Arc<Machine>,
    last_p: Option<usize>,
) -> Option<BoxCore> {
    let pool = &shared.nodes[machine.node].idle_machines;
    pool.lock().unwrap().push(machine.clone());
    if let Some(p) = last_p {
        shared.procs[p].ask_back(machine);
        // The P's holder may already be parked, having looked for an asker
        // before we asked: wake it so it looks again. (barrier) It releases
        // its P under the idle lock, which `take_specific` takes after our
        // `ask_back`; if it releases later, its re-check sees the asker.
        if shared.idle.take_specific(p) {
            shared.unpark(p);
        }
    }
    let mut slot = machine.handoff.lock().unwrap();
    loop {
        if let Some(c) = slot.take() {
            return Some(c);
        }
        if shared.is_shutdown() {
            drop(slot);
            pool.lock().unwrap().retain(|m| !Arc::ptr_eq(m, machine));
            return None;
        }
        let (s, t) = machine.cv.wait_timeout(slot, M_KEEP_ALIVE).unwrap();
        slot = s;
        // An M with live pinned tasks never leaves: only it may run them.
        if t.timed_out() && slot.is_none() && !machine.local.has_live_tasks() {
            let mut p = pool.lock().unwrap();
            let before = p.len();
            p.retain(|m| !Arc::ptr_eq(m, machine));
            if p.len() < before {
                // Nobody picked us: leave.
                return None;
            }
            // Someone popped us and is about to hand us a core: wait for it.
        }
    }
}

impl Worker {
    /// Runs tasks on `core` until the core is handed away or shutdown.
    /// Returns true if `block_in_place` lent the P to another M, or sysmon
    /// took it (retake).
    fn run_core(&self, mut core: BoxCore) -> bool {
        let index = core.index;
        self.shared.procs[index].set_holder(&self.machine);
        self.machine.local.set_machine_p(index);
        self.shared.procs[index]
            .metrics
            .machine
            .store(self.machine.id, Relaxed);
        numa_rt_reactor::context::set_current_p(Some(index));
        self.shared.procs[index].set_running(true);
        let lent = loop {
            let task;
            (core, task) = match self.find_runnable(core) {
                Some(x) => x,
                None => break false, // shutdown, or given back
            };
            core = match self.run_task(core, task) {
                Some(c) => c,
                None => break true, // lent by block_in_place, or retaken
            };
        };
        self.machine.local.set_machine_p(usize::MAX);
        numa_rt_reactor::context::set_current_p(None);
        lent
    }

    fn run_task(&self, mut core: BoxCore, task: Runnable) -> Option<BoxCore> {
        if core.spinning {
            // Go's resetspinning: the last spinner to find work wakes another,
            // since there may be more work than it can take.
            core.spinning = false;
            if self.shared.idle.stop_spinning(core.node) {
                self.shared.wake_idle_p(core.node);
            }
        }
        let p = &self.shared.procs[core.index];
        p.metrics.polls.incr();
        // Busy time runs from the first task found to the next search for
        // work (see `counters`); a clock read only when a batch begins.
        core.begin_busy();
        core.batch_polls = core.batch_polls.wrapping_add(1);
        let hist = p.metrics.poll_histogram.as_deref();
        let meta = task.metadata();
        meta.note_polled(core.clock_ms);
        p.current_task.store(meta.id.as_u64(), Relaxed);
        p.in_task.store(true, Relaxed);
        // SAFETY: this thread is the M owning the seat.
        unsafe { self.machine.seat.enter_poll(core) };
        let (forced, ns) = match hist {
            None => (coop::budget_counting(|| task.run()).1, 0),
            Some(_) => {
                let t0 = Instant::now();
                let forced = coop::budget_counting(|| task.run()).1;
                let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
                (forced, ns)
            }
        };
        // SAFETY: as above.
        let Some(core) = (unsafe { self.machine.seat.leave_poll() }) else {
            // The P went to another M during the poll (block_in_place, or
            // sysmon's retake): its counters and flags are that M's now, so
            // this poll's end is not recorded on it.
            return None;
        };
        p.in_task.store(false, Relaxed);
        if let (Some(buckets), Some(shape)) = (hist, self.shared.config.poll_histogram.as_ref()) {
            buckets[shape.bucket_of(ns)].incr();
            p.metrics.poll_ns.add(ns);
        }
        if forced {
            p.metrics.forced_yields.incr();
        }
        Some(core)
    }

    /// Finds the next task, parking when there is none. `None` on shutdown
    /// (the core is then left in its processor's `core_slot`).
    fn find_runnable(&self, mut core: BoxCore) -> Option<(BoxCore, Runnable)> {
        let shared = &*self.shared;
        let cfg = &shared.config;
        // Woken from a park and not yet found anything: parking again with
        // this set is a spurious wake-up.
        let mut woke = false;
        loop {
            if shared.is_shutdown() {
                let p = &shared.procs[core.index];
                core.flush_busy(&p.metrics, false);
                *p.core_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(core);
                return None;
            }
            // Above a shrunk CPU quota: no work but pinned tasks.
            if core.retired {
                match self.retired_round(core) {
                    Retired::Resume(c) => core = c,
                    Retired::Run(c, t) => return Some((c, t)),
                    Retired::Gone => return None,
                }
                continue;
            }
            let m = &shared.procs[core.index].metrics;
            // 1. Fairness: the other queues first, once in a while.
            if cfg.global_queue_interval.hits(core.tick) {
                if let Some(t) = self.machine.local.pop() {
                    core.tick = core.tick.wrapping_add(1);
                    return Some((core, t));
                }
                // A batch, not one task: with local work that never runs
                // out (tasks that keep yielding), one task per 61 ticks
                // would starve the node queue (tokio's spawn_many_remote_busy1
                // took 370x longer that way).
                if let Some(t) = self.take_batch(&mut core) {
                    return Some((core, t));
                }
            }
            // 2. Keep this P's I/O and timers moving while it is busy.
            if cfg.event_interval.hits(core.tick) && core.tick != core.last_event_tick {
                core.last_event_tick = core.tick;
                // The batch boundary for busy time (one clock read per
                // `event_interval` ticks; see `counters`).
                core.flush_busy(m, true);
                core = self.poll_driver(core, false);
                // The quota re-read reaches a busy P here (one load per
                // `event_interval` ticks).
                if core.index >= shared.active_procs() {
                    core.retired = true;
                    continue;
                }
            }
            // 3. runnext, then the ring.
            if let Some((t, lifo)) = core.queue.pop(core.lifo_polls < MAX_LIFO_POLLS) {
                if lifo {
                    core.lifo_polls += 1;
                    m.runnext_polls.incr();
                } else {
                    core.lifo_polls = 0;
                    core.tick = core.tick.wrapping_add(1);
                }
                return Some((core, t));
            }
            core.lifo_polls = 0;
            // 4. Pinned tasks, the inbox, the node queue.
            if let Some(t) = self.machine.local.pop() {
                core.tick = core.tick.wrapping_add(1);
                return Some((core, t));
            }
            if let Some(t) = self.take_batch(&mut core) {
                return Some((core, t));
            }
            // 5. The poller, without blocking. The node's watcher may skip
            // it while it keeps finding nothing: its park blocks on every
            // poller of the node, its own included, so it would see the
            // same events one syscall later, and at light load (one
            // connection) this poll is an empty `epoll_wait` per request.
            // It still polls once per `QUIET_POLLS` skips, and polls every
            // time again as soon as one finds work: where the poll does find
            // work, it finds it before this M releases its P (a parked P
            // gets woken for new work). Always skipping saved 2.13 -> 2.02
            // `epoll_wait`s per request at one connection; under 4
            // connections on 2 P's its effect was inside this machine's
            // run-to-run noise, so the cautious rule was kept.
            let skip = core.quiet_polls >= QUIET_POLLS
                && core.skipped_polls < QUIET_POLLS
                && core.driver.as_ref().is_some_and(|d| d.watches());
            if skip {
                core.skipped_polls += 1;
            } else {
                core.skipped_polls = 0;
                core = self.poll_driver(core, false);
                if let Some((t, _)) = core.queue.pop(true) {
                    core.quiet_polls = 0;
                    core.tick = core.tick.wrapping_add(1);
                    return Some((core, t));
                }
                core.quiet_polls = core.quiet_polls.saturating_add(1);
            }
            // 6. Steal. Searching for work is not busy time: the batch
            // closes here (and a found task opens the next one).
            core.flush_busy(m, false);
            // Only where there is something to steal: another busy P of
            // this node, or a saturated node elsewhere. At light load (this
            // M's P the only busy one) the scan would probe every idle P's
            // empty ring — a cache miss each on a big machine — on every
            // request before parking.
            if !core.spinning && shared.idle.may_spin(core.node) && self.worth_stealing(core.node) {
                core.spinning = true;
                shared.idle.start_spinning(core.node);
            }
            // A new M (tick 0, never parked) skips the steal: at build every
            // M starts spinning, and N of them each scanning N victims made
            // build() quadratic (1,024 P's: a quarter of its time in
            // `steal_from`). Nothing is lost: its park re-checks every
            // queue a spinner may take from (`any_work`), and comes back
            // spinning if one has work.
            let fresh = core.tick == 0 && !woke;
            if core.spinning && !fresh {
                if let Some(t) = self.steal(&mut core) {
                    core.tick = core.tick.wrapping_add(1);
                    return Some((core, t));
                }
            }
            // 7. Park (or give the P back to the M that lent it).
            if core.index >= shared.active_procs() {
                core.retired = true;
                continue;
            }
            if woke {
                shared.procs[core.index].metrics.spurious_wakeups.incr();
            }
            core = self.park(core)?;
            woke = true;
            // Woken to retire (sysmon's quota re-read wakes idle P's above it).
            if core.index >= shared.active_procs() {
                core.retired = true;
            }
        }
    }

    /// One stay of a P above a shrunk CPU quota (sysmon's re-read; see
    /// docs/architecture.md, "sysmon"): the P is marked retired (not idle:
    /// nobody wakes it for work), hands what is queued on it (ring,
    /// `runnext`, inbox) to its node's queue for the other P's, runs only
    /// this M's pinned tasks (they cannot move), returns itself to an M
    /// that lent it away and asks for it back, and otherwise sleeps in its
    /// driver. Targeted wakes reach it (`Idle::take_specific`): a pinned
    /// task, an inbox push, an asker, the quota growing back. As its node's
    /// watcher it may fire I/O wakers into its own ring; the next turn of
    /// the loop hands them on. Its poller is watched like an idle P's.
    fn retired_round(&self, mut core: BoxCore) -> Retired {
        let shared = &*self.shared;
        let (idx, node) = (core.index, core.node);
        let p = &shared.procs[idx];
        if !p.retired.load(Relaxed) {
            core.flush_busy(&p.metrics, false);
            if core.spinning {
                core.spinning = false;
                if shared.idle.stop_spinning(node) {
                    shared.wake_idle_p(node);
                }
            }
            p.set_running(false);
            p.retired.store(true, Relaxed);
            // (barrier) Under the idle lock: a targeted waker pushes, then
            // takes that lock in `take_specific`; our checks below come
            // after it, so one of us sees the other.
            shared.idle.retire(idx);
        }
        loop {
            if shared.is_shutdown() || idx < shared.active_procs() {
                shared.idle.unretire(idx);
                p.retired.store(false, Relaxed);
                p.set_running(true);
                core.retired = false;
                return Retired::Resume(core);
            }
            let mut moved = core.queue.drain();
            moved.extend(p.inbox.drain());
            if !moved.is_empty() {
                let inject = &shared.nodes[node].inject;
                for t in moved {
                    inject.push(t);
                }
                shared.wake_idle_p(node);
            }
            if let Some(t) = self.machine.local.pop() {
                return Retired::Run(core, t);
            }
            core = match self.give_back(core) {
                Ok(()) => return Retired::Gone,
                Err(c) => c,
            };
            core = self.poll_driver(core, true);
        }
    }

    /// Takes a batch from the P's inbox or else the node queue into the
    /// local queue (Go's `globrunqget` share, capped by the room in the
    /// ring); returns the oldest to run now.
    fn take_batch(&self, core: &mut Core) -> Option<Runnable> {
        let shared = &*self.shared;
        let p = &shared.procs[core.index];
        let node = &shared.nodes[core.node];
        // The common case at light load, checked before any bookkeeping:
        // nothing queued for this P or its node.
        if p.inbox.is_empty() && node.inject.is_empty() {
            return None;
        }
        // At most half the room left in the ring (it may hold work already,
        // at a fairness check), and Go's share of the node queue.
        let room = (crate::queue::CAPACITY - core.queue.len().min(crate::queue::CAPACITY)) / 2;
        let max = room.clamp(1, crate::queue::CAPACITY / 2);
        let mut batch = std::mem::take(&mut core.batch);
        if !p.inbox.is_empty() {
            p.inbox.pop_batch(max, &mut batch);
        } else if !node.inject.is_empty() {
            let len = node.inject.len();
            let n = (len / node.procs.len().max(1) + 1).min(len).min(max);
            node.inject.pop_batch(n, &mut batch);
        }
        // Oldest first: run the first, queue the rest in order.
        let mut tasks = batch.drain(..);
        let first = tasks.next();
        if first.is_some() {
            p.metrics.global_polls.incr();
            core.tick = core.tick.wrapping_add(1);
        }
        for t in tasks {
            core.queue.push_back(t, &node.inject);
        }
        core.batch = batch;
        first
    }

    /// Polls (or parks in) the P's driver. The core sits in the thread's
    /// context meanwhile, so the wakers the driver fires reach its queue.
    fn poll_driver(&self, mut core: BoxCore, block: bool) -> BoxCore {
        let mut driver = core
            .driver
            .take()
            .expect("a P's driver is only out while its M is in it");
        // SAFETY: this thread is the M owning the seat (outside a poll).
        unsafe { self.machine.seat.with_owned(|s| *s = Some(core)) };
        self.in_driver.set(true);
        if block {
            driver.park(None);
        } else {
            driver.poll_now();
        }
        self.in_driver.set(false);
        // SAFETY: as above.
        let mut core = unsafe { self.machine.seat.with_owned(Option::take) }
            .expect("the core stays with its M while in the driver");
        core.driver = Some(driver);
        // The driver queued what it woke here without waking anybody (see
        // `Shared::schedule`). This M runs the next task itself; only if more
        // are queued is a spinner worth a wake-up (tokio's rule; Go's
        // `startIdle` wakes one M per extra goroutine).
        if core.queue.len() > 1 {
            self.shared.wake_idle_p_hint(core.node);
        }
        core
    }

    /// Whether a steal could find anything: another P of `node` is held by
    /// an M, or some other node is saturated (the only remote work `steal`
    /// takes).
    fn worth_stealing(&self, node: usize) -> bool {
        let shared = &*self.shared;
        shared.idle.others_busy(node)
            || shared.nodes[node]
                .remote_order
                .iter()
                .any(|&rn| shared.saturated(rn))
    }

    /// Steals, nearest first: P's of this node (four passes, `runnext` on the
    /// last), then remote node queues (nearest node first), then remote P's.
    /// Remote stealing starts only once this node has nothing.
    fn steal(&self, core: &mut Core) -> Option<Runnable> {
        let shared = &*self.shared;
        let node = &shared.nodes[core.node];
        let m = &shared.procs[core.index].metrics;
        for pass in 0..STEAL_PASSES {
            let last = pass + 1 == STEAL_PASSES;
            if let Some((t, n)) = self.steal_pass(core, node.procs.clone(), last) {
                m.steals.add(n as u64);
                m.local_steals.incr();
                return Some(t);
            }
        }
        if node.remote_order.is_empty() {
            return None;
        }
        // Other nodes only where nobody of their own can take the work: no
        // idle P, no spinning M (see the `idle` module, "Per node").
        for &rn in &node.remote_order {
            if !shared.saturated(rn) {
                continue;
            }
            let inject = &shared.nodes[rn].inject;
            if let Some(t) = inject.pop_unserved(REMOTE_GRACE) {
                m.remote_steals.incr();
                m.steals.incr();
                return Some(t);
            }
        }
        for pass in 0..STEAL_PASSES {
            let last = pass + 1 == STEAL_PASSES;
            for &rn in &node.remote_order {
                if !shared.saturated(rn) {
                    continue;
                }
                if let Some((t, n)) = self.steal_pass(core, shared.nodes[rn].procs.clone(), last) {
                    m.steals.add(n as u64);
                    m.remote_steals.incr();
                    return Some(t);
                }
            }
        }
        None
    }

    fn steal_pass(
        &self,
        core: &mut Core,
        victims: std::ops::Range<usize>,
        last: bool,
    ) -> Option<(Runnable, usize)> {
        let n = victims.len();
        if n == 0 {
            return None;
        }
        let start = core.rand(n);
        for i in 0..n {
            let v = victims.start + (start + i) % n;
            if v == core.index {
                continue;
            }
            let victim = &self.shared.procs[v];
            let wait = || {
                if victim.running.load(Relaxed) {
                    let t0 = Instant::now();
                    while t0.elapsed() < RUNNEXT_GRACE {
                        crate::loom::spin_loop();
                    }
                }
            };
            if let Some(x) = core.queue.steal_from(&victim.steal, last, wait) {
                return Some(x);
            }
        }
        None
    }

    /// Releases the P, runs the barrier and re-check, then parks in the P's
    /// driver. Returns with the P held again, spinning if woken to spin.
    /// The protocol is explained in the `idle` module (and docs/architecture.md).
    fn park(&self, core: BoxCore) -> Option<BoxCore> {
        let shared = &*self.shared;
        let idx = core.index;
        // Rather than idling, return the P to the M that gave it away.
        let core = match self.give_back(core) {
            Ok(()) => return None,
            Err(c) => c,
        };
        let mut core = core;
        let was_spinning = core.spinning;
        shared.procs[idx].set_running(false);
        shared.idle.release(idx);
        if was_spinning {
            core.spinning = false;
            shared.idle.stop_spinning(core.node);
        }
        // (barrier) Pairs with the fence in `Shared::wake_idle_p`: a
        // submitter either sees our P idle and no spinner and wakes us, or
        // we see its work below.
        fence(SeqCst);
        let work = shared.any_work(idx, was_spinning)
            || !self.machine.local.is_empty()
            || !core.queue.is_empty()
            || shared.procs[idx].has_asker();
        if !work && !shared.is_shutdown() {
            shared.procs[idx].metrics.parks.incr();
            core.flush_busy(&shared.procs[idx].metrics, false);
            core = self.poll_driver(core, true);
        }
        match shared.idle.reclaim(idx) {
            super::idle::Reclaim::Spinning => core.spinning = true,
            super::idle::Reclaim::Plain if work && was_spinning => {
                // Go: a spinner that finds work in its re-check goes back to spinning.
                core.spinning = true;
                shared.idle.start_spinning(core.node);
            }
            super::idle::Reclaim::Plain => {}
        }
        shared.procs[idx].set_running(true);
        Some(core)
    }

    /// Hands `core` to the M waiting to get this P back, if there is one and
    /// it is still in its pool (a concurrent handoff may have taken it).
    fn give_back(&self, mut core: BoxCore) -> Result<(), BoxCore> {
        let shared = &*self.shared;
        let Some(m) = shared.procs[core.index].take_asker() else {
            return Err(core);
        };
        if Arc::ptr_eq(&m, &self.machine) {
            return Err(core);
        }
        let mut pool = shared.nodes[m.node].idle_machines.lock().unwrap();
        let Some(pos) = pool.iter().position(|x| Arc::ptr_eq(x, &m)) else {
            return Err(core);
        };
        pool.swap_remove(pos);
        drop(pool);
        if core.spinning {
            core.spinning = false;
            if shared.idle.stop_spinning(core.node) {
                shared.wake_idle_p(core.node);
            }
        }
        shared.procs[core.index].metrics.handbacks.incr();
        *m.handoff.lock().unwrap() = Some(core);
        m.cv.notify_one();
        Ok(())
    }
}
