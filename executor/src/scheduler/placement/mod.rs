//! Placement policy: where a woken or spawned task goes and what a thief may
//! take, apart from the mechanism that moves tasks.
//!
//! The mechanism — the ring and `runnext`, node queues and inboxes, steal
//! half, spinning, park/unpark, the run loop (`worker/`) — is Go's, and
//! it works with every rule here switched off ([`Placement::go`]). It asks
//! this module at these points, and nowhere else:
//!
//! | # | verb | asked by | question |
//! |---|---|---|---|
//! | 1 | [`Policy::route`] | `Shared::place_new` with a [`NewTask`] (a root, a `spawn_near`); the schedule function with a [`Woken`] task (a wake edge's waker, the `runnext` swap) | where does this task go, and the task it displaces from `runnext`: round-robin, the anchor's P, `runnext`; the ring or the batch queue? |
//! | 2 | [`Policy::look`] | a thief, the park re-check (`any_work`), sysmon's offer (through `Shared::steal_look`) | what may a thief take from this P ([`Look`]; how much stays with it: its reserve)? |
//! | 3 | [`Policy::owner_next`] | `find_runnable`: after `runnext` ([`Turn::Pick`]), every `event_interval` ticks ([`Turn::Tick`]), after a ring pop or an empty ring ([`Turn::RingRan`], [`Turn::RingDry`], told) | what does the owner run next: a batch-queue task, a split for thieves, or the ring ([`Next`])? |
//! | 4 | [`Policy::worth_waking`] | the last spinner to find work, `poll_driver` (through `Shared::shareable`) | is this P's queued work worth waking a thread for? |
//! | 5 | [`Policy::begin_poll`] | `run_task`, before each poll | a poll begins: here, or does the task go back to its batch's P ([`Poll`])? |
//! | 6 | [`Policy::end_poll`] | `run_task`, after each poll | (told) a poll ended: a followed hub's progress |
//! | 7 | [`Policy::long_poll`] | sysmon, a P in long polls with tasks in its ring and a P idle | offer its queue now (lift its reserve for this poll)? |
//! | 8 | [`Policy::describe`] | `RuntimeMetrics`, sysmon's idleness test (paused time), the schedtrace and the task dump | its rules; does a P's batch queue hold tasks, how many; a task's live batch; a hub's label ([`Describe`]) |
//!
//! These eight and the constructor are the policy's whole surface, 8
//! methods called from outside `placement/` (sysmon asks 7 and 8, and 2
//! through the mechanism's `steal_look`); this lists them, calls that
//! span lines included:
//!
//! ```text
//! grep -rhozE '\.policy\s*\.\s*[a-z_]+' executor/src --include=*.rs \
//!     --exclude-dir=placement | tr -d ' \n' | tr '\0' '\n' | sort -u
//! ```
//!
//! The state types own three small accessors of their own for the
//! mechanism (`PolicyCore::{has_work, drain}`, `PolicyP::new`) and
//! [`Look::stealable`].
//!
//! The policy's state is its own: per P the thief-visible [`Hints`] (on
//! the P's first cache line) and the poll's [`RunningBatch`] (on the line
//! its M writes per poll), private fields of `Processor` that the mechanism
//! reads only as the view [`PolicyP`] (`Processor::policy`); per core the
//! owner-only [`PolicyCore`] (the batch queue, the poll's wake edges), a
//! field of `Core` whose own fields are private here. Their fields are this module's alone. The
//! policy holds no task reference: the mechanism hands it `&TaskMeta` for
//! one question (the task to poll; a wake's waker, which the schedule
//! function finds as `Core::polling`), and the task in a poll is named by
//! its id. No `unsafe` in this module; none crosses the seam.
//!
//! [`Policy`] is one of two types behind the eight [`Verbs`]: with
//! [`Placement::go`] the no-op type [`Go`] (`go.rs`), which answers every
//! verb as Go would (`runnext`, the ring, steal half, poll here, nothing
//! kept, nothing offered; only `spawn_near`, the program's own request,
//! still places a task) and keeps no state; with any rule on, [`Rules`],
//! which checks its rules at run time (with none on it answers as `Go`
//! does, verb by verb: a test compares them). The mechanism calls the
//! same verbs either way (`seam.rs` forwards with one `match`).
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
//!   ([`Policy::long_poll`]), the rule's safety valve (a task queued
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
mod go;
pub(crate) mod hub_mode;
mod route;
mod rules;
mod seam;
mod state;

