//! Unix signals: [`signal`] makes a [`Signal`] listener for a
//! [`SignalKind`] (tokio's `tokio::signal::unix`). The design is in the
//! [parent module](super).

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::OwnedFd;
use std::task::{Context, Poll};

use crate::net::{AsyncFd, Interest};

/// A signal number, with constructors named after what the signals mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// Any signal number; [`signal`] checks it.
    pub const fn from_raw(signum: std::os::raw::c_int) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal number.
    pub const fn as_raw_value(&self) -> std::os::raw::c_int {
        self.0
    }

    /// `SIGALRM`: a real-time timer expired.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }

    /// `SIGCHLD`: a child process stopped or ended.
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }

    /// `SIGHUP`: the terminal hung up (daemons: reload the configuration).
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// `SIGINT`: ctrl-c.
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// `SIGIO`: I/O is possible on a descriptor.
    pub const fn io() -> SignalKind {
        SignalKind(libc::SIGIO)
    }

    /// `SIGPIPE`: a write to a pipe with no reader.
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }

    /// `SIGQUIT`: ctrl-\.
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// `SIGTERM`: a polite request to end.
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// `SIGUSR1`.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// `SIGUSR2`.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }

    /// `SIGWINCH`: the terminal changed size.
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }
}

impl From<std::os::raw::c_int> for SignalKind {
    fn from(signum: std::os::raw::c_int) -> SignalKind {
        SignalKind(signum)
    }
}

impl From<SignalKind> for std::os::raw::c_int {
    fn from(kind: SignalKind) -> std::os::raw::c_int {
        kind.0
    }
}

/// Listens for one signal: [`recv`](Signal::recv) returns once per burst of
/// deliveries made since the listener was created or last returned.
///
/// Several listeners for the same signal each see every delivery. The
/// listener's descriptor is registered with the poller of the P that made
/// it and closed when it drops.
pub struct Signal {
    fd: AsyncFd<OwnedFd>,
    signum: libc::c_int,
    /// The generation last returned (or current at creation).
    seen: u64,
    /// Its entry in the registry's list of waiting listeners.
    id: u64,
}

impl Drop for Signal {
    fn drop(&mut self) {
        super::forget(self.id);
    }
}

/// Creates a listener for `kind`, installing numa_rt's handler for it the
/// first time (for the process's life; see the [module docs](super)).
///
/// # Errors
/// `InvalidInput` for a number that is not a signal, and for `SIGKILL`,
/// `SIGSTOP` (cannot be caught), `SIGSEGV`, `SIGBUS`, `SIGILL` and
/// `SIGFPE` (faults: the thread would fault again after the handler);
/// the OS's error when the handler cannot be installed (glibc reserves
/// signals 32 and 33), or when the runtime has shut down.
///
/// # Panics
/// Outside a numa_rt runtime (a task, `block_on`, or an entered handle).
///
/// ```no_run
/// use numa_rt_reactor::signal::unix::{signal, SignalKind};
/// # async fn f() -> std::io::Result<()> {
/// let mut hangups = signal(SignalKind::hangup())?;
/// while hangups.recv().await.is_some() {
///     // reload the configuration
/// }
/// # Ok(()) }
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let signum = kind.0;
    check(signum)?;
    let (fd, seen) = super::register(signum)?;
    let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
    Ok(Signal {
        fd,
        signum,
        seen,
        id: super::next_listener_id(),
    })
}

fn check(signum: libc::c_int) -> io::Result<()> {
    let refused = match signum {
        libc::SIGKILL => Some("SIGKILL cannot be caught"),
        libc::SIGSTOP => Some("SIGSTOP cannot be caught"),
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE => Some(
            "it reports a fault of the thread that gets it, which would fault again after the handler",
        ),
        _ => None,
    };
    if let Some(why) = refused {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("numa_rt::signal::unix::signal: cannot listen for signal {signum}: {why}"),
        ));
    }
    if signum <= 0 || signum > super::sys::max_signal() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "numa_rt::signal::unix::signal: {signum} is not a signal number (1 to {})",
                super::sys::max_signal()
            ),
        ));
    }
    Ok(())
}

impl Signal {
    /// Waits for the next delivery (bursts coalesce into one). `None` once
    /// the runtime that made the listener has shut down.
    ///
    /// Cancel safe: a delivery is only consumed by the poll that returns it.
    pub async fn recv(&mut self) -> Option<()> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The poll behind [`recv`](Signal::recv).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        // Each pass clears a readiness the poller reported; more than a few
        // in one poll means a storm of signals: yield and come back.
        for _ in 0..8 {
            if super::take_new(self.signum, &mut self.seen, None) {
                return Poll::Ready(Some(()));
            }
            match self.fd.poll_read_ready(cx) {
                // Look once more now that the waker is in place, and leave
                // the waker in the registry: a byte written from here on
                // may be drained from the shared pipe by another
                // listener's collect before this listener's poller looks,
                // and epoll then reports nothing; that collect wakes us
                // instead (see `Registry::waiting`).
                Poll::Pending
                    if super::take_new(
                        self.signum,
                        &mut self.seen,
                        Some((self.id, cx.waker())),
                    ) =>
                {
                    return Poll::Ready(Some(()))
                }
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                // Collected on the next pass, after the clear: a byte
                // written after it raises readiness again.
                Poll::Ready(Ok(mut guard)) => guard.clear_ready(),
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("signum", &self.signum)
            .field("seen", &self.seen)
            .finish()
    }
}
