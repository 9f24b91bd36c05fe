//! [`AsyncFd`]: readiness for any file descriptor, on the same per-P
//! pollers as numa_rt's own sockets (the guide is on the type).

use std::error::Error;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{ready, Context, Poll};

use super::Interest;
use crate::driver::io::{Kind, ReadyEvent};
use crate::driver::registration::PollEvented;
use crate::driver::waiters::wait_fn;

mod guard;
pub use guard::{AsyncFdReadyGuard, AsyncFdReadyMutGuard};

/// Readiness events for a file descriptor owned by `T` (a pipe, an eventfd,
/// a socket made by another library, a device).
///
/// `AsyncFd` does no I/O itself. A task waits for readiness
/// ([`readable`](AsyncFd::readable), [`writable`](AsyncFd::writable),
/// [`ready`](AsyncFd::ready)), gets a guard, and runs its nonblocking syscall
/// inside [`try_io`](AsyncFdReadyGuard::try_io): when the syscall says
/// `WouldBlock`, the guard forgets the readiness, so the next wait really
/// waits for the poller. The descriptor must be in nonblocking mode.
///
/// The fd is registered (edge-triggered) with the io poller of the P that
/// creates the `AsyncFd` when it is created, so a descriptor the poller
/// refuses (a regular file: `EPERM`) fails [`AsyncFd::register`] at once,
/// handing the object back ([`AsyncFdRegisterError::into_parts`]). It is
/// deregistered when the `AsyncFd` drops or [`into_inner`](AsyncFd::into_inner)
/// returns the object; the object (and so the descriptor) outlives the
/// registration.
///
/// # Readiness, as in tokio
///
/// - A new `AsyncFd` is ready in no direction until the poller reports: the
///   registration's first event says what the descriptor is ready for now
///   (a fresh socket is writable at once, and readable only once data
///   arrived), so `writable()` resolves after that event and `readable()`
///   waits for data.
/// - Readiness stays until cleared: by [`clear_ready`], or by a
///   `WouldBlock` inside [`try_io`]. After a clear, the next wait waits for
///   the poller's next edge. Dropping a guard keeps the readiness.
/// - Every task waiting on one `AsyncFd` through the `async` waits
///   ([`readable`](AsyncFd::readable), [`ready`](AsyncFd::ready), …) is woken
///   by an event that meets its interest, and gets a guard even if another
///   woken task cleared the readiness first (its [`ready`] may then be
///   empty). The `poll_*` functions keep only the last caller's waker per
///   direction.
/// - When the runtime shuts down (is dropped), pending waits and every later
///   one fail with an `io::ErrorKind::Other` error ("numa_rt runtime has shut
///   down", where tokio says "A Tokio 1.x context was found, but it is being
///   shutdown"); a guard obtained before still works, its `clear_ready` too.
///
/// [`clear_ready`]: AsyncFdReadyGuard::clear_ready
/// [`try_io`]: AsyncFdReadyGuard::try_io
/// [`ready`]: AsyncFdReadyGuard::ready
///
/// ```no_run
/// # async fn f(fd: numa_rt_reactor::net::AsyncFd<std::os::unix::net::UnixStream>) -> std::io::Result<()> {
/// use std::io::Read;
/// let mut buf = [0; 1024];
/// let n = loop {
///     let mut guard = fd.readable().await?;
///     match guard.try_io(|fd| fd.get_ref().read(&mut buf)) {
///         Ok(result) => break result?,
///         Err(_would_block) => continue,
///     }
/// };
/// # let _ = n; Ok(())
/// # }
/// ```
pub struct AsyncFd<T: AsRawFd> {
    io: PollEvented<T>,
    interest: Interest,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Registers `inner`'s descriptor for reading and writing; on failure
    /// the error hands `inner` back.
    ///
    /// # Safety
    ///
    /// As in tokio: `inner.as_raw_fd()` must be an open descriptor that
    /// stays open, and refers to the same open file description, until the
    /// `AsyncFd` is dropped, [`into_inner`](Self::into_inner) returns, or it
    /// is forgotten; every call of `inner.as_raw_fd()` meanwhile must return
    /// that descriptor. ([`AsFd`] for `AsyncFd` lends it on that promise.)
    ///
    /// # Errors
    ///
    /// When the poller refuses the descriptor (`EPERM` for a regular file,
    /// `EBADF` for no descriptor) or the runtime has shut down.
    ///
    /// # Panics
    ///
    /// Outside a numa_rt runtime (a task, `block_on`, or an entered handle).
    #[track_caller]
    pub unsafe fn register(inner: T) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        // SAFETY: the caller upholds `register_with_interest`'s contract,
        // which is this function's.
        unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE | Interest::WRITABLE) }
    }

    /// Registers `inner`'s descriptor for the readiness in `interest` only;
    /// on failure the error hands `inner` back. Waiting for readiness the
    /// descriptor was not registered for waits forever (or until shutdown).
    ///
    /// # Safety
    ///
    /// As [`AsyncFd::register`]: the descriptor stays open, and the same,
    /// for the `AsyncFd`'s life.
    ///
    /// # Errors and panics
    ///
    /// As [`AsyncFd::register`].
    #[track_caller]
    pub unsafe fn register_with_interest(
        inner: T,
        interest: Interest,
    ) -> Result<AsyncFd<T>, AsyncFdRegisterError<T>> {
        let io = PollEvented::new(inner, interest.to_mio(), Kind::Stream).reported();
        match io.register_now() {
            Ok(()) => Ok(AsyncFd { io, interest }),
            Err(cause) => Err(AsyncFdRegisterError {
                inner: io.into_inner(),
                cause,
            }),
        }
    }

    /// [`AsyncFd::register`] for callers that cannot write `unsafe`; the
    /// object is dropped on failure.
    ///
    /// tokio 1.54 deprecates its `new` as unsound (the descriptor's
    /// lifetime is promised, not checked); numa_rt keeps it undeprecated
    /// for its own callers. The same promise applies: see
    /// [`register`](Self::register)'s safety section.
    ///
    /// # Errors and panics
    ///
    /// As [`AsyncFd::register`].
    #[track_caller]
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// [`AsyncFd::register_with_interest`] without `unsafe` (see
    /// [`new`](Self::new)); the object is dropped on failure.
    ///
    /// # Errors and panics
    ///
    /// As [`AsyncFd::register`].
    #[track_caller]
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        // SAFETY: not checked, as in tokio's (deprecated) `with_interest`:
        // the caller makes register's promise (see `new`).
        Ok(unsafe { AsyncFd::register_with_interest(inner, interest) }?)
    }

    /// [`AsyncFd::new`] that hands the object back on failure (tokio's
    /// older name for [`register`](Self::register)).
    ///
    /// # Errors and panics
    ///
    /// As [`AsyncFd::register`].
    #[track_caller]
    pub fn try_new(inner: T) -> Result<AsyncFd<T>, AsyncFdTryNewError<T>> {
        AsyncFd::try_with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// [`AsyncFd::with_interest`] that hands the object back on failure.
    ///
    /// # Errors and panics
    ///
    /// As [`AsyncFd::register`].
    #[track_caller]
    pub fn try_with_interest(
        inner: T,
        interest: Interest,
    ) -> Result<AsyncFd<T>, AsyncFdTryNewError<T>> {
        // SAFETY: as in `with_interest`.
        unsafe { AsyncFd::register_with_interest(inner, interest) }
    }

    /// The wrapped object.
    pub fn get_ref(&self) -> &T {
        self.io.get_ref()
    }

    /// The wrapped object, mutably. Do not swap its descriptor for another:
    /// the registration belongs to the one it had when wrapped.
    pub fn get_mut(&mut self) -> &mut T {
        self.io.get_mut()
    }

    /// The interest the descriptor was registered with.
    pub fn interest(&self) -> Interest {
        self.interest
    }

    /// Deregisters the descriptor and returns the object (still open).
    pub fn into_inner(self) -> T {
        self.io.into_inner()
    }

    /// Polls for read readiness. Only the waker of the latest
    /// `poll_read_ready`/`poll_read_ready_mut` call is kept (write readiness
    /// keeps its own); use [`readable`](Self::readable) to wait from several
    /// tasks at once.
    pub fn poll_read_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let ev = ready!(self
            .io
            .poll_ready_mask(cx, Interest::READABLE.mask(), false))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            fd: self,
            event: Some(ev),
        }))
    }

    /// Polls for write readiness (one kept waker, as for reads).
    pub fn poll_write_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let ev = ready!(self
            .io
            .poll_ready_mask(cx, Interest::WRITABLE.mask(), false))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            fd: self,
            event: Some(ev),
        }))
    }

    /// [`poll_read_ready`](Self::poll_read_ready) with a guard that lends
    /// the object mutably.
    pub fn poll_read_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let ev = ready!(self
            .io
            .poll_ready_mask(cx, Interest::READABLE.mask(), false))?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard {
            fd: self,
            event: Some(ev),
        }))
    }

    /// [`poll_write_ready`](Self::poll_write_ready) with a guard that lends
    /// the object mutably.
    pub fn poll_write_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let ev = ready!(self
            .io
            .poll_ready_mask(cx, Interest::WRITABLE.mask(), false))?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard {
            fd: self,
            event: Some(ev),
        }))
    }

    /// Waits for an event of `interest` (an event that woke this wait
    /// counts even if another task cleared it since).
    async fn wait(&self, interest: Interest) -> io::Result<ReadyEvent> {
        let mask = interest.mask();
        wait_fn(|cx| self.io.poll_ready_mask(cx, mask, true)).await
    }

    /// Waits until the descriptor is ready for any of `interest`;
    /// [`AsyncFdReadyGuard::ready`] says for which (only readiness within
    /// `interest` shows there).
    pub async fn ready(&self, interest: Interest) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        let ev = self.wait(interest).await?;
        Ok(AsyncFdReadyGuard {
            fd: self,
            event: Some(ev),
        })
    }

    /// [`ready`](Self::ready) with a guard that lends the object mutably.
    pub async fn ready_mut(
        &mut self,
        interest: Interest,
    ) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        let ev = self.wait(interest).await?;
        Ok(AsyncFdReadyMutGuard {
            fd: self,
            event: Some(ev),
        })
    }

    /// Waits for read readiness.
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::READABLE).await
    }

    /// Waits for read readiness, lending the object mutably.
    pub async fn readable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::READABLE).await
    }

    /// Waits for write readiness.
    pub async fn writable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::WRITABLE).await
    }

    /// Waits for write readiness, lending the object mutably.
    pub async fn writable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        self.ready_mut(Interest::WRITABLE).await
    }

    /// Waits for `interest` and runs `f` until it does not return
    /// `WouldBlock` (each `WouldBlock` clears the readiness it ran on): the
    /// whole wait-try-clear loop in one call. `f` should do one kind of
    /// operation, matching one interest.
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        mut f: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let mask = interest.mask();
        wait_fn(|cx| loop {
            let ev = ready!(self.io.poll_ready_mask(cx, mask, true))?;
            match f(self.io.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.clear_readiness(ev),
                r => return Poll::Ready(r),
            }
        })
        .await
    }

    /// [`async_io`](Self::async_io) with the object lent mutably to `f`.
    pub async fn async_io_mut<R>(
        &mut self,
        interest: Interest,
        mut f: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        let mask = interest.mask();
        let io = &mut self.io;
        wait_fn(|cx| loop {
            let ev = ready!(io.poll_ready_mask(cx, mask, true))?;
            match f(io.get_mut()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => io.clear_readiness(ev),
                r => return Poll::Ready(r),
            }
        })
        .await
    }

    /// Runs `f` once if the descriptor is ready for `interest`, without
    /// waiting: not ready gives `WouldBlock` without calling `f`;
    /// `WouldBlock` from `f` clears that readiness and is returned.
    ///
    /// # Errors
    ///
    /// `f`'s error, `WouldBlock` when not ready, or the shutdown error.
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let Some(ev) = self.io.ready_now_mask(interest.mask())? else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let r = f(self.io.get_ref());
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.io.clear_readiness(ev);
        }
        r
    }

    /// [`try_io`](Self::try_io) with the object lent mutably to `f`.
    ///
    /// # Errors
    ///
    /// As [`try_io`](Self::try_io).
    pub fn try_io_mut<R>(
        &mut self,
        interest: Interest,
        f: impl FnOnce(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        let Some(ev) = self.io.ready_now_mask(interest.mask())? else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let r = f(self.io.get_mut());
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.io.clear_readiness(ev);
        }
        r
    }
}

