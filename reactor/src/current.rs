//! What this thread does for the runtime, as plain thread-locals: the P its
//! machine holds, the P whose wakers it fires without holding one, and
//! whether the running task just accepted a connection.
//!
//! The ground floor of the crate: the drivers read it, and it reads nothing
//! of theirs. The thread's current *reactor* (which needs the drivers'
//! types) is in [`crate::context`], which re-exports the public half of this.

use std::cell::Cell;

thread_local! {
    static CURRENT_P: Cell<Option<usize>> = const { Cell::new(None) };
    static ACCEPTED: Cell<bool> = const { Cell::new(false) };
    static FIRING_FOR: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The P whose I/O and timer wakers this thread fires on that P's behalf,
/// if it fires any without holding a P: the monitor thread polling the
/// pollers nobody watches (see `driver::monitor`). The executor queues
/// what they wake on that P's node.
pub fn firing_for() -> Option<usize> {
    FIRING_FOR.with(|c| c.get())
}

/// Sets [`firing_for`] for the wakers fired next on this thread.
pub(crate) fn set_firing_for(p: Option<usize>) {
    FIRING_FOR.with(|c| c.set(p));
}

/// Records the P this thread's M now holds (`None` when it holds none).
/// I/O sources and timers first polled on this thread register with that P.
pub fn set_current_p(p: Option<usize>) {
    CURRENT_P.with(|c| c.set(p));
}

/// The P this thread's M holds, if any.
pub fn current_p() -> Option<usize> {
    CURRENT_P.with(|c| c.get())
}

/// Marks that the running task just accepted a connection.
pub(crate) fn set_accepted() {
    ACCEPTED.with(|c| c.set(true));
}

/// Returns and clears the "just accepted a connection" flag.
///
/// The executor's spawn checks it: a task spawned right after an accept is a
/// root task (one per connection) and goes to the next P round-robin instead
/// of the spawning P's `runnext`. [`crate::coop::budget`] clears it at the
/// start of every task poll.
pub fn take_accepted() -> bool {
    ACCEPTED.with(|c| c.replace(false))
}

/// Clears the accepted flag (start of a task poll).
pub(crate) fn clear_accepted() {
    ACCEPTED.with(|c| c.set(false));
}
