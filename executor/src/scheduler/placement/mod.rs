//! Placement policy: where a woken or spawned task goes and what a thief may
//! take, apart from the mechanism that moves tasks.
//!
//! The mechanism — the ring and `runnext`, node queues and inboxes, steal
//! half, spinning, park/unpark, the run loop (`worker/`) — is Go's, and
//! it works with every rule here switched off ([`Placement::go`]). It asks
//! this module at these points, and nowhere else:
//!
//! | hook | asked by | question |
//! |---|---|---|
//! | [`Policy::on_wake`] | the schedule function, a wake inside a poll | which batch do waker and wakee share now? |
//! | [`Policy::displaced`] | the same, when the wakee pushed a task out of `runnext` | ring (Go) or batch queue? |
//! | [`Policy::begin_poll`], [`Policy::end_poll`] | `run_task`, around each poll | the poll's batch; a hub's progress |
//! | [`Policy::send_home`] | `run_task`, a task that last ran on another P | poll it here, or send it back? |
//! | [`Policy::owner_next`] | `find_runnable`, after `runnext` | a batch-queue task, or a split |
//! | [`Policy::ring_ran`], [`Policy::ring_dry`] | `find_runnable`, after a ring pop or an empty ring | (told) the batch queue's turn starts over; shared-out work is gone |
//! | [`Policy::on_tick`] | `find_runnable`, every `event_interval` ticks | split a batch queue for an idle P? |
//! | [`Policy::look`], [`Policy::shareable`] | a thief, the park re-check, the wake rules | how much of a victim's ring stays with it ([`Policy::reserve`])? |
//! | [`Policy::route_new`] | a spawn right after an accept, `spawn_near` | round-robin, the anchor's P, or `runnext`? |
//! | [`Policy::wants_offer`], [`Policy::mark_long`] | sysmon, a P in long polls | lift its reserve? |
//! | [`Policy::describe`] | sysmon's schedtrace and task dump | a P's batch queue, a task's batch, is it a hub's? |
//! | [`Policy::queued`] | sysmon's idleness test (paused time) | does a P's batch queue hold tasks? |
//! | [`Policy::rules`] | `RuntimeMetrics` | which rules are on? |
//!
//! The policy sees queue lengths, the P's counters and its own state: per P
//! the thief-visible [`Hints`] and the poll's [`RunningBatch`], per core the
//! owner-only [`Owner`] (the batch queue, the poll's wake edges). It never
//! touches a `Processor` or `Core`.
//!
//! The rules ([`Rule`]), each switchable on its own (`NUMA_RT_PLACEMENT`,
//! [`Placement`]) so that each can be measured alone:
//!
//! - [`Rule::Roots`] (Vyukov): a task spawned right after an accept goes
//!   to the next P round-robin, not the acceptor's `runnext`: otherwise
//!   every connection piles up on the P running the accept loop.
//! - [`Rule::Keep`]: a running P *reserves* for its own M the tasks that M
//!   reaches within [`RESERVE_NS`] at its mean poll time: an idle P is not
//!   woken for them, and an M looking
//!   for work before it parks does not count them as work: a wake-up, a
//!   steal pass and a migration cost more than they save there (a cold
//!   cache, a socket whose readiness keeps arriving at the old P's
//!   poller). A thief that is awake and stealing takes half of any ring,
//!   as in Go: keeping work from it made a fan-in whose producers compute
//!   run on one P while the other idled. Nothing is reserved by a P whose
//!   queues have not run dry for a whole `event_interval` (its ring
//!   refills as fast as it runs), whose ring holds batch work it shared
//!   out, or whose poll sysmon marked long: sysmon offers the queue of a P
//!   whose polls run long while tasks wait behind them and a P idles
//!   ([`Policy::wants_offer`]), the rule's safety valve (a task queued
//!   behind a poll that waits for it would otherwise wait for ever).
//! - [`Rule::Batches`] (occam-π, seed 000): tasks that wake each other form
//!   a batch (`batch`); a member a wake displaces from `runnext` goes to the
//!   ring shared out (any thief may take it: a pipeline spreads), except
//!   in a hub's batch measured to carry little work per hand-off
//!   (`hub_mode`), whose members wait in the owner's batch queue, where no
//!   thief takes them (a cheap fan-in runs serially beside its consumer
//!   instead of fighting over one channel from every core). A task in
//!   `runnext` beside a kept batch is the owner's too.
//! - [`Rule::HubHome`]: a kept batch's hub about to be polled on another P
//!   while its batch runs on its old P goes back there.
//!
//! The figures behind each rule, on and off, are in docs/performance.md
//! ("Placement rules"), with the command that reproduces them
//! (`benches/placement_rules.sh`).

