//! Unix pipes, anonymous ([`pipe`]) and named (FIFOs, opened with
//! [`OpenOptions`]): tokio's `net::unix::pipe`. A [`Sender`] is the write
//! end, a [`Receiver`] the read end; both are nonblocking and registered
//! with the poller like sockets, and implement tokio's and futures-io's
//! `AsyncWrite`/`AsyncRead`.
//!
//! A pipe end starts ready in no direction, as tokio's: its first readiness
//! is what the poller reports (a fresh pipe is writable, not readable).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use mio::unix::pipe as mio_pipe;

use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;
use crate::driver::waiters::wait_fn;
use crate::net::{Interest, Ready};

/// A new anonymous pipe: its write end and its read end.
pub fn pipe() -> io::Result<(Sender, Receiver)> {
    let (tx, rx) = mio_pipe::new()?;
    Ok((Sender::from_mio(tx), Receiver::from_mio(rx)))
}

/// Opens a FIFO (named pipe) as a [`Sender`] or a [`Receiver`] (tokio's
/// `pipe::OpenOptions`).
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    read_write: bool,
    unchecked: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PipeEnd {
    Sender,
    Receiver,
}

impl OpenOptions {
    /// The defaults: read-only receivers, write-only senders, the file
    /// checked to be a FIFO.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Opens the FIFO read-write (`O_RDWR`, Linux): a sender opens even
    /// with no reader, and a receiver never sees end of file when the last
    /// writer leaves, since it is a writer itself.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn read_write(&mut self, value: bool) -> &mut Self {
        self.read_write = value;
        self
    }

    /// Skips the check that the file is a FIFO (any file that the poller
    /// accepts, a character device say, will do).
    pub fn unchecked(&mut self, value: bool) -> &mut Self {
        self.unchecked = value;
        self
    }

    /// Opens the FIFO at `path` as a receiver. An error of kind
    /// `InvalidInput` when it is not a FIFO.
    pub fn open_receiver<P: AsRef<Path>>(&self, path: P) -> io::Result<Receiver> {
        let file = self.open(path.as_ref(), PipeEnd::Receiver)?;
        Receiver::from_file_unchecked(file)
    }

    /// Opens the FIFO at `path` as a sender. With no reader (and not
    /// [`read_write`](Self::read_write)) this fails with `ENXIO`, as
    /// `open(2)` does in nonblocking mode.
    pub fn open_sender<P: AsRef<Path>>(&self, path: P) -> io::Result<Sender> {
        let file = self.open(path.as_ref(), PipeEnd::Sender)?;
        Sender::from_file_unchecked(file)
    }

    fn open(&self, path: &Path, end: PipeEnd) -> io::Result<File> {
        let mut options = std::fs::OpenOptions::new();
        options
            .read(end == PipeEnd::Receiver)
            .write(end == PipeEnd::Sender)
            .custom_flags(libc::O_NONBLOCK);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if self.read_write {
            options.read(true).write(true);
        }
        let file = options.open(path)?;
        if !self.unchecked && !is_pipe(file.as_fd())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a pipe", path.display()),
            ));
        }
        Ok(file)
    }
}

/// The write end of a pipe.
#[derive(Debug)]
pub struct Sender {
    io: PollEvented<mio_pipe::Sender>,
}

/// The read end of a pipe.
#[derive(Debug)]
pub struct Receiver {
    io: PollEvented<mio_pipe::Receiver>,
}

impl Sender {
    fn from_mio(tx: mio_pipe::Sender) -> Sender {
        Sender {
            io: registered(PollEvented::new(tx, mio::Interest::WRITABLE, Kind::Stream).reported()),
        }
    }

    /// The write end of a pipe or FIFO opened as a file (switched to
    /// nonblocking mode). `InvalidInput` when it is not a pipe or was not
    /// opened for writing.
    pub fn from_file(file: File) -> io::Result<Sender> {
        Sender::from_owned_fd(file.into())
    }

