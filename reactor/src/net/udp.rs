//! UDP: [`UdpSocket`], with tokio's API: the async operations, their
//! `poll_*` forms (`ReadBuf` in, the sender's address out), the `try_*`
//! forms, the `BufMut` receives (`recv_buf` family) and the socket options.
//!
//! The receives into memory that may be uninitialised (`ReadBuf`'s unfilled
//! part, a `BufMut`'s spare capacity) go through socket2, whose `recv`
//! family takes `&mut [MaybeUninit<u8>]`: no `&mut [u8]` is ever made over
//! bytes nobody wrote.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{ready, Context, Poll};

use bytes::BufMut;
use socket2::{SockAddr, SockRef};
use tokio::io::ReadBuf;

use super::{each_addr, readiness_impls, resolve, ToSocketAddrs};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;
use crate::driver::waiters::wait_fn;

/// A UDP socket. Share it between tasks through an `Arc`: every task
/// waiting in a direction is woken by that direction's next event.
#[derive(Debug)]
pub struct UdpSocket {
    io: PollEvented<mio::net::UdpSocket>,
}

/// Receives into the spare capacity of `buf` with `recv`, then advances it
/// past what was written; gives back the length and what `recv` returned.
pub(super) fn recv_buf_mut<B: BufMut + ?Sized, R>(
    buf: &mut B,
    recv: impl FnOnce(&mut [MaybeUninit<u8>]) -> io::Result<(usize, R)>,
) -> io::Result<(usize, R)> {
    let dst = buf.chunk_mut();
    // SAFETY: `UninitSlice` is a transparent wrapper of `[MaybeUninit<u8>]`
    // (bytes documents `as_uninit_slice_mut` for exactly this); the slice
    // is only written to.
    let dst = unsafe { dst.as_uninit_slice_mut() };
    let (n, r) = recv(dst)?;
    // SAFETY: the syscall initialised the first `n` bytes of the chunk.
    unsafe { buf.advance_mut(n) };
    Ok((n, r))
}

/// An IP address out of socket2's: `recvfrom` on an IP socket always gives
/// one, but an error beats a panic if a platform leaves it out.
fn ip_addr(a: SockAddr) -> io::Result<SocketAddr> {
    a.as_socket()
        .ok_or_else(|| io::Error::other("the datagram's sender address is not an IP address"))
}