pub(crate) mod batch;
pub(crate) mod hub_mode;
mod rules;
mod state;

pub use rules::{Placement, Rule, PLACEMENT_ENV};
pub(crate) use state::{Hints, Look, Next, Owner, Route, RunningBatch, Spawned, Victim};

use crate::counters::ProcCounters;
use crate::task::{BatchId, Runnable, TaskMeta};
use std::sync::atomic::Ordering::Relaxed;

// The policy's tuning constants are in crate::tuning with the others; the
// batch queue's bound is beside the queue (not a tuning).
use crate::tuning::{MAX_BATCH_RUN, MIN_TASK_NS, RESERVE_NS};
use state::BATCH_QUEUE_CAP;

/// The placement policy of one runtime: its rules and the state of the
/// batch rules (shared by every P).
pub(crate) struct Policy {
    rules: Placement,
    /// The batches with a hub (see `batch::Hubs`).
    hubs: batch::Hubs,
    /// Whether each hub's batch is kept or spread, as measured.
    hub_modes: hub_mode::HubModes,
}

/// The runtime's busy time (ns, every P's) so far, read only when a hub's
/// measurement begins or ends (`hub_mode`).
pub(crate) trait BusyTime: Fn() -> u64 {}
impl<F: Fn() -> u64> BusyTime for F {}

impl Policy {
    pub(crate) fn new(rules: Placement) -> Policy {
        Policy {
            rules,
            hubs: batch::Hubs::new(),
            hub_modes: hub_mode::HubModes::default(),
        }
    }

    /// The rules in force.
    pub(crate) fn rules(&self) -> Placement {
        self.rules
    }

    #[inline]
    fn on(&self, r: Rule) -> bool {
        self.rules.has(r)
    }

    // ---- spawns ---------------------------------------------------------

    /// Where a new task that is a root or placed beside another goes
    /// (`Shared::place_new` asks; any other spawn goes where a wake would).
    /// `active`: the P's allowed to take work (retired ones get none);
    /// `here`: this thread's P, if it holds one; `next_root`: the runtime's
    /// round-robin cursor, advanced by one.
    ///
    /// - [`Spawned::Root`] ([`Rule::Roots`], Vyukov): the next P
    ///   round-robin, skipping this one, which runs the accept loop;
    ///   with the rule off, like a wake.
    /// - [`Spawned::Near`]: the anchor's batch, and the inbox of the P that
    ///   last polled the anchor, unless that is this P (then like a wake) or
    ///   retired, or the anchor never ran. `spawn_near` is the program's
    ///   own request: it holds with every rule off.
    pub(crate) fn route_new(
        &self,
        meta: &TaskMeta,
        how: Spawned,
        active: usize,
        here: impl FnOnce() -> Option<usize>,
        next_root: impl FnOnce() -> usize,
    ) -> Route {
        match how {
            Spawned::Root if self.on(Rule::Roots) => {
                let n = active.max(1);
                let k = next_root() % n;
                Route::Root(match here() {
                    Some(here) if k == here => (k + 1) % n,
                    _ => k,
                })
            }
            Spawned::Root => Route::Wake,
            Spawned::Near(a) => {
                meta.set_batch(a.batch);
                let here = here();
                match a.last_p.filter(|&p| p < active) {
                    Some(p) if here != Some(p) => Route::Near(p),
                    _ => Route::Wake,
                }
            }
        }
    }

    // ---- wakes ----------------------------------------------------------

