//! Draining an io poller: its epoll events become readiness for the
//! sources (read as mio reads them, [`readiness`]) and their wakers are
//! collected; the P's timerfd and, on a hosting P, the node's watch epoll
//! are reported to the caller ([`Found`]). [`help`] is the same drain of
//! another P's poller, with a try-lock, for its node's watcher or the
//! monitor.
//!
//! Nothing is woken here: the caller fires what was collected, outside
//! every lock, timers first (Go runs timers before netpoll), then
//! write-readiness wakers, then read, then listener (accept) wakers
//! (`io::Wakeups::fire`): Vyukov's soft priorities, and since the executor
//! queues the wakes in order, dispatch order is run order.

use std::sync::{MutexGuard, TryLockError};
use std::task::Waker;
use std::time::Duration;

use super::io::{self, Wakeups};
use super::{IoPoller, PState, TIMER_TOKEN, WATCH_IN_IO};
use crate::sys;

/// What one look at an io poller found besides readiness for its sources.
#[derive(Default)]
pub(super) struct Found {
    /// The P's timerfd fired.
    pub(super) timer: bool,
    /// The node's watch epoll is ready (the P hosts it).
    pub(super) watch: bool,
    /// At least one source of the P got readiness.
    pub(super) io: bool,
}

/// What helping another P's poller achieved.
pub(super) enum Help {
    Drained,
    /// Someone else holds or owns it right now; it is being handled.
    Busy,
}

impl PState {
    /// Polls the io poller (whose lock is held) without blocking and collects
    /// wakers; returns whether the timerfd fired.
    pub(super) fn drain(&self, mut io: MutexGuard<'_, IoPoller>, out: &mut Wakeups) -> bool {
        let n = match sys::epoll_wait_events(self.io_fd, &mut io.events, Some(Duration::ZERO)) {
            Ok(n) => n,
            Err(e) => {
                // Only EBADF/EINVAL, which would be a bug of ours.
                debug_assert!(false, "epoll_wait(io): {e}");
                return false;
            }
        };
        self.count_drain();
        let found = self.dispatch(&io.events[..n], out);
        drop(io);
        if found.timer {
            sys::drain_counter(self.timers.timerfd());
        }
        found.timer
    }

    /// Hands the readiness in `events` (taken from this P's io poller) to
    /// the sources, collecting their wakers; says what else was there.
    pub(super) fn dispatch(&self, events: &[libc::epoll_event], out: &mut Wakeups) -> Found {
        let mut found = Found::default();
        if events.is_empty() {
            return found;
        }
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events {
            // Copies out of the (packed) struct.
            let (tag, flags) = (ev.u64, ev.events);
            if tag == TIMER_TOKEN.0 as u64 {
                found.timer = true;
            } else if tag == WATCH_IN_IO {
                found.watch = true;
            } else if let Some(sio) = sources.get(tag as usize) {
                found.io = true;
                sio.set_readiness(readiness(flags), out);
            }
        }
        found
    }
}

/// The readiness bits of an epoll event's flags, read as mio reads them
/// (mio registers the sources, edge-triggered, with `EPOLLRDHUP`), plus
/// `PRIORITY` for `EPOLLPRI` and `ERROR` for `EPOLLERR` (tokio's `Ready`).
fn readiness(flags: u32) -> usize {
    let f = flags as libc::c_int;
    let mut bits = 0;
    if f & (libc::EPOLLIN | libc::EPOLLPRI) != 0 {
        bits |= io::READABLE;
    }
    if f & libc::EPOLLPRI != 0 {
        bits |= io::PRIORITY;
    }
    if f & libc::EPOLLOUT != 0 {
        bits |= io::WRITABLE;
    }
    // Both halves closed, or a FIN received (shutdown(SHUT_RD) included).
    if f & libc::EPOLLHUP != 0 || (f & libc::EPOLLIN != 0 && f & libc::EPOLLRDHUP != 0) {
        bits |= io::READ_CLOSED;
    }
    // Both halves closed, or a pipe's read end gone.
    if f & libc::EPOLLHUP != 0
        || (f & libc::EPOLLOUT != 0 && f & libc::EPOLLERR != 0)
        || f == libc::EPOLLERR
    {
        bits |= io::WRITE_CLOSED;
    }
    if f & libc::EPOLLERR != 0 {
        // Let both directions retry: the operation reports the error.
        bits |= io::ERROR | io::READABLE | io::WRITABLE;
    }
    bits
}

/// Polls `other`'s io poller on behalf of its M (busy, or asleep on its
/// eventfd), collecting wakers for the calling watcher to fire.
pub(super) fn help(other: &PState, wakeups: &mut Wakeups, timer_wakers: &mut Vec<Waker>) -> Help {
    let io = match other.io.try_lock() {
        Ok(io) => io,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return Help::Busy,
    };
    if other.drain(io, wakeups) {
        other.timers.fire_expired(timer_wakers);
    }
    Help::Drained
}

#[cfg(test)]
mod tests {
    use super::{io, readiness};

    /// The raw-flag reading matches mio's `Event` accessors on Linux, which
    /// the drain used before it read the epoll events itself.
    #[test]
    fn readiness_reads_epoll_flags_as_mio_does() {
        let f = |flags: libc::c_int| readiness(flags as u32);
        assert_eq!(f(libc::EPOLLIN), io::READABLE);
        assert_eq!(f(libc::EPOLLPRI), io::READABLE | io::PRIORITY);
        assert_eq!(f(libc::EPOLLOUT), io::WRITABLE);
        assert_eq!(
            f(libc::EPOLLIN | libc::EPOLLRDHUP),
            io::READABLE | io::READ_CLOSED
        );
        // RDHUP alone (no data to read) is not read-closed for mio.
        assert_eq!(f(libc::EPOLLRDHUP), 0);
        assert_eq!(f(libc::EPOLLHUP), io::READ_CLOSED | io::WRITE_CLOSED);
        // A pipe whose reader is gone: EPOLLERR alone.
        assert_eq!(
            f(libc::EPOLLERR),
            io::WRITE_CLOSED | io::ERROR | io::READABLE | io::WRITABLE
        );
        assert_eq!(
            f(libc::EPOLLOUT | libc::EPOLLERR),
            io::WRITE_CLOSED | io::ERROR | io::READABLE | io::WRITABLE
        );
        assert_eq!(
            f(libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR),
            io::READABLE | io::WRITABLE | io::READ_CLOSED | io::WRITE_CLOSED | io::ERROR
        );
    }
}