impl<T: AsRawFd> AsRawFd for AsyncFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl<T: AsRawFd> AsFd for AsyncFd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor belongs to the wrapped object, which lives
        // as long as `self` and so outlives the borrow; `register`'s
        // contract keeps it open and the same meanwhile.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", self.io.get_ref())
            .field("interest", &self.interest)
            .finish()
    }
}

/// The error of [`AsyncFd::register`] and its siblings: why the poller
/// refused the descriptor, and the object, handed back.
pub struct AsyncFdRegisterError<T> {
    inner: T,
    cause: io::Error,
}

/// tokio's older name for [`AsyncFdRegisterError`] (what
/// [`AsyncFd::try_new`] returns).
pub type AsyncFdTryNewError<T> = AsyncFdRegisterError<T>;

impl<T> AsyncFdRegisterError<T> {
    /// The object that was not registered, and why.
    pub fn into_parts(self) -> (T, io::Error) {
        (self.inner, self.cause)
    }
}

impl<T> fmt::Display for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl<T> fmt::Debug for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.cause, f)
    }
}

impl<T> Error for AsyncFdRegisterError<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.cause)
    }
}

impl<T> From<AsyncFdRegisterError<T>> for io::Error {
    fn from(e: AsyncFdRegisterError<T>) -> io::Error {
        e.cause
    }
}

/// The operation in [`try_io`](AsyncFdReadyGuard::try_io) returned
/// `WouldBlock`: the readiness was cleared; wait again.
#[derive(Debug)]
pub struct TryIoError(());

impl fmt::Display for TryIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the operation would block; readiness was cleared")
    }
}

impl Error for TryIoError {}