    /// A task woke `wakee` from inside its poll on this P ([`Rule::Batches`]:
    /// learn the edge, count a hub poll). Returns the batch both are in now
    /// (0: none, or the rule is off). `clock_ms`: the P's busy clock.
    #[inline]
    pub(crate) fn on_wake(
        &self,
        owner: &mut Owner,
        wakee: &TaskMeta,
        clock_ms: u32,
        m: &ProcCounters,
        site: impl FnOnce(&TaskMeta) -> usize,
        busy: impl BusyTime,
    ) -> u32 {
        if !self.on(Rule::Batches) {
            return 0;
        }
        let bits = batch::learn_edge(owner, wakee, clock_ms, m);
        if batch::note_wake(owner, wakee) {
            self.note_hub_poll(owner, bits, clock_ms, m, site, busy);
        }
        bits
    }

    /// A poll has just woken its [`HUB_WAKES`](crate::tuning::HUB_WAKES)th different task:
    /// count it and mark its batch a hub's. Cold: once per hub poll.
    #[cold]
    #[inline(never)]
    fn note_hub_poll(
        &self,
        owner: &Owner,
        bits: u32,
        clock_ms: u32,
        m: &ProcCounters,
        site: impl FnOnce(&TaskMeta) -> usize,
        busy: impl BusyTime,
    ) {
        m.batch_hub_polls.incr();
        if bits != 0 {
            self.hubs.mark(bits, clock_ms);
            let site = || {
                // SAFETY: we run inside the poll of the task `running_meta`
                // names (`on_wake` is called by the schedule function during
                // it), whose allocation async-task keeps alive for the poll.
                site(unsafe { &*(owner.running_meta as *const TaskMeta) })
            };
            self.hub_modes
                .claim(bits, owner.running_meta, site, &at(busy));
        }
    }

    /// Where the task a wake displaced from `runnext` goes: `None` if the
    /// policy keeps it (the batch queue), else `Some` for the ring's tail.
    /// A member of the waker's batch (`bits`) is one of two members
    /// runnable at once: occam-π's cue to split. It waits in the batch
    /// queue only when its batch is a hub's held kept; otherwise it goes
    /// to the ring shared out, so a thief may take it however soon this P
    /// would reach it. Out of line: most wakes displace nothing.
    #[inline(never)]
    pub(crate) fn displaced(
        &self,
        owner: &mut Owner,
        hints: &Hints,
        old: Runnable,
        bits: u32,
        clock_ms: u32,
        m: &ProcCounters,
    ) -> Option<Runnable> {
        if bits == 0
            || old.metadata().batch_bits() != bits
            || batch::live_batch(old.metadata(), clock_ms).is_none()
        {
            return Some(old);
        }
        let keep = self.hub_modes.keeps(bits)
            && (batch::in_hub_poll(owner) || self.hubs.is_hub(bits, clock_ms));
        if !keep {
            share_out(hints);
            return Some(old);
        }
        if owner.bq.len() >= BATCH_QUEUE_CAP {
            return Some(old);
        }
        m.batch_queued.incr();
        owner.bq.push_back(old);
        hints.bq_len.store(owner.bq.len() as u32, Relaxed);
        None
    }

    // ---- around a poll --------------------------------------------------

    /// A poll of `meta` (in batch `bits`) begins on this P.
    #[inline]
    pub(crate) fn begin_poll(
        &self,
        owner: &mut Owner,
        running: &RunningBatch,
        meta: &TaskMeta,
        bits: u32,
    ) {
        if !self.on(Rule::Batches) {
            return;
        }
        owner.running_meta = std::ptr::from_ref(meta) as usize;
        owner.poll_wakes = 0;
        owner.last_wakees = [0; 2];
        running.0.store(bits, Relaxed);
    }

    /// The poll just ended (its task was in batch `bits`): a followed
    /// hub's progress, which may end its batch's measuring phase
    /// (`hub_mode`). One branch for polls that woke nobody or are in no
    /// batch; the task may be gone, `running_meta` is only compared.
    #[inline]
    pub(crate) fn end_poll(&self, owner: &Owner, bits: u32, m: &ProcCounters, busy: impl BusyTime) {
        if owner.poll_wakes != 0 && bits != 0 && self.hub_modes.may_follow(bits, owner.running_meta)
        {
            self.note_poll_wakes(owner, bits, m, busy);
        }
    }

