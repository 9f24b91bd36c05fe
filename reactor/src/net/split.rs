//! Read and write halves of a stream (TCP or Unix), borrowed or owned.
//!
//! Both halves use the one registration of the stream: its read and write
//! waker slots are separate, so a reader task and a writer task can wait at
//! the same time.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::StreamOps;

/// A borrowed read half (from `split`).
#[derive(Debug)]
pub struct ReadHalf<'a, S>(pub(crate) &'a S);

/// A borrowed write half (from `split`); `poll_close` shuts writing down.
#[derive(Debug)]
pub struct WriteHalf<'a, S>(pub(crate) &'a S);

/// An owned read half (from `into_split`).
#[derive(Debug)]
pub struct OwnedReadHalf<S> {
    inner: Arc<S>,
}

/// An owned write half (from `into_split`). Dropping it shuts the write
/// direction down (the peer reads end-of-file), unless [`forget`] was called.
///
/// [`forget`]: OwnedWriteHalf::forget
pub struct OwnedWriteHalf<S> {
    inner: Arc<S>,
    /// Called on drop: shuts the write direction of the stream down.
    shutdown_on_drop: Option<fn(&S)>,
}

/// Splits an owned stream into its two halves.
pub(crate) fn split_owned<S: StreamOps>(s: Arc<S>) -> (OwnedReadHalf<S>, OwnedWriteHalf<S>) {
    fn shutdown<S: StreamOps>(s: &S) {
        // A peer that already left makes this fail; nothing to report on drop.
        let _ = s.shutdown_priv(std::net::Shutdown::Write);
    }
    (
        OwnedReadHalf { inner: s.clone() },
        OwnedWriteHalf {
            inner: s,
            shutdown_on_drop: Some(shutdown::<S>),
        },
    )
}

/// The halves passed to `reunite` came from different streams.
pub struct ReuniteError<S>(pub OwnedReadHalf<S>, pub OwnedWriteHalf<S>);

impl<S> fmt::Debug for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReuniteError(..)")
    }
}

impl<S> fmt::Display for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl<S> std::error::Error for ReuniteError<S> {}

impl<S> OwnedReadHalf<S> {
    /// Puts the stream back together (fails if the halves do not match).
    pub fn reunite(self, other: OwnedWriteHalf<S>) -> Result<S, ReuniteError<S>> {
        if !Arc::ptr_eq(&self.inner, &other.inner) {
            return Err(ReuniteError(self, other));
        }
        let mut other = other;
        other.shutdown_on_drop = None;
        drop(other);
        // The write half was the only other owner and is gone.
        Ok(Arc::into_inner(self.inner).expect("both halves reunited"))
    }
}

impl<S> OwnedWriteHalf<S> {
    /// Drops the half without shutting the write direction down.
    pub fn forget(mut self) {
        self.shutdown_on_drop = None;
    }

    /// Puts the stream back together (fails if the halves do not match).
    pub fn reunite(self, other: OwnedReadHalf<S>) -> Result<S, ReuniteError<S>> {
        other.reunite(self)
    }
}

impl<S> Drop for OwnedWriteHalf<S> {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown_on_drop {
            shutdown(&self.inner);
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for OwnedWriteHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedWriteHalf")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<S> AsRef<S> for OwnedReadHalf<S> {
    fn as_ref(&self) -> &S {
        &self.inner
    }
}

impl<S> AsRef<S> for OwnedWriteHalf<S> {
    fn as_ref(&self) -> &S {
        &self.inner
    }
}

impl<S> AsRef<S> for ReadHalf<'_, S> {
    fn as_ref(&self) -> &S {
        self.0
    }
}

impl<S> AsRef<S> for WriteHalf<'_, S> {
    fn as_ref(&self) -> &S {
        self.0
    }
}

fn read<S: StreamOps>(s: &S, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
    s.poll_read_priv(cx, buf)
}

impl<S: StreamOps> futures_io::AsyncRead for ReadHalf<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        read(self.0, cx, buf)
    }
}

impl<S: StreamOps> futures_io::AsyncRead for OwnedReadHalf<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        read(&*self.inner, cx, buf)
    }
}

impl<S: StreamOps> tokio::io::AsyncRead for ReadHalf<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        super::poll_read_buf(self.0, cx, buf)
    }
}

impl<S: StreamOps> tokio::io::AsyncRead for OwnedReadHalf<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        super::poll_read_buf(&*self.inner, cx, buf)
    }
}

macro_rules! write_impl {
    ($ty:ty, |$this:ident| $inner:expr) => {
        impl<S: StreamOps> futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let $this = &*self;
                $inner.poll_write_priv(cx, buf)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let $this = &*self;
                $inner.poll_write_vectored_priv(cx, bufs)
            }
            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let $this = &*self;
                Poll::Ready(super::shutdown_write($inner))
            }
        }
    };
}