pub(crate) use go::Go;
pub use rules::{Placement, Rule, PLACEMENT_ENV};
pub(crate) use seam::{Policy, Verbs};
pub(crate) use state::{
    Arrival, Hints, Look, NewTask, Next, PolicyCore, PolicyP, Poll, Route, RunningBatch, Spawned,
    Turn, Victim, WakeTo, Woken,
};

use crate::counters::ProcCounters;
use crate::task::{BatchId, TaskMeta};
use std::sync::atomic::Ordering::Relaxed;

// The policy's tuning constants are in crate::tuning with the others.
use crate::tuning::{MAX_BATCH_RUN, MIN_TASK_NS, RESERVE_NS};

/// The placement rules of one runtime, checked at run time, and the state
/// of the batch rules (shared by every P).
pub(crate) struct Rules {
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

// ---- the verbs: what the mechanism asks ---------------------------------

impl Rules {
    pub(crate) fn new(rules: Placement) -> Rules {
        Rules {
            rules,
            hubs: batch::Hubs::new(),
            hub_modes: hub_mode::HubModes::default(),
        }
    }
}

impl Verbs for Rules {
    /// (1) Where a task arriving goes: a [`NewTask`] (a root or a
    /// `spawn_near`) or a [`Woken`] task (and the task it displaces from
    /// `runnext`).
    #[inline]
    fn route<A: Arrival>(&self, task: A) -> A::To {
        task.route(self)
    }

    /// (2) What a thief may take from `v`. A victim with only a batch queue
    /// is asked to split it (`ask`: the thief will really steal, not just
    /// look: the steal; `false`: the park re-check, sysmon's offer).
    #[inline]
    fn look(&self, v: Victim<'_>, ask: bool) -> Look {
        if v.ring == 0 {
            let hints = v.p.hints;
            let batch_queue = hints.bq_len.load(Relaxed) != 0;
            if ask && batch_queue && !hints.split.load(Relaxed) {
                // Only a store when not set yet: every thief asks, and a
                // store per look would take the line from its owner.
                hints.split.store(true, Relaxed);
            }
            return if v.runnext && !self.runnext_kept(v.p) {
                Look::Runnext
            } else if v.runnext || batch_queue {
                Look::OwnerOnly
            } else {
                Look::Nothing
            };
        }
        // A thief that is awake already (`ask`: it steals now) takes half
        // of any ring: the reserve decides only whom to wake and when to park.
        let reserve = if ask { 0 } else { self.reserve(v.held, v.p) };
        if v.ring > reserve as usize {
            Look::Stealable { reserve }
        } else {
            Look::OwnerOnly
        }
    }

    /// (3) What the owner runs next, after `runnext` ([`Turn::Pick`]): a
    /// batch-queue task (at most [`MAX_BATCH_RUN`] in a row while the ring
    /// holds tasks), or a split a thief asked for, or the ring's turn; once
    /// per `event_interval` ticks ([`Turn::Tick`]) a split for an idle P;
    /// and told when the ring ran a task or ran dry.
    #[inline]
    fn owner_next<'a>(&self, st: &'a mut PolicyCore, p: PolicyP<'_>, turn: Turn) -> Next<'a> {
        match turn {
            Turn::Pick { ring_empty } => self.pick(st, p, ring_empty),
            Turn::Tick { idle_p } => self.on_tick(st, p, idle_p),
            Turn::RingRan => {
                st.bq_run = 0;
                Next::Ring
            }
            Turn::RingDry => {
                if p.hints.shared_out.load(Relaxed) {
                    p.hints.shared_out.store(false, Relaxed);
                }
                Next::Ring
            }
        }
    }

