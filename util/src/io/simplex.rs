//! A one-way, in-memory byte pipe with a bounded buffer (tokio-util's
//! `io::simplex`), on numa_rt's cooperative budget.
//!
//! tokio-util's own `simplex` charges tokio's budget, which its build here
//! (without `rt`) compiles out: a loop writing into a pipe that always has
//! room would never yield. This one charges numa_rt's budget
//! ([`numa_rt::task::coop::poll_proceed`]) for every read and write that
//! moves bytes (one that waits or finds nothing to do gets its unit back),
//! as tokio-util's does with tokio's.
//!
//! ```
//! use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
//! use numa_rt_util::io::simplex;
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> std::io::Result<()> {
//! let (mut tx, mut rx) = simplex::new(4); // at most 4 bytes in flight
//! let writer = numa_rt::spawn(async move {
//!     tx.write_all(b"hello, world").await?;
//!     tx.shutdown().await // the reader sees end-of-file
//! });
//! let mut got = String::new();
//! rx.read_to_string(&mut got).await?;
//! assert_eq!(got, "hello, world");
//! writer.await??;
//! # Ok(())
//! # }
//! ```

use bytes::{Buf, BytesMut};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Creates a pipe holding at most `capacity` bytes not yet read.
///
/// # Panics
/// If `capacity` is 0.
#[track_caller]
pub fn new(capacity: usize) -> (Sender, Receiver) {
    assert_ne!(capacity, 0, "capacity must be greater than zero");
    let pipe = Arc::new(Mutex::new(Pipe {
        buf: BytesMut::with_capacity(capacity),
        capacity,
        closed: false,
        reader: None,
        writer: None,
    }));
    (Sender { pipe: pipe.clone() }, Receiver { pipe })
}

struct Pipe {
    buf: BytesMut,
    capacity: usize,
    /// Either end dropped, or the sender shut down.
    closed: bool,
    /// The reader waiting for bytes, the writer waiting for room.
    reader: Option<Waker>,
    writer: Option<Waker>,
}

fn lock(pipe: &Mutex<Pipe>) -> MutexGuard<'_, Pipe> {
    // A panic while holding the lock leaves the pipe consistent (every
    // update is a single step), so a poisoned lock is still usable.
    pipe.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stores `cx`'s waker in `slot` unless it is there already; returns the
/// one replaced (to drop outside the lock).
fn register(slot: &mut Option<Waker>, cx: &Context<'_>) -> Option<Waker> {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => None,
        _ => slot.replace(cx.waker().clone()),
    }
}

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "simplex has been closed")
}

/// Closes the pipe and wakes whoever waits on it.
fn close(pipe: &Mutex<Pipe>) {
    let (reader, writer) = {
        let mut p = lock(pipe);
        p.closed = true;
        (p.reader.take(), p.writer.take())
    };
    reader.into_iter().chain(writer).for_each(Waker::wake);
}

/// The reading end: `AsyncRead`. End-of-file once the sender is dropped or
/// shut down and the buffer is empty.
pub struct Receiver {
    pipe: Arc<Mutex<Pipe>>,
}

/// The writing end: `AsyncWrite`. Writes fail with `BrokenPipe` once the
/// receiver is dropped (or after `shutdown`).
pub struct Sender {
    pipe: Arc<Mutex<Pipe>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        close(&self.pipe);
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        close(&self.pipe);
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = lock(&self.pipe);
        f.debug_struct("Receiver")
            .field("buffered", &p.buf.len())
            .field("closed", &p.closed)
            .finish()
    }
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = lock(&self.pipe);
        f.debug_struct("Sender")
            .field("buffered", &p.buf.len())
            .field("capacity", &p.capacity)
            .field("closed", &p.closed)
            .finish()
    }
}

impl AsyncRead for Receiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let coop = ready!(numa_rt::task::coop::poll_proceed(cx));
        let mut p = lock(&self.pipe);
        let n = buf.remaining().min(p.buf.len());
        if n == 0 {
            if p.closed || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let old = register(&mut p.reader, cx);
            drop(p);
            drop(old);
            return Poll::Pending;
        }
        coop.made_progress();
        buf.put_slice(&p.buf[..n]);
        p.buf.advance(n);
        let writer = p.writer.take();
        drop(p);
        if let Some(w) = writer {
            w.wake();
        }
        Poll::Ready(Ok(()))
    }
}

impl Sender {
    /// Appends what fits of `bufs` (`Ready(Ok(0))` for nothing to write).
    fn poll_put(&self, cx: &mut Context<'_>, bufs: &[&[u8]]) -> Poll<io::Result<usize>> {
        let coop = ready!(numa_rt::task::coop::poll_proceed(cx));
        let mut p = lock(&self.pipe);
        if p.closed {
            return Poll::Ready(Err(closed_error()));
        }
        let wanted: usize = bufs.iter().map(|b| b.len()).sum();
        if wanted == 0 {
            return Poll::Ready(Ok(0));
        }
        let room = p.capacity - p.buf.len();
        if room == 0 {
            let old = register(&mut p.writer, cx);
            drop(p);
            drop(old);
            return Poll::Pending;
        }
        coop.made_progress();
        let mut left = room;
        for b in bufs {
            let n = b.len().min(left);
            p.buf.extend_from_slice(&b[..n]);
            left -= n;
            if left == 0 {
                break;
            }
        }
        let reader = p.reader.take();
        drop(p);
        if let Some(r) = reader {
            r.wake();
        }
        Poll::Ready(Ok(room - left))
    }
}

impl AsyncWrite for Sender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_put(cx, &[buf])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let slices: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
        self.poll_put(cx, &slices)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if lock(&self.pipe).closed {
            Poll::Ready(Err(closed_error()))
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        close(&self.pipe);
        Poll::Ready(Ok(()))
    }
}
