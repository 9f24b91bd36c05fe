//! Helpers for `AsyncRead`/`AsyncWrite` (tokio-util's `io` module).
//!
//! Everything but [`SyncIoBridge`], [`read_exact_arc`] and [`simplex`] is
//! tokio-util's own code, re-exported: [`ReaderStream`], [`StreamReader`],
//! [`SinkWriter`], [`CopyToBytes`], [`InspectReader`]/[`InspectWriter`],
//! [`read_buf`], [`poll_read_buf`], [`write_all_vectored`]. The first two
//! written here are the ones tokio-util keeps behind its `io-util` feature,
//! which compiles tokio's runtime in: [`SyncIoBridge`] blocks on a numa_rt
//! [`Handle`] instead of a tokio one. [`simplex`] is written here so that it
//! takes numa_rt's cooperative budget (tokio-util's takes tokio's).
//!
//! ```
//! use futures::StreamExt;
//! use numa_rt_util::io::ReaderStream;
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() {
//! let mut chunks = ReaderStream::new(&b"hello"[..]);
//! assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"hello");
//! assert!(chunks.next().await.is_none());
//! # }
//! ```

pub use tokio_util::io::*;

pub mod simplex;

use numa_rt::runtime::Handle;
use std::future::poll_fn;
use std::io::{self, BufRead, Read, Seek, Write};
use std::pin::pin;
use std::sync::Arc;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWrite,
    AsyncWriteExt, ReadBuf,
};

/// Reads exactly `len` bytes from `read` into a new `Arc<[u8]>`, with no
/// zeroing and no copy: the bytes are read straight into the `Arc`'s
/// allocation.
///
/// An `UnexpectedEof` error if `read` ends before `len` bytes; reads
/// interrupted (`ErrorKind::Interrupted`) are retried.
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// let bytes = numa_rt_util::io::read_exact_arc(&b"hello world"[..], 5).await?;
/// assert_eq!(&bytes[..], b"hello");
/// # Ok(())
/// # }
/// ```
pub async fn read_exact_arc<R: AsyncRead>(read: R, len: usize) -> io::Result<Arc<[u8]>> {
    let mut read = pin!(read);
    let mut arc = Arc::<[u8]>::new_uninit_slice(len);
    let slot = Arc::get_mut(&mut arc).expect("a new Arc has one owner");
    let mut buf = ReadBuf::uninit(slot);
    while buf.remaining() > 0 {
        let before = buf.filled().len();
        match poll_fn(|cx| read.as_mut().poll_read(cx, &mut buf)).await {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        if buf.filled().len() == before {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "early eof"));
        }
    }
    debug_assert_eq!(buf.filled().len(), len);
    // SAFETY: the loop ends only once `buf` is full, and `ReadBuf` counts
    // as filled only bytes that were initialized (by the reader, through
    // `ReadBuf`'s API, which never un-initializes): all `len` bytes are.
    Ok(unsafe { arc.assume_init() })
}

/// Uses an `AsyncRead`/`AsyncWrite`/`AsyncBufRead`/`AsyncSeek` as a
/// synchronous `std::io::Read`/`Write`/`BufRead`/`Seek`, by blocking on a
/// numa_rt runtime for each call ([`Handle::block_on`]).
///
/// For code that must take a std reader or writer (a compressor, a hasher,
/// a parser) and runs where blocking is allowed: in
/// [`numa_rt::spawn_blocking`] or a thread of its own, never in a task
/// (`Handle::block_on` panics on a runtime worker).
///
/// ```
/// use numa_rt_util::io::SyncIoBridge;
/// use std::io::Read;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let reader = &b"hello"[..];
/// let text = numa_rt::spawn_blocking(move || {
///     let mut bridge = SyncIoBridge::new(reader); // takes Handle::current()
///     let mut s = String::new();
///     bridge.read_to_string(&mut s).unwrap();
///     s
/// })
/// .await
/// .unwrap();
/// assert_eq!(text, "hello");
/// # }
/// ```
#[derive(Debug)]
pub struct SyncIoBridge<T> {
    src: T,
    rt: Handle,
}

impl<T: AsyncBufRead + Unpin> BufRead for SyncIoBridge<T> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.rt.block_on(AsyncBufReadExt::fill_buf(&mut self.src))
    }

    fn consume(&mut self, amt: usize) {
        AsyncBufReadExt::consume(&mut self.src, amt)
    }

    fn read_until(&mut self, byte: u8, buf: &mut Vec<u8>) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt
            .block_on(AsyncBufReadExt::read_until(src, byte, buf))
    }

    fn read_line(&mut self, buf: &mut String) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncBufReadExt::read_line(src, buf))
    }
}

impl<T: AsyncRead + Unpin> Read for SyncIoBridge<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncReadExt::read(src, buf))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncReadExt::read_to_end(src, buf))
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncReadExt::read_to_string(src, buf))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let src = &mut self.src;
        self.rt
            .block_on(AsyncReadExt::read_exact(src, buf))
            .map(drop)
    }
}

impl<T: AsyncWrite + Unpin> Write for SyncIoBridge<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncWriteExt::write(src, buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(AsyncWriteExt::flush(src))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(AsyncWriteExt::write_all(src, buf))
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(AsyncWriteExt::write_vectored(src, bufs))
    }
}

impl<T: AsyncSeek + Unpin> Seek for SyncIoBridge<T> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let src = &mut self.src;
        self.rt.block_on(AsyncSeekExt::seek(src, pos))
    }
}

impl<T: AsyncWrite> SyncIoBridge<T> {
    /// Whether the writer has an efficient `write_vectored` (std's
    /// `Write::is_write_vectored` is not stable yet).
    pub fn is_write_vectored(&self) -> bool {
        self.src.is_write_vectored()
    }
}

impl<T: AsyncWrite + Unpin> SyncIoBridge<T> {
    /// Shuts the writer down (`AsyncWriteExt::shutdown`), blocking until done.
    pub fn shutdown(&mut self) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(AsyncWriteExt::shutdown(src))
    }
}

impl<T: Unpin> SyncIoBridge<T> {
    /// Wraps `src`, blocking on the current runtime ([`Handle::current`]).
    ///
    /// # Panics
    /// Outside a numa_rt runtime. Call it in the task (or `block_on`) that
    /// hands the bridge to a blocking thread, or use
    /// [`new_with_handle`](Self::new_with_handle).
    #[track_caller]
    pub fn new(src: T) -> Self {
        Self::new_with_handle(src, Handle::current())
    }

    /// Wraps `src`, blocking on `rt`.
    pub fn new_with_handle(src: T, rt: Handle) -> Self {
        SyncIoBridge { src, rt }
    }

    /// The wrapped reader or writer.
    pub fn into_inner(self) -> T {
        self.src
    }
}

impl<T> AsMut<T> for SyncIoBridge<T> {
    fn as_mut(&mut self) -> &mut T {
        &mut self.src
    }
}

impl<T> AsRef<T> for SyncIoBridge<T> {
    fn as_ref(&self) -> &T {
        &self.src
    }
}
