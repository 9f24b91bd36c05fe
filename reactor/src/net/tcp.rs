//! TCP: [`TcpListener`], [`TcpStream`] and the stream's halves.

use crate::driver::waiters::wait_fn;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use mio::Interest;

use super::split::split_owned;
use super::{
    each_addr, readiness_impls, stream_impls, stream_try_impls, AcceptBackoff, ToSocketAddrs,
};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;

/// A TCP listening socket.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// use numa_rt_reactor::net::TcpListener;
/// let listener = TcpListener::bind("127.0.0.1:8080").await?;
/// loop {
///     let (stream, peer) = listener.accept().await?;
///     // spawn a task per connection
/// #   drop((stream, peer));
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct TcpListener {
    io: PollEvented<mio::net::TcpListener>,
    backoff: AcceptBackoff,
}

impl TcpListener {
    /// Binds to `addr` (the first address that works), with `SO_REUSEADDR`
    /// and a backlog of 1024.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        crate::context::check_not_shut_down()?;
        each_addr(addr, |a| {
            mio::net::TcpListener::bind(a).map(TcpListener::new)
        })
        .await
    }

    pub(crate) fn new(l: mio::net::TcpListener) -> TcpListener {
        TcpListener {
            io: PollEvented::new(l, Interest::READABLE, Kind::Listener),
            backoff: AcceptBackoff::default(),
        }
    }

    /// Waits for a connection. Tasks spawned right after a successful accept
    /// are spread round-robin across P's by the executor.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        wait_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (s, addr) = ready!(self.backoff.poll_accept(&self.io, cx, |l| l.accept()))?;
        Poll::Ready(Ok((TcpStream::new(s), addr)))
    }

    /// Wraps a std listener (switched to nonblocking mode).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        Ok(TcpListener::new(mio::net::TcpListener::from_std(listener)))
    }

    /// Deregisters and returns the std listener (still nonblocking).
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        Ok(self.io.into_inner().into())
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// Gets `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }
}

impl TryFrom<std::net::TcpListener> for TcpListener {
    type Error = io::Error;