    /// [`from_file`](Self::from_file) for a descriptor.
    pub fn from_owned_fd(fd: OwnedFd) -> io::Result<Sender> {
        if !is_pipe(fd.as_fd())? {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"));
        }
        let flags = file_flags(fd.as_fd())?;
        if !matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not in O_WRONLY or O_RDWR access mode",
            ));
        }
        Sender::from_owned_fd_unchecked(fd)
    }

    /// [`from_file`](Self::from_file) without the checks.
    pub fn from_file_unchecked(file: File) -> io::Result<Sender> {
        Sender::from_owned_fd_unchecked(file.into())
    }

    /// [`from_owned_fd`](Self::from_owned_fd) without the checks.
    pub fn from_owned_fd_unchecked(fd: OwnedFd) -> io::Result<Sender> {
        let tx = mio_pipe::Sender::from(fd);
        tx.set_nonblocking(true)?;
        Ok(Sender::from_mio(tx))
    }

    /// Waits until the pipe is ready for `interest` and says how (see
    /// `TcpStream::ready`; only writing applies to a sender).
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        // Any interest, ERROR and PRIORITY included (as the sockets').
        let mask = interest.mask();
        let ev = crate::coop::unconstrained(wait_fn(|cx| self.io.poll_ready_mask(cx, mask, true)))
            .await?;
        Ok(Ready::from_bits(ev.bits()))
    }

    /// Waits until a write may not block (then [`try_write`](Self::try_write)).
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(drop)
    }

    /// Polls for write readiness.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_ready(cx, Direction::Write).map_ok(drop)
    }

    /// Writes what fits without waiting: `WouldBlock` when the pipe is full
    /// (the readiness is then cleared).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(false, true, |mut s| s.write(buf))
    }

    /// [`try_write`](Self::try_write) from several buffers (`writev`).
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.io.try_io(false, true, |mut s| s.write_vectored(bufs))
    }

    /// Runs `f` (a nonblocking syscall on the pipe) if it is writable;
    /// `WouldBlock` from `f` clears the readiness.
    pub fn try_io<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.io.try_io(false, true, |_| f())
    }

    /// Waits until the pipe is writable and runs `f`, again after each
    /// `WouldBlock`.
    pub async fn async_io<R>(&self, mut f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Write, |_| f())).await
    }

    /// Deregisters and returns the descriptor, switched to blocking mode
    /// (to hand to a child process).
    pub fn into_blocking_fd(self) -> io::Result<OwnedFd> {
        let tx = self.io.into_inner();
        tx.set_nonblocking(false)?;
        Ok(tx.into())
    }

    /// Deregisters and returns the descriptor, still nonblocking.
    pub fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
        Ok(self.io.into_inner().into())
    }

    fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io
            .poll_stream_io(cx, Direction::Write, buf.len(), |mut s| s.write(buf))
    }

    fn poll_write_vectored_priv(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.io
            .poll_stream_io(cx, Direction::Write, len, |mut s| s.write_vectored(bufs))
    }
}

impl Receiver {
    fn from_mio(rx: mio_pipe::Receiver) -> Receiver {
        Receiver {
            io: registered(PollEvented::new(rx, mio::Interest::READABLE, Kind::Stream).reported()),
        }
    }

    /// The read end of a pipe or FIFO opened as a file (switched to
    /// nonblocking mode). `InvalidInput` when it is not a pipe or was not
    /// opened for reading.
    pub fn from_file(file: File) -> io::Result<Receiver> {
        Receiver::from_owned_fd(file.into())
    }

