//! [`File`]: an open file whose reads, writes and seeks run on the
//! blocking pool, one at a time, with tokio's semantics.

use std::fmt;
use std::fs::{Metadata, Permissions};
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tokio::sync::Mutex;

use super::{asyncify, background_failed, FileTimes, OpenOptions};
use crate::io::stdio::{Buf, MAX_BUF};
use crate::JoinHandle;

/// An open file (tokio's `fs::File`).
///
/// Reads, writes, seeks and flushes run on numa_rt's blocking pool, one at
/// a time; the file's methods taking `&self` (`sync_all`, `set_len`,
/// `metadata`, ...) wait for the operation in flight first.
///
/// - A read asks for as many bytes as the caller's buffer holds (up to
///   [`max_buf_size`](File::max_buf_size), 2 MiB by default); what the
///   caller's buffer could not take is kept for the next read.
/// - A write copies the caller's bytes (up to `max_buf_size`) and returns
///   at once; the write runs in the background. Its error, if any, is
///   returned by the next write, read-after-write, `flush`, `sync_all` or
///   `seek`. **Call [`flush`](crate::io::AsyncWriteExt::flush) (or
///   `sync_all`) before relying on the data being in the file**, and
///   before dropping the `File` if the write's outcome matters.
/// - [`AsyncSeek::start_seek`] fails while another operation is in flight
///   (as tokio's); `AsyncSeekExt::seek` flushes first, so it does not.
///
/// ```
/// use numa_rt::fs::File;
/// use numa_rt::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt, SeekFrom};
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// # let path = std::env::temp_dir().join(format!("numa_rt-file-doc-{}", std::process::id()));
/// let mut file = File::options().read(true).write(true).create(true).truncate(true).open(&path).await?;
/// file.write_all(b"0123456789").await?;
/// file.seek(SeekFrom::Start(4)).await?;
/// let mut four = [0; 4];
/// file.read_exact(&mut four).await?;
/// assert_eq!(&four, b"4567");
/// file.set_len(5).await?;
/// assert_eq!(file.metadata().await?.len(), 5);
/// # numa_rt::fs::remove_file(&path).await?;
/// # Ok(())
/// # }
/// ```
pub struct File {
    std: Arc<std::fs::File>,
    inner: Mutex<Inner>,
    max_buf_size: usize,
}

struct Inner {
    state: State,
    /// A background write's error, for the next operation to report.
    last_write_err: Option<io::ErrorKind>,
    /// The offset the last seek reached (what `poll_complete` returns
    /// when no seek is in flight, as tokio's).
    pos: u64,
}

enum State {
    /// The buffer: empty, or the unread rest of the last read.
    Idle(Option<Buf>),
    Busy(JoinHandle<(Op, Buf)>),
}

enum Op {
    Read(io::Result<usize>),
    Write(io::Result<()>),
    Seek(io::Result<u64>),
}

impl File {
    /// Opens a file for reading.
    ///
    /// # Errors
    /// As `std::fs::File::open`.
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Opens a file for writing, creating it or truncating it.
    ///
    /// # Errors
    /// As `std::fs::File::create`.
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Creates a new file for reading and writing, failing with
    /// `AlreadyExists` if it exists.
    ///
    /// # Errors
    /// As `std::fs::File::create_new`.
    pub async fn create_new(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await
    }

    /// An [`OpenOptions`] to open a file with.
    #[must_use]
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Wraps an open std file.
    pub fn from_std(std: std::fs::File) -> File {
        File {
            std: Arc::new(std),
            inner: Mutex::new(Inner {
                state: State::Idle(Some(Buf::new())),
                last_write_err: None,
                pos: 0,
            }),
            max_buf_size: MAX_BUF,
        }
    }

