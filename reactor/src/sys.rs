//! Every raw system call the reactor makes, in one place.
//!
//! mio covers the io pollers and the sockets; what it does not expose lives
//! here: the "park epoll" of each P and the "watch epoll" of each node
//! (level-triggered, holding epoll fds, which mio's edge-triggered `Poll`
//! cannot express), the eventfd that unparks a
//! driver, and the timerfd that carries a P's earliest timer deadline. All
//! descriptors are created close-on-exec and nonblocking and are owned by
//! [`OwnedFd`]s, so they close when the reactor drops.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Converts a `-1` return into the thread's `errno`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Wraps a freshly created descriptor.
fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful create call and nothing
    // else owns it, so the `OwnedFd` becomes its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A new epoll instance.
pub(crate) fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes no pointers.
    let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    Ok(owned(fd))
}

/// Adds `fd` to `epoll`, level-triggered for input, with `data` as its tag.
///
/// `EPOLLEXCLUSIVE` would make one waiter wake per event, but Linux rejects it
/// (`EINVAL`) when the target is itself an epoll instance, which is exactly
/// what the park and watch epolls hold; see the driver's design notes.
pub(crate) fn epoll_add_level(epoll: &OwnedFd, fd: RawFd, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: data,
    };
    // SAFETY: both descriptors are valid for the call and `ev` is a valid
    // epoll_event that the kernel only reads.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    Ok(())
}

/// Turns `fd`'s entry in `epoll` on (level-triggered input) or off. An entry
/// that is off stays registered but never reports, so no wake-up goes
/// through it; switching costs no loop check, unlike a delete and re-add.
pub(crate) fn epoll_set_level(epoll: &OwnedFd, fd: RawFd, data: u64, on: bool) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: if on { libc::EPOLLIN as u32 } else { 0 },
        u64: data,
    };
    // SAFETY: both descriptors are valid for the call and `ev` is a valid
    // epoll_event that the kernel only reads.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev) })?;
    Ok(())
}

/// Waits on `epoll` for up to `timeout` (forever when `None`), filling `out`
/// with the tags of the ready entries. `EINTR` counts as a timeout with no events.
pub(crate) fn epoll_wait(
    epoll: &OwnedFd,
    buf: &mut [libc::epoll_event],
    timeout: Option<Duration>,
    out: &mut Vec<u64>,
) -> io::Result<()> {
    out.clear();
    let n = epoll_wait_events(epoll.as_raw_fd(), buf, timeout)?;
    out.extend(buf[..n].iter().map(|ev| ev.u64));
    Ok(())
}

/// Waits on the epoll `epoll` (a raw descriptor the caller keeps open) for
/// up to `timeout`, filling `buf` from the front; returns how many entries
/// are filled. `EINTR` counts as a timeout with no events.
pub(crate) fn epoll_wait_events(
    epoll: RawFd,
    buf: &mut [libc::epoll_event],
    timeout: Option<Duration>,
) -> io::Result<usize> {
    let ms: libc::c_int = match timeout {
        None => -1,
        // Round up so a park never returns before its deadline.
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(libc::c_int::MAX as u128) as libc::c_int
        }
    };
    let len = buf.len().min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: `buf` is a writable array of `len` epoll_events that outlives
    // the call; the kernel writes at most `len` entries. The caller keeps
    // `epoll` open for the call.
    let n = unsafe { libc::epoll_wait(epoll, buf.as_mut_ptr(), len, ms) };
    match cvt(n) {
        Ok(n) => Ok(n as usize),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// Adds the epoll `inner` to the epoll `outer`, level-triggered, tagged
/// `data`. Adding an epoll to an epoll runs the kernel's loop check (under
/// a global mutex): for rare moves only (see the driver's "hosting").
pub(crate) fn epoll_nest(outer: RawFd, inner: RawFd, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: data,
    };
    // SAFETY: the caller keeps both descriptors open for the call; `ev` is
    // a valid epoll_event that the kernel only reads.
    cvt(unsafe { libc::epoll_ctl(outer, libc::EPOLL_CTL_ADD, inner, &mut ev) })?;
    Ok(())
}

/// Removes `inner` from the epoll `outer`.
pub(crate) fn epoll_unnest(outer: RawFd, inner: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: the caller keeps both descriptors open for the call; the
    // kernel ignores `ev` for a delete (non-null for pre-2.6.9 kernels).
    cvt(unsafe { libc::epoll_ctl(outer, libc::EPOLL_CTL_DEL, inner, &mut ev) })?;
    Ok(())
}

/// A new nonblocking eventfd with a zero counter.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    Ok(owned(fd))
}

/// Adds one to an eventfd counter (makes it readable).
pub(crate) fn eventfd_signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64. The only possible failure is
    // EAGAIN when the counter is saturated, which still leaves it readable,
    // so the result is deliberately ignored.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Reads (and so resets) an eventfd or timerfd counter; `EAGAIN` is fine.
/// Whether any of `fds` is readable now (`poll` with a zero timeout). On an
/// epoll fd this says whether it has undelivered events, without taking
/// them (an `epoll_wait` would consume edge-triggered ones). Paused time
/// asks it of every io poller before the clock jumps.
pub(crate) fn any_readable(fds: &[RawFd]) -> bool {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid, writable array of `pfds.len()` pollfd
    // structs for the duration of the call; a closed fd is reported as
    // POLLNVAL, not undefined behaviour.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
    n > 0
        && pfds
            .iter()
            .any(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

pub(crate) fn drain_counter(fd: &OwnedFd) {
    let mut buf: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64. EAGAIN (nothing to read)
    // is the expected outcome when the counter is already zero.
    unsafe { libc::read(fd.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
}

/// A new nonblocking monotonic timerfd, disarmed.
pub(crate) fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create takes no pointers.
    let fd = cvt(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    })?;
    Ok(owned(fd))
}

/// Arms the timerfd to expire once after `after` (`None` disarms it). Arming
/// also resets its expiration count, so it is not readable until it expires.
pub(crate) fn timerfd_set(fd: &OwnedFd, after: Option<Duration>) -> io::Result<()> {
    let value = match after {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        Some(d) => {
            // A zero value would disarm; one nanosecond means "now".
            let d = d.max(Duration::from_nanos(1));
            libc::timespec {
                tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        }
    };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: value,
    };
    // SAFETY: `spec` is a valid itimerspec the kernel only reads; the old
    // value pointer may be null.
    cvt(unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) })?;
    Ok(())
}

/// The soft limit on open descriptors (`RLIMIT_NOFILE`), if it can be read
/// and is finite.
pub(crate) fn nofile_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for the call's duration.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}
