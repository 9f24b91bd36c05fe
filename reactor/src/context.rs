//! Thread-local context: which reactor this thread belongs to, and (from
//! the crate's ground floor, `current`) which processor (P) its machine
//! holds and whether the current task just accepted a connection.

use std::cell::RefCell;

pub use crate::current::{current_p, firing_for, set_current_p, take_accepted};
use crate::Reactor;

thread_local! {
    static CURRENT_REACTOR: RefCell<Option<Reactor>> = const { RefCell::new(None) };
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

/// [`enter`], or `None` when this thread's locals are being destroyed (a
/// runtime dropped by a `thread_local!`'s destructor at thread exit).
pub fn try_enter(reactor: &Reactor) -> Option<EnterGuard> {
    let prev = CURRENT_REACTOR
        .try_with(|c| c.replace(Some(reactor.clone())))
        .ok()?;
    Some(EnterGuard {
        prev,
        _not_send: std::marker::PhantomData,
    })
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
        // `try_with`: see `try_enter`.
        let replaced = CURRENT_REACTOR.try_with(|c| c.replace(prev));
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

/// The current reactor's shared state, weakly: the runtime a new socket
/// belongs to, for telling "its runtime is gone" apart at first use.
pub(crate) fn current_home() -> Option<std::sync::Weak<crate::driver::Shared>> {
    CURRENT_REACTOR.with(|c| {
        c.borrow()
            .as_ref()
            .map(|r| std::sync::Arc::downgrade(&r.shared))
    })
}

/// The shutdown error when this thread's current runtime has shut down
/// (tokio's sockets fail to be made then: `bind`, `connect`); `Ok` outside
/// any runtime too, where a socket registers when first polled.
pub(crate) fn check_not_shut_down() -> std::io::Result<()> {
    let gone =
        CURRENT_REACTOR.with(|c| c.borrow().as_ref().is_some_and(|r| r.shared.is_shutdown()));
    if gone {
        Err(crate::driver::io::shutdown_error())
    } else {
        Ok(())
    }
}

/// [`with_current`] that gives `None` outside a runtime instead of panicking.
pub(crate) fn try_with_current<R>(f: impl FnOnce(&Reactor) -> R) -> Option<R> {
    CURRENT_REACTOR.with(|c| c.borrow().as_ref().map(f))
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