    /// Waits for the operation in flight, then flushes the file's data and
    /// metadata to the disk (`fsync`).
    ///
    /// # Errors
    /// A pending write's error, or `fsync`'s.
    pub async fn sync_all(&self) -> io::Result<()> {
        let mut inner = self.inner.lock().await;
        inner.complete_inflight().await;
        if let Some(kind) = inner.last_write_err.take() {
            return Err(kind.into());
        }
        let std = self.std.clone();
        asyncify(move || std.sync_all()).await
    }

    /// As [`sync_all`](File::sync_all), but only the data and the metadata
    /// needed to read it back (`fdatasync`).
    ///
    /// # Errors
    /// A pending write's error, or `fdatasync`'s.
    pub async fn sync_data(&self) -> io::Result<()> {
        let mut inner = self.inner.lock().await;
        inner.complete_inflight().await;
        if let Some(kind) = inner.last_write_err.take() {
            return Err(kind.into());
        }
        let std = self.std.clone();
        asyncify(move || std.sync_data()).await
    }

    /// Truncates or extends the file to `size` bytes, after the operation
    /// in flight. The file's offset is not moved.
    ///
    /// # Errors
    /// As `std::fs::File::set_len` (say, the file is not open for
    /// writing).
    pub async fn set_len(&self, size: u64) -> io::Result<()> {
        let mut inner = self.inner.lock().await;
        inner.complete_inflight().await;
        let mut buf = inner.take_buf()?;
        // Unread bytes of the last read: put the offset back first.
        let back = buf.discard_read();
        let std = self.std.clone();
        inner.state = State::Busy(crate::spawn_blocking(move || {
            let res = if back != 0 {
                (&*std).seek(SeekFrom::Current(back)).map(|_| ())
            } else {
                Ok(())
            };
            let res = res.and_then(|()| std.set_len(size)).map(|()| 0);
            (Op::Seek(res), buf)
        }));
        let op = poll_fn(|cx| inner.poll_op(cx)).await?;
        match op {
            Op::Seek(res) => res.map(|_| ()),
            _ => unreachable!("set_len started a seek"),
        }
    }

    /// The file's metadata.
    ///
    /// # Errors
    /// As `std::fs::File::metadata`.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let std = self.std.clone();
        asyncify(move || std.metadata()).await
    }

    /// A new `File` for the same open file (a `dup`: shared offset), after
    /// the operation in flight.
    ///
    /// # Errors
    /// As `std::fs::File::try_clone`.
    pub async fn try_clone(&self) -> io::Result<File> {
        self.inner.lock().await.complete_inflight().await;
        let std = self.std.clone();
        let clone = asyncify(move || std.try_clone()).await?;
        let mut file = File::from_std(clone);
        file.max_buf_size = self.max_buf_size;
        Ok(file)
    }

    /// Waits for the operation in flight and returns the std file.
    ///
    /// # Panics
    /// When a closure of this file still runs on the blocking pool (a
    /// `metadata` whose future was dropped mid-way, say).
    pub async fn into_std(mut self) -> std::fs::File {
        self.inner.get_mut().complete_inflight().await;
        Arc::try_unwrap(self.std).expect("a blocking operation still holds the file")
    }

    /// The std file, if no operation is in flight; otherwise the `File`
    /// back.
    #[allow(clippy::result_large_err)]
    pub fn try_into_std(mut self) -> Result<std::fs::File, File> {
        match Arc::try_unwrap(self.std) {
            Ok(std) => Ok(std),
            Err(std) => {
                self.std = std;
                Err(self)
            }
        }
    }

    /// Sets the file's permissions.
    ///
    /// # Errors
    /// As `std::fs::File::set_permissions`.
    pub async fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        let std = self.std.clone();
        asyncify(move || std.set_permissions(perm)).await
    }

    /// Sets the file's access and modification times, after the operation
    /// in flight.
    ///
    /// # Errors
    /// As `std::fs::File::set_times`.
    pub async fn set_times(&self, times: FileTimes) -> io::Result<()> {
        self.inner.lock().await.complete_inflight().await;
        let std = self.std.clone();
        asyncify(move || std.set_times(times)).await
    }

    /// Sets the file's modification time, after the operation in flight.
    ///
    /// # Errors
    /// As `std::fs::File::set_modified`.
    pub async fn set_modified(&self, time: std::time::SystemTime) -> io::Result<()> {
        self.set_times(FileTimes::new().set_modified(time)).await
    }

    /// The most bytes one read or write moves (2 MiB by default).
    ///
    /// # Panics
    /// When `max_buf_size` is 0.
    #[track_caller]
    pub fn set_max_buf_size(&mut self, max_buf_size: usize) {
        assert!(max_buf_size > 0, "`max_buf_size` must be greater than 0");
        self.max_buf_size = max_buf_size;
    }

    /// The most bytes one read or write moves.
    pub fn max_buf_size(&self) -> usize {
        self.max_buf_size
    }
}