    #[cold]
    #[inline(never)]
    fn note_poll_wakes(&self, owner: &Owner, bits: u32, m: &ProcCounters, busy: impl BusyTime) {
        let decided =
            self.hub_modes
                .note_wakes(bits, owner.running_meta, owner.poll_wakes, &at(busy));
        match decided {
            hub_mode::Decision::None => return,
            hub_mode::Decision::Keep => m.batch_keeps.incr(),
            hub_mode::Decision::Spread => m.batch_spreads.incr(),
        }
        if let Some(ns) = self.hub_modes.last_work(bits) {
            m.batch_last_work_ns.set(ns);
        }
    }

    /// Whether `hub`, about to be polled here but last polled on P `home`,
    /// goes back there ([`Rule::HubHome`]): it is the followed hub of batch
    /// `bits`, the batch is kept, and `home` is polling a member of it now
    /// (`home_runs`: the batch in `home`'s poll, if it is in one), so it
    /// will reach its inbox as soon as the members it runs block. A kept
    /// fan-in's consumer is woken into the `runnext` of whichever producer
    /// sends first; one a thief took before the batch was known would take
    /// the consumer to the other P while the rest of the batch runs on
    /// `home`, both P's contending on one channel. Checked only for a task
    /// that last ran on another P.
    #[cold]
    #[inline(never)]
    pub(crate) fn send_home(
        &self,
        hub: &TaskMeta,
        bits: u32,
        home_runs: impl FnOnce() -> Option<u32>,
    ) -> bool {
        self.on(Rule::HubHome)
            && bits != 0
            && self
                .hub_modes
                .may_follow(bits, std::ptr::from_ref(hub) as usize)
            && self.hub_modes.keeps(bits)
            && home_runs() == Some(bits)
    }

    // ---- what the owner runs --------------------------------------------

    /// After `runnext`: a batch-queue task (at most [`MAX_BATCH_RUN`] in a
    /// row while the ring holds tasks), or a split a thief asked for, or
    /// the ring's turn. `to_ring` receives a split's tasks in order.
    #[inline]
    pub(crate) fn owner_next(
        &self,
        owner: &mut Owner,
        hints: &Hints,
        ring_empty: bool,
        m: &ProcCounters,
        to_ring: impl FnMut(Runnable),
    ) -> Next {
        if owner.bq.is_empty() {
            return Next::Ring;
        }
        if hints.split.load(Relaxed) && !self.bq_kept(owner, hints) {
            return match self.split(owner, hints, m, to_ring) {
                true => Next::Split,
                false => Next::Ring,
            };
        }
        if owner.bq_run < MAX_BATCH_RUN || ring_empty {
            if let Some(t) = owner.bq.pop_front() {
                hints.bq_len.store(owner.bq.len() as u32, Relaxed);
                owner.bq_run += 1;
                m.batch_polls.incr();
                return Next::Run(t);
            }
        }
        Next::Ring
    }

    /// The ring's turn came: the batch queue's run count starts over.
    #[inline]
    pub(crate) fn ring_ran(&self, owner: &mut Owner) {
        owner.bq_run = 0;
    }

    /// The ring ran dry: what the owner shared out is gone.
    #[inline]
    pub(crate) fn ring_dry(&self, hints: &Hints) {
        if hints.shared_out.load(Relaxed) {
            hints.shared_out.store(false, Relaxed);
        }
    }

    /// Once per `event_interval` ticks: occam-π's split of a batch queue
    /// whose members are runnable at once while a P of the node idles
    /// (`idle_p`). True if it split (then wake that P).
    pub(crate) fn on_tick(
        &self,
        owner: &mut Owner,
        hints: &Hints,
        idle_p: bool,
        m: &ProcCounters,
        to_ring: impl FnMut(Runnable),
    ) -> bool {
        !owner.bq.is_empty()
            && idle_p
            && !self.bq_kept(owner, hints)
            && self.split(owner, hints, m, to_ring)
    }

