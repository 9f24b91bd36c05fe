//! Async sockets: TCP, UDP and Unix-domain, on the per-P io pollers, and
//! the pieces around them: name resolution ([`lookup_host`]), a socket
//! builder ([`TcpSocket`]), readiness for any descriptor ([`AsyncFd`]).
//!
//! Every type wraps a nonblocking mio socket and registers it lazily, the
//! first time it is polled, with the io poller of the P that polls it (a
//! connection lives where its task runs); a socket first polled outside a
//! worker goes to a P chosen round-robin. Every operation takes one unit of
//! the task's coop budget, except the readiness waits (`ready`, `readable`,
//! `writable`), which take none, as tokio's.
//!
//! What a socket is first taken to be ready for follows tokio: an accepted
//! stream, a pair and a socket from `from_std` are assumed ready both ways
//! (their first operation tries the syscall at once); a stream from
//! `connect` starts ready in no direction, so `connect` waits for the
//! poller's writable report (then checks `SO_ERROR`) and `ready(READABLE)`
//! waits for data; a pipe end (`unix::pipe`) also starts ready in no
//! direction, registered as soon as it is made inside a runtime.
//!
//! Streams implement [`futures_io::AsyncRead`] and [`futures_io::AsyncWrite`]
//! (`poll_close` shuts the write half down), so any futures-io library works
//! on them.
//!
//! Addresses are taken as this module's [`ToSocketAddrs`]: IP addresses are
//! parsed in place, host names are resolved on a blocking thread, never on
//! the worker (see [`lookup_host`] and the `resolve` module source for
//! where that thread comes from).
//!
//! Besides the async operations, streams and datagram sockets have tokio's
//! readiness API: `ready(Interest)`, `readable()`, `writable()`, and
//! `try_read`/`try_write` (`try_send`/`try_recv` for datagrams), which never
//! wait: without readiness they return `WouldBlock` without a syscall, and a
//! `WouldBlock` from the syscall clears the readiness so the next wait waits.
//! `try_io` and `async_io` run the caller's own syscall the same way.
//!
//! The signatures are tokio 1.54's: the datagram `poll_recv`/`poll_recv_from`/
//! `poll_peek*` fill a `ReadBuf` (memory that may be uninitialised, read
//! through socket2, never viewed as `&mut [u8]`) and give the sender's
//! address; the `recv_buf` family and `try_read_buf` fill a `BufMut`'s
//! spare capacity. A Unix path starting with a NUL byte names a Linux
//! abstract socket.
//!
//! An accept that fails because the process or system ran out of file
//! descriptors (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) does not return the
//! error: the listener backs off for 10 ms and retries, so an accept loop
//! neither spins nor dies while descriptors are exhausted. It is not silent
//! either: the first failure of a stretch prints one line on stderr
//! (`numa_rt: accept on 127.0.0.1:8080 failed: Too many open files …`) and
//! its end another (`… accepts again after 37 retries, 412 ms`); a process
//! prints at most one such failure line every 10 s (`ACCEPT_REPORT_EVERY`),
//! saying how many it held back.

mod accept;
mod async_fd;
mod ready;
mod resolve;
mod split;
pub mod tcp;
mod tcp_socket;
mod udp;
pub mod unix;
mod unix_datagram;
mod unix_socket;

use std::io;
use std::net::SocketAddr;
use std::task::{ready, Context, Poll};

pub use self::async_fd::{
    AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, AsyncFdRegisterError, AsyncFdTryNewError,
    TryIoError,
};
pub use self::ready::{Interest, Ready};
pub use self::resolve::{
    lookup_host, set_blocking_hook, set_blocking_hook_if_unset, BlockingHook, BlockingJob,
    ToSocketAddrs,
};
pub use self::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
pub use self::tcp::{TcpListener, TcpStream};
pub use self::tcp_socket::TcpSocket;
pub use self::udp::UdpSocket;
pub use self::unix::{UnixListener, UnixStream};
pub use self::unix_datagram::UnixDatagram;
pub use self::unix_socket::UnixSocket;

pub(crate) use self::resolve::resolve;
use accept::AcceptBackoff;

/// Tries `f` on each resolved address in turn, returning the first success
/// or the last error.
async fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in resolve(addr).await? {
        match f(a) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no address to try")))
}

