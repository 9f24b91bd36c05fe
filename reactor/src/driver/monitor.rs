//! The monitor thread, the reactor's part of Go's sysmon: one per reactor,
//! started where the watcher role can move, when the executor installs its
//! sysmon ([`SysmonHook`], [`Reactor::set_sysmon`]) or when the clock is
//! paused ([`Reactor::pause_clock`]). It holds the
//! reactor weakly and ends when the reactor shuts down or is dropped. Its
//! place in park and wake, and the measurements behind its rules, are in
//! docs/architecture.md, "Idle P's and parked M's: the park/unpark
//! protocol" (the monitor under "Waking: who wakes whom"; "Rescuing it").
//! What it does:
//!
//! - it sleeps 20 µs, doubling up to 10 ms while it finds nothing to do
//!   (Go's sysmon figures);
//! - the **rescue**, at each tick: for each node whose watcher is out of its
//!   park and has not come back since the previous tick (its wake-up count
//!   did not move), it first gives the watch back if that holder hosts it
//!   ([`super::watch::Role::release_host`]) and judges at the next tick;
//!   otherwise, if the node's watch epoll shows a poller with events that
//!   nobody has drained since the previous tick ([`Ready::stale`]), it hands
//!   the role to a parked candidate ([`super::watch::Role::rescue`]): two
//!   `epoll_ctl`s, and the new watcher wakes at once for the waiting event.
//!   Evidence, not time alone: a watcher whose every task readies the next
//!   one on its own poller keeps the role (taken on time alone, one echo
//!   connection passed back and forth between two M's);
//! - the **network poll**, at each tick ([`poll_unwatched`], Go's sysmon
//!   `netpoll(0)`): every P's io poller that nobody has drained for 10 ms
//!   while no parked watcher watches its node (its own, or one its node is
//!   lent to: `super::lend`) is polled without blocking, and what it finds
//!   is fired here;
//! - the executor's round ([`SysmonHook::tick`]): stall reports, retake,
//!   schedtrace, the deadlock diagnostic;
//! - the **deep sleep**: when every M of the runtime is parked and none woke
//!   during the last tick, it sleeps until an M leaves its park
//!   ([`Monitor::kick`]), so an idle runtime makes no system call, while
//!   light load (an M waking every few hundred microseconds) costs one
//!   monitor wake-up per 10 ms rather than a kick per request.
//!
//! The deep sleep and the kick are a Dekker pair: the monitor sets `sleeping`
//! then reads every P's parked flag; an M clears its parked flag (in
//! `Driver::park`) then reads `sleeping`. Either the monitor sees the running
//! M and stays awake, or the M sees the monitor asleep and kicks it.

