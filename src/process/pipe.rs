//! [`ChildStdin`], [`ChildStdout`], [`ChildStderr`]: a child's pipes,
//! nonblocking and registered with numa_rt's pollers.

use std::fmt;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::process::Stdio;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::io::{AsyncFd, Interest};

/// One end of a pipe, registered for one direction.
struct Pipe {
    fd: AsyncFd<OwnedFd>,
}

/// Sets or clears `O_NONBLOCK` on `fd`.
fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl(F_GETFL) on a descriptor open for the call (borrowed);
    // it reads no memory of ours.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new != flags {
        // SAFETY: as above, F_SETFL with an int argument.
        if unsafe { libc::fcntl(raw, libc::F_SETFL, new) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A syscall's `ssize_t` as a result, `EINTR` told apart.
fn check(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

impl Pipe {
    fn new(fd: OwnedFd, interest: Interest) -> io::Result<Pipe> {
        set_nonblocking(fd.as_fd(), true)?;
        Ok(Pipe {
            fd: AsyncFd::with_interest(fd, interest)?,
        })
    }

    /// Runs `op` (a nonblocking syscall) when the pipe is ready for
    /// `interest`, waiting again after `WouldBlock`, retrying `EINTR`.
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let mut guard = if interest.is_readable() {
                ready!(self.fd.poll_read_ready(cx))?
            } else {
                ready!(self.fd.poll_write_ready(cx))?
            };
            match guard.try_io(|fd| loop {
                match op(fd.as_raw_fd()) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    res => break res,
                }
            }) {
                Ok(res) => return Poll::Ready(res),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = ready!(self.poll_io(cx, Interest::READABLE, |fd| {
            // SAFETY: only read(2) writes through this slice, and it never
            // de-initialises a byte (it writes bytes).
            let unfilled = unsafe { buf.unfilled_mut() };
            // SAFETY: `unfilled` is the ReadBuf's unfilled part, writable
            // for `unfilled.len()` bytes; read(2) writes at most that many
            // and `fd` is open (owned by self).
            check(unsafe { libc::read(fd, unfilled.as_mut_ptr().cast(), unfilled.len()) })
        }))?;
        // SAFETY: read(2) initialised the first `n` bytes of the unfilled
        // part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    fn poll_write(&self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Interest::WRITABLE, |fd| {
            // SAFETY: `src` is readable for `src.len()` bytes; `fd` is open.
            check(unsafe { libc::write(fd, src.as_ptr().cast(), src.len()) })
        })
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // IoSlice is an iovec on Unix; writev takes at most IOV_MAX.
        let count = bufs.len().min(1024) as libc::c_int;
        self.poll_io(cx, Interest::WRITABLE, |fd| {
            // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix and
            // the `count` entries are readable for their lengths; `fd` is
            // open.
            check(unsafe { libc::writev(fd, bufs.as_ptr().cast(), count) })
        })
    }

    /// Back to blocking mode, out of the poller: a descriptor to hand on.
    fn into_blocking_fd(self) -> io::Result<OwnedFd> {
        let fd = self.fd.into_inner();
        set_nonblocking(fd.as_fd(), false)?;
        Ok(fd)
    }
}

macro_rules! pipe_type {
    ($(#[$doc:meta])* $name:ident, $std:ty, $interest:expr) => {
        $(#[$doc])*
        pub struct $name {
            inner: Pipe,
        }

        impl $name {
            /// Wraps std's pipe: made nonblocking and registered with the
            /// current runtime's poller.
            ///
            /// # Errors
            /// When the descriptor cannot be made nonblocking or
            /// registered.
            ///
            /// # Panics
            /// Outside a numa_rt runtime.
            pub fn from_std(inner: $std) -> io::Result<$name> {
                Ok($name {
                    inner: Pipe::new(OwnedFd::from(inner), $interest)?,
                })
            }

            /// The descriptor, back in blocking mode and out of the
            /// poller.
            ///
            /// # Errors
            /// When blocking mode cannot be restored.
            pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
                self.inner.into_blocking_fd()
            }
        }

        impl TryInto<Stdio> for $name {
            type Error = io::Error;

            /// The pipe as another child's stdio (back in blocking mode),
            /// to chain processes.
            fn try_into(self) -> io::Result<Stdio> {
                self.into_owned_fd().map(Stdio::from)
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.inner.fd.as_raw_fd()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.inner.fd.as_fd()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("fd", &self.as_raw_fd())
                    .finish()
            }
        }
    };
}

pipe_type!(
    /// The writing end of a child's stdin (tokio's `ChildStdin`):
    /// tokio's `AsyncWrite`, served by numa_rt's poller. Drop it to close
    /// the pipe (the child reads end-of-file); `shutdown` only flushes,
    /// as tokio's.
    ChildStdin,
    std::process::ChildStdin,
    Interest::WRITABLE
);
pipe_type!(
    /// The reading end of a child's stdout (tokio's `ChildStdout`):
    /// tokio's `AsyncRead`, served by numa_rt's poller.
    ChildStdout,
    std::process::ChildStdout,
    Interest::READABLE
);
pipe_type!(
    /// The reading end of a child's stderr (tokio's `ChildStderr`):
    /// tokio's `AsyncRead`, served by numa_rt's poller.
    ChildStderr,
    std::process::ChildStderr,
    Interest::READABLE
);

impl AsyncWrite for ChildStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Nothing is buffered: ready at once.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Nothing is buffered and the pipe stays open until dropped (tokio's
    /// behaviour): ready at once.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for ChildStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.inner.poll_read(cx, buf)
    }
}

impl AsyncRead for ChildStderr {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.inner.poll_read(cx, buf)
    }
}
