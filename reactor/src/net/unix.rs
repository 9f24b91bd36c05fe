//! Unix-domain streams: [`UnixListener`], [`UnixStream`] and the stream's halves.

use crate::driver::waiters::wait_fn;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use mio::Interest;

use super::split::split_owned;
use super::{readiness_impls, stream_impls, stream_try_impls, AcceptBackoff};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;

/// A Unix-domain listening socket.
#[derive(Debug)]
pub struct UnixListener {
    io: PollEvented<mio::net::UnixListener>,
    backoff: AcceptBackoff,
}

impl UnixListener {
    /// Binds to the filesystem `path` (which must not exist yet).
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        Ok(UnixListener::new(mio::net::UnixListener::bind(path)?))
    }

    fn new(l: mio::net::UnixListener) -> UnixListener {
        UnixListener {
            io: PollEvented::new(l, Interest::READABLE, Kind::Listener),
            backoff: AcceptBackoff::default(),
        }
    }

    /// Waits for a connection.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        wait_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (s, addr) = ready!(self.backoff.poll_accept(&self.io, cx, |l| l.accept()))?;
        Poll::Ready(Ok((UnixStream::new(s), addr)))
    }

    /// Wraps a std listener (switched to nonblocking mode).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener::new(mio::net::UnixListener::from_std(
            listener,
        )))
    }

    /// Deregisters and returns the std listener (still nonblocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        Ok(self.io.into_inner().into())
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

impl TryFrom<std::os::unix::net::UnixListener> for UnixListener {
    type Error = io::Error;

    /// tokio's conversion: [`UnixListener::from_std`].
    fn try_from(std: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        UnixListener::from_std(std)
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// A Unix-domain stream.
#[derive(Debug)]
pub struct UnixStream {
    pub(crate) io: PollEvented<mio::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let s = UnixStream::new(mio::net::UnixStream::connect(path)?);
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

    /// A connected pair of streams.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::new(a), UnixStream::new(b)))
    }

    fn new(s: mio::net::UnixStream) -> UnixStream {
        UnixStream {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream),
        }
    }

    /// Wraps a std stream (switched to nonblocking mode).
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        Ok(UnixStream::new(mio::net::UnixStream::from_std(stream)))
    }

    /// Deregisters and returns the std stream (still nonblocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
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

    /// Shuts down the read, write or both directions at once (std's
    /// `shutdown`). Named apart so that tokio code's
    /// `stream.shutdown().await` (`AsyncWriteExt::shutdown`, the write
    /// direction) finds the trait method: an inherent `shutdown` would
    /// shadow it.
    pub fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Borrowed read and write halves.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (super::split::ReadHalf(self), super::split::WriteHalf(self))
    }

    /// Owned halves; dropping the write half shuts writing down.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split_owned(Arc::new(self))
    }
}

stream_impls!(UnixStream);
readiness_impls!(UnixStream);
stream_try_impls!(UnixStream);

/// The owned read half of a [`UnixStream`] (from [`UnixStream::into_split`]).
pub type OwnedReadHalf = super::OwnedReadHalf<UnixStream>;
/// The owned write half of a [`UnixStream`]; dropping it shuts writing down.
pub type OwnedWriteHalf = super::OwnedWriteHalf<UnixStream>;
/// The borrowed read half of a [`UnixStream`] (from [`UnixStream::split`]).
pub type ReadHalf<'a> = super::ReadHalf<'a, UnixStream>;
/// The borrowed write half of a [`UnixStream`].
pub type WriteHalf<'a> = super::WriteHalf<'a, UnixStream>;
/// Returned by `reunite` when the halves belong to different streams.
pub type ReuniteError = super::ReuniteError<UnixStream>;

impl TryFrom<std::os::unix::net::UnixStream> for UnixStream {
    type Error = io::Error;

    /// tokio's conversion: [`UnixStream::from_std`].
    fn try_from(std: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        UnixStream::from_std(std)
    }
}
