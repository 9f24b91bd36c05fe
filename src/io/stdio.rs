//! [`stdin`], [`stdout`] and [`stderr`] (tokio's `io::stdin` ...): the
//! process's standard streams, each operation run on numa_rt's blocking
//! pool, one at a time.
//!
//! A terminal, a pipe or a file behind fd 0/1/2 cannot be made
//! nonblocking without changing it for every other process that shares it
//! (the shell, a parent), so, as tokio does, each read or write is a
//! blocking call on a pool thread. A write copies the caller's bytes into
//! the handle's buffer and returns at once; the next write, or
//! [`flush`](crate::io::AsyncWriteExt::flush), waits for it. So flush
//! before the program ends, or the last write may not reach its stream.
//!
//! Each handle is independent: two tasks writing through two `Stdout`s
//! interleave at write boundaries (std's own lock is taken per write).
//!
//! A read of stdin cannot be cancelled: dropping the future leaves the
//! read running on its thread until a line (or end-of-file) arrives, and a
//! runtime shut down meanwhile waits for it (as tokio's does). Use stdin
//! for piped input, or read it on a thread of your own for interactive use.

use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::JoinHandle;

/// The most a blocking read or write moves at once (tokio's figure).
pub(crate) const MAX_BUF: usize = 2 * 1024 * 1024;

/// The bytes of one blocking operation: read into it on a pool thread and
/// copied out to the caller, or copied in from the caller and written out
/// on a pool thread. `pos` is how much of a read has been handed out.
#[derive(Debug, Default)]
pub(crate) struct Buf {
    data: Vec<u8>,
    pos: usize,
}

impl Buf {
    pub(crate) fn new() -> Buf {
        Buf::default()
    }

    /// Bytes read and not yet handed out (none for a write in flight once
    /// it is done).
    pub(crate) fn len(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands out as much of a read as `dst` takes.
    pub(crate) fn copy_to(&mut self, dst: &mut ReadBuf<'_>) -> usize {
        let n = self.len().min(dst.remaining());
        dst.put_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.data.len() {
            self.clear();
        }
        n
    }

    /// Takes up to `max` bytes of a write; the buffer must be empty.
    pub(crate) fn copy_from(&mut self, src: &[u8], max: usize) -> usize {
        debug_assert!(self.is_empty());
        let n = src.len().min(max);
        self.data.extend_from_slice(&src[..n]);
        n
    }

    /// Takes up to `max` bytes of a vectored write, slice by slice.
    pub(crate) fn copy_from_bufs(&mut self, bufs: &[IoSlice<'_>], max: usize) -> usize {
        debug_assert!(self.is_empty());
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(max - n);
            self.data.extend_from_slice(&b[..take]);
            n += take;
            if n == max {
                break;
            }
        }
        n
    }

    /// Drops the unread rest of a read, returning minus its length: the
    /// seek that puts the file's offset back where the reader is.
    pub(crate) fn discard_read(&mut self) -> i64 {
        let back = -(self.len() as i64);
        self.clear();
        back
    }

    fn clear(&mut self) {
        self.data.clear();
        self.pos = 0;
    }

    /// One `read(2)` of up to `max` bytes from `fd` into the buffer (which
    /// must be empty), retried on `EINTR`.
    pub(crate) fn read_fd(&mut self, fd: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        debug_assert!(self.is_empty());
        self.clear();
        self.data.reserve(max);
        let spare = self.data.spare_capacity_mut();
        let len = spare.len().min(max);
        loop {
            // SAFETY: `spare` is the vector's unused capacity, at least
            // `len` bytes, writable and not aliased; read(2) writes at most
            // `len` bytes into it and `fd` is open for the call (borrowed).
            let r = unsafe { libc::read(fd.as_raw_fd(), spare.as_mut_ptr().cast(), len) };
            if r >= 0 {
                let n = r as usize;
                // SAFETY: read(2) initialised the first `n` bytes of the
                // spare capacity (n <= len <= capacity - 0, the vector
                // being empty).
                unsafe { self.data.set_len(n) };
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// One read of up to `max` bytes from a `Read` into the (empty)
    /// buffer, retried on `Interrupted`. Zeroes the space first: used for
    /// stdin, whose reads are small.
    fn read_from(&mut self, r: &mut impl Read, max: usize) -> io::Result<usize> {
        debug_assert!(self.is_empty());
        self.data.resize(max, 0);
        let res = loop {
            match r.read(&mut self.data) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                res => break res,
            }
        };
        self.data.truncate(*res.as_ref().unwrap_or(&0));
        res
    }

    /// Writes the whole buffer out and empties it (whatever happens).
    pub(crate) fn write_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        let res = w.write_all(&self.data[self.pos..]);
        self.clear();
        res
    }
}

/// The error of a blocking operation that was never run (the runtime shut
/// down) or did not return.
fn gone() -> io::Error {
    io::Error::other("the blocking pool did not run this operation (runtime shut down?)")
}

/// A blocking reader or writer driven from async code: one operation at a
/// time on the blocking pool, the object travelling with it.
struct Blocking<T> {
    /// `None` while an operation has it.
    inner: Option<T>,
    state: State<T>,
    /// A write went out since the last flush.
    need_flush: bool,
}

enum State<T> {
    Idle(Option<Buf>),
    Busy(JoinHandle<(io::Result<usize>, Buf, T)>),
}

impl<T: Send + 'static> Blocking<T> {
    fn new(inner: T) -> Blocking<T> {
        Blocking {
            inner: Some(inner),
            state: State::Idle(Some(Buf::new())),
            need_flush: false,
        }
    }

    /// Starts `op` with the object and the buffer.
    fn start(
        &mut self,
        buf: Buf,
        op: impl FnOnce(&mut T, &mut Buf) -> io::Result<usize> + Send + 'static,
    ) {
        let mut inner = self.inner.take().expect("idle, so the object is here");
        self.state = State::Busy(crate::spawn_blocking(move || {
            let mut buf = buf;
            let res = op(&mut inner, &mut buf);
            (res, buf, inner)
        }));
    }

    /// Waits for the operation in flight (if any); its result.
    fn poll_done(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let State::Busy(handle) = &mut self.state else {
            return Poll::Ready(Ok(0));
        };
        match ready!(Pin::new(handle).poll(cx)) {
            Ok((res, buf, inner)) => {
                self.inner = Some(inner);
                self.state = State::Idle(Some(buf));
                Poll::Ready(res)
            }
            // The object went with the closure: this handle is dead.
            Err(_) => {
                self.state = State::Idle(None);
                Poll::Ready(Err(gone()))
            }
        }
    }

    fn take_buf(&mut self) -> io::Result<Buf> {
        match &mut self.state {
            State::Idle(b) => b.take().ok_or_else(gone),
            State::Busy(_) => unreachable!("called when idle"),
        }
    }
}

impl<T: Read + Send + 'static> Blocking<T> {
    fn poll_read(&mut self, cx: &mut Context<'_>, dst: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            if let State::Idle(Some(buf)) = &mut self.state {
                if !buf.is_empty() || dst.remaining() == 0 {
                    buf.copy_to(dst);
                    return Poll::Ready(Ok(()));
                }
            }
            if let State::Idle(_) = self.state {
                let buf = self.take_buf()?;
                let max = dst.remaining().min(MAX_BUF);
                self.start(buf, move |r, buf| buf.read_from(r, max));
            }
            // A read copies out on the next pass; a write's error is
            // returned here, as tokio's does.
            ready!(self.poll_done(cx))?;
            if let State::Idle(Some(buf)) = &mut self.state {
                buf.copy_to(dst);
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<T: Write + Send + 'static> Blocking<T> {
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        fill: impl FnOnce(&mut Buf) -> usize,
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_done(cx))?;
        let mut buf = self.take_buf()?;
        let n = fill(&mut buf);
        self.start(buf, |w, buf| buf.write_to(w).map(|()| 0));
        self.need_flush = true;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_done(cx))?;
            if !self.need_flush {
                return Poll::Ready(Ok(()));
            }
            self.need_flush = false;
            let buf = self.take_buf()?;
            self.start(buf, |w, _| w.flush().map(|()| 0));
        }
    }
}

