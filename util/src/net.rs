//! [`Listener`]: one trait over numa_rt's TCP and Unix listeners
//! (tokio-util's `net` module).
//!
//! tokio-util also gives its own `Either<L, R>` of two listeners inherent
//! `accept` and `local_addr` methods; `Either` is tokio-util's type
//! (re-exported in [`crate::either`]), which this crate cannot add inherent
//! methods to. Match on the `Either` and call [`Listener::accept`] on the
//! arm instead.
//!
//! ```
//! use numa_rt::net::TcpListener;
//! use numa_rt_util::net::Listener;
//!
//! async fn serve_one<L: Listener>(listener: &mut L) -> std::io::Result<L::Addr> {
//!     let (_io, peer) = listener.accept().await?;
//!     Ok(peer)
//! }
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> std::io::Result<()> {
//! let mut listener = TcpListener::bind("127.0.0.1:0").await?;
//! let addr = Listener::local_addr(&listener)?;
//! let client = numa_rt::spawn(numa_rt::net::TcpStream::connect(addr));
//! let peer = serve_one(&mut listener).await?;
//! assert_eq!(peer, client.await.unwrap()?.local_addr()?);
//! # Ok(())
//! # }
//! ```

use numa_rt::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use std::future::Future;
use std::io::Result;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A listener: [`TcpListener`] and [`UnixListener`].
pub trait Listener {
    /// The stream of an accepted connection.
    type Io: tokio::io::AsyncRead + tokio::io::AsyncWrite;
    /// The address type of this listener.
    type Addr;

    /// Polls for a connection.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Result<(Self::Io, Self::Addr)>>;

    /// Waits for a connection.
    fn accept(&mut self) -> ListenerAcceptFut<'_, Self>
    where
        Self: Sized,
    {
        ListenerAcceptFut { listener: self }
    }

    /// The address this listener is bound to.
    fn local_addr(&self) -> Result<Self::Addr>;
}

impl Listener for TcpListener {
    type Io = TcpStream;
    type Addr = std::net::SocketAddr;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Result<(TcpStream, Self::Addr)>> {
        TcpListener::poll_accept(self, cx)
    }

    fn local_addr(&self) -> Result<Self::Addr> {
        TcpListener::local_addr(self)
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;
    type Addr = std::os::unix::net::SocketAddr;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Result<(UnixStream, Self::Addr)>> {
        UnixListener::poll_accept(self, cx)
    }

    fn local_addr(&self) -> Result<Self::Addr> {
        UnixListener::local_addr(self)
    }
}

/// The future of [`Listener::accept`].
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct ListenerAcceptFut<'a, L> {
    listener: &'a mut L,
}

impl<L: Listener> Future for ListenerAcceptFut<'_, L> {
    type Output = Result<(L::Io, L::Addr)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.listener.poll_accept(cx)
    }
}