    /// tokio's conversion: [`TcpListener::from_std`].
    fn try_from(std: std::net::TcpListener) -> io::Result<TcpListener> {
        TcpListener::from_std(std)
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// A TCP connection.
#[derive(Debug)]
pub struct TcpStream {
    pub(crate) io: PollEvented<mio::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr`, trying each resolved address in turn. A host
    /// name is resolved off the worker (see [`super::lookup_host`]).
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        crate::context::check_not_shut_down()?;
        let mut last = None;
        for a in super::resolve(addr).await? {
            match TcpStream::connect_addr(a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to try")))
    }

    /// A nonblocking connect, then: wait for writability and check
    /// `SO_ERROR` and the peer address.
    async fn connect_addr(addr: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connecting(mio::net::TcpStream::connect(addr)?).await
    }

    /// Waits for the connect in progress on `s` to finish. The stream
    /// starts ready in no direction (tokio's): the poller's first event
    /// says when the connection is up (writable), and `ready(READABLE)`
    /// waits for data instead of resolving at once.
    pub(crate) async fn connecting(s: mio::net::TcpStream) -> io::Result<TcpStream> {
        let s = TcpStream {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream)
                .reported(),
        };
        wait_fn(|cx| s.poll_connected(cx)).await?;
        Ok(s)
    }

    fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let ev = ready!(self.io.poll_ready(cx, Direction::Write))?;
            let sock = self.io.get_ref();
            if let Some(e) = sock.take_error()? {
                return Poll::Ready(Err(e));
            }
            match sock.peer_addr() {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => self.io.clear_readiness(ev),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    pub(crate) fn new(s: mio::net::TcpStream) -> TcpStream {
        TcpStream {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream),
        }
    }

    /// Wraps a connected std stream (switched to nonblocking mode).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream::new(mio::net::TcpStream::from_std(stream)))
    }

    /// Deregisters and returns the std stream (still nonblocking).
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        Ok(self.io.into_inner().into())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when true).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// Gets `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// Gets `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `SO_LINGER`: `Some(d)` makes close wait up to `d` for unsent
    /// data (`Some(0)` resets the connection on close); `None` is the default.
    pub fn set_linger(&self, linger: Option<std::time::Duration>) -> io::Result<()> {
        socket2::SockRef::from(self.io.get_ref()).set_linger(linger)
    }

    /// Gets `SO_LINGER`.
    pub fn linger(&self) -> io::Result<Option<std::time::Duration>> {
        socket2::SockRef::from(self.io.get_ref()).linger()
    }

    /// Sets a linger time of zero (`SO_LINGER`): dropping the stream then
    /// resets the connection (an RST, not a FIN) and drops unsent data,
    /// and the socket does not enter `TIME_WAIT` (tokio's
    /// `set_zero_linger`).
    pub fn set_zero_linger(&self) -> io::Result<()> {
        self.set_linger(Some(std::time::Duration::ZERO))
    }

    /// Shuts down the read, write or both directions at once (std's
    /// `shutdown`). Named apart so that tokio code's
    /// `stream.shutdown().await` (`AsyncWriteExt::shutdown`, the write
    /// direction) finds the trait method: an inherent `shutdown` would
    /// shadow it.
    pub fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Receives data without removing it from the queue (waits for some).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        wait_fn(|cx| self.io.poll_io(cx, Direction::Read, |s| s.peek(buf))).await
    }

    /// Polls [`peek`](Self::peek) into the unfilled part of `buf` (tokio's
    /// signature); gives the number of bytes peeked, which `buf` gained.
    pub fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        let n = ready!(self.io.poll_io(cx, Direction::Read, |s| {
            socket2::SockRef::from(s).peek(super::udp::uninit_of(buf))
        }))?;
        super::udp::filled(buf, n);
        Poll::Ready(Ok(n))
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Gets `TCP_QUICKACK`.
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    pub fn quickack(&self) -> io::Result<bool> {
        socket2::SockRef::from(self.io.get_ref()).tcp_quickack()
    }

    /// Sets `TCP_QUICKACK`: acknowledge at once rather than delaying ACKs
    /// (the kernel may turn it off again by itself).
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    pub fn set_quickack(&self, quickack: bool) -> io::Result<()> {
        socket2::SockRef::from(self.io.get_ref()).set_tcp_quickack(quickack)
    }

    /// Borrowed read and write halves, usable concurrently in one task.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (super::split::ReadHalf(self), super::split::WriteHalf(self))
    }

    /// Owned halves that can move to different tasks; see [`OwnedWriteHalf`]
    /// (dropping it shuts the write direction down).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split_owned(Arc::new(self))
    }
}

stream_impls!(TcpStream);
readiness_impls!(TcpStream);
stream_try_impls!(TcpStream);

/// The owned read half of a [`TcpStream`] (from [`TcpStream::into_split`]).
pub type OwnedReadHalf = super::OwnedReadHalf<TcpStream>;
/// The owned write half of a [`TcpStream`]; dropping it shuts writing down.
pub type OwnedWriteHalf = super::OwnedWriteHalf<TcpStream>;
/// The borrowed read half of a [`TcpStream`] (from [`TcpStream::split`]).
pub type ReadHalf<'a> = super::ReadHalf<'a, TcpStream>;
/// The borrowed write half of a [`TcpStream`].
pub type WriteHalf<'a> = super::WriteHalf<'a, TcpStream>;
/// Returned by `reunite` when the halves belong to different streams.
pub type ReuniteError = super::ReuniteError<TcpStream>;

impl TryFrom<std::net::TcpStream> for TcpStream {
    type Error = io::Error;

    /// tokio's conversion: [`TcpStream::from_std`].
    fn try_from(std: std::net::TcpStream) -> io::Result<TcpStream> {
        TcpStream::from_std(std)
    }
}
