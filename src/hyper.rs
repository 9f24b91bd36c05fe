//! Running hyper 1.x on numa_rt (feature `hyper`).
//!
//! - [`Io`] adapts any futures-io stream (such as [`crate::net::TcpStream`])
//!   to `hyper::rt::{Read, Write}`.
//! - [`Executor`] implements `hyper::rt::Executor` with [`crate::spawn`], so
//!   the connection tasks hyper spawns (HTTP/2 streams, client connections)
//!   run on the numa_rt runtime.
//! - [`Timer`] implements `hyper::rt::Timer` with [`crate::time::Sleep`], for
//!   hyper's header-read and keep-alive timeouts.
//!
//! ```ignore
//! let listener = numa_rt::net::TcpListener::bind("127.0.0.1:3000").await?;
//! loop {
//!     let (stream, _) = listener.accept().await?;
//!     numa_rt::spawn(async move {
//!         let _ = hyper::server::conn::http1::Builder::new()
//!             .timer(numa_rt::hyper::Timer)
//!             .serve_connection(numa_rt::hyper::Io::new(stream), service)
//!             .await;
//!     });
//! }
//! ```

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_io::{AsyncRead, AsyncWrite};

/// A futures-io stream seen as a hyper stream.
#[derive(Debug)]
pub struct Io<T> {
    inner: T,
}

impl<T> Io<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Io<T> {
        Io { inner }
    }

    /// The wrapped stream.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the stream.
    pub fn into_inner(self) -> T {
        self.inner
    }

    fn project(self: Pin<&mut Self>) -> Pin<&mut T> {
        // SAFETY: `inner` is structurally pinned: `Io` never moves it out of
        // a pinned `Io` (`into_inner` and `inner_mut` need an unpinned `Io`,
        // which a pinned `!Unpin` value cannot give back), and `Io` has no
        // Drop impl.
        unsafe { self.map_unchecked_mut(|io| &mut io.inner) }
    }
}

impl<T: AsyncRead> hyper::rt::Read for Io<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // futures-io reads into initialized memory, so the unfilled part is
        // zeroed first. hyper hands a fresh uninitialized cursor over its
        // spare capacity to every read, so this zeroes that whole spare
        // capacity each time (about 3% of a hello-world request's CPU); a
        // path that reads numa_rt's own sockets into uninit memory would
        // avoid it.
        let unfilled = buf.initialize_unfilled();
        let len = unfilled.len();
        let n = match self.project().poll_read(cx, unfilled) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        // `AsyncRead` is a safe trait: a buggy reader may claim more bytes
        // than it was given, and hyper's cursor does not check (its
        // `advance` only adds to the filled count).
        if n > len {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("AsyncRead::poll_read reported {n} bytes read into a {len}-byte buffer"),
            )));
        }
        // SAFETY: `advance(n)` requires the first `n` unfilled bytes to be
        // initialized. `initialize_unfilled` initialized all `len` of them,
        // and `n <= len` was checked just above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite> hyper::rt::Write for Io<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_close(cx)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write_vectored(cx, bufs)
    }
}

/// Spawns hyper's background futures with [`crate::spawn`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Dropping the JoinHandle detaches the task; hyper does not join it.
        drop(crate::spawn(fut));
    }
}

/// hyper's timers on numa_rt's per-P timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

/// A numa_rt [`crate::time::Sleep`] as a `hyper::rt::Sleep`.
#[derive(Debug)]
struct HyperSleep(crate::time::Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(mut s) => Pin::new(&mut s.0).reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
