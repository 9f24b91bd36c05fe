//! The queue offer: a P whose polls run long has its queue offered to an idle P.

use crate::scheduler::placement::Look;
use crate::scheduler::Shared;
use crate::tuning::OFFER_POLL;
use std::time::Instant;

/// Whether P `p`, in a poll, may be reserving queued tasks from an idle P:
/// tasks in its ring (a task alone in `runnext` is taken by a thief's last
/// pass after Go's grace, and ping-pong pairs keep one there nearly
/// always) and a P idle. Whether it is, and whether its queue is offered,
/// the policy answers ([`long_poll`]).
pub(super) fn may_offer(shared: &Shared, p: &crate::scheduler::processor::Processor) -> bool {
    !p.steal.ring_is_empty() && shared.idle.npidle() != 0
}

/// The policy's answer for P `i` in poll number `polls`, whose polls sysmon
/// measured as `long` ([`long_polls`]): `Some(true)`: offer its queue now
/// ([`offer_queue`]); `None`: too soon to say. Not while the running task
/// is a member of a batch held (or measured) kept on the P: those polls
/// are long by nature (a consumer draining 128 values, its producers
/// filling them), the batch was measured to run best there, and offering
/// its queue made the no-work fan-in spread, many times slower.
pub(super) fn long_poll(shared: &Shared, i: usize, polls: u64, long: Option<bool>) -> Option<bool> {
    shared
        .policy
        .long_poll(shared.procs[i].policy(), polls, long)
}

/// Whether a P's polls between two rounds (`(polls, busy ns, when)` each)
/// ran longer than [`OFFER_POLL`] on average: its busy time per poll, or,
/// still in the same poll, the time since. `None`: too soon to say.
pub(super) fn long_polls(last: (u64, u64, Instant), now: (u64, u64, Instant)) -> Option<bool> {
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
/// it and went to sleep. The policy has marked the poll in progress for
/// thieves ([`long_poll`]; once per poll); this wakes an idle P, which now
/// takes half the ring. Go and tokio steal any queue and need no such
/// step; it is what reserving a short queue for its owner costs to do
/// safely. No clock is read per poll: a TSC stamp at each poll's start and
/// end slowed the shortest polls (ping_pong) measurably.
pub(super) fn offer_queue(shared: &Shared, i: usize) {
    let p = &shared.procs[i];
    p.metrics.long_poll_offers.incr_shared();
    if shared.steal_look(p, false).stealable() {
        shared.wake_idle_p(p.node);
    }
}

/// Whether P `p` holds a task alone in `runnext` that a thief may take
/// (its ring empty; `Look::Runnext`: the policy does not keep it) while a
/// P is idle: sysmon's backstop for a wake-up that did not come
/// ([`offer_runnext`]).
pub(super) fn runnext_stranded(
    shared: &Shared,
    p: &crate::scheduler::processor::Processor,
) -> bool {
    p.steal.has_runnext()
        && p.steal.ring_is_empty()
        && shared.idle.npidle() != 0
        && matches!(shared.steal_look(p, false), Look::Runnext)
}

/// A P has been inside one poll for at least [`OFFER_POLL`] with a task
/// alone in its `runnext` and a P idle ([`runnext_stranded`]): wake an
/// idle P (of its node, or of the nearest one if its node has none), whose
/// steal takes `runnext` after Go's grace. Queuing a task in `runnext`
/// wakes nobody (a wake is worth a thread only for work beyond what the
/// owner runs next; tokio's LIFO slot is not stealable at all), and a
/// thief that was spinning then may have looked just before it arrived;
/// without this, such a task waited for the poll to end (with retake off:
/// once 30 s in the 2-node guest) or for retake. Go's `wakep` runs at
/// every `runqput`; this runs once per long poll, in the monitor. Not the
/// policy's: it holds with every placement rule off.
pub(super) fn offer_runnext(shared: &Shared, i: usize) {
    let p = &shared.procs[i];
    p.metrics.long_poll_offers.incr_shared();
    shared.wake_idle_p(p.node);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