use super::dispatch::{help, Help};
use super::io::Wakeups;
use super::lend::LendOps;
use super::watch_ops::{LendEpolls, Ops};
use super::{NodeWatch, Reactor, Shared, LEND_IN_WATCH, UNPARK_IN_WATCH};
use crate::sys;
use std::sync::atomic::{
    AtomicBool,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::tuning::{MAX_DELAY, MIN_DELAY, UNWATCHED_POLL};

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

impl Reactor {
    /// Installs the runtime's sysmon: `hook` runs on the monitor thread at
    /// every tick (see [`SysmonHook`]), and the monitor thread is started if
    /// the watcher alone did not need it.
    pub fn set_sysmon(&self, hook: Weak<dyn SysmonHook>) -> std::io::Result<()> {
        self.shared.monitor.set_hook(hook);
        self.shared.monitor.start(&self.shared)
    }

    /// Installs the runtime's sysmon without starting the monitor thread:
    /// `hook` runs once the thread runs, because the watcher role needs it
    /// or the clock is paused ([`Reactor::pause_clock`]).
    pub fn set_sysmon_hook(&self, hook: Weak<dyn SysmonHook>) {
        self.shared.monitor.set_hook(hook);
    }

    /// Wakes the monitor thread if it sleeps until an M leaves its park: a
    /// thread outside the runtime (a parking `block_on`) has news for the
    /// sysmon hook. One SeqCst load when it is awake.
    pub fn kick_monitor(&self) {
        self.shared.monitor.kick();
    }
}

pub(super) struct Monitor {
    /// True while the thread sleeps until kicked. SeqCst: the monitor's side
    /// of the pair with `PState::parked` (module docs).
    sleeping: AtomicBool,
    state: Mutex<State>,
    cv: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The executor's sysmon, called every round (`Reactor::set_sysmon`).
    hook: Mutex<Option<Weak<dyn SysmonHook>>>,
}

#[derive(Default)]
struct State {
    kicked: bool,
    stop: bool,
}

impl Monitor {
    pub(super) fn new() -> Arc<Monitor> {
        Arc::new(Monitor {
            sleeping: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            thread: Mutex::new(None),
            hook: Mutex::new(None),
        })
    }

    /// Starts the thread for the reactor `shared`, unless it runs already.
    pub(super) fn start(self: &Arc<Self>, shared: &Arc<Shared>) -> std::io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_some() {
            return Ok(());
        }
        let weak = Arc::downgrade(shared);
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name("numa_rt-monitor".into())
            .spawn(move || me.run(weak))
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("starting the numa_rt-monitor thread: {e}"),
                )
            })?;
        *thread = Some(t);
        Ok(())
    }

    pub(super) fn set_hook(&self, hook: Weak<dyn SysmonHook>) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Runs the sysmon hook's round, if one is installed and alive. A panic
    /// in it is contained (reported once per round on stderr): the monitor
    /// keeps the watcher role moving either way.
    fn hook_tick(&self, idle: bool) -> Option<Duration> {
        let hook = self.hook.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let hook = hook?.upgrade()?;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook.tick(idle))) {
            Ok(limit) => limit,
            Err(_) => {
                eprintln!("numa_rt: the sysmon round panicked; it will run again next tick");
                None
            }
        }
    }

    /// The hook's [`SysmonHook::runtime_idle`]; true with no hook (a
    /// reactor without an executor: the M's parked flags decide).
    pub(super) fn hook_runtime_idle(&self) -> bool {
        let hook = self.hook.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match hook {
            None => true,
            Some(h) => h.upgrade().is_some_and(|h| h.runtime_idle()),
        }
    }

    /// Called by an M leaving its park: wakes the monitor if it sleeps until
    /// kicked. One SeqCst load when it does not (pairs with the store in
    /// `run`).
    pub(super) fn kick(&self) {
        if self.sleeping.load(SeqCst) {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.kicked = true;
            self.sleeping.store(false, SeqCst);
            self.cv.notify_one();
        }
    }

    /// Ends the thread and waits for it (reactor shutdown), unless called on
    /// the monitor thread itself.
    pub(super) fn stop(&self) {
        self.signal_stop();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }

    /// Asks the thread to end without waiting (the reactor is being dropped).
    pub(super) fn signal_stop(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.stop = true;
        self.cv.notify_one();
    }

    fn run(&self, shared: Weak<Shared>) {
        let mut delay = MIN_DELAY;
        // Per node: the watcher seen out of its park at the last tick, and
        // its wake-up count then.
        let mut seen: Vec<Option<(usize, u64)>> = Vec::new();
        // Every P's wake-ups, summed, at the last tick.
        let mut last_total = u64::MAX;
        // Per P: its io poller's drain count when last seen, and since when
        // it has stood still.
        let mut polled: Vec<(u64, Instant)> = Vec::new();
        // Per P: its io poller's drain count at the last tick (the rescue's
        // "nobody drained it since").
        let mut drains: Vec<u64> = Vec::new();
        let mut ready = Ready::default();
        loop {
            let deep = {
                let Some(sh) = shared.upgrade() else { return };
                let total: u64 = sh.ps.iter().map(|p| p.stats.wakeups.load(Relaxed)).sum();
                // Relaxed: the wake-up counters only say whether anything
                // happened since the last tick. Sleep until kicked only once
                // the runtime has been idle for
                // a whole tick (no M woke since the last one), so light load
                // does not pay a kick per request.
                let quiet = total == last_total;
                last_total = total;
                quiet && {
                    self.sleeping.store(true, SeqCst);
                    // SeqCst loads: the other half of the pair with `kick`.
                    let all_parked = sh.ps.iter().all(|p| p.parked.load(SeqCst));
                    if !all_parked {
                        self.sleeping.store(false, SeqCst);
                    }
                    all_parked
                }
            };
            // The executor's round (stall reports, schedtrace, the
            // deadlock diagnostic): it may bound the coming sleep.
            let limit = self.hook_tick(deep);
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if deep {
                let mut timed_out = false;
                while !s.kicked && !s.stop && !timed_out {
                    s = match limit {
                        None => self.cv.wait(s).unwrap_or_else(|e| e.into_inner()),
                        Some(d) => {
                            let (s, r) = self
                                .cv
                                .wait_timeout(s, d)
                                .unwrap_or_else(|e| e.into_inner());
                            timed_out = r.timed_out();
                            s
                        }
                    };
                }
                if timed_out && !s.kicked {
                    // The hook asked to run again while the runtime is still
                    // idle: stay quiet (same wake-up total) and go round.
                    // SeqCst: the same pair as above; a kick from now on
                    // finds the monitor awake.
                    self.sleeping.store(false, SeqCst);
                    continue;
                }
                s.kicked = false;
                // Back from a long idle: the next check in a full tick.
                delay = MAX_DELAY;
                seen.clear();
                polled.clear();
                last_total = u64::MAX;
            } else if !s.stop {
                s = self
                    .cv
                    .wait_timeout(s, limit.map_or(delay, |l| l.min(delay)))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if s.stop {
                return;
            }
            drop(s);
            let Some(sh) = shared.upgrade() else { return };
            if sh.is_shutdown() {
                return;
            }
            seen.resize(sh.nodes.len(), None);
            let last_drains = std::mem::take(&mut drains);
            // Relaxed: counters compared between ticks, ordering nothing.
            drains.extend(sh.ps.iter().map(|p| p.stats.drains.load(Relaxed)));
            let mut moved = false;
            for (n, watch) in sh.nodes.iter().enumerate() {
                let out = watch
                    .role
                    .watcher()
                    .filter(|&h| !sh.ps[h].parked.load(SeqCst));
                // Relaxed: a counter compared between ticks, ordering nothing.
                let now = out.map(|h| (h, sh.ps[h].stats.wakeups.load(Relaxed)));
                match now {
                    Some((h, _)) if now == seen[n] => {
                        // Relaxed: a hint; `release_host` decides under the
                        // role lock.
                        if sh.ps[h].hosted.load(Relaxed) {
                            // Its own poller is not in the watch: put it
                            // back, and judge at the next tick.
                            let ops = Ops {
                                shared: &sh,
                                watch,
                                host: false,
                            };
                            if watch.role.release_host(h, &ops) {
                                sh.ps[h].stats.releases.fetch_add(1, Relaxed);
                            }
                            continue;
                        }
                        if !ready.stale(watch, &last_drains, &drains) {
                            // Out for a whole tick, but nothing waits on it.
                            continue;
                        }
                        let ops = Ops {
                            shared: &sh,
                            watch,
                            host: false,
                        };
                        if watch.role.rescue(h, &ops) {
                            moved = true;
                            sh.ps[h].stats.handoffs.fetch_add(1, Relaxed);
                        }
                        seen[n] = None;
                    }
                    _ => seen[n] = now,
                }
            }
            moved |= poll_unwatched(&sh, &mut polled, Instant::now());
            delay = if moved {
                MIN_DELAY
            } else {
                (delay * 2).min(MAX_DELAY)
            };
        }
    }
}