impl UdpSocket {
    /// Binds to `addr` (the first address that works).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        crate::context::check_not_shut_down()?;
        each_addr(addr, |a| mio::net::UdpSocket::bind(a).map(UdpSocket::new)).await
    }

    fn new(s: mio::net::UdpSocket) -> UdpSocket {
        UdpSocket {
            io: PollEvented::new(
                s,
                mio::Interest::READABLE | mio::Interest::WRITABLE,
                Kind::Stream,
            ),
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

    fn sock(&self) -> SockRef<'_> {
        SockRef::from(self.io.get_ref())
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

    /// Waits until the socket can send (tokio's `poll_send_ready`): then
    /// [`try_send`](Self::try_send) or [`try_send_to`](Self::try_send_to).
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_ready(cx)
    }

    /// Waits until a datagram may be queued (tokio's `poll_recv_ready`):
    /// then [`try_recv`](Self::try_recv) or [`try_recv_from`](Self::try_recv_from).
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready(cx)
    }

    /// Sends to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        wait_fn(|cx| self.poll_send(cx, buf)).await
    }

    /// Polls sending to the connected peer.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io.poll_io(cx, Direction::Write, |s| s.send(buf))
    }

    /// Sends to the connected peer without waiting (`WouldBlock` when the
    /// socket is not writable; the readiness is then cleared).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send(buf))
    }

    /// Receives from the connected peer; a datagram longer than `buf` is
    /// cut to its length.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv(buf))).await
    }

    /// Polls receiving from the connected peer into the unfilled part of
    /// `buf` (tokio's signature: the length is what `buf` gained).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            SockRef::from(s).recv(uninit_of(buf))
        }))?;
        filled(buf, n);
        Poll::Ready(Ok(()))
    }

    /// Receives from the connected peer without waiting (`WouldBlock` when
    /// no datagram is queued; the readiness is then cleared).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |s| s.recv(buf))
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
        self.io.try_io(true, false, |s| {
            recv_buf_mut(buf, |dst| {
                let (n, a) = SockRef::from(s).recv_from(dst)?;
                Ok((n, ip_addr(a)?))
            })
        })
    }

    /// [`recv_from`](Self::recv_from) into the spare capacity of `buf`,
    /// which is advanced past the datagram.
    pub async fn recv_buf_from<B: BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| {
            self.io.poll_io(cx, Direction::Read, |s| {
                recv_buf_mut(buf, |dst| {
                    let (n, a) = SockRef::from(s).recv_from(dst)?;
                    Ok((n, ip_addr(a)?))
                })
            })
        })
        .await
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

    /// Sends to `target` without waiting.
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.io.try_io(false, true, |s| s.send_to(buf, target))
    }

    /// Receives a datagram and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.recv_from(buf))).await
    }

    /// Polls receiving a datagram into the unfilled part of `buf`; gives
    /// its sender (tokio's signature: the length is what `buf` gained).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let (n, a) = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            SockRef::from(s).recv_from(uninit_of(buf))
        }))?;
        filled(buf, n);
        Poll::Ready(ip_addr(a))
    }

    /// Receives a datagram and its sender without waiting.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(true, false, |s| s.recv_from(buf))
    }

    /// Receives a datagram from the connected peer without removing it from
    /// the queue.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.peek(buf))).await
    }

    /// Polls [`peek`](Self::peek) into the unfilled part of `buf`.
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            SockRef::from(s).peek(uninit_of(buf))
        }))?;
        filled(buf, n);
        Poll::Ready(Ok(()))
    }

    /// [`peek`](Self::peek) without waiting.
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(true, false, |s| s.peek(buf))
    }

    /// Receives a datagram and its sender without removing it from the queue.
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.peek_from(buf))).await
    }

    /// Polls [`peek_from`](Self::peek_from) into the unfilled part of `buf`.
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let (n, a) = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            SockRef::from(s).peek_from(uninit_of(buf))
        }))?;
        filled(buf, n);
        Poll::Ready(ip_addr(a))
    }

    /// Peeks at the next datagram and its sender without waiting.
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(true, false, |s| s.peek_from(buf))
    }

    /// The sender of the datagram at the head of the queue (waits for one),
    /// leaving it queued.
    pub async fn peek_sender(&self) -> io::Result<SocketAddr> {
        wait_fn(|cx| self.poll_peek_sender(cx)).await
    }

    /// Polls [`peek_sender`](Self::peek_sender).
    pub fn poll_peek_sender(&self, cx: &mut Context<'_>) -> Poll<io::Result<SocketAddr>> {
        self.io.poll_io(cx, Direction::Read, |s| {
            ip_addr(SockRef::from(s).peek_sender()?)
        })
    }

    /// [`peek_sender`](Self::peek_sender) without waiting.
    pub fn try_peek_sender(&self) -> io::Result<SocketAddr> {
        self.io
            .try_io(true, false, |s| ip_addr(SockRef::from(s).peek_sender()?))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Gets `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets `SO_BROADCAST`: whether datagrams may go to a broadcast address.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// Gets `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_LOOP`: whether IPv4 multicast sent here loops back
    /// to this host's sockets.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v4(on)
    }

    /// Gets `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.io.get_ref().multicast_ttl_v4()
    }

    /// Sets `IP_MULTICAST_TTL`: how many hops IPv4 multicast sent here may
    /// take (1, the default, keeps it on the local network).
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_multicast_ttl_v4(ttl)
    }

    /// Gets `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v6()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v6(on)
    }

    /// Gets `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `IP_TTL`, the time-to-live of the datagrams sent here.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// Gets `IP_TOS`, the type-of-service field of the IPv4 datagrams sent
    /// here.
    pub fn tos_v4(&self) -> io::Result<u32> {
        self.sock().tos_v4()
    }

    /// Sets `IP_TOS`.
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        self.sock().set_tos_v4(tos)
    }

    /// tokio's older name for [`UdpSocket::tos_v4`].
    #[deprecated(note = "use `tos_v4()`")]
    pub fn tos(&self) -> io::Result<u32> {
        self.tos_v4()
    }

    /// tokio's older name for [`UdpSocket::set_tos_v4`].
    #[deprecated(note = "use `set_tos_v4()`")]
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        self.set_tos_v4(tos)
    }

    /// Gets `IPV6_TCLASS`, the traffic class of the IPv6 datagrams sent here.
    pub fn tclass_v6(&self) -> io::Result<u32> {
        self.sock().tclass_v6()
    }

    /// Sets `IPV6_TCLASS`.
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        self.sock().set_tclass_v6(tclass)
    }

    /// Gets `SO_BINDTODEVICE`: the interface the socket is bound to, if any.
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
        self.sock().device()
    }

    /// Sets `SO_BINDTODEVICE`: only datagrams that arrive on `interface` are
    /// received (`None` or an empty name removes the binding).
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
        self.sock().bind_device(interface)
    }

    /// Joins the IPv4 multicast group `multiaddr` on the interface with
    /// address `interface` (`UNSPECIFIED`: the system picks one).
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().join_multicast_v4(&multiaddr, &interface)
    }

    /// Joins the IPv6 multicast group `multiaddr` on the interface with
    /// index `interface` (0: the system picks one).
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().join_multicast_v6(multiaddr, interface)
    }

    /// Leaves an IPv4 multicast group (see [`join_multicast_v4`](Self::join_multicast_v4)).
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v4(&multiaddr, &interface)
    }

    /// Leaves an IPv6 multicast group (see [`join_multicast_v6`](Self::join_multicast_v6)).
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v6(multiaddr, interface)
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

/// The unfilled part of `buf`, for a receive to store into.
pub(super) fn uninit_of<'a>(buf: &'a mut ReadBuf<'_>) -> &'a mut [MaybeUninit<u8>] {
    // SAFETY: `unfilled_mut` must not be used to de-initialise bytes: every
    // caller hands the slice to a `recv(2)` family syscall, which only
    // stores into it.
    unsafe { buf.unfilled_mut() }
}

/// Marks the first `n` unfilled bytes of `buf` as received.
pub(super) fn filled(buf: &mut ReadBuf<'_>, n: usize) {
    // SAFETY: the receive that returned `n` wrote the first `n` bytes of the
    // unfilled part (`n` is at most its length: a datagram longer than the
    // room is cut, never overrun).
    unsafe { buf.assume_init(n) };
    buf.advance(n);
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