    /// (4) Whether a wake is worth a thread: this P holds work a thief
    /// woken now could take — ring tasks beyond its reserve (`queued` in
    /// its queue, `next` of them at its head that this M runs before
    /// anything else), or a batch queue. The wake rules ask this, not
    /// whether any work is queued: a P woken for owner-only work finds
    /// nothing.
    #[inline]
    fn worth_waking(&self, st: &PolicyCore, p: PolicyP<'_>, queued: usize, next: usize) -> bool {
        st.has_work() || queued.saturating_sub(next) > self.reserve(true, p) as usize
    }

    /// (5) A poll of `meta` (in batch `bits`) is about to begin on this P.
    /// `home`: the P that last polled it, if another (and active); `home_p`
    /// gives that P's policy state while it is inside a poll. Answers
    /// [`Poll::Home`] if the task goes back there ([`Rule::HubHome`]),
    /// else the poll begins here.
    #[inline]
    fn begin_poll<'h>(
        &self,
        st: &mut PolicyCore,
        p: PolicyP<'_>,
        meta: &TaskMeta,
        bits: u32,
        home: Option<usize>,
        home_p: impl FnOnce(usize) -> Option<PolicyP<'h>>,
    ) -> Poll {
        if let Some(home) = home {
            if self.send_home(meta, bits, || home_p(home).map(|h| h.running.get())) {
                p.m.batch_hub_homes.incr();
                return Poll::Home(home);
            }
        }
        if self.on(Rule::Batches) {
            st.running = meta.id.as_u64();
            st.poll_wakes = 0;
            st.last_wakees = [0; 2];
            p.running.0.store(bits, Relaxed);
        }
        Poll::Here
    }

    /// (6) The poll just ended (its task was in batch `bits`): a followed
    /// hub's progress, which may end its batch's measuring phase
    /// (`hub_mode`). One branch for polls that woke nobody or are in no
    /// batch; the task may be gone: it is named by its id.
    #[inline]
    fn end_poll(&self, st: &PolicyCore, p: PolicyP<'_>, bits: u32, busy: impl BusyTime) {
        if st.poll_wakes != 0 && bits != 0 && self.hub_modes.may_follow(bits, st.running) {
            self.note_poll_wakes(st, bits, p.m, busy);
        }
    }

    /// (7) sysmon's question about a P inside poll number `polls` with tasks
    /// in its ring while a P idles: `long` is sysmon's measurement (its
    /// polls ran long on average; `None`: too soon to say). `Some(true)`:
    /// offer its queue now — the poll is marked long, and the P reserves
    /// nothing from thieves until it ends (once per poll); `Some(false)`:
    /// no offer (the rule is off, the running task is a member of a batch
    /// held kept on it — those polls are long by nature, and the batch was
    /// measured to run best there —, the polls are short, or this poll was
    /// offered already); `None`: too soon to say. The reserve's safety
    /// valve: tasks reserved behind a poll that waits for them would
    /// otherwise wait for ever while a P idles.
    fn long_poll(&self, p: PolicyP<'_>, polls: u64, long: Option<bool>) -> Option<bool> {
        if !self.wants_offer(p.running) {
            return Some(false);
        }
        match long {
            Some(true) => Some(mark_long(p.hints, polls)),
            other => other,
        }
    }

    /// (8) What the policy says about itself, for `RuntimeMetrics` (its
    /// rules), sysmon's idleness test, the schedtrace and the task dump.
    fn describe(&self) -> Describe<'_> {
        Describe { policy: Some(self) }
    }
}

// ---- how the verbs are answered (question 1 in `route.rs`) ----------------

impl Rules {
    #[inline]
    fn on(&self, r: Rule) -> bool {
        self.rules.has(r)
    }

    // ---- around a poll --------------------------------------------------

