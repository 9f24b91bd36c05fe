//! `numa_rt::io::AsyncFd` on descriptors numa_rt did not create: a pipe, an
//! eventfd, a socketpair, and a regular file (which the poller refuses).
//!
//! "Not ready yet" is observed by polling a wait once and seeing `Pending`
//! (never by sleeping); every body runs under a generous `timeout`.

use std::fs::File;
use std::future::Future;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use numa_rt::io::{AsyncFd, Interest};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

/// A nonblocking pipe: (read end, write end).
fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by us.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

/// A nonblocking eventfd with a zero counter.
fn eventfd() -> OwnedFd {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
    // SAFETY: eventfd succeeded: `fd` is open and owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn eventfd_read(fd: &OwnedFd) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into a live u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

fn eventfd_write(fd: &OwnedFd, v: u64) {
    // SAFETY: writes 8 bytes from a live u64.
    let n = unsafe { libc::write(fd.as_raw_fd(), (&v as *const u64).cast(), 8) };
    assert_eq!(n, 8, "eventfd write: {}", io::Error::last_os_error());
}

/// Makes sure the next read wait really waits for the poller. A new
/// `AsyncFd` is not readable until the poller says so (as in tokio), so
/// this usually returns at once; readiness that is there is used up by a
/// read that gives `WouldBlock`. A wait can be ready once more right after
/// a clear: an event that arrived meanwhile moves the readiness tick on,
/// so the clear keeps the bits, as designed; the next `WouldBlock` clears
/// them.
async fn drain_initial_read_readiness<T: AsRawFd>(
    fd: &AsyncFd<T>,
    mut read: impl FnMut(&T) -> io::Result<usize>,
) {
    for _ in 0..1000 {
        if futures::poll!(pin!(fd.readable())).is_pending() {
            return;
        }
        let mut guard = fd.readable().await.unwrap();
        if let Ok(r) = guard.try_io(|f| read(f.get_ref())) {
            panic!("nothing was written yet, but the read gave {r:?}");
        }
    }
    panic!("readiness was never cleared");
}

#[test]
fn a_pipe_becomes_readable_when_written() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (r, mut w) = pipe();
            let fd = AsyncFd::new(r).unwrap();
            drain_initial_read_readiness(&fd, |mut f| f.read(&mut [0; 16])).await;

            let mut wait = pin!(fd.readable());
            assert!(futures::poll!(wait.as_mut()).is_pending(), "empty pipe");
            w.write_all(b"ping").unwrap();
            let mut guard = wait.await.unwrap();
            assert!(guard.ready().is_readable());
            let mut buf = [0; 16];
            let n = guard
                .try_io(|f| f.get_ref().read(&mut buf))
                .expect("readable after a write")
                .unwrap();
            assert_eq!(&buf[..n], b"ping");

            // The writer closing shows up as readable, then end of file.
            drop(w);
            let n = fd
                .async_io(Interest::READABLE, |mut f| f.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(n, 0);
        })
        .await
        .unwrap();
    });
}

#[test]
fn a_task_waiting_on_an_eventfd_is_woken_by_another_task() {
    rt().block_on(async {
        timeout(GUARD, async {
            let fd = std::sync::Arc::new(AsyncFd::new(eventfd()).unwrap());
            drain_initial_read_readiness(&fd, |f| eventfd_read(f).map(|v| v as usize)).await;
            let (waiting_tx, waiting_rx) = futures::channel::oneshot::channel::<()>();
            let reader = {
                let fd = fd.clone();
                numa_rt::spawn(async move {
                    let mut waiting_tx = Some(waiting_tx);
                    let mut wait = pin!(fd.readable());
                    let mut guard = std::future::poll_fn(|cx| match wait.as_mut().poll(cx) {
                        Poll::Pending => {
                            // Parked on the poller: let the writer go.
                            if let Some(tx) = waiting_tx.take() {
                                let _ = tx.send(());
                            }
                            Poll::Pending
                        }
                        ready => ready,
                    })
                    .await
                    .unwrap();
                    guard
                        .try_io(|f| eventfd_read(f.get_ref()))
                        .unwrap()
                        .unwrap()
                })
            };
            waiting_rx.await.unwrap();
            eventfd_write(fd.get_ref(), 5);
            assert_eq!(reader.await.unwrap(), 5);
        })
        .await
        .unwrap();
    });
}

#[test]
fn mutable_guards_lend_the_object_and_clear_on_would_block() {
    rt().block_on(async {
        timeout(GUARD, async {
            let mut fd = AsyncFd::with_interest(eventfd(), Interest::READABLE).unwrap();
            assert_eq!(fd.interest(), Interest::READABLE);
            eventfd_write(fd.get_ref(), 2);
            let mut guard = fd.readable_mut().await.unwrap();
            let v = guard
                .try_io(|f| eventfd_read(f.get_mut()))
                .unwrap()
                .unwrap();
            assert_eq!(v, 2);
            // Now empty: the next try clears the readiness (once more if
            // the write's own edge was reported after the read).
            assert!(guard.try_io(|f| eventfd_read(f.get_ref())).is_err());
            let mut settled = false;
            for _ in 0..1000 {
                if futures::poll!(pin!(fd.readable_mut())).is_pending() {
                    settled = true;
                    break;
                }
                let mut guard = fd.readable_mut().await.unwrap();
                assert!(guard.try_io(|f| eventfd_read(f.get_ref())).is_err());
            }
            assert!(
                settled,
                "a WouldBlock inside try_io never cleared the readiness"
            );
        })
        .await
        .unwrap();
    });
}

#[test]
fn a_socketpair_reports_both_directions() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let fd = AsyncFd::new(a).unwrap();
            let guard = fd
                .ready(Interest::READABLE | Interest::WRITABLE)
                .await
                .unwrap();
            assert!(guard.ready().is_writable(), "{:?}", guard.ready());
            let n = fd
                .async_io(Interest::WRITABLE, |mut s| s.write(b"abc"))
                .await
                .unwrap();
            assert_eq!(n, 3);
            let mut buf = [0; 3];
            b.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"abc");
            b.write_all(b"xyz").unwrap();
            let n = fd
                .async_io(Interest::READABLE, |mut s| s.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(&buf[..n], b"xyz");
        })
        .await
        .unwrap();
    });
}

#[test]
fn into_inner_deregisters_and_keeps_the_descriptor_open() {
    rt().block_on(async {
        let fd = AsyncFd::new(eventfd()).unwrap();
        let raw = fd.as_raw_fd();
        let inner = fd.into_inner();
        assert_eq!(inner.as_raw_fd(), raw);
        eventfd_write(&inner, 1);
        assert_eq!(eventfd_read(&inner).unwrap(), 1, "still open");
        // Registering again works only if the first registration is gone
        // (epoll refuses a second add of one descriptor with EEXIST).
        let again = AsyncFd::new(inner).unwrap();
        assert_eq!(again.as_raw_fd(), raw);
    });
}

#[test]
fn a_regular_file_is_refused_with_the_os_error() {
    rt().block_on(async {
        let f = File::open("/proc/self/exe")
            .or_else(|_| File::open(std::env::current_exe().unwrap()))
            .unwrap();
        let e = AsyncFd::new(f).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    });
}