/// The monitor's look at a node's watch epoll.
#[derive(Default)]
struct Ready {
    buf: Vec<libc::epoll_event>,
    tags: Vec<u64>,
}

impl Ready {
    /// Whether one of the node's pollers has events waiting and has not been
    /// drained since the last tick (`before` and `now`: every P's drain
    /// count then and now). A non-blocking wait on the watch epoll consumes
    /// nothing: its entries are the P pollers' epoll fds, level-triggered,
    /// ready while their own ready lists are not empty. Unpark eventfds in
    /// it are left out (an unparked running M runs the work itself). A
    /// failed wait counts as stale: rescuing is the safe side.
    fn stale(&mut self, watch: &NodeWatch, before: &[u64], now: &[u64]) -> bool {
        let want = watch.procs.max(1) * 2;
        if self.buf.len() < want {
            self.buf
                .resize(want, libc::epoll_event { events: 0, u64: 0 });
        }
        if sys::epoll_wait(
            &watch.epoll,
            &mut self.buf,
            Some(Duration::ZERO),
            &mut self.tags,
        )
        .is_err()
        {
            return true;
        }
        self.tags.iter().any(|&t| {
            let p = t as usize;
            // A lend epoll (another node's pollers, lent to this one) is
            // left out too: its own node's M's drain those, and the monitor
            // polls them if nobody does (`poll_unwatched`).
            t & (UNPARK_IN_WATCH | LEND_IN_WATCH) == 0
                && before.get(p).is_none_or(|b| now.get(p) == Some(b))
        })
    }
}