    /// Whether the batch in the batch queue is kept (its hub's batch
    /// measuring or held kept): then no split. Clears a thief's request it
    /// refuses.
    fn bq_kept(&self, owner: &Owner, hints: &Hints) -> bool {
        let Some(t) = owner.bq.front() else {
            return false;
        };
        let kept = self.hub_modes.keeps(t.metadata().batch_bits());
        if kept {
            hints.split.store(false, Relaxed);
        }
        kept
    }

    /// The batch queue goes to the ring for thieves. True if anything moved.
    fn split(
        &self,
        owner: &mut Owner,
        hints: &Hints,
        m: &ProcCounters,
        mut to_ring: impl FnMut(Runnable),
    ) -> bool {
        hints.split.store(false, Relaxed);
        if owner.bq.is_empty() {
            return false;
        }
        for t in owner.bq.drain(..) {
            to_ring(t);
        }
        hints.bq_len.store(0, Relaxed);
        m.batch_splits.incr();
        share_out(hints);
        true
    }

    // ---- what thieves see -----------------------------------------------

    /// A held P's reserve ([`Rule::Keep`]): how many of its ring tasks are its own M's,
    /// those it reaches within [`RESERVE_NS`] at its mean poll time, for which
    /// nobody is woken and a parking M does not stay up — none if its queues have not run dry for a whole
    /// `event_interval`, if its ring holds batch work shared out, or if
    /// sysmon marked its poll long. `held`: an M holds the P and runs it
    /// (a parked P reserves nothing).
    #[inline]
    fn reserve(&self, held: bool, hints: &Hints, m: &ProcCounters) -> u32 {
        if !held
            || !self.on(Rule::Keep)
            || m.unbroken_busy.load(Relaxed)
            || hints.shared_out.load(Relaxed)
            || long_marked(hints, m)
        {
            return 0;
        }
        let per = m.poll_time_ewma_ns.get().max(MIN_TASK_NS);
        (RESERVE_NS / per).min(u64::from(u32::MAX)) as u32
    }

    /// Whether a task in a victim's `runnext` (its ring empty) is its
    /// owner's because a kept batch runs there: a batch queue waits, or a
    /// member of a kept hub batch is in the poll. The first member a
    /// hub's drain wakes waits there for the rest of the drain, past Go's
    /// 3 µs grace. sysmon's long mark lifts this as it lifts the reserve.
    #[inline]
    fn runnext_kept(&self, hints: &Hints, running: &RunningBatch, m: &ProcCounters) -> bool {
        if hints.bq_len.load(Relaxed) == 0 && running.get() == 0 {
            return false; // the common case, and every case without batches
        }
        if long_marked(hints, m) {
            return false;
        }
        hints.bq_len.load(Relaxed) != 0 || self.hub_modes.keeps(running.get())
    }

    /// What a thief may take from `v`. A victim with only a batch queue is
    /// asked to split it (`ask`: the thief will really steal, not just
    /// look).
    #[inline]
    pub(crate) fn look(&self, v: Victim<'_>, ask: bool) -> Look {
        if v.ring == 0 {
            let batch_queue = v.hints.bq_len.load(Relaxed) != 0;
            if ask && batch_queue && !v.hints.split.load(Relaxed) {
                // Only a store when not set yet: every thief asks, and a
                // store per look would take the line from its owner.
                v.hints.split.store(true, Relaxed);
            }
            return if v.runnext && !self.runnext_kept(v.hints, v.running, v.counters) {
                Look::Runnext
            } else if v.runnext || batch_queue {
                Look::OwnerOnly
            } else {
                Look::Nothing
            };
        }
        // A thief that is awake already (`ask`: it steals now) takes half
        // of any ring: the reserve decides only whom to wake and when to park.
        let reserve = if ask {
            0
        } else {
            self.reserve(v.held, v.hints, v.counters)
        };
        if v.ring > reserve as usize {
            Look::Stealable { reserve }
        } else {
            Look::OwnerOnly
        }
    }

