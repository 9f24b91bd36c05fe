//! The policy's per-P state (`Hints`, `RunningBatch`, `Owner`) and the
//! answers it gives the mechanism (`Look`, `Route`, `Next`).

use crate::counters::ProcCounters;
use crate::task::{Anchor, Runnable};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

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
    pub(crate) hints: &'a Hints,
    pub(crate) running: &'a RunningBatch,
    pub(crate) counters: &'a ProcCounters,
}

/// A P's policy state that thieves and sysmon read (on the P's first cache
/// line, written rarely). All Relaxed: hints; a stale value delays a split
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
    /// The poll number sysmon found running long ([`Policy::mark_long`](super::Policy::mark_long);
    /// 0: none): while the P's poll counter reads it, nothing is kept.
    pub(super) long_mark: AtomicU64,
}

/// The batch of the task in a poll on a P (`TaskMeta::batch_bits`; 0:
/// none), on the line its M writes per poll; read by thieves, the hub
/// rule and sysmon. Relaxed: a hint.
#[derive(Default)]
pub(crate) struct RunningBatch(pub(super) AtomicU32);

impl RunningBatch {
    /// The running batch's bits (0: none).
    #[inline]
    pub(crate) fn get(&self) -> u32 {
        self.0.load(Relaxed)
    }
}

/// Most tasks a batch queue (`Owner::bq`) holds; beyond it displaced
/// members go to the ring, stealable. A bound on a P's private memory, not
/// a tuning: a batch queue holds members of one kept hub batch, and every
/// bound above the largest batch (63 in a 64-producer fan-in) behaves the
/// same; it only stops a runaway batch (8 KiB of task pointers at 1,024).
pub(crate) const BATCH_QUEUE_CAP: usize = 1024;

/// A P's owner-only policy state (in its `Core`). Its fields are the
/// placement module's alone: the task addresses it keeps (the waker side
/// of a wake edge, the last wakees) never leave it; the mechanism hands
/// the policy `&TaskMeta` and gets back batch bits.
pub(crate) struct Owner {
    /// The `TaskMeta` address of the task in a poll on this P (0 before the
    /// first): the waker side of a wake edge. Only dereferenced during that
    /// poll (`batch::learn_edge`); an address so that `Core` stays `Send`.
    pub(super) running_meta: usize,
    /// Different tasks the poll in progress woke (see `batch::note_wake`).
    pub(super) poll_wakes: u32,
    /// The last two tasks the poll woke.
    pub(super) last_wakees: [usize; 2],
    /// The batch queue: members of a kept hub batch displaced from
    /// `runnext`. Thieves never take from it.
    pub(super) bq: VecDeque<Runnable>,
    /// Batch-queue polls since the ring's last turn.
    pub(super) bq_run: u32,
}

impl Owner {
    pub(crate) fn new() -> Owner {
        Owner {
            running_meta: 0,
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

    /// Every task of the batch queue (shutdown, retirement).
    pub(crate) fn drain(&mut self, hints: &Hints) -> impl Iterator<Item = Runnable> + '_ {
        hints.bq_len.store(0, Relaxed);
        self.bq.drain(..)
    }
}

/// A new task the policy places ([`Policy::route_new`](super::Policy::route_new)).
pub(crate) enum Spawned {
    /// Spawned right after an accept: a connection's task.
    Root,
    /// Spawned beside the task the anchor names (`spawn_near`).
    Near(Anchor),
}

/// Where [`Policy::route_new`](super::Policy::route_new) sends a new task.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Where a wake would (`runnext`, or a node's queue off the workers).
    Wake,
    /// A root task, to this P's inbox.
    Root(usize),
    /// Beside its anchor, to this P's inbox.
    Near(usize),
}

/// What the owner runs after `runnext` ([`Policy::owner_next`](super::Policy::owner_next)).
pub(crate) enum Next {
    /// A batch-queue task.
    Run(Runnable),
    /// The batch queue went to the ring (a split): wake an idle P.
    Split,
    /// The ring's turn.
    Ring,
}
