//! Unix-domain datagrams: [`UnixDatagram`].

use crate::driver::waiters::wait_fn;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;

use mio::Interest;

use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;

/// A Unix-domain datagram socket.
#[derive(Debug)]
pub struct UnixDatagram {
    io: PollEvented<mio::net::UnixDatagram>,
}

impl UnixDatagram {
    /// A socket bound to the filesystem `path`.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram::new(mio::net::UnixDatagram::bind(path)?))
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
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream),
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

    /// Sets the default peer for `send`/`recv`.
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.io.get_ref().connect(path)
    }

    /// Sends to the connected peer without waiting (`WouldBlock` when the
    /// socket is not writable; the readiness is then cleared).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send(buf))
    }

    /// Receives from the connected peer without waiting (`WouldBlock` when
    /// no datagram is queued; the readiness is then cleared).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |s| s.recv(buf))
    }

    /// Sends to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Write, |s| s.send(buf))).await
    }

    /// Receives from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv(buf))).await
    }

    /// Sends to the socket at `path`.
    pub async fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        wait_fn(|cx| {
            self.io
                .poll_io(cx, Direction::Write, |s| s.send_to(buf, path))
        })
        .await
    }

    /// Receives a datagram and its sender's address.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv_from(buf))).await
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