    #[cold]
    #[inline(never)]
    fn note_poll_wakes(&self, st: &PolicyCore, bits: u32, m: &ProcCounters, busy: impl BusyTime) {
        let decided = self
            .hub_modes
            .note_wakes(bits, st.running, st.poll_wakes, &at(busy));
        match decided {
            hub_mode::Decision::None => return,
            hub_mode::Decision::Keep => m.batch_keeps.incr(),
            hub_mode::Decision::Spread => m.batch_spreads.incr(),
        }
        if let Some(ns) = self.hub_modes.last_work(bits) {
            m.batch_last_work_ns.set(ns);
        }
    }

    /// Whether `hub`, about to be polled here but last polled on another P
    /// (`home`), goes back there ([`Rule::HubHome`]): it is the followed
    /// hub of batch `bits`, the batch is kept, and `home` is polling a
    /// member of it now (`home_runs`: the batch in `home`'s poll, if it is
    /// in one), so it will reach its inbox as soon as the members it runs
    /// block. A kept fan-in's consumer is woken into the `runnext` of
    /// whichever producer sends first; one a thief took before the batch
    /// was known would take the consumer to the other P while the rest of
    /// the batch runs on `home`, both P's contending on one channel.
    /// Checked only for a task that last ran on another P.
    #[cold]
    #[inline(never)]
    fn send_home(
        &self,
        hub: &TaskMeta,
        bits: u32,
        home_runs: impl FnOnce() -> Option<u32>,
    ) -> bool {
        self.on(Rule::HubHome)
            && bits != 0
            && self.hub_modes.may_follow(bits, hub.id.as_u64())
            && self.hub_modes.keeps(bits)
            && home_runs() == Some(bits)
    }

    // ---- what the owner runs --------------------------------------------

    /// [`Turn::Pick`]: a batch-queue task, a split, or the ring's turn.
    #[inline]
    fn pick<'a>(&self, st: &'a mut PolicyCore, p: PolicyP<'_>, ring_empty: bool) -> Next<'a> {
        if st.bq.is_empty() {
            return Next::Ring;
        }
        if p.hints.split.load(Relaxed) && !self.bq_kept(st, p.hints) {
            return self.split(st, p);
        }
        if st.bq_run < MAX_BATCH_RUN || ring_empty {
            if let Some(t) = st.bq.pop_front() {
                p.hints.bq_len.store(st.bq.len() as u32, Relaxed);
                st.bq_run += 1;
                p.m.batch_polls.incr();
                return Next::Run(t);
            }
        }
        Next::Ring
    }

    /// [`Turn::Tick`]: occam-π's split of a batch queue whose members are
    /// runnable at once while a P of the node idles (`idle_p`).
    #[inline]
    fn on_tick<'a>(&self, st: &'a mut PolicyCore, p: PolicyP<'_>, idle_p: bool) -> Next<'a> {
        if st.bq.is_empty() || !idle_p || self.bq_kept(st, p.hints) {
            return Next::Ring;
        }
        self.split(st, p)
    }

    /// Whether the batch in the batch queue is kept (its hub's batch
    /// measuring or held kept): then no split. Clears a thief's request it
    /// refuses.
    fn bq_kept(&self, st: &PolicyCore, hints: &Hints) -> bool {
        let Some(t) = st.bq.front() else {
            return false;
        };
        let kept = self.hub_modes.keeps(t.metadata().batch_bits());
        if kept {
            hints.split.store(false, Relaxed);
        }
        kept
    }

    /// The batch queue goes to the ring for thieves: [`Next::Split`] with
    /// its tasks, or [`Next::Ring`] if it was empty.
    fn split<'a>(&self, st: &'a mut PolicyCore, p: PolicyP<'_>) -> Next<'a> {
        p.hints.split.store(false, Relaxed);
        if st.bq.is_empty() {
            return Next::Ring;
        }
        p.hints.bq_len.store(0, Relaxed);
        p.m.batch_splits.incr();
        share_out(p.hints);
        Next::Split(st.bq.drain(..))
    }

    // ---- what thieves see -----------------------------------------------

