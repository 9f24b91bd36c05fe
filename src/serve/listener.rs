//! What [`serve`](super::serve) accepts from: the [`Listener`] trait and
//! its implementations, [`ListenerExt::tap_io`], what an accept error does,
//! and the [`IncomingStream`] a make-service sees.

use std::fmt;
use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// A source of connections for [`serve`](super::serve): numa_rt's [`TcpListener`] and
/// [`UnixListener`], or a wrapper of one ([`ListenerExt::tap_io`]).
///
/// `accept` never fails: errors are handled inside as the module docs say.
pub trait Listener: Send + 'static {
    /// An accepted connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The peer's address.
    type Addr: Send;

    /// The next connection.
    fn accept(&mut self) -> impl Future<Output = (Self::Io, Self::Addr)> + Send;

    /// The address this listener is bound to.
    fn local_addr(&self) -> io::Result<Self::Addr>;
}

impl Listener for TcpListener {
    type Io = TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (TcpStream, std::net::SocketAddr) {
        loop {
            match TcpListener::accept(self).await {
                Ok((stream, addr)) => {
                    // Only fails on a socket that is already gone; hyper
                    // then sees the error on its first read.
                    let _ = stream.set_nodelay(true);
                    return (stream, addr);
                }
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        TcpListener::local_addr(self)
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;
    type Addr = crate::net::unix::SocketAddr;

    async fn accept(&mut self) -> (UnixStream, crate::net::unix::SocketAddr) {
        loop {
            match UnixListener::accept(self).await {
                Ok(conn) => return conn,
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<crate::net::unix::SocketAddr> {
        UnixListener::local_addr(self)
    }
}

/// What axum (and hyper 0.14's server before it) does with an accept error:
/// a connection that died in the backlog is skipped; anything else, such as
/// `EMFILE`, is logged and the loop waits a second, so that a process out of
/// file descriptors does not spin on an accept that keeps failing while its
/// connections close.
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    log_accept_error(&e);
    crate::time::sleep(ACCEPT_ERROR_BACKOFF).await;
}

/// How long the accept loop waits after an accept error that is not the
/// connection's own (axum's and hyper 0.14's figure).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_secs(1);

#[cfg(feature = "axum")]
fn log_accept_error(e: &io::Error) {
    tracing::error!("accept error: {e}");
}

#[cfg(not(feature = "axum"))]
fn log_accept_error(e: &io::Error) {
    eprintln!("numa_rt::serve: accept error: {e}");
}

/// Extra methods for [`Listener`]s.
pub trait ListenerExt: Listener + Sized {
    /// Runs `tap` on every accepted connection before it is served (to set
    /// socket options, for example), as axum's `tap_io`.
    fn tap_io<F>(self, tap: F) -> TapIo<Self, F>
    where
        F: FnMut(&mut Self::Io) + Send + 'static,
    {
        TapIo {
            listener: self,
            tap,
        }
    }
}

impl<L: Listener> ListenerExt for L {}

/// A [`Listener`] that runs a function on each accepted connection
/// ([`ListenerExt::tap_io`]).
pub struct TapIo<L, F> {
    listener: L,
    tap: F,
}

impl<L: fmt::Debug, F> fmt::Debug for TapIo<L, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TapIo")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl<L, F> Listener for TapIo<L, F>
where
    L: Listener,
    F: FnMut(&mut L::Io) + Send + 'static,
{
    type Io = L::Io;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (L::Io, L::Addr) {
        let (mut io, addr) = self.listener.accept().await;
        (self.tap)(&mut io);
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

/// An accepted connection, as the make-service sees it: the socket and the
/// peer's address (axum's type of the same name, for numa_rt's listeners).
pub struct IncomingStream<'a, L: Listener> {
    pub(super) io: &'a L::Io,
    pub(super) remote_addr: L::Addr,
}

impl<L: Listener> IncomingStream<'_, L> {
    /// The accepted socket.
    pub fn io(&self) -> &L::Io {
        self.io
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> &L::Addr {
        &self.remote_addr
    }
}

impl<L> fmt::Debug for IncomingStream<'_, L>
where
    L: Listener,
    L::Io: fmt::Debug,
    L::Addr: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncomingStream")
            .field("io", self.io)
            .field("remote_addr", &self.remote_addr)
            .finish()
    }
}
