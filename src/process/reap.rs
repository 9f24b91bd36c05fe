//! Telling when a child exits (a pidfd, or `SIGCHLD`), and reaping the
//! children dropped before they exited (the orphan reaper thread).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::io::{AsyncFd, Interest};
use crate::signal::unix::{signal, Signal, SignalKind};

/// What a wait watches for its child's exit.
pub(super) enum Watch {
    /// Readable once the child has exited.
    Pidfd(AsyncFd<OwnedFd>),
    /// Every `SIGCHLD` after the listener was made.
    Sigchld(Signal),
}

impl Watch {
    /// A watch for `pid`, registered with the current runtime: its pidfd
    /// where the kernel gives one, `SIGCHLD` otherwise.
    pub(super) fn new(pid: u32) -> io::Result<Watch> {
        match pidfd_open(pid) {
            Some(fd) => Ok(Watch::Pidfd(AsyncFd::with_interest(
                fd,
                Interest::READABLE,
            )?)),
            None => Ok(Watch::Sigchld(signal(SignalKind::child())?)),
        }
    }

    /// `Ready(Ok)` when the child may have exited (the caller looks with
    /// `try_wait`, which it also did before this poll, so an exit between
    /// the two is not missed); `Ready(Err)` when the watch's runtime has
    /// gone.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Watch::Pidfd(fd) => match fd.poll_read_ready(cx) {
                Poll::Pending => Poll::Pending,
                // A pidfd stays readable once the child has exited, so
                // forgetting the readiness loses nothing: if try_wait then
                // finds no exit, the next poll really waits.
                Poll::Ready(Ok(mut guard)) => {
                    guard.clear_ready();
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            },
            Watch::Sigchld(sig) => match sig.poll_recv(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(())) => Poll::Ready(Ok(())),
                Poll::Ready(None) => Poll::Ready(Err(io::Error::other(
                    "the runtime that listened for SIGCHLD has shut down",
                ))),
            },
        }
    }
}

/// 0: not yet known; 1: pidfd_open works; 2: it does not (or
/// `NUMA_RT_NO_PIDFD` is set).
static PIDFD: AtomicU8 = AtomicU8::new(0);

/// A pidfd for `pid`, or `None` where the kernel gives none.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // Relaxed: a cache of a fact that does not change; racing first calls
    // each find it out.
    match PIDFD.load(Ordering::Relaxed) {
        2 => return None,
        0 if std::env::var_os("NUMA_RT_NO_PIDFD").is_some_and(|v| v != "0" && !v.is_empty()) => {
            PIDFD.store(2, Ordering::Relaxed);
            return None;
        }
        _ => {}
    }
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new
    // descriptor or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        // ENOSYS (before 5.3), EPERM/EACCES (seccomp): never for anyone.
        // Anything else (EMFILE, ...) only for this child.
        if matches!(
            e.raw_os_error(),
            Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EACCES)
        ) {
            PIDFD.store(2, Ordering::Relaxed);
        }
        return None;
    }
    PIDFD.store(1, Ordering::Relaxed);
    // SAFETY: a new descriptor, owned by nothing else; pidfds are
    // close-on-exec.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A dropped child not yet reaped.
struct Orphan {
    child: std::process::Child,
    pidfd: Option<OwnedFd>,
}

impl Orphan {
    /// Reaped (or unknown to `waitpid`: someone else reaped it, or
    /// `SIGCHLD` is ignored and the kernel did).
    fn gone(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

struct Reaper {
    orphans: Vec<Orphan>,
    /// The reaper thread exists (it clears this, under the lock, when it
    /// leaves with no orphan left).
    running: bool,
}

static REAPER: Mutex<Reaper> = Mutex::new(Reaper {
    orphans: Vec::new(),
    running: false,
});

/// The reaper thread's doorbell: written when an orphan is added.
fn doorbell() -> Option<&'static OwnedFd> {
    static BELL: OnceLock<Option<OwnedFd>> = OnceLock::new();
    BELL.get_or_init(|| {
        // SAFETY: eventfd(2) takes two ints and returns a new descriptor
        // or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        // SAFETY: a new descriptor, owned by nothing else (kept for the
        // process's life).
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
}

fn ring(bell: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of `one` to the eventfd, open for the
    // process's life. A full counter (EAGAIN) already means "ring".
    let _ = unsafe { libc::write(bell.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Hands over a child dropped before its exit was collected: reaped now
/// if it has exited, otherwise by the reaper thread when it does.
pub(super) fn orphan(child: std::process::Child, watch: Option<Watch>) {
    let mut orphan = Orphan {
        child,
        pidfd: match watch {
            Some(Watch::Pidfd(fd)) => Some(fd.into_inner()),
            _ => None,
        },
    };
    if orphan.gone() {
        return;
    }
    if orphan.pidfd.is_none() {
        orphan.pidfd = pidfd_open(orphan.child.id());
    }
    let mut r = REAPER.lock().unwrap_or_else(|e| e.into_inner());
    r.orphans.push(orphan);
    if r.running {
        if let Some(bell) = doorbell() {
            ring(bell);
        }
        return;
    }
    let started = std::thread::Builder::new()
        .name("numa_rt-orphan-reaper".into())
        .stack_size(64 * 1024)
        .spawn(reap_loop);
    // Without a thread the orphan stays listed; the next one tries again.
    r.running = started.is_ok();
}

/// How long the reaper sleeps between looks at orphans that have no pidfd.
const NO_PIDFD_PERIOD: Duration = Duration::from_millis(100);

fn reap_loop() {
    let bell = doorbell();
    let mut fds: Vec<RawFd> = Vec::new();
    loop {
        let timeout = {
            let mut r = REAPER.lock().unwrap_or_else(|e| e.into_inner());
            r.orphans.retain_mut(|o| !o.gone());
            if r.orphans.is_empty() {
                r.running = false;
                return;
            }
            // Only this thread removes orphans, so these descriptors stay
            // open while it polls them unlocked.
            fds.clear();
            fds.extend(bell.iter().map(|b| b.as_raw_fd()));
            fds.extend(
                r.orphans
                    .iter()
                    .filter_map(|o| o.pidfd.as_ref())
                    .map(|p| p.as_raw_fd()),
            );
            let all_pidfds = r.orphans.iter().all(|o| o.pidfd.is_some());
            if all_pidfds && bell.is_some() {
                -1
            } else {
                NO_PIDFD_PERIOD.as_millis() as libc::c_int
            }
        };
        let mut pfds: Vec<libc::pollfd> = fds
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds, and its
        // descriptors are open (see above).
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if let Some(bell) = bell {
            let mut count: u64 = 0;
            // SAFETY: reads 8 bytes into `count`; nonblocking, so an
            // unrung bell returns EAGAIN at once.
            let _ = unsafe { libc::read(bell.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        }
    }
}
