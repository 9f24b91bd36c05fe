//! Async sockets: TCP, UDP and Unix-domain, on the per-P io pollers.
//!
//! Every type wraps a nonblocking mio socket and registers it lazily, the
//! first time it is polled, with the io poller of the P that polls it (a
//! connection lives where its task runs); a socket first polled outside a
//! worker goes to a P chosen round-robin. Every operation takes one unit of
//! the task's coop budget.
//!
//! Streams implement [`futures_io::AsyncRead`] and [`futures_io::AsyncWrite`]
//! (`poll_close` shuts the write half down), so any futures-io library works
//! on them.
//!
//! Addresses are taken as [`std::net::ToSocketAddrs`]; resolving a host name
//! through it blocks the calling thread (getaddrinfo). Pass IP addresses, or
//! resolve on a blocking thread first, where that matters.
//!
//! An accept that fails because the process or system ran out of file
//! descriptors (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) does not return the
//! error: the listener backs off for 10 ms and retries, so an accept loop
//! neither spins nor dies while descriptors are exhausted.

mod split;
pub mod tcp;
mod udp;
pub mod unix;
mod unix_datagram;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::task::{ready, Context, Poll};
use std::time::Duration;

pub use self::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
pub use self::tcp::{TcpListener, TcpStream};
pub use self::udp::UdpSocket;
pub use self::unix::{UnixListener, UnixStream};
pub use self::unix_datagram::UnixDatagram;
use crate::context;
use crate::driver::io::Direction;
use crate::driver::registration::PollEvented;
use crate::time::{sleep, Sleep};

/// How long a listener waits before retrying after running out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Resolves `addr` (may block, see the module docs).
fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(addrs)
}

/// Tries `f` on each address in turn, returning the first success or the
/// last error.
fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in resolve(addr)? {
        match f(a) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// Whether an accept error means descriptors (or kernel memory) ran out.
fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// The accept loop shared by TCP and Unix listeners, with its back-off timer.
#[derive(Default)]
struct AcceptBackoff {
    sleep: Mutex<Option<Sleep>>,
}

impl std::fmt::Debug for AcceptBackoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AcceptBackoff")
    }
}

impl AcceptBackoff {
    fn poll_accept<S: std::os::fd::AsRawFd, R>(
        &self,
        io: &PollEvented<S>,
        cx: &mut Context<'_>,
        mut accept: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let mut backoff = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = backoff.as_mut() {
                ready!(s.poll_deadline(cx, false));
                *backoff = None;
            }
            match ready!(io.poll_io(cx, Direction::Read, &mut accept)) {
                Ok(r) => {
                    context::set_accepted();
                    return Poll::Ready(Ok(r));
                }
                // Readiness is left set, so the retry tries accept again even
                // though no new edge will arrive for the queued connection.
                Err(e) if is_resource_exhaustion(&e) => *backoff = Some(sleep(ACCEPT_BACKOFF)),
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
        }
        $crate::net::futures_io_impls!($ty);
        $crate::net::futures_io_impls!(&$ty);
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
pub(crate) use {futures_io_impls, stream_impls};

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
}

/// `poll_close`: shuts the write direction down; a socket whose peer is
/// already gone counts as closed.
pub(crate) fn shutdown_write(s: &impl StreamOps) -> io::Result<()> {
    match s.shutdown_priv(std::net::Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}
