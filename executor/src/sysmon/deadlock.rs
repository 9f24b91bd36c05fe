//! Whether the runtime is asleep: paused time's idleness test and the deadlock diagnostic.

use super::trace::dump;
use crate::config::{DeadlockMode, DEADLOCK_ENV};
use crate::scheduler::Shared;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

/// Whether auto-advance may move a paused clock: every M is parked (the
/// caller's `idle`), every P idle with empty queues, every `block_on`
/// parked, no `block_in_place` closure running, the blocking pool idle
/// with an empty queue (tokio refuses to auto-advance while a
/// `spawn_blocking` task runs too). I/O sources may have waiters, as in
/// tokio: an event that is ready would have woken the node's watcher, which
/// the monitor's quiet tick rules out. Every read is Relaxed: a snapshot
/// checked again by the reactor (every M still parked) right before it
/// advances; see docs/architecture.md, "Paused time (tests)", for the races
/// left and why they are acceptable.
pub(super) fn runtime_idle(shared: &Shared) -> bool {
    let b = &shared.block_ons;
    b.parked.load(Relaxed) == b.running.load(Relaxed)
        && shared.idle.npidle() + shared.idle.nretired() == shared.nprocs()
        && shared.in_place.load(Relaxed) == 0
        && shared.blocking.is_idle()
        && shared.nodes.iter().all(|n| n.inject.is_empty())
        && shared.procs.iter().all(|p| {
            p.steal.is_empty() && p.inbox.is_empty() && !shared.policy.describe().queued(p.policy())
        })
}

/// Every M parked, a `block_on` parked, and nothing that could ever wake a
/// task: no pending timer, no I/O waiter, nothing in the blocking pool.
/// Never with the side tokio runtime (`Builder::enable_tokio_compat`): its
/// timers and sockets hold wakers this runtime cannot count, so a task
/// asleep on `tokio::time::sleep` would look deadlocked.
pub(super) fn looks_deadlocked(shared: &Shared) -> bool {
    #[cfg(feature = "tokio-compat")]
    if shared.tokio.is_some() {
        return false;
    }
    let b = &shared.block_ons;
    let parked = b.parked.load(Relaxed);
    parked > 0
        && parked == b.running.load(Relaxed)
        && shared.idle.npidle() + shared.idle.nretired() == shared.nprocs()
        && shared.in_place.load(Relaxed) == 0
        && shared.blocking.is_idle()
        && shared.reactor.pending_timers() == 0
        && shared.reactor.io_waiters() == 0
}

pub(super) fn report_deadlock(shared: &Shared) {
    let dump = dump(shared);
    let mut msg = format!(
        "numa_rt: all tasks are asleep - possible deadlock: {} live task(s), every processor \
         idle, no timer pending, no I/O awaited, and block_on is waiting. Nothing in the \
         runtime can wake them; only a waker held outside it could (set {DEADLOCK_ENV}=off \
         if that is expected).",
        dump.len()
    );
    let locations = dump.locations(10);
    if !locations.is_empty() {
        msg.push_str(" Spawned at:");
        for (loc, n) in locations {
            let _ = write!(msg, "\n  {loc} ({n} task(s))");
        }
    }
    match shared.config.deadlock {
        DeadlockMode::Off => {}
        DeadlockMode::Warn => eprintln!("{msg}"),
        DeadlockMode::Panic => shared.block_ons.fail_all(msg),
    }
}
