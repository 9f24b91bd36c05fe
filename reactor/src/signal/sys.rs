//! Every system call of the signal module, in one place: the self-pipe, the
//! `sigaction` that installs the handler, and the handler itself.
//!
//! The handler runs on whatever thread the kernel interrupts, between any
//! two instructions, so it may only do what POSIX calls async-signal-safe:
//! it stores to an atomic, makes one `write(2)` on the pipe, calls the
//! handler that was installed before ours (if any), and restores `errno`.
//! It takes no lock, allocates nothing and touches no `Mutex`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

/// One slot per signal number, 0 (unused) to 64 (`SIGRTMAX` on Linux).
pub(super) const SLOTS: usize = 65;

/// Set by the handler when its signal arrives, cleared by
/// [`take_pending`]. Release in the handler, paired with the AcqRel swap in
/// `take_pending` (there is no data to publish beyond the flag itself: the
/// ordering only keeps the flag from being read before the pipe byte that
/// announced it).
static PENDING: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

/// The write end of the self-pipe, -1 until [`set_write_fd`]. It is never
/// closed (the handler may run at any time), so it lives for the process.
/// Release in `set_write_fd`, paired with the handler's Acquire load.
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// The handler that was installed before ours, as a function address (0:
/// none, or `SIG_DFL`/`SIG_IGN`, which are not called), and whether it takes
/// the three-argument `SA_SIGINFO` form. Stored before our handler is
/// installed (Release), loaded by the handler (Acquire).
static PREVIOUS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static PREVIOUS_SIGINFO: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The highest signal number this system has (`SIGRTMAX`).
pub(super) fn max_signal() -> libc::c_int {
    libc::SIGRTMAX().min(SLOTS as libc::c_int - 1)
}

/// A nonblocking, close-on-exec pipe: (read end, write end).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both are fresh descriptors owned by no one
    // else; each `OwnedFd` becomes the only owner of one.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Hands the pipe's write end to the handler, for the rest of the process.
pub(super) fn set_write_fd(fd: OwnedFd) {
    use std::os::fd::IntoRawFd;
    // Release: pairs with the handler's Acquire load, so a handler that sees
    // the fd sees it open.
    WRITE_FD.store(fd.into_raw_fd(), Ordering::Release);
}

/// A new descriptor for the same open pipe (close-on-exec): each listener
/// registers its own with a poller, since one poller refuses the same
/// descriptor twice. The pipe's nonblocking flag is shared.
pub(super) fn dup(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: `fd` is open for the call; F_DUPFD_CLOEXEC takes an int.
    let new = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: fcntl just returned this fresh descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Reads the pipe until it is empty (or closed). The bytes carry nothing:
/// the pending flags say which signals came.
pub(super) fn drain(fd: RawFd) {
    let mut buf = [0u8; 128];
    // Bounded: a pipe holds at most 64 KiB by default.
    for _ in 0..4096 {
        // SAFETY: `buf` is valid for `buf.len()` bytes of writing; `fd` is
        // an open descriptor (the process-lifetime read end).
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            // 0: no writer (cannot happen: the write end is never closed);
            // -1: EAGAIN once empty, or EINTR (the next drain goes on).
            return;
        }
    }
}

/// Clears and returns `signum`'s pending flag.
pub(super) fn take_pending(signum: libc::c_int) -> bool {
    // AcqRel: pairs with the handler's Release store.
    PENDING[signum as usize].swap(false, Ordering::AcqRel)
}

/// The signal handler: flag, wake, chain. See the module docs.
extern "C" fn handler(signum: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot, valid for
    // the thread's life; reading and restoring it keeps the interrupted
    // code's errno intact across our write(2).
    let errno_slot = unsafe { libc::__errno_location() };
    // SAFETY: as above; the slot is a valid, aligned int.
    let saved_errno = unsafe { *errno_slot };
    let Some(slot) = usize::try_from(signum).ok().filter(|&s| s < SLOTS) else {
        return;
    };
    // Release: pairs with `take_pending`'s swap.
    PENDING[slot].store(true, Ordering::Release);
    // Acquire: pairs with `set_write_fd`.
    let fd = WRITE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; `byte` is valid for one
        // byte of reading; `fd` is the never-closed, nonblocking write end.
        // A full pipe (EAGAIN) is fine: its unread bytes already wake the
        // readers, and the flag is set.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    // Acquire: pairs with the Release stores in `install`.
    let previous = PREVIOUS[slot].load(Ordering::Acquire);
    if previous != 0 {
        if PREVIOUS_SIGINFO[slot].load(Ordering::Acquire) {
            // SAFETY: `previous` is the `sa_sigaction` of a handler installed
            // with SA_SIGINFO, i.e. this function type; it is called the way
            // the kernel would have called it.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(previous) };
            f(signum, info, ctx);
        } else {
            // SAFETY: `previous` is the `sa_handler` of a handler installed
            // without SA_SIGINFO (not SIG_DFL or SIG_IGN, which are never
            // stored), i.e. this function type.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
            f(signum);
        }
    }
    // SAFETY: as above.
    unsafe { *errno_slot = saved_errno };
}

/// Installs [`handler`] for `signum`, remembering the handler it replaces
/// (called after ours on every delivery) unless that was the default
/// action or "ignore". Called once per signal for the process's life.
pub(super) fn install(signum: libc::c_int) -> io::Result<()> {
    let slot = signum as usize;
    // SAFETY: sigaction_t is plain data; all-zeroes is a valid value that
    // the kernel overwrites.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null `act` only reads the current action into `old`, which
    // is valid for writing.
    cvt(unsafe { libc::sigaction(signum, std::ptr::null(), &mut old) })?;
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
        // Release: pairs with the handler's Acquire loads; stored before our
        // handler can run.
        PREVIOUS_SIGINFO[slot].store(old.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
        PREVIOUS[slot].store(old.sa_sigaction, Ordering::Release);
    }
    // SAFETY: as above.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler as *const () as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    // Every signal blocked while the handler runs: with an empty mask a
    // burst of different signals (tokio's signal_realtime sends 28 real-time
    // ones at once) nested one handler frame per signal on the thread's
    // small alternate stack (SA_ONSTACK; Rust gives each thread a few KiB)
    // and overflowed it: SIGSEGV, 2 runs in 3. Blocked, they are delivered
    // one after another as each handler returns.
    // SAFETY: `new.sa_mask` is a valid sigset_t to initialise.
    unsafe { libc::sigfillset(&mut new.sa_mask) };
    // SAFETY: `new` is a fully initialised action whose handler is an
    // `extern "C"` function of the SA_SIGINFO type; `old` may be null.
    cvt(unsafe { libc::sigaction(signum, &new, std::ptr::null_mut()) })?;
    Ok(())
}