/// The stream operations the generic halves and trait impls need.
pub(crate) trait StreamOps {
    fn poll_read_priv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
    fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
    fn poll_write_vectored_priv(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>>;
    fn shutdown_priv(&self, how: std::net::Shutdown) -> io::Result<()>;
    /// A read into memory that may be uninitialised (tokio's `ReadBuf`):
    /// `read(2)` on the raw descriptor, so no `&mut [u8]` over
    /// uninitialised bytes is ever made.
    fn poll_read_uninit_priv(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>>;
}

/// Implements `StreamOps` for a wrapper whose field `io` is a
/// `PollEvented<mio socket>`, the futures-io traits for it and `&it`, and
/// `AsRawFd`/`AsFd`.
macro_rules! stream_impls {
    ($ty:ty) => {
        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(self.io.get_ref())
            }
        }
        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(self.io.get_ref())
            }
        }
        impl $crate::net::StreamOps for $ty {
            fn poll_read_priv(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                use std::io::Read;
                let len = buf.len();
                self.io
                    .poll_stream_io(cx, $crate::driver::io::Direction::Read, len, |mut s| {
                        s.read(buf)
                    })
            }
            fn poll_write_priv(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                use std::io::Write;
                let len = buf.len();
                self.io
                    .poll_stream_io(cx, $crate::driver::io::Direction::Write, len, |mut s| {
                        s.write(buf)
                    })
            }
            fn poll_write_vectored_priv(
                &self,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                use std::io::Write;
                let len = bufs.iter().map(|b| b.len()).sum();
                self.io
                    .poll_stream_io(cx, $crate::driver::io::Direction::Write, len, |mut s| {
                        s.write_vectored(bufs)
                    })
            }
            fn shutdown_priv(&self, how: std::net::Shutdown) -> std::io::Result<()> {
                self.io.get_ref().shutdown(how)
            }
            fn poll_read_uninit_priv(
                &self,
                cx: &mut std::task::Context<'_>,
                buf: &mut [std::mem::MaybeUninit<u8>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let len = buf.len();
                self.io
                    .poll_stream_io(cx, $crate::driver::io::Direction::Read, len, |s| {
                        $crate::net::read_uninit(std::os::fd::AsRawFd::as_raw_fd(s), buf)
                    })
            }
        }
        $crate::net::futures_io_impls!($ty);
        $crate::net::futures_io_impls!(&$ty);
        $crate::net::tokio_io_impls!($ty);
        $crate::net::tokio_io_impls!(&$ty);
    };
}

/// The futures-io traits for a type implementing (or dereferencing to) `StreamOps`.
macro_rules! futures_io_impls {
    ($ty:ty) => {
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::StreamOps::poll_read_priv(&*self, cx, buf)
            }
        }
        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::StreamOps::poll_write_priv(&*self, cx, buf)
            }
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::StreamOps::poll_write_vectored_priv(&*self, cx, bufs)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready($crate::net::shutdown_write(&*self))
            }
        }
    };
}
/// tokio's `AsyncRead`/`AsyncWrite` for a type implementing (or
/// dereferencing to) `StreamOps`: the same operations as the futures-io
/// impls, with tokio's `ReadBuf` filled in place and `poll_shutdown` for
/// `poll_close`. tokio's traits come from the tokio crate built without
/// any feature: no tokio runtime is compiled in.
macro_rules! tokio_io_impls {
    ($ty:ty) => {
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::net::poll_read_buf(&*self, cx, buf)
            }
        }
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::StreamOps::poll_write_priv(&*self, cx, buf)
            }
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::StreamOps::poll_write_vectored_priv(&*self, cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready($crate::net::shutdown_write(&*self))
            }
        }
    };
}

/// tokio's `poll_read`: reads into the unfilled part of `buf` without
/// zeroing it first, then marks what the kernel wrote as filled.
pub(crate) fn poll_read_buf<S: StreamOps + ?Sized>(
    s: &S,
    cx: &mut Context<'_>,
    buf: &mut tokio::io::ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    // SAFETY: `unfilled_mut` must not be used to de-initialise bytes: the
    // read below only stores into them (`read(2)` through a raw pointer).
    let unfilled = unsafe { buf.unfilled_mut() };
    let n = ready!(s.poll_read_uninit_priv(cx, unfilled))?;
    // SAFETY: `read(2)` returned `n`: it wrote the first `n` bytes of the
    // unfilled part (and `n` is at most its length).
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Poll::Ready(Ok(()))
}

/// `read(2)` on `fd` into possibly uninitialised memory.
pub(crate) fn read_uninit(
    fd: std::os::fd::RawFd,
    buf: &mut [std::mem::MaybeUninit<u8>],
) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole
    // call (a unique borrow), and `read(2)` writes at most that many;
    // `MaybeUninit<u8>` has no validity requirement to break.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// tokio's readiness API for a type whose field `io` is a `PollEvented`:
