//! [`empty`], [`repeat`] and [`sink`]: tokio's always-ready readers and
//! writers, taking numa_rt's cooperative budget.
//!
//! tokio's own versions take *tokio's* budget, which outside a tokio task
//! is unlimited, so on numa_rt a loop over `io::empty()` never yielded and
//! a `timeout` around it never fired. These take a unit of numa_rt's budget
//! per operation (as tokio's do of tokio's), so such a loop returns
//! `Pending` every `numa_rt_reactor::coop::BUDGET` operations and the
//! runtime, and a `timeout` around it, get their turn.

use std::fmt;
use std::io::{self, IoSlice, SeekFrom};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use numa_rt_reactor::coop::poll_proceed;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

/// Reads end-of-file at once and accepts every write, discarding it
/// (tokio's `io::Empty`).
#[derive(Clone, Copy, Default)]
pub struct Empty {
    _p: (),
}

/// An empty reader (and a writer that discards), tokio's `io::empty`.
pub fn empty() -> Empty {
    Empty { _p: () }
}

/// Reads an endless run of one byte (tokio's `io::Repeat`).
#[derive(Clone, Copy)]
pub struct Repeat {
    byte: u8,
}

/// A reader that fills every read with `byte`, tokio's `io::repeat`.
pub fn repeat(byte: u8) -> Repeat {
    Repeat { byte }
}

/// Accepts every write, discarding it (tokio's `io::Sink`).
#[derive(Clone, Copy, Default)]
pub struct Sink {
    _p: (),
}

/// A writer that discards everything, tokio's `io::sink`.
pub fn sink() -> Sink {
    Sink { _p: () }
}

/// The write side shared by [`Empty`] and [`Sink`]: every write succeeds in
/// full, each taking a unit of budget.
macro_rules! discarding_writer {
    ($ty:ty) => {
        impl AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                ready!(poll_proceed(cx));
                Poll::Ready(Ok(buf.len()))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                ready!(poll_proceed(cx));
                Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()))
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                ready!(poll_proceed(cx));
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                ready!(poll_proceed(cx));
                Poll::Ready(Ok(()))
            }
        }
    };
}

discarding_writer!(Empty);
discarding_writer!(Sink);

impl AsyncRead for Empty {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(poll_proceed(cx));
        Poll::Ready(Ok(()))
    }
}

impl AsyncBufRead for Empty {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        ready!(poll_proceed(cx));
        Poll::Ready(Ok(&[]))
    }

    fn consume(self: Pin<&mut Self>, _: usize) {}
}

impl AsyncSeek for Empty {
    fn start_seek(self: Pin<&mut Self>, _: SeekFrom) -> io::Result<()> {
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        ready!(poll_proceed(cx));
        Poll::Ready(Ok(0))
    }
}

impl AsyncRead for Repeat {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(poll_proceed(cx));
        let n = buf.remaining();
        buf.initialize_unfilled_to(n).fill(self.byte);
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl fmt::Debug for Empty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Empty { .. }")
    }
}

impl fmt::Debug for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Repeat { .. }")
    }
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Sink { .. }")
    }
}
