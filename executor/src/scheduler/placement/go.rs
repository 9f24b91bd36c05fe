//! Plain Go placement ([`Placement::go`](super::Placement::go)): the
//! policy that answers every verb as Go's scheduler does and keeps no
//! state. A woken or spawned task goes to `runnext`, the task it displaces
//! to the ring's tail; a thief takes half of any ring, and `runnext` on its
//! last pass; the owner runs `runnext`, then the ring; a wake is worth a
//! thread for any task beyond the one its M runs next; every poll begins
//! where it is; sysmon offers nothing. Only `spawn_near`, the program's own
//! request, still places a task beside its anchor.
//!
//! [`Rules`](super::Rules) built with no rule answers the same (the tests
//! compare the two, verb by verb); this type exists so that the mechanism
//! can be read, and run, against a policy that does nothing.

use super::{
    Arrival, BusyTime, Describe, Look, Next, PolicyCore, PolicyP, Poll, Turn, Verbs, Victim,
};
use crate::task::TaskMeta;

/// The no-op policy: Go's placement.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Go;

impl Verbs for Go {
    /// A root like a wake, a `spawn_near` beside its anchor; a woken task to
    /// `runnext`, the displaced one to the ring.
    #[inline]
    fn route<A: Arrival>(&self, task: A) -> A::To {
        task.go()
    }

    /// Half of any ring (no reserve); a `runnext` alone on the last pass.
    #[inline]
    fn look(&self, v: Victim<'_>, _ask: bool) -> Look {
        if v.ring != 0 {
            Look::Stealable { reserve: 0 }
        } else if v.runnext {
            Look::Runnext
        } else {
            Look::Nothing
        }
    }

    /// The ring's turn, always: there is no batch queue.
    #[inline]
    fn owner_next<'a>(&self, _st: &'a mut PolicyCore, _p: PolicyP<'_>, _turn: Turn) -> Next<'a> {
        Next::Ring
    }

    /// Any task beyond the ones this M runs next.
    #[inline]
    fn worth_waking(&self, _st: &PolicyCore, _p: PolicyP<'_>, queued: usize, next: usize) -> bool {
        queued > next
    }

    /// Every poll begins where it is.
    #[inline]
    fn begin_poll<'h>(
        &self,
        _st: &mut PolicyCore,
        _p: PolicyP<'_>,
        _meta: &TaskMeta,
        _bits: u32,
        _home: Option<usize>,
        _home_p: impl FnOnce(usize) -> Option<PolicyP<'h>>,
    ) -> Poll {
        Poll::Here
    }

    #[inline]
    fn end_poll(&self, _st: &PolicyCore, _p: PolicyP<'_>, _bits: u32, _busy: impl BusyTime) {}

    /// Nothing is reserved, so nothing needs offering.
    fn long_poll(&self, _p: PolicyP<'_>, _polls: u64, _long: Option<bool>) -> Option<bool> {
        Some(false)
    }

    /// No rules, no hubs, no batch queue.
    fn describe(&self) -> Describe<'_> {
        Describe { policy: None }
    }
}
