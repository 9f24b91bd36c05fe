//! The policy's state (per P the thief-visible [`Hints`] and the poll's
//! [`RunningBatch`], read through [`PolicyP`]; per core the owner-only
//! [`PolicyCore`]) and the questions and answers that cross the seam
//! ([`Victim`] and [`Look`], [`NewTask`] and [`Route`], [`Woken`] and
//! [`WakeTo`], [`Turn`] and [`Next`], [`Poll`]). Every field of the state
//! is this module's alone: the mechanism holds the state and hands it to
//! the policy's verbs.

use crate::counters::ProcCounters;
use crate::task::{Anchor, Runnable, TaskMeta};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// What a thief may take from a victim ([`Policy::look`](super::Policy::look)).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Look {
    /// Nothing queued.
    Nothing,
    /// Owner-only work: a ring within the P's reserve (its own M reaches it
    /// soon), a kept batch's `runnext`, or a batch queue the owner splits
    /// when asked.
    OwnerOnly,
    /// A ring with more than `keep` tasks: the thief takes half of the
    /// rest.
    Stealable { reserve: u32 },
    /// An empty ring and a task in `runnext`, which a thief takes on its
    /// last pass (after Go's grace if the owner runs).
    Runnext,
}

impl Look {
    /// Whether a thief may take anything.
    #[inline]
    pub(crate) fn stealable(self) -> bool {
        matches!(self, Look::Stealable { .. } | Look::Runnext)
    }
}

/// What a thief sees of a victim P ([`Policy::look`](super::Policy::look)).
pub(crate) struct Victim<'a> {
    /// Tasks in its ring.
    pub(crate) ring: usize,
    /// Whether its `runnext` holds a task.
    pub(crate) runnext: bool,
    /// Whether an M holds and runs it (a parked P keeps nothing).
    pub(crate) held: bool,
    /// Its policy state (`Processor::policy`).
    pub(crate) p: PolicyP<'a>,
}

/// One P's policy state as the policy reads it: the P's [`Hints`] (first
/// cache line), its [`RunningBatch`] (the line its M writes per poll) and
/// its counters. The two state fields sit apart in `Processor` for the
/// cache lines' sake; this view puts them together. Three references, no
/// indirection beyond the fields themselves: built inline per question.
#[derive(Clone, Copy)]
pub(crate) struct PolicyP<'a> {
    pub(super) hints: &'a Hints,
    pub(super) running: &'a RunningBatch,
    pub(super) m: &'a ProcCounters,
}

impl<'a> PolicyP<'a> {
    /// The view over a P's policy fields and its counters.
    #[inline]
    pub(crate) fn new(hints: &'a Hints, running: &'a RunningBatch, m: &'a ProcCounters) -> Self {
        PolicyP { hints, running, m }
    }
}

/// A P's policy state that thieves and sysmon read (on the P's first cache
/// line, written rarely: `Processor` keeps the field there, private; only
/// this module reads or writes what is in it). All Relaxed: hints; a stale value delays a split
/// or a steal by one look, and the queues' own atomics order the tasks.
#[derive(Default)]
pub(crate) struct Hints {
    /// A thief that found nothing else asks the owner to split its batch
    /// queue; the owner reads it before each batch-queue pop.
    pub(super) split: AtomicBool,
    /// The owner put batch work in its ring for thieves (a split, or a
    /// displaced member of a spread batch): until the ring runs dry, it
    /// keeps none of it.
    pub(super) shared_out: AtomicBool,
    /// Tasks in the owner's batch queue.
    pub(super) bq_len: AtomicU32,
    /// The poll number sysmon found running long ([`Policy::long_poll`](super::Policy::long_poll);
    /// 0: none): while the P's poll counter reads it, nothing is kept.
    pub(super) long_mark: AtomicU64,
}

/// The batch of the task in a poll on a P (`TaskMeta::batch_bits`; 0:
/// none), on the line its M writes per poll (`Processor` keeps the field
/// there, private); read by thieves, the hub rule and sysmon. Relaxed: a
/// hint.
#[derive(Default)]
pub(crate) struct RunningBatch(pub(super) AtomicU32);

impl RunningBatch {
    /// The running batch's bits (0: none).
    #[inline]
    pub(super) fn get(&self) -> u32 {
        self.0.load(Relaxed)
    }
}

/// Most tasks a batch queue (`PolicyCore::bq`) holds; beyond it displaced
/// members go to the ring, stealable. A bound on a P's private memory, not
/// a tuning: a batch queue holds members of one kept hub batch, and every
/// bound above the largest batch (63 in a 64-producer fan-in) behaves the
/// same; it only stops a runaway batch (8 KiB of task pointers at 1,024).
pub(crate) const BATCH_QUEUE_CAP: usize = 1024;

/// A P's owner-only policy state (in its `Core`, a private field). Its
/// fields are the placement module's alone. It holds no task reference:
/// the task in the poll is named by its id, and the last wakees' addresses
/// are only compared, never dereferenced; the mechanism hands the policy
/// `&TaskMeta` (the waker, the wakee) for the length of one question.
pub(crate) struct PolicyCore {
    /// The id of the task in a poll on this P (`TaskId::as_u64`; 0 before
    /// the first, no task's id): the followed hub's identity at the poll's
    /// end, when the task may be gone.
    pub(super) running: u64,
    /// Different tasks the poll in progress woke (see `batch::note_wake`).
    pub(super) poll_wakes: u32,
    /// The last two tasks the poll woke (their addresses, only compared).
    pub(super) last_wakees: [usize; 2],
    /// The batch queue: members of a kept hub batch displaced from
    /// `runnext`. Thieves never take from it.
    pub(super) bq: VecDeque<Runnable>,
    /// Batch-queue polls since the ring's last turn.
    pub(super) bq_run: u32,
}