    /// Whether a P holds work a thief woken now could take: ring tasks
    /// beyond its reserve (`next`: tasks at the ring's head this M runs before
    /// anything else), or a batch queue. The wake rules ask this, not
    /// whether any work is queued: a P woken for owner-only work finds nothing.
    #[inline]
    pub(crate) fn shareable(
        &self,
        owner: &Owner,
        hints: &Hints,
        m: &ProcCounters,
        queued: usize,
        next: usize,
    ) -> bool {
        owner.has_work() || queued.saturating_sub(next) > self.reserve(true, hints, m) as usize
    }

    /// Whether a batch queue holds tasks (idle checks).
    #[inline]
    pub(crate) fn queued(&self, hints: &Hints) -> bool {
        hints.bq_len.load(Relaxed) != 0
    }

    // ---- sysmon's offer -------------------------------------------------

    /// Whether sysmon should offer a P's queue when its polls run long (the
    /// reserve's safety valve: tasks reserved behind a poll that waits for them
    /// would otherwise wait for ever while a P idles): not while the running task is a member of a batch
    /// held kept on it (those polls are long by nature, and the batch was
    /// measured to run best there).
    pub(crate) fn wants_offer(&self, running: &RunningBatch) -> bool {
        self.on(Rule::Keep) && {
            let bits = running.get();
            bits == 0 || !self.hub_modes.keeps(bits)
        }
    }

    /// Marks poll number `polls` of a P long: it reserves nothing from thieves
    /// until that poll ends. False if that poll was marked already (sysmon
    /// offers a queue once per poll).
    pub(crate) fn mark_long(&self, hints: &Hints, polls: u64) -> bool {
        if hints.long_mark.load(Relaxed) == polls {
            return false;
        }
        hints.long_mark.store(polls, Relaxed);
        true
    }

    /// Diagnostics: what the policy says about its state for the schedtrace
    /// and the task dump, read at `now_ms` (`task::epoch_ms`, for the
    /// batches' and hubs' decay).
    pub(crate) fn describe(&self, now_ms: u32) -> Describe<'_> {
        Describe {
            policy: self,
            now_ms,
        }
    }
}

/// The policy's answers for the schedtrace and the task dump
/// ([`Policy::describe`]).
pub(crate) struct Describe<'a> {
    policy: &'a Policy,
    now_ms: u32,
}

impl Describe<'_> {
    /// A P's batch-queue length.
    pub(crate) fn bq_len(&self, hints: &Hints) -> u32 {
        hints.bq_len.load(Relaxed)
    }

    /// The batch task `meta` is a live member of (`None`: in none, or its
    /// batch decayed).
    pub(crate) fn task_batch(&self, meta: &TaskMeta) -> Option<BatchId> {
        batch::live_batch(meta, self.now_ms)
    }

    /// How the schedtrace marks batch `b`: nothing, or a hub's
    /// `(hub,<mode>)`.
    pub(crate) fn batch_label(&self, b: u16) -> &'static str {
        let policy = self.policy;
        if !policy.hubs.is_hub_id(b, self.now_ms) {
            return "";
        }
        match policy
            .hub_modes
            .mode(u32::from(b) << crate::task::BATCH_SHIFT)
        {
            Some(hub_mode::Mode::Keep) => "(hub,kept)",
            Some(hub_mode::Mode::Spread) => "(hub,spread)",
            Some(hub_mode::Mode::Measuring) => "(hub,measuring)",
            None => "(hub)",
        }
    }
}

/// Marks the ring as holding shared-out batch work (only when not set yet).
#[inline]
fn share_out(hints: &Hints) {
    if !hints.shared_out.load(Relaxed) {
        hints.shared_out.store(true, Relaxed);
    }
}

/// Whether sysmon marked the poll in progress long (the poll counter is
/// read only when a mark exists).
#[inline]
fn long_marked(hints: &Hints, m: &ProcCounters) -> bool {
    let mark = hints.long_mark.load(Relaxed);
    mark != 0 && mark == m.polls.get()
}

fn at(busy: impl BusyTime) -> hub_mode::At<impl Fn() -> u32, impl Fn() -> u64> {
    hub_mode::At {
        now_ms: || crate::task::epoch_ms(std::time::Instant::now()),
        busy,
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