/// sysmon's network poll (Go's sysmon calling `netpoll(0)` when nobody has
/// polled for 10 ms). A P's poller is normally drained by its own M (when
/// it runs out of work, and every `event_interval` ticks while busy) or,
/// on an event, by its node's parked watcher. With no watcher parked on
/// the node — every M of the node busy, or only M's that cannot hold the
/// role (beyond the first `watch::CANDIDATES` P's) parked — and the P's M
/// inside a long poll, nobody would look: this polls such a poller once it
/// has stood undrained for [`UNWATCHED_POLL`], without blocking (try-lock,
/// as a watcher helps), and fires what it finds here. The executor queues
/// the woken tasks on the P's node (`context::firing_for`) and wakes an
/// idle P there, if any; sysmon's retake hands a stuck P with work waiting
/// in its node's queue to another M. Returns whether anything was woken.
fn poll_unwatched(sh: &Shared, polled: &mut Vec<(u64, Instant)>, now: Instant) -> bool {
    polled.resize(sh.ps.len(), (u64::MAX, now));
    let mut fired = false;
    for (i, p) in sh.ps.iter().enumerate() {
        // Relaxed: a counter compared between ticks, ordering nothing.
        let drains = p.stats.drains.load(Relaxed);
        if polled[i].0 != drains {
            polled[i] = (drains, now);
            continue;
        }
        if now.saturating_duration_since(polled[i].1) < UNWATCHED_POLL {
            continue;
        }
        polled[i].1 = now;
        // A parked watcher is woken by this poller's events itself. SeqCst:
        // as in the rescue above (a hint here: a stale answer costs one
        // extra drain, or delays this one by a tick).
        // A poller hosting the watch is seen by its own M only (Relaxed: a
        // hint, as above).
        // So is a poller of a node lent to a node whose watcher is parked
        // (see `lend`; a hosting poller is not in the lend epoll).
        let watched =
            sh.nodes[p.node].role.watcher().is_some_and(|h| {
                sh.ps[h].parked.load(SeqCst) && (h == i || !p.hosted.load(Relaxed))
            }) || (!p.hosted.load(Relaxed)
                && sh
                    .lending
                    .lent_to(p.node)
                    .is_some_and(|t| LendEpolls(sh).watched(t)));
        if watched {
            continue;
        }
        let mut wakeups = Wakeups::default();
        let mut timers = Vec::new();
        // Paused time must not advance while this holds events it has
        // taken from the poller and not yet fired (see `paused`).
        sh.paused.monitor_drain_begins();
        if let Help::Drained = help(p, &mut wakeups, &mut timers) {
            // Our own drain moved the count: it is not someone else's.
            polled[i].0 = p.stats.drains.load(Relaxed);
            fired |= !timers.is_empty() || !wakeups.is_empty();
            crate::current::set_firing_for(Some(i));
            for w in timers.drain(..) {
                crate::fault::wake(w, "a timer's waker");
            }
            wakeups.fire();
            crate::current::set_firing_for(None);
        }
        sh.paused.monitor_drain_ends();
    }
    fired
}
