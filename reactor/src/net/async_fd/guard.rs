//! The guards a wait on an [`AsyncFd`] returns: the readiness it saw, and
//! `try_io`, which clears it on `WouldBlock`.

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;

use super::{AsyncFd, TryIoError};
use crate::driver::io::ReadyEvent;
use crate::net::Ready;

/// Readiness of an [`AsyncFd`] observed by a wait. Dropping the guard keeps
/// the readiness (the next wait returns at once); [`clear_ready`] or a
/// `WouldBlock` inside [`try_io`] forgets it.
///
/// [`clear_ready`]: AsyncFdReadyGuard::clear_ready
/// [`try_io`]: AsyncFdReadyGuard::try_io
#[must_use = "a guard says whether to clear the readiness: call a method on it"]
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    pub(super) fd: &'a AsyncFd<T>,
    /// What the wait saw (within its interest), until cleared.
    pub(super) event: Option<ReadyEvent>,
}

/// Like [`AsyncFdReadyGuard`], lending the [`AsyncFd`] mutably.
#[must_use = "a guard says whether to clear the readiness: call a method on it"]
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    pub(super) fd: &'a mut AsyncFd<T>,
    pub(super) event: Option<ReadyEvent>,
}

/// The readiness a guard holds.
fn ready_of(event: &Option<ReadyEvent>) -> Ready {
    event.map_or(Ready::EMPTY, |ev| Ready::from_bits(ev.bits()))
}

/// Clears what a guard observed, unless an event arrived since.
fn clear<T: AsRawFd>(fd: &AsyncFd<T>, event: &mut Option<ReadyEvent>) {
    if let Some(ev) = event.take() {
        fd.io.clear_readiness(ev);
    }
}

/// Clears `ready` (the closed states are final and stay) as of the
/// guard's event; the guard keeps the rest.
fn clear_matching<T: AsRawFd>(fd: &AsyncFd<T>, event: &mut Option<ReadyEvent>, ready: Ready) {
    if let Some(ev) = event.take() {
        fd.io.clear_readiness(ev.with_bits(ready.bits()));
        let left = ev.bits() & !ready.bits();
        if left != 0 {
            *event = Some(ev.with_bits(left));
        }
    }
}

/// Turns `WouldBlock` into [`TryIoError`].
fn would_block<R>(r: io::Result<R>) -> Result<io::Result<R>, TryIoError> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(TryIoError(())),
        r => Ok(r),
    }
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    /// The readiness the wait saw, within the interest it waited for (empty
    /// after [`clear_ready`](Self::clear_ready), or for a task woken by an
    /// event another task cleared first).
    pub fn ready(&self) -> Ready {
        ready_of(&self.event)
    }

    /// Forgets the readiness: the next wait waits for a new event. Call it
    /// after an operation returned `WouldBlock` outside [`try_io`](Self::try_io),
    /// never merely because one succeeded. An event that arrived after the
    /// wait is kept.
    pub fn clear_ready(&mut self) {
        clear(self.fd, &mut self.event);
    }

    /// Forgets only `ready` of the readiness (say `Ready::READABLE` after a
    /// read hit `WouldBlock` while writing may go on); [`ready`](Self::ready)
    /// no longer shows it.
    pub fn clear_ready_matching(&mut self, ready: Ready) {
        clear_matching(self.fd, &mut self.event, ready);
    }

    /// Keeps the readiness (what dropping the guard does too).
    pub fn retain_ready(&mut self) {}

    /// Runs `f`; `WouldBlock` clears the readiness and gives [`TryIoError`],
    /// anything else is returned as `Ok(result)`.
    ///
    /// # Errors
    ///
    /// [`TryIoError`] when `f` returned `WouldBlock`.
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let r = would_block(f(self.fd));
        if r.is_err() {
            self.clear_ready();
        }
        r
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.fd
    }

    /// The wrapped object.
    pub fn get_inner(&self) -> &'a T {
        self.fd.get_ref()
    }
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    /// The readiness the wait saw (see [`AsyncFdReadyGuard::ready`]).
    pub fn ready(&self) -> Ready {
        ready_of(&self.event)
    }

    /// Forgets the readiness: the next wait waits for a new event.
    pub fn clear_ready(&mut self) {
        clear(self.fd, &mut self.event);
    }

    /// Forgets only `ready` of the readiness (see
    /// [`AsyncFdReadyGuard::clear_ready_matching`]).
    pub fn clear_ready_matching(&mut self, ready: Ready) {
        clear_matching(self.fd, &mut self.event, ready);
    }

    /// Keeps the readiness (what dropping the guard does too).
    pub fn retain_ready(&mut self) {}

    /// Runs `f` with the `AsyncFd` lent mutably; `WouldBlock` clears the
    /// readiness and gives [`TryIoError`].
    ///
    /// # Errors
    ///
    /// [`TryIoError`] when `f` returned `WouldBlock`.
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let r = would_block(f(self.fd));
        if r.is_err() {
            self.clear_ready();
        }
        r
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.fd
    }

    /// The `AsyncFd`, mutably.
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.fd
    }

    /// The wrapped object.
    pub fn get_inner(&self) -> &T {
        self.fd.get_ref()
    }

    /// The wrapped object, mutably.
    pub fn get_inner_mut(&mut self) -> &mut T {
        self.fd.get_mut()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("fd", self.fd)
            .field("ready", &self.ready())
            .finish()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard")
            .field("fd", &*self.fd)
            .field("ready", &self.ready())
            .finish()
    }
}
