//! UDP: [`UdpSocket`].

use crate::driver::waiters::wait_fn;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{Context, Poll};

use mio::Interest;

use super::{each_addr, readiness_impls, resolve, ToSocketAddrs};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;

/// A UDP socket. Share it between a sending and a receiving task through an
/// `Arc`: each direction has its own waker slot (one waiting task per
/// direction).
#[derive(Debug)]
pub struct UdpSocket {
    io: PollEvented<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to `addr` (the first address that works).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        each_addr(addr, |a| mio::net::UdpSocket::bind(a).map(UdpSocket::new)).await
    }

    fn new(s: mio::net::UdpSocket) -> UdpSocket {
        UdpSocket {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream),
        }
    }

    /// Wraps a std socket (switched to nonblocking mode).
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        Ok(UdpSocket::new(mio::net::UdpSocket::from_std(socket)))
    }

    /// Deregisters and returns the std socket (still nonblocking).
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        Ok(self.io.into_inner().into())
    }

    /// Sets the default peer for `send`/`recv` and filters incoming datagrams
    /// to it (the first resolved address that works).
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let mut last = None;
        for a in resolve(addr).await? {
            match self.io.get_ref().connect(a) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to try")))
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
        wait_fn(|cx| self.poll_recv(cx, buf)).await
    }

    /// Polls receiving from the connected peer.
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io.poll_io(cx, Direction::Read, |s| s.recv(buf))
    }

    /// Sends to `target`. A host name is resolved off the worker, on every
    /// call (resolve once with [`super::lookup_host`] when sending many
    /// datagrams); of its addresses, the first of this socket's family
    /// (IPv4 or IPv6) is used, or the first one when none matches.
    pub async fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let addrs = resolve(target).await?;
        let target = match addrs.as_slice() {
            [one] => *one,
            // Only names give several addresses: one getsockname here is
            // nothing next to the lookup.
            many => same_family_first(many, self.local_addr().map(|a| a.is_ipv6()).ok()),
        };
        wait_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Polls sending to `target`.
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.io
            .poll_io(cx, Direction::Write, |s| s.send_to(buf, target))
    }

    /// Receives a datagram and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// Polls receiving a datagram and its sender.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.io.poll_io(cx, Direction::Read, |s| s.recv_from(buf))
    }

    /// Receives a datagram without removing it from the queue.
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.peek_from(buf))).await
    }

    /// Receives a datagram from the connected peer without removing it from
    /// the queue.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.peek(buf))).await
    }

    /// Sends to the connected peer without waiting (`WouldBlock` when the
    /// socket is not writable; the readiness is then cleared).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send(buf))
    }

    /// Sends to `target` without waiting.
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send_to(buf, target))
    }

    /// Receives from the connected peer without waiting (`WouldBlock` when
    /// no datagram is queued; the readiness is then cleared).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |s| s.recv(buf))
    }

    /// Receives a datagram and its sender without waiting.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(true, false, |s| s.recv_from(buf))
    }

    /// Peeks at the next datagram and its sender without waiting.
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(true, false, |s| s.peek_from(buf))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

readiness_impls!(UdpSocket);

impl TryFrom<std::net::UdpSocket> for UdpSocket {
    type Error = io::Error;

    /// tokio's conversion: [`UdpSocket::from_std`].
    fn try_from(std: std::net::UdpSocket) -> io::Result<UdpSocket> {
        UdpSocket::from_std(std)
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// The first of `addrs` whose family is IPv6 when `v6` says so (IPv4 when
/// not), or the first of all when none matches or the family is unknown.
fn same_family_first(addrs: &[SocketAddr], v6: Option<bool>) -> SocketAddr {
    *addrs
        .iter()
        .find(|a| Some(a.is_ipv6()) == v6)
        .unwrap_or(&addrs[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_to_prefers_the_sockets_family() {
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        let v4: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(same_family_first(&[v6, v4], Some(false)), v4);
        assert_eq!(same_family_first(&[v6, v4], Some(true)), v6);
        assert_eq!(same_family_first(&[v6], Some(false)), v6, "none matches");
        assert_eq!(same_family_first(&[v6, v4], None), v6, "unknown family");
    }
}