/// tokio's `AsyncWrite` for a write half, like `write_impl!`.
macro_rules! tokio_write_impl {
    ($ty:ty, |$this:ident| $inner:expr) => {
        impl<S: StreamOps> tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let $this = &*self;
                $inner.poll_write_priv(cx, buf)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let $this = &*self;
                $inner.poll_write_vectored_priv(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let $this = &*self;
                Poll::Ready(super::shutdown_write($inner))
            }
        }
    };
}

tokio_write_impl!(WriteHalf<'_, S>, |this| this.0);
tokio_write_impl!(OwnedWriteHalf<S>, |this| &*this.inner);
write_impl!(WriteHalf<'_, S>, |this| this.0);
write_impl!(OwnedWriteHalf<S>, |this| &*this.inner);

/// tokio's readiness and `try_` methods on the halves of stream `$s`
/// (whose address type is `$addr`): each forwards to the stream.
macro_rules! half_methods {
    ($s:ty, $addr:ty) => {
        half_methods!(@read ReadHalf<'_, $s>, |this| this.0, $addr);
        half_methods!(@read OwnedReadHalf<$s>, |this| &*this.inner, $addr);
        half_methods!(@write WriteHalf<'_, $s>, |this| this.0, $addr);
        half_methods!(@write OwnedWriteHalf<$s>, |this| &*this.inner, $addr);
    };
    (@read $ty:ty, |$this:ident| $inner:expr, $addr:ty) => {
        impl $ty {
            /// Waits until the stream is ready for `interest` (see the
            /// stream's `ready`).
            pub async fn ready(&self, interest: super::Interest) -> io::Result<super::Ready> {
                let $this = self;
                $inner.ready(interest).await
            }

            /// Waits until a read may not block (then use a `try_` read).
            pub async fn readable(&self) -> io::Result<()> {
                let $this = self;
                $inner.readable().await
            }

            /// Reads what is there without waiting (see the stream's
            /// `try_read`).
            pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                let $this = self;
                $inner.try_read(buf)
            }

            /// `try_read` into several buffers.
            pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
                let $this = self;
                $inner.try_read_vectored(bufs)
            }

            /// `try_read` into the spare capacity of `buf`.
            pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                let $this = self;
                $inner.try_read_buf(buf)
            }

            /// The stream's peer address.
            pub fn peer_addr(&self) -> io::Result<$addr> {
                let $this = self;
                $inner.peer_addr()
            }

            /// The stream's local address.
            pub fn local_addr(&self) -> io::Result<$addr> {
                let $this = self;
                $inner.local_addr()
            }
        }
    };
    (@write $ty:ty, |$this:ident| $inner:expr, $addr:ty) => {
        impl $ty {
            /// Waits until the stream is ready for `interest` (see the
            /// stream's `ready`).
            pub async fn ready(&self, interest: super::Interest) -> io::Result<super::Ready> {
                let $this = self;
                $inner.ready(interest).await
            }

            /// Waits until a write may not block (then use a `try_` write).
            pub async fn writable(&self) -> io::Result<()> {
                let $this = self;
                $inner.writable().await
            }

            /// Writes what fits without waiting (see the stream's
            /// `try_write`).
            pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                let $this = self;
                $inner.try_write(buf)
            }

            /// `try_write` from several buffers.
            pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
                let $this = self;
                $inner.try_write_vectored(bufs)
            }

            /// The stream's peer address.
            pub fn peer_addr(&self) -> io::Result<$addr> {
                let $this = self;
                $inner.peer_addr()
            }

            /// The stream's local address.
            pub fn local_addr(&self) -> io::Result<$addr> {
                let $this = self;
                $inner.local_addr()
            }
        }
    };
}

half_methods!(super::TcpStream, std::net::SocketAddr);
half_methods!(super::UnixStream, std::os::unix::net::SocketAddr);

/// `peek` on a TCP read half, as tokio's halves have it.
macro_rules! tcp_peek {
    ($ty:ty, |$this:ident| $inner:expr) => {
        impl $ty {
            /// Receives data without removing it from the queue (waits for
            /// some); see `TcpStream::peek`.
            pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let $this = &*self;
                $inner.peek(buf).await
            }

            /// Polls [`peek`](Self::peek) into the unfilled part of `buf`;
            /// gives the number of bytes peeked.
            pub fn poll_peek(
                &mut self,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<usize>> {
                let $this = &*self;
                $inner.poll_peek(cx, buf)
            }
        }
    };
}

tcp_peek!(ReadHalf<'_, super::TcpStream>, |this| this.0);
tcp_peek!(OwnedReadHalf<super::TcpStream>, |this| &*this.inner);
