//! The accept loop shared by TCP and Unix listeners: an accept that finds
//! the process out of descriptors waits [`ACCEPT_BACKOFF`] (one timer for
//! every task accepting on the listener) instead of spinning.

use std::io;
use std::sync::Mutex;
use std::task::{ready, Context, Poll, Waker};

use crate::driver::io::Direction;
use crate::driver::registration::PollEvented;
use crate::time::{sleep, Sleep};
use crate::tuning::ACCEPT_BACKOFF;

/// Whether an accept error means descriptors (or kernel memory) ran out.
fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// The accept loop shared by TCP and Unix listeners, with its back-off timer.
#[derive(Default)]
pub(super) struct AcceptBackoff {
    state: Mutex<Backoff>,
}

#[derive(Default)]
struct Backoff {
    /// Set while descriptors have run out: accepts wait for it.
    sleep: Option<Sleep>,
    /// Every task waiting for `sleep` (its timer holds only the last one's
    /// waker): the task that sees it end wakes the others, which would
    /// otherwise wait forever on a listener shared by several acceptors.
    waiters: Vec<Waker>,
}

impl std::fmt::Debug for AcceptBackoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AcceptBackoff")
    }
}

impl AcceptBackoff {
    pub(super) fn poll_accept<S: std::os::fd::AsRawFd, R>(
        &self,
        io: &PollEvented<S>,
        cx: &mut Context<'_>,
        accept: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let mut ended = Vec::new();
        let r = self.poll_accept_locked(io, cx, accept, &mut ended);
        // Outside the lock: the other waiters of a back-off that ended.
        for w in ended {
            crate::fault::wake(w, "an accept back-off waiter");
        }
        r
    }

    fn poll_accept_locked<S: std::os::fd::AsRawFd, R>(
        &self,
        io: &PollEvented<S>,
        cx: &mut Context<'_>,
        mut accept: impl FnMut(&S) -> io::Result<R>,
        ended: &mut Vec<Waker>,
    ) -> Poll<io::Result<R>> {
        let mut backoff = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = backoff.sleep.as_mut() {
                if s.poll_deadline(cx, false).is_pending() {
                    if !backoff.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        backoff.waiters.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                backoff.sleep = None;
                // This task goes on polling now; the others must be told.
                ended.extend(
                    backoff
                        .waiters
                        .drain(..)
                        .filter(|w| !w.will_wake(cx.waker())),
                );
            }
            match ready!(io.poll_io(cx, Direction::Read, &mut accept)) {
                Ok(r) => {
                    crate::current::set_accepted();
                    return Poll::Ready(Ok(r));
                }
                // Readiness is left set, so the retry tries accept again even
                // though no new edge will arrive for the queued connection.
                Err(e) if is_resource_exhaustion(&e) => {
                    backoff.sleep = Some(sleep(ACCEPT_BACKOFF));
                }
                // The peer gave up before we accepted: take the next one.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}
