//! The accept loop shared by TCP and Unix listeners: an accept that finds
//! the process out of descriptors waits [`ACCEPT_BACKOFF`] (one timer for
//! every task accepting on the listener) instead of spinning, and says so on
//! stderr: the first failure of a stretch, and its end (at most one failure
//! line per [`ACCEPT_REPORT_EVERY`] in a process).

use std::io;
use std::sync::Mutex;
use std::task::{ready, Context, Poll, Waker};

use crate::driver::io::Direction;
use crate::driver::registration::PollEvented;
use crate::time::{sleep, Sleep};
use crate::tuning::{ACCEPT_BACKOFF, ACCEPT_REPORT_EVERY};

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
    /// The stretch of failed accepts under way, if any.
    exhausted: Option<Exhausted>,
    /// Every task waiting for `sleep` (its timer holds only the last one's
    /// waker): the task that sees it end wakes the others, which would
    /// otherwise wait forever on a listener shared by several acceptors.
    waiters: Vec<Waker>,
}

/// When the process last reported a failed accept, and how many it held
/// back since.
static ACCEPT_REPORTS: Mutex<(Option<std::time::Instant>, u64)> = Mutex::new((None, 0));

/// A stretch of accepts failed for want of descriptors, on one listener.
struct Exhausted {
    since: std::time::Instant,
    retries: u64,
    /// Whether its first failure was reported (then its end is too).
    reported: bool,
}

impl Exhausted {
    fn begin<S: std::os::fd::AsRawFd>(listener: &S, e: &io::Error) -> Exhausted {
        let now = std::time::Instant::now();
        let mut reports = ACCEPT_REPORTS.lock().unwrap_or_else(|p| p.into_inner());
        let due = reports
            .0
            .is_none_or(|last| now.duration_since(last) >= ACCEPT_REPORT_EVERY);
        if due {
            let held = std::mem::take(&mut reports.1);
            reports.0 = Some(now);
            let held = if held > 0 {
                format!(" ({held} more since the last report)")
            } else {
                String::new()
            };
            eprintln!(
                "numa_rt: accept on {} failed: {e}; the process is out of descriptors or \
                 kernel memory: the listener retries every {} ms{held}",
                describe_listener(listener),
                ACCEPT_BACKOFF.as_millis()
            );
        } else {
            reports.1 += 1;
        }
        Exhausted {
            since: now,
            retries: 0,
            reported: due,
        }
    }

    fn report_end<S: std::os::fd::AsRawFd>(self, listener: &S) {
        if self.reported {
            eprintln!(
                "numa_rt: accept on {} works again after {} retries, {} ms",
                describe_listener(listener),
                self.retries,
                self.since.elapsed().as_millis()
            );
        }
    }
}

/// A listener's local address, for a report (its descriptor if that fails).
fn describe_listener<S: std::os::fd::AsRawFd>(listener: &S) -> String {
    let fd = listener.as_raw_fd();
    // SAFETY: `fd` is the listener's own open descriptor, borrowed for the
    // call; `ManuallyDrop` keeps the temporary socket2 view from closing it.
    let sock = std::mem::ManuallyDrop::new(unsafe {
        <socket2::Socket as std::os::fd::FromRawFd>::from_raw_fd(fd)
    });
    match sock.local_addr() {
        Ok(a) => match (a.as_socket(), a.as_pathname()) {
            (Some(ip), _) => ip.to_string(),
            (None, Some(path)) => path.display().to_string(),
            _ => format!("fd {fd}"),
        },
        Err(_) => format!("fd {fd}"),
    }
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
                    if let Some(x) = backoff.exhausted.take() {
                        x.report_end(io.get_ref());
                    }
                    crate::current::set_accepted();
                    return Poll::Ready(Ok(r));
                }
                // Readiness is left set, so the retry tries accept again even
                // though no new edge will arrive for the queued connection.
                Err(e) if is_resource_exhaustion(&e) => {
                    match backoff.exhausted.as_mut() {
                        Some(x) => x.retries += 1,
                        None => backoff.exhausted = Some(Exhausted::begin(io.get_ref(), &e)),
                    }
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