    /// A held P's reserve ([`Rule::Keep`]): how many of its ring tasks are its own M's,
    /// those it reaches within [`RESERVE_NS`] at its mean poll time, for which
    /// nobody is woken and a parking M does not stay up — none if its queues have not run dry for a whole
    /// `event_interval`, if its ring holds batch work shared out, or if
    /// sysmon marked its poll long. `held`: an M holds the P and runs it
    /// (a parked P reserves nothing).
    #[inline]
    fn reserve(&self, held: bool, p: PolicyP<'_>) -> u32 {
        if !held
            || !self.on(Rule::Keep)
            || p.m.unbroken_busy.load(Relaxed)
            || p.hints.shared_out.load(Relaxed)
            || long_marked(p.hints, p.m)
        {
            return 0;
        }
        let per = p.m.poll_time_ewma_ns.get().max(MIN_TASK_NS);
        (RESERVE_NS / per).min(u64::from(u32::MAX)) as u32
    }

    /// Whether a task in a victim's `runnext` (its ring empty) is its
    /// owner's because a kept batch runs there: a batch queue waits, or a
    /// member of a kept hub batch is in the poll. The first member a
    /// hub's drain wakes waits there for the rest of the drain, past Go's
    /// 3 µs grace. sysmon's long mark lifts this as it lifts the reserve.
    #[inline]
    fn runnext_kept(&self, p: PolicyP<'_>) -> bool {
        let (hints, running) = (p.hints, p.running);
        if hints.bq_len.load(Relaxed) == 0 && running.get() == 0 {
            return false; // the common case, and every case without batches
        }
        if long_marked(hints, p.m) {
            return false;
        }
        hints.bq_len.load(Relaxed) != 0 || self.hub_modes.keeps(running.get())
    }

    // ---- sysmon's offer -------------------------------------------------

    /// Whether sysmon should offer a P's queue when its polls run long:
    /// not while the running task is a member of a batch held kept on it.
    fn wants_offer(&self, running: &RunningBatch) -> bool {
        self.on(Rule::Keep) && {
            let bits = running.get();
            bits == 0 || !self.hub_modes.keeps(bits)
        }
    }
}

/// The policy's answers for `RuntimeMetrics`, sysmon's idleness test, the
/// schedtrace and the task dump ([`Policy::describe`]). Batches and hubs
/// decay: the readers that depend on it take the clock (`now_ms`,
/// `task::epoch_ms`), read once per trace or dump.
pub(crate) struct Describe<'a> {
    /// `None`: [`Go`], which has no rules, no hubs and no batch queue.
    policy: Option<&'a Rules>,
}

impl Describe<'_> {
    /// The rules in force.
    pub(crate) fn rules(&self) -> Placement {
        self.policy.map_or(Placement::go(), |r| r.rules)
    }

    /// Whether a P's batch queue holds tasks (sysmon's idleness test).
    pub(crate) fn queued(&self, p: PolicyP<'_>) -> bool {
        p.hints.bq_len.load(Relaxed) != 0
    }

    /// A P's batch-queue length.
    pub(crate) fn bq_len(&self, p: PolicyP<'_>) -> u32 {
        p.hints.bq_len.load(Relaxed)
    }

    /// The batch task `meta` is a live member of at `now_ms` (`None`: in
    /// none, or its batch decayed).
    pub(crate) fn task_batch(&self, meta: &TaskMeta, now_ms: u32) -> Option<BatchId> {
        batch::live_batch(meta, now_ms)
    }

    /// How the schedtrace marks batch `b` at `now_ms`: nothing, or a hub's
    /// `(hub,<mode>)`.
    pub(crate) fn batch_label(&self, b: u16, now_ms: u32) -> &'static str {
        let Some(policy) = self.policy else {
            return "";
        };
        if !policy.hubs.is_hub_id(b, now_ms) {
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

/// Marks poll number `polls` of a P long: it reserves nothing from thieves
/// until that poll ends. False if that poll was marked already (sysmon
/// offers a queue once per poll).
fn mark_long(hints: &Hints, polls: u64) -> bool {
    if hints.long_mark.load(Relaxed) == polls {
        return false;
    }
    hints.long_mark.store(polls, Relaxed);
    true
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