impl Inner {
    /// The buffer of an idle file; an error if a failed blocking
    /// operation took it.
    fn take_buf(&mut self) -> io::Result<Buf> {
        match &mut self.state {
            State::Idle(buf) => Ok(buf.take().unwrap_or_default()),
            State::Busy(_) => Err(io::Error::other(
                "another operation on this file is in flight",
            )),
        }
    }

    /// Waits for the operation in flight: its outcome, the file idle
    /// again. `Ok(None)` when idle already.
    fn poll_op(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Op>> {
        let State::Busy(handle) = &mut self.state else {
            return Poll::Ready(Err(io::Error::other("no operation in flight")));
        };
        let res = ready!(Pin::new(handle).poll(cx));
        match res {
            Ok((op, buf)) => {
                self.state = State::Idle(Some(buf));
                Poll::Ready(Ok(op))
            }
            Err(e) => {
                self.state = State::Idle(Some(Buf::new()));
                Poll::Ready(Err(background_failed(e)))
            }
        }
    }

    /// Waits for the operation in flight; a write's error is returned.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(kind) = self.last_write_err.take() {
            return Poll::Ready(Err(kind.into()));
        }
        if let State::Idle(_) = self.state {
            return Poll::Ready(Ok(()));
        }
        match ready!(self.poll_op(cx))? {
            Op::Write(res) => Poll::Ready(res),
            Op::Read(_) => Poll::Ready(Ok(())),
            Op::Seek(res) => {
                if let Ok(pos) = res {
                    self.pos = pos;
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Waits for the operation in flight, keeping a write's error for the
    /// next operation to report.
    async fn complete_inflight(&mut self) {
        let res = poll_fn(|cx| self.poll_flush(cx)).await;
        if let Err(e) = res {
            self.last_write_err = Some(e.kind());
        }
    }
}

impl AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let inner = me.inner.get_mut();
        loop {
            if let State::Idle(_) = inner.state {
                let mut buf = inner.take_buf()?;
                if !buf.is_empty() || dst.remaining() == 0 {
                    buf.copy_to(dst);
                    inner.state = State::Idle(Some(buf));
                    return Poll::Ready(Ok(()));
                }
                let std = me.std.clone();
                let max = dst.remaining().min(me.max_buf_size);
                inner.state = State::Busy(crate::spawn_blocking(move || {
                    let res = buf.read_fd(std.as_fd(), max);
                    (Op::Read(res), buf)
                }));
            }
            match ready!(inner.poll_op(cx))? {
                Op::Read(Ok(_)) => {
                    if let State::Idle(Some(buf)) = &mut inner.state {
                        buf.copy_to(dst);
                    }
                    return Poll::Ready(Ok(()));
                }
                Op::Read(Err(e)) => return Poll::Ready(Err(e)),
                // A write or seek finished first: now read.
                Op::Write(Ok(())) => {}
                Op::Write(Err(e)) => inner.last_write_err = Some(e.kind()),
                Op::Seek(res) => {
                    if let Ok(pos) = res {
                        inner.pos = pos;
                    }
                }
            }
        }
    }
}

impl AsyncSeek for File {
    fn start_seek(self: Pin<&mut Self>, pos: SeekFrom) -> io::Result<()> {
        let me = self.get_mut();
        let inner = me.inner.get_mut();
        if let State::Busy(_) = inner.state {
            return Err(io::Error::other(
                "another operation on this file is in flight: call poll_complete before start_seek",
            ));
        }
        let mut buf = inner.take_buf()?;
        // The unread rest of a read: the file's offset is that far ahead
        // of the reader.
        let back = buf.discard_read();
        let (first, pos) = match pos {
            SeekFrom::Current(off) if back != 0 => match off.checked_add(back) {
                Some(off) => (None, SeekFrom::Current(off)),
                None => (Some(SeekFrom::Current(back)), pos),
            },
            _ if back != 0 => (Some(SeekFrom::Current(back)), pos),
            _ => (None, pos),
        };
        let std = me.std.clone();
        inner.state = State::Busy(crate::spawn_blocking(move || {
            let mut f = &*std;
            let res = match first {
                Some(first) => f.seek(first).and_then(|_| f.seek(pos)),
                None => f.seek(pos),
            };
            (Op::Seek(res), buf)
        }));
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let inner = self.get_mut().inner.get_mut();
        loop {
            if let State::Idle(_) = inner.state {
                return Poll::Ready(Ok(inner.pos));
            }
            match ready!(inner.poll_op(cx))? {
                Op::Seek(res) => {
                    if let Ok(pos) = res {
                        inner.pos = pos;
                    }
                    return Poll::Ready(res);
                }
                Op::Write(Err(e)) => inner.last_write_err = Some(e.kind()),
                Op::Write(Ok(())) | Op::Read(_) => {}
            }
        }
    }
}

impl File {
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        fill: impl FnOnce(&mut Buf, usize) -> usize,
    ) -> Poll<io::Result<usize>> {
        let inner = self.inner.get_mut();
        if let Some(kind) = inner.last_write_err.take() {
            return Poll::Ready(Err(kind.into()));
        }
        loop {
            if let State::Idle(_) = inner.state {
                let mut buf = inner.take_buf()?;
                let back = buf.discard_read();
                let n = fill(&mut buf, self.max_buf_size);
                let std = self.std.clone();
                inner.state = State::Busy(crate::spawn_blocking(move || {
                    let mut f = &*std;
                    let res = if back != 0 {
                        f.seek(SeekFrom::Current(back)).map(|_| ())
                    } else {
                        Ok(())
                    };
                    let res = res.and_then(|()| buf.write_to(&mut f));
                    (Op::Write(res), buf)
                }));
                return Poll::Ready(Ok(n));
            }
            match ready!(inner.poll_op(cx))? {
                Op::Write(res) => res?,
                Op::Read(_) => {}
                Op::Seek(res) => {
                    if let Ok(pos) = res {
                        inner.pos = pos;
                    }
                }
            }
        }
    }
}

impl AsyncWrite for File {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_with(cx, |buf, max| buf.copy_from(src, max))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_with(cx, |buf, max| buf.copy_from_bufs(bufs, max))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.get_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.get_mut().poll_flush(cx)
    }
}

impl From<std::fs::File> for File {
    fn from(std: std::fs::File) -> File {
        File::from_std(std)
    }
}

impl From<OwnedFd> for File {
    fn from(fd: OwnedFd) -> File {
        File::from_std(std::fs::File::from(fd))
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.std.as_raw_fd()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.std.as_fd()
    }
}

impl FromRawFd for File {
    /// # Safety
    /// `fd` is an open descriptor that nothing else owns (as
    /// `std::fs::File::from_raw_fd`).
    unsafe fn from_raw_fd(fd: RawFd) -> File {
        // SAFETY: the caller's promise, passed on.
        File::from_std(unsafe { std::fs::File::from_raw_fd(fd) })
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("numa_rt::fs::File")
            .field("std", &self.std)
            .finish()
    }
}
