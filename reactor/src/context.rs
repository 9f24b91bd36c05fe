//! Thread-local context: which processor (P) this thread's machine holds,
//! which reactor it belongs to, and whether the current task just accepted a
//! connection.

use std::cell::{Cell, RefCell};

use crate::Reactor;

thread_local! {
    static CURRENT_P: Cell<Option<usize>> = const { Cell::new(None) };
    static CURRENT_REACTOR: RefCell<Option<Reactor>> = const { RefCell::new(None) };
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

/// Makes `reactor` this thread's current reactor until the guard drops.
///
/// I/O types and timers find their driver through it: the driver of
/// [`current_p`] when the thread holds a P of this reactor, otherwise a P
/// chosen round-robin. Guards nest; dropping one restores the previous reactor.
pub fn enter(reactor: &Reactor) -> EnterGuard {
    let prev = CURRENT_REACTOR.with(|c| c.replace(Some(reactor.clone())));
    EnterGuard {
        prev,
        _not_send: std::marker::PhantomData,
    }
}

/// Restores the previously current reactor when dropped (see [`enter`]).
#[must_use = "the reactor is only current while the guard lives"]
pub struct EnterGuard {
    prev: Option<Reactor>,
    /// The guard restores a thread-local, so it must drop on its own thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let replaced = CURRENT_REACTOR.with(|c| c.replace(prev));
        drop(replaced);
    }
}

impl std::fmt::Debug for EnterGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// Whether this thread's current reactor is the one owning `shared`.
pub(crate) fn is_current_shared(shared: &std::sync::Arc<crate::driver::Shared>) -> bool {
    CURRENT_REACTOR.with(|c| c.borrow().as_ref().is_some_and(|r| r.shares(shared)))
}

/// The current reactor, if any.
pub fn try_current() -> Option<Reactor> {
    CURRENT_REACTOR.with(|c| c.borrow().clone())
}

/// Runs `f` with the current reactor, borrowed in place (no clone of it);
/// panics outside a runtime. `f` must not enter another reactor.
pub(crate) fn with_current<R>(f: impl FnOnce(&Reactor) -> R) -> R {
    CURRENT_REACTOR.with(|c| match c.borrow().as_ref() {
        Some(reactor) => f(reactor),
        None => panic!(
            "there is no reactor running: this must be called from the context of a numa_rt \
             runtime (a task, block_on, or inside Handle::enter)"
        ),
    })
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