impl PolicyCore {
    pub(crate) fn new() -> PolicyCore {
        PolicyCore {
            running: 0,
            poll_wakes: 0,
            last_wakees: [0; 2],
            bq: VecDeque::new(),
            bq_run: 0,
        }
    }

    /// Whether the batch queue holds tasks.
    #[inline]
    pub(crate) fn has_work(&self) -> bool {
        !self.bq.is_empty()
    }

    /// Every task of the batch queue (shutdown, retirement); `p`: this
    /// core's P.
    pub(crate) fn drain(&mut self, p: PolicyP<'_>) -> impl Iterator<Item = Runnable> + '_ {
        p.hints.bq_len.store(0, Relaxed);
        self.bq.drain(..)
    }
}

/// A new task the policy places ([`NewTask`]).
pub(crate) enum Spawned {
    /// Spawned right after an accept: a connection's task.
    Root,
    /// Spawned beside the task the anchor names (`spawn_near`).
    Near(Anchor),
}

/// Where the policy sends a new task ([`NewTask`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Where a wake would (`runnext`, or a node's queue off the workers).
    Wake,
    /// A root task, to this P's inbox.
    Root(usize),
    /// Beside its anchor, to this P's inbox.
    Near(usize),
}

/// What a task is arriving somewhere, for [`Policy::route`](super::Policy::route):
/// a [`NewTask`] (answered with a [`Route`]) or a [`Woken`] one (answered
/// with a [`WakeTo`]). Static dispatch: each is a concrete type, inlined.
pub(crate) trait Arrival {
    /// The answer.
    type To;
    /// The rules' answer (`Rules::route` calls this).
    fn route(self, policy: &super::Rules) -> Self::To;
    /// Go's answer (`Go::route` calls this).
    fn go(self) -> Self::To;
}

/// A spawned task the policy places itself: a root or a `spawn_near`
/// (`Shared::place_new`; any other spawn goes where a wake would, a
/// [`Woken`] with no waker).
pub(crate) struct NewTask<'a, H: FnOnce() -> Option<usize>> {
    pub(crate) meta: &'a TaskMeta,
    pub(crate) how: Spawned,
    /// The P's allowed to take work (retired ones get none).
    pub(crate) active: usize,
    /// This thread's P, if it holds one (asked only when needed).
    pub(crate) here: H,
    /// The runtime's round-robin cursor, advanced by one for a root.
    pub(crate) next_root: &'a AtomicUsize,
}

/// A task woken (or spawned) on a worker holding a P, on its way to that
/// P's `runnext`.
pub(crate) struct Woken<'a, S, B>
where
    S: FnOnce(Runnable) -> Option<Runnable>,
    B: super::BusyTime,
{
    /// The task.
    pub(crate) task: Runnable,
    /// The P's owner-only policy state.
    pub(crate) st: &'a mut PolicyCore,
    /// The P's policy state.
    pub(crate) p: PolicyP<'a>,
    /// The task in the poll that woke it: a wake edge (`None`: a spawn, or
    /// no poll in progress).
    pub(crate) waker: Option<&'a TaskMeta>,
    /// The P's busy clock (ms).
    pub(crate) clock_ms: u32,
    /// The runtime's busy time so far (ns), read only when a hub's
    /// measurement starts.
    pub(crate) busy: B,
    /// The mechanism's `runnext` swap: puts the task there, returns the one
    /// it displaced.
    pub(crate) runnext: S,
}

/// Where a [`Woken`] task and the task it displaced went.
pub(crate) enum WakeTo {
    /// To `runnext`, displacing nothing.
    Runnext,
    /// To `runnext`; the displaced task is for the ring's tail (a thief may
    /// take it).
    Ring(Runnable),
    /// To `runnext`; the displaced task waits in the batch queue (the
    /// owner's).
    Kept,
}

/// What the owner's run loop asks or tells the policy about its next
/// task ([`Policy::owner_next`](super::Policy::owner_next)).
#[derive(Clone, Copy)]
pub(crate) enum Turn {
    /// After `runnext`: a batch-queue task or a split (`ring_empty`: the
    /// ring holds nothing).
    Pick { ring_empty: bool },
    /// Once per `event_interval` ticks (`idle_p`: a P of the node idles):
    /// a split for it?
    Tick { idle_p: bool },
    /// (Told) a ring task was popped: the batch queue's turn starts over.
    RingRan,
    /// (Told) the ring ran dry: what was shared out is gone.
    RingDry,
}

/// What the owner runs after `runnext` ([`Policy::owner_next`](super::Policy::owner_next)).
pub(crate) enum Next<'a> {
    /// A batch-queue task.
    Run(Runnable),
    /// The batch queue went to the ring (a split): these tasks, in order,
    /// go to the ring's tail; then wake an idle P.
    Split(std::collections::vec_deque::Drain<'a, Runnable>),
    /// The ring's turn (or nothing to do).
    Ring,
}

/// Where a task about to be polled is polled ([`Policy::begin_poll`](super::Policy::begin_poll)).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Poll {
    /// Here: the poll begins.
    Here,
    /// Back on P `home`, where its kept batch runs ([`Rule::HubHome`](super::Rule::HubHome)):
    /// to that P's inbox, not polled here.
    Home(usize),
}