/// The standard input, read on the blocking pool (tokio's `io::Stdin`);
/// from [`stdin`]. Wrap it in a [`BufReader`](crate::io::BufReader) to read
/// lines.
///
/// A read cannot be cancelled: dropping the future leaves the blocking
/// read running on its pool thread until a line (or end-of-file) arrives,
/// and a runtime shut down meanwhile waits for it, as tokio's does. It
/// suits piped input; for interactive input, read on a thread of your own.
pub struct Stdin {
    io: Blocking<io::Stdin>,
}

/// The standard output, written on the blocking pool (tokio's
/// `io::Stdout`); from [`stdout`]. Flush before exiting.
pub struct Stdout {
    io: Blocking<io::Stdout>,
}

/// The standard error, written on the blocking pool (tokio's
/// `io::Stderr`); from [`stderr`]. Flush before exiting.
pub struct Stderr {
    io: Blocking<io::Stderr>,
}

/// A handle to the standard input (see [`Stdin`] on cancelling a read).
///
/// ```no_run
/// use numa_rt::io::{AsyncBufReadExt, BufReader};
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// let mut lines = BufReader::new(numa_rt::io::stdin()).lines();
/// while let Some(line) = lines.next_line().await? {
///     println!("got {line}");
/// }
/// # Ok(())
/// # }
/// ```
pub fn stdin() -> Stdin {
    Stdin {
        io: Blocking::new(io::stdin()),
    }
}

/// A handle to the standard output (see [`Stdout`]).
///
/// ```
/// use numa_rt::io::AsyncWriteExt;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// let mut out = numa_rt::io::stdout();
/// out.write_all(b"hello from numa_rt\n").await?;
/// out.flush().await?;
/// # Ok(())
/// # }
/// ```
pub fn stdout() -> Stdout {
    Stdout {
        io: Blocking::new(io::stdout()),
    }
}

/// A handle to the standard error (see [`Stderr`]).
pub fn stderr() -> Stderr {
    Stderr {
        io: Blocking::new(io::stderr()),
    }
}

impl AsyncRead for Stdin {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.io.poll_read(cx, buf)
    }
}

macro_rules! writer {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                src: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.io
                    .poll_write_with(cx, |buf| buf.copy_from(src, MAX_BUF))
            }

            fn poll_write_vectored(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.io
                    .poll_write_with(cx, |buf| buf.copy_from_bufs(bufs, MAX_BUF))
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.io.poll_flush(cx)
            }

            /// Flushes; the stream itself stays open (it is the process's).
            fn poll_shutdown(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                self.io.poll_flush(cx)
            }
        }
    };
}

writer!(Stdout);
writer!(Stderr);

macro_rules! fd_of {
    ($t:ty, $fd:expr, $name:literal) => {
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                $fd
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                // SAFETY: the standard streams' descriptors are open for
                // the process's life (std never closes them).
                unsafe { BorrowedFd::borrow_raw($fd) }
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct($name).finish_non_exhaustive()
            }
        }
    };
}

fd_of!(Stdin, libc::STDIN_FILENO, "Stdin");
fd_of!(Stdout, libc::STDOUT_FILENO, "Stdout");
fd_of!(Stderr, libc::STDERR_FILENO, "Stderr");
