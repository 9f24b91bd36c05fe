//! The seam's two sides: [`Verbs`], the eight questions the mechanism
//! asks (the table in the module above), and [`Policy`], the runtime's
//! answerer — [`Go`], the no-op type, or [`Rules`] — to which each verb
//! forwards with one `match`.

use super::{
    Arrival, BusyTime, Describe, Go, Look, Next, Placement, PolicyCore, PolicyP, Poll, Rules, Turn,
    Victim,
};
use crate::task::TaskMeta;

/// The placement policy of one runtime: plain Go placement ([`Go`], the
/// no-op type) when no rule is on, else the rules checked at run time
/// ([`Rules`]). The mechanism calls the eight verbs on this type; each
/// forwards with one `match` (inlined; no allocation, no dynamic dispatch).
pub(crate) enum Policy {
    /// [`Placement::go`]: every verb answers as Go's scheduler would.
    Go(Go),
    /// Any other [`Placement`]: the rules it names.
    Rules(Rules),
}

/// The eight questions the mechanism asks (the table above), answered by
/// [`Go`] and by [`Rules`]; [`Policy`] forwards to one of them. A trait so
/// that the no-op type has the same surface as the rules, checked by the
/// compiler.
pub(crate) trait Verbs {
    /// (1) Where a task arriving goes: a [`NewTask`](super::NewTask) (a root or a
    /// `spawn_near`) or a [`Woken`](super::Woken) task (and the task it displaces from
    /// `runnext`).
    fn route<A: Arrival>(&self, task: A) -> A::To;
    /// (2) What a thief may take from `v` (`ask`: the thief will really
    /// steal, not just look).
    fn look(&self, v: Victim<'_>, ask: bool) -> Look;
    /// (3) What the owner runs next.
    fn owner_next<'a>(&self, st: &'a mut PolicyCore, p: PolicyP<'_>, turn: Turn) -> Next<'a>;
    /// (4) Whether a wake is worth a thread (`queued` tasks in the ring,
    /// `next` of them run by this M before anything else).
    fn worth_waking(&self, st: &PolicyCore, p: PolicyP<'_>, queued: usize, next: usize) -> bool;
    /// (5) A poll of `meta` (batch `bits`) is about to begin on this P.
    fn begin_poll<'h>(
        &self,
        st: &mut PolicyCore,
        p: PolicyP<'_>,
        meta: &TaskMeta,
        bits: u32,
        home: Option<usize>,
        home_p: impl FnOnce(usize) -> Option<PolicyP<'h>>,
    ) -> Poll;
    /// (6) The poll just ended (its task was in batch `bits`).
    fn end_poll(&self, st: &PolicyCore, p: PolicyP<'_>, bits: u32, busy: impl BusyTime);
    /// (7) sysmon's question about a P in long polls with tasks queued.
    fn long_poll(&self, p: PolicyP<'_>, polls: u64, long: Option<bool>) -> Option<bool>;
    /// (8) What the policy says about itself.
    fn describe(&self) -> Describe<'_>;
}

impl Policy {
    /// [`Go`] for [`Placement::go`], else [`Rules`].
    pub(crate) fn new(rules: Placement) -> Policy {
        if rules == Placement::go() {
            Policy::Go(Go)
        } else {
            Policy::Rules(Rules::new(rules))
        }
    }

    /// (1) [`Verbs::route`].
    #[inline]
    pub(crate) fn route<A: Arrival>(&self, task: A) -> A::To {
        match self {
            Policy::Go(g) => g.route(task),
            Policy::Rules(r) => r.route(task),
        }
    }

    /// (2) [`Verbs::look`].
    #[inline]
    pub(crate) fn look(&self, v: Victim<'_>, ask: bool) -> Look {
        match self {
            Policy::Go(g) => g.look(v, ask),
            Policy::Rules(r) => r.look(v, ask),
        }
    }

    /// (3) [`Verbs::owner_next`].
    #[inline]
    pub(crate) fn owner_next<'a>(
        &self,
        st: &'a mut PolicyCore,
        p: PolicyP<'_>,
        turn: Turn,
    ) -> Next<'a> {
        match self {
            Policy::Go(g) => g.owner_next(st, p, turn),
            Policy::Rules(r) => r.owner_next(st, p, turn),
        }
    }

    /// (4) [`Verbs::worth_waking`].
    #[inline]
    pub(crate) fn worth_waking(
        &self,
        st: &PolicyCore,
        p: PolicyP<'_>,
        queued: usize,
        next: usize,
    ) -> bool {
        match self {
            Policy::Go(g) => g.worth_waking(st, p, queued, next),
            Policy::Rules(r) => r.worth_waking(st, p, queued, next),
        }
    }

    /// (5) [`Verbs::begin_poll`].
    #[inline]
    pub(crate) fn begin_poll<'h>(
        &self,
        st: &mut PolicyCore,
        p: PolicyP<'_>,
        meta: &TaskMeta,
        bits: u32,
        home: Option<usize>,
        home_p: impl FnOnce(usize) -> Option<PolicyP<'h>>,
    ) -> Poll {
        match self {
            Policy::Go(g) => g.begin_poll(st, p, meta, bits, home, home_p),
            Policy::Rules(r) => r.begin_poll(st, p, meta, bits, home, home_p),
        }
    }

    /// (6) [`Verbs::end_poll`].
    #[inline]
    pub(crate) fn end_poll(&self, st: &PolicyCore, p: PolicyP<'_>, bits: u32, busy: impl BusyTime) {
        match self {
            Policy::Go(g) => g.end_poll(st, p, bits, busy),
            Policy::Rules(r) => r.end_poll(st, p, bits, busy),
        }
    }

    /// (7) [`Verbs::long_poll`].
    pub(crate) fn long_poll(&self, p: PolicyP<'_>, polls: u64, long: Option<bool>) -> Option<bool> {
        match self {
            Policy::Go(g) => g.long_poll(p, polls, long),
            Policy::Rules(r) => r.long_poll(p, polls, long),
        }
    }

    /// (8) [`Verbs::describe`].
    pub(crate) fn describe(&self) -> Describe<'_> {
        match self {
            Policy::Go(g) => g.describe(),
            Policy::Rules(r) => r.describe(),
        }
    }

    /// The rules, for tests of their inner workings.
    #[cfg(test)]
    pub(super) fn rules(&self) -> &Rules {
        match self {
            Policy::Rules(r) => r,
            Policy::Go(_) => panic!("Go placement has no rules"),
        }
    }
}
