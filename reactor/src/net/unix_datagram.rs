//! Unix-domain datagrams: [`UnixDatagram`], with tokio's API: the async
//! operations, their `poll_*` forms (`ReadBuf` in, the sender's address
//! out), the `try_*` forms and the `BufMut` receives (`recv_buf` family).
//!
//! A path that starts with a NUL byte names a Linux abstract socket (as
//! tokio's Unix streams take it, and here datagrams too): `bind`,
//! `connect`, `send_to` and their forms accept one. Receives into memory
//! that may be uninitialised go through socket2 (see the `udp` module).

use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::task::{ready, Context, Poll};

use bytes::BufMut;
use socket2::{SockAddr, SockRef};
use tokio::io::ReadBuf;

use super::udp::{filled, recv_buf_mut, uninit_of};
use super::unix::{from_sock_addr, std_addr};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;
use crate::driver::waiters::wait_fn;

/// A Unix-domain datagram socket. Share it between tasks through an `Arc`:
/// every task waiting in a direction is woken by that direction's next
/// event.
#[derive(Debug)]
pub struct UnixDatagram {
    io: PollEvented<mio::net::UnixDatagram>,
}

/// The socket address `path` names: a filesystem path, or (leading NUL, on
/// Linux) an abstract name.
fn target(path: &Path) -> io::Result<SockAddr> {
    SockAddr::unix(path)
}

impl UnixDatagram {
    /// A socket bound to `path`: a filesystem path (which must not exist
    /// yet), or on Linux a leading NUL byte and an abstract name.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        crate::context::check_not_shut_down()?;
        UnixDatagram::bind_addr(&std_addr(path.as_ref())?)
    }

    /// A socket bound to `addr` (a pathname or abstract address).
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram::new(mio::net::UnixDatagram::bind_addr(addr)?))
    }

    /// A socket bound to no address.
    pub fn unbound() -> io::Result<UnixDatagram> {
        Ok(UnixDatagram::new(mio::net::UnixDatagram::unbound()?))
    }

    /// A connected pair of sockets.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::new(a), UnixDatagram::new(b)))
    }

    fn new(s: mio::net::UnixDatagram) -> UnixDatagram {
        UnixDatagram {
            io: PollEvented::new(
                s,
                mio::Interest::READABLE | mio::Interest::WRITABLE,
                Kind::Stream,
            ),
        }
    }

    /// Wraps a std socket (switched to nonblocking mode).
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        socket.set_nonblocking(true)?;
        Ok(UnixDatagram::new(mio::net::UnixDatagram::from_std(socket)))
    }

    /// Deregisters and returns the std socket (still nonblocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixDatagram> {
        Ok(self.io.into_inner().into())
    }

    /// Sets the default peer for `send`/`recv` (a path, or on Linux a
    /// leading NUL byte and an abstract name).
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).connect(&target(path.as_ref())?)
    }

    /// Waits until the socket can send (tokio's `poll_send_ready`).
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_ready(cx)
    }

    /// Waits until a datagram may be queued (tokio's `poll_recv_ready`).
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready(cx)
    }

    /// Sends to the connected peer without waiting (`WouldBlock` when the
    /// socket is not writable; the readiness is then cleared).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send(buf))
    }

    /// Sends to the socket at `path` without waiting.
    pub fn try_send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let to = target(path.as_ref())?;
        self.io
            .try_io(false, true, |s| SockRef::from(s).send_to(buf, &to))
    }

    /// Receives from the connected peer without waiting (`WouldBlock` when
    /// no datagram is queued; the readiness is then cleared).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |s| s.recv(buf))
    }

    /// Receives a datagram and its sender's address without waiting.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(true, false, |s| s.recv_from(buf))
    }

    /// Sends to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        wait_fn(|cx| self.poll_send(cx, buf)).await
    }

    /// Polls sending to the connected peer.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io.poll_io(cx, Direction::Write, |s| s.send(buf))
    }

    /// Receives from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv(buf))).await
    }

    /// Polls receiving from the connected peer into the unfilled part of
    /// `buf` (the length is what `buf` gained).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            SockRef::from(s).recv(uninit_of(buf))
        }))?;
        filled(buf, n);
        Poll::Ready(Ok(()))
    }

    /// [`try_recv`](Self::try_recv) into the spare capacity of `buf`, which
    /// is advanced past the datagram.
    pub fn try_recv_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.io.try_io(true, false, |s| {
            recv_buf_mut(buf, |dst| Ok((SockRef::from(s).recv(dst)?, ()))).map(|(n, ())| n)
        })
    }

    /// [`recv`](Self::recv) into the spare capacity of `buf`, which is
    /// advanced past the datagram.
    pub async fn recv_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        wait_fn(|cx| {
            self.io.poll_io(cx, Direction::Read, |s| {
                recv_buf_mut(buf, |dst| Ok((SockRef::from(s).recv(dst)?, ()))).map(|(n, ())| n)
            })
        })
        .await
    }

    /// [`try_recv_from`](Self::try_recv_from) into the spare capacity of
    /// `buf`, which is advanced past the datagram.
    pub fn try_recv_buf_from<B: BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        self.io
            .try_io(true, false, |s| recv_buf_mut(buf, |dst| recv_from(s, dst)))
    }

    /// [`recv_from`](Self::recv_from) into the spare capacity of `buf`,
    /// which is advanced past the datagram.
    pub async fn recv_buf_from<B: BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| {
            self.io.poll_io(cx, Direction::Read, |s| {
                recv_buf_mut(buf, |dst| recv_from(s, dst))
            })
        })
        .await
    }

    /// Sends to the socket at `path` (a path, or on Linux a leading NUL
    /// byte and an abstract name).
    pub async fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let to = target(path.as_ref())?;
        wait_fn(|cx| {
            self.io
                .poll_io(cx, Direction::Write, |s| SockRef::from(s).send_to(buf, &to))
        })
        .await
    }

    /// Polls sending to the socket at `path`.
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        path: impl AsRef<Path>,
    ) -> Poll<io::Result<usize>> {
        let to = target(path.as_ref())?;
        self.io
            .poll_io(cx, Direction::Write, |s| SockRef::from(s).send_to(buf, &to))
    }

    /// Receives a datagram and its sender's address.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv_from(buf))).await
    }

    /// Polls receiving a datagram into the unfilled part of `buf`; gives
    /// its sender's address (the length is what `buf` gained).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let (n, a) = ready!(self
            .io
            .poll_io(cx, Direction::Read, |s| recv_from(s, uninit_of(buf))))?;
        filled(buf, n);
        Poll::Ready(Ok(a))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Shuts down the read, write or both directions.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

/// `recvfrom(2)` into possibly uninitialised memory, with the sender's
/// address as std's type.
fn recv_from(
    s: &mio::net::UnixDatagram,
    dst: &mut [std::mem::MaybeUninit<u8>],
) -> io::Result<(usize, SocketAddr)> {
    let (n, a) = SockRef::from(s).recv_from(dst)?;
    Ok((n, from_sock_addr(&a)?))
}

super::readiness_impls!(UnixDatagram);

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixDatagram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl TryFrom<std::os::unix::net::UnixDatagram> for UnixDatagram {
    type Error = io::Error;

    /// tokio's conversion: [`UnixDatagram::from_std`].
    fn try_from(std: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(std)
    }
}