    /// [`from_file`](Self::from_file) for a descriptor.
    pub fn from_owned_fd(fd: OwnedFd) -> io::Result<Receiver> {
        if !is_pipe(fd.as_fd())? {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"));
        }
        let flags = file_flags(fd.as_fd())?;
        if !matches!(flags & libc::O_ACCMODE, libc::O_RDONLY | libc::O_RDWR) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not in O_RDONLY or O_RDWR access mode",
            ));
        }
        Receiver::from_owned_fd_unchecked(fd)
    }

    /// [`from_file`](Self::from_file) without the checks.
    pub fn from_file_unchecked(file: File) -> io::Result<Receiver> {
        Receiver::from_owned_fd_unchecked(file.into())
    }

    /// [`from_owned_fd`](Self::from_owned_fd) without the checks.
    pub fn from_owned_fd_unchecked(fd: OwnedFd) -> io::Result<Receiver> {
        let rx = mio_pipe::Receiver::from(fd);
        rx.set_nonblocking(true)?;
        Ok(Receiver::from_mio(rx))
    }

    /// Waits until the pipe is ready for `interest` and says how (only
    /// reading applies to a receiver; the writer leaving reads as
    /// `is_read_closed`).
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        // Any interest, ERROR and PRIORITY included (as the sockets').
        let mask = interest.mask();
        let ev = crate::coop::unconstrained(wait_fn(|cx| self.io.poll_ready_mask(cx, mask, true)))
            .await?;
        Ok(Ready::from_bits(ev.bits()))
    }

    /// Waits until a read may not block (then [`try_read`](Self::try_read)).
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(drop)
    }

    /// Polls for read readiness.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_ready(cx, Direction::Read).map_ok(drop)
    }

    /// Reads what is there without waiting: `WouldBlock` when nothing is
    /// (the readiness is then cleared), `Ok(0)` once every writer is gone.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |mut s| s.read(buf))
    }

    /// [`try_read`](Self::try_read) into several buffers (`readv`).
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.io.try_io(true, false, |mut s| s.read_vectored(bufs))
    }

    /// [`try_read`](Self::try_read) into the spare capacity of `buf`, which
    /// is advanced past what was read.
    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.io.try_io(true, false, |s| {
            let fd = s.as_raw_fd();
            crate::net::udp::recv_buf_mut(buf, |dst| Ok((crate::net::read_uninit(fd, dst)?, ())))
                .map(|(n, ())| n)
        })
    }

    /// Runs `f` (a nonblocking syscall on the pipe) if it is readable;
    /// `WouldBlock` from `f` clears the readiness.
    pub fn try_io<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.io.try_io(true, false, |_| f())
    }

    /// Waits until the pipe is readable and runs `f`, again after each
    /// `WouldBlock`.
    pub async fn async_io<R>(&self, mut f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |_| f())).await
    }

    /// Deregisters and returns the descriptor, switched to blocking mode.
    pub fn into_blocking_fd(self) -> io::Result<OwnedFd> {
        let rx = self.io.into_inner();
        rx.set_nonblocking(false)?;
        Ok(rx.into())
    }

    /// Deregisters and returns the descriptor, still nonblocking.
    pub fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
        Ok(self.io.into_inner().into())
    }

    fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.io.poll_stream_io(cx, Direction::Read, len, |s| {
            crate::net::read_uninit(s.as_raw_fd(), buf)
        })
    }
}

impl tokio::io::AsyncWrite for Sender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored_priv(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl futures_io::AsyncWrite for Sender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored_priv(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncRead for Receiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = std::task::ready!(self.poll_read_uninit(cx, crate::net::udp::uninit_of(buf)))?;
        crate::net::udp::filled(buf, n);
        Poll::Ready(Ok(()))
    }
}

impl futures_io::AsyncRead for Receiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.io
            .poll_stream_io(cx, Direction::Read, len, |mut s| s.read(buf))
    }
}

impl AsRawFd for Sender {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for Sender {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl AsRawFd for Receiver {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for Receiver {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// Registers a pipe end at once when made inside a runtime, as tokio's:
/// its readiness then comes from the poller's first report, before the
/// first operation (a pipe end made elsewhere registers on first use, as
/// sockets do). A failure is left for that first operation to report.
fn registered<S: AsRawFd>(io: PollEvented<S>) -> PollEvented<S> {
    if crate::context::try_with_current(|_| ()).is_some() {
        let _ = io.register_now();
    }
    io
}

/// Whether `fd` is a pipe or FIFO (`fstat`'s `S_IFIFO`).
fn is_pipe(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open for the call (borrowed), and `stat` is valid for
    // writes of a `libc::stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fstat` succeeded, so it filled `stat` in.
    let mode = unsafe { stat.assume_init() }.st_mode;
    Ok(mode & libc::S_IFMT == libc::S_IFIFO)
}

/// `fcntl(F_GETFL)`: the descriptor's access mode and status flags.
fn file_flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: `fd` is open for the call; F_GETFL reads no memory of ours.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(flags)
    }
}