/// `ready`, `readable`, `writable`, `poll_read_ready`, `poll_write_ready`,
/// `try_io`.
macro_rules! readiness_impls {
    ($ty:ty) => {
        impl $ty {
            /// Waits until the socket is ready in at least one direction of
            /// `interest` and says which. Readiness can be spurious: the
            /// operation that follows may still return `WouldBlock`.
            ///
            /// As in tokio, this takes none of the task's coop budget (the
            /// `try_` operation that follows does no more than one syscall),
            /// so a loop of `writable().await` and `try_write` is not made
            /// to yield while the socket stays ready.
            ///
            /// Any interest works (`ERROR` too: a pending socket error); a
            /// task an event woke returns even if another task cleared the
            /// readiness first (the `Ready` may then be empty), as tokio's.
            pub async fn ready(
                &self,
                interest: $crate::net::Interest,
            ) -> std::io::Result<$crate::net::Ready> {
                let mask = interest.mask();
                let ev = $crate::coop::unconstrained($crate::driver::waiters::wait_fn(|cx| {
                    self.io.poll_ready_mask(cx, mask, true)
                }))
                .await?;
                Ok($crate::net::Ready::from_bits(ev.bits()))
            }

            /// Waits until a read may not block (then use a `try_` read).
            pub async fn readable(&self) -> std::io::Result<()> {
                self.ready($crate::net::Interest::READABLE).await.map(drop)
            }

            /// Waits until a write may not block (then use a `try_` write).
            pub async fn writable(&self) -> std::io::Result<()> {
                self.ready($crate::net::Interest::WRITABLE).await.map(drop)
            }

            /// Polls for read readiness; a stored waker is woken by the next
            /// read event.
            pub fn poll_read_ready(
                &self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.io
                    .poll_ready(cx, $crate::driver::io::Direction::Read)
                    .map_ok(drop)
            }

            /// Polls for write readiness.
            pub fn poll_write_ready(
                &self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.io
                    .poll_ready(cx, $crate::driver::io::Direction::Write)
                    .map_ok(drop)
            }

            /// Runs `f` (a nonblocking syscall on this socket's fd) if the
            /// socket is ready for `interest`; `WouldBlock` from `f` clears
            /// that readiness. Without readiness, `WouldBlock` at once.
            pub fn try_io<R>(
                &self,
                interest: $crate::net::Interest,
                f: impl FnOnce() -> std::io::Result<R>,
            ) -> std::io::Result<R> {
                self.io.try_io_mask(interest.mask(), f)
            }

            /// Waits until the socket is ready for `interest`, then runs `f`
            /// (a nonblocking syscall on this socket's fd); `WouldBlock`
            /// from `f` clears that readiness and waits again, anything
            /// else is returned (tokio's `async_io`).
            pub async fn async_io<R>(
                &self,
                interest: $crate::net::Interest,
                mut f: impl FnMut() -> std::io::Result<R>,
            ) -> std::io::Result<R> {
                let mask = interest.mask();
                $crate::driver::waiters::wait_fn(|cx| loop {
                    let ev = std::task::ready!(self.io.poll_ready_mask(cx, mask, true))?;
                    match f() {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            self.io.clear_readiness(ev)
                        }
                        r => return std::task::Poll::Ready(r),
                    }
                })
                .await
            }
        }
    };
}

/// `try_read`, `try_write` and their vectored forms, for a stream type.
macro_rules! stream_try_impls {
    ($ty:ty) => {
        impl $ty {
            /// Reads what is there without waiting: `WouldBlock` when
            /// nothing is (the readiness is then cleared), `Ok(0)` at end of
            /// file.
            pub fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
                use std::io::Read;
                self.io.try_io(true, false, |mut s| s.read(buf))
            }

            /// [`try_read`](Self::try_read) into the spare capacity of `buf`
            /// (a `BufMut`), which is advanced past what was read.
            pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> std::io::Result<usize> {
                self.io.try_io(true, false, |s| {
                    let fd = std::os::fd::AsRawFd::as_raw_fd(s);
                    $crate::net::udp::recv_buf_mut(buf, |dst| {
                        Ok(($crate::net::read_uninit(fd, dst)?, ()))
                    })
                    .map(|(n, ())| n)
                })
            }

            /// [`try_read`](Self::try_read) into several buffers (`readv`).
            pub fn try_read_vectored(
                &self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                use std::io::Read;
                self.io.try_io(true, false, |mut s| s.read_vectored(bufs))
            }

            /// Writes what fits without waiting: `WouldBlock` when the send
            /// buffer is full (the readiness is then cleared).
            pub fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
                use std::io::Write;
                self.io.try_io(false, true, |mut s| s.write(buf))
            }

            /// [`try_write`](Self::try_write) from several buffers (`writev`).
            pub fn try_write_vectored(
                &self,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::io::Result<usize> {
                use std::io::Write;
                self.io.try_io(false, true, |mut s| s.write_vectored(bufs))
            }
        }
    };
}
pub(crate) use {
    futures_io_impls, readiness_impls, stream_impls, stream_try_impls, tokio_io_impls,
};

impl<T: StreamOps + ?Sized> StreamOps for &T {
    fn poll_read_priv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        (**self).poll_read_priv(cx, buf)
    }
    fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        (**self).poll_write_priv(cx, buf)
    }
    fn poll_write_vectored_priv(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        (**self).poll_write_vectored_priv(cx, bufs)
    }
    fn shutdown_priv(&self, how: std::net::Shutdown) -> io::Result<()> {
        (**self).shutdown_priv(how)
    }
    fn poll_read_uninit_priv(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        (**self).poll_read_uninit_priv(cx, buf)
    }
}

/// `poll_close`: shuts the write direction down; a socket whose peer is
/// already gone counts as closed.
pub(crate) fn shutdown_write(s: &impl StreamOps) -> io::Result<()> {
    match s.shutdown_priv(std::net::Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}
