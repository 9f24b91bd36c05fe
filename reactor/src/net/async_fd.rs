//! [`AsyncFd`]: readiness for any file descriptor, on the same per-P
//! pollers as numa_rt's own sockets (the guide is on the type).

use crate::driver::waiters::wait_fn;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{ready, Context, Poll};

use super::{Interest, Ready};
use crate::driver::io::{Kind, ReadyEvent};
use crate::driver::registration::PollEvented;

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
/// refuses (a regular file: `EPERM`) fails [`AsyncFd::new`] at once. It is
/// deregistered when the `AsyncFd` drops or [`into_inner`](AsyncFd::into_inner)
/// returns the object; the object (and so the descriptor) outlives the
/// registration.
///
/// Like every source, a new `AsyncFd` starts out assumed ready both ways:
/// the first `readable()` returns at once and the first syscall decides.
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
    /// Registers `inner`'s descriptor for reading and writing.
    ///
    /// # Errors
    /// When the poller refuses the descriptor (`EPERM` for a regular file)
    /// or the runtime has shut down; `inner` is dropped.
    ///
    /// # Panics
    /// Outside a numa_rt runtime (a task, `block_on`, or an entered handle).
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// Registers `inner`'s descriptor for the directions in `interest` only.
    /// Waiting on the other direction returns at most once (the initial
    /// "assumed ready"), then never.
    ///
    /// # Errors and panics
    /// As [`AsyncFd::new`].
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        let io = PollEvented::new(inner, interest.to_mio(), Kind::Stream);
        io.register_now()?;
        Ok(AsyncFd { io, interest })
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

    fn poll_events(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
    ) -> Poll<io::Result<[Option<ReadyEvent>; 2]>> {
        self.io
            .poll_ready_any(cx, interest.is_readable(), interest.is_writable())
    }

    /// Polls for read readiness; the guard's `try_io` runs the read.
    pub fn poll_read_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let events = ready!(self.poll_events(cx, Interest::READABLE))?;
        Poll::Ready(Ok(AsyncFdReadyGuard { fd: self, events }))
    }

    /// Polls for write readiness; the guard's `try_io` runs the write.
    pub fn poll_write_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let events = ready!(self.poll_events(cx, Interest::WRITABLE))?;
        Poll::Ready(Ok(AsyncFdReadyGuard { fd: self, events }))
    }

    /// [`poll_read_ready`](Self::poll_read_ready) with a guard that lends
    /// the object mutably.
    pub fn poll_read_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let events = ready!(self.poll_events(cx, Interest::READABLE))?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard { fd: self, events }))
    }

    /// [`poll_write_ready`](Self::poll_write_ready) with a guard that lends
    /// the object mutably.
    pub fn poll_write_ready_mut<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyMutGuard<'a, T>>> {
        let events = ready!(self.poll_events(cx, Interest::WRITABLE))?;
        Poll::Ready(Ok(AsyncFdReadyMutGuard { fd: self, events }))
    }

    /// Waits until the descriptor is ready in at least one direction of
    /// `interest`; [`AsyncFdReadyGuard::ready`] says which.
    pub async fn ready(&self, interest: Interest) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        let events = wait_fn(|cx| self.poll_events(cx, interest)).await?;
        Ok(AsyncFdReadyGuard { fd: self, events })
    }

    /// [`ready`](Self::ready) with a guard that lends the object mutably.
    pub async fn ready_mut(
        &mut self,
        interest: Interest,
    ) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        let events = wait_fn(|cx| self.poll_events(cx, interest)).await?;
        Ok(AsyncFdReadyMutGuard { fd: self, events })
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
    /// `WouldBlock`: the whole wait-try-clear loop in one call.
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        mut f: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let mut guard = self.ready(interest).await?;
            if let Ok(r) = guard.try_io(|fd| f(fd.get_ref())) {
                return r;
            }
        }
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
        // as long as `self` and so outlives the borrow.
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

/// The operation in [`try_io`](AsyncFdReadyGuard::try_io) returned
/// `WouldBlock`: the readiness was cleared; wait again.
#[derive(Debug)]
pub struct TryIoError(());

impl fmt::Display for TryIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the operation would block; readiness was cleared")
    }
}

impl std::error::Error for TryIoError {}

/// Readiness of an [`AsyncFd`] observed by a wait. Dropping the guard keeps
/// the readiness (the next wait returns at once); [`clear_ready`] or a
/// `WouldBlock` inside [`try_io`] forgets it.
///
/// [`clear_ready`]: AsyncFdReadyGuard::clear_ready
/// [`try_io`]: AsyncFdReadyGuard::try_io
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    fd: &'a AsyncFd<T>,
    /// What the wait saw for read and for write, cleared only on request.
    events: [Option<ReadyEvent>; 2],
}

/// Like [`AsyncFdReadyGuard`], lending the [`AsyncFd`] mutably.
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    fd: &'a mut AsyncFd<T>,
    events: [Option<ReadyEvent>; 2],
}

/// Clears what a guard observed, unless an event arrived since.
fn clear<T: AsRawFd>(fd: &AsyncFd<T>, events: &mut [Option<ReadyEvent>; 2]) {
    for ev in events.iter_mut().filter_map(Option::take) {
        fd.io.clear_readiness(ev);
    }
}

/// Runs `r`'s producer and turns `WouldBlock` into a cleared guard.
fn would_block<R>(r: io::Result<R>) -> Result<io::Result<R>, TryIoError> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(TryIoError(())),
        r => Ok(r),
    }
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    /// The readiness the wait saw.
    pub fn ready(&self) -> Ready {
        Ready::from_events(&self.events)
    }

    /// Forgets the readiness: the next wait waits for a new event. Call it
    /// after an operation returned `WouldBlock` outside [`try_io`](Self::try_io).
    pub fn clear_ready(&mut self) {
        clear(self.fd, &mut self.events);
    }

    /// Keeps the readiness (what dropping the guard does too).
    pub fn retain_ready(&mut self) {}

    /// Runs `f`; `WouldBlock` clears the readiness and gives [`TryIoError`],
    /// anything else is returned as `Ok(result)`.
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let r = would_block(f(self.fd));
        if r.is_err() {
            self.clear_ready();
        }
        r
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.fd
    }

    /// The wrapped object.
    pub fn get_inner(&self) -> &'a T {
        self.fd.get_ref()
    }
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    /// The readiness the wait saw.
    pub fn ready(&self) -> Ready {
        Ready::from_events(&self.events)
    }

    /// Forgets the readiness: the next wait waits for a new event.
    pub fn clear_ready(&mut self) {
        clear(self.fd, &mut self.events);
    }

    /// Keeps the readiness (what dropping the guard does too).
    pub fn retain_ready(&mut self) {}

    /// Runs `f` with the `AsyncFd` lent mutably; `WouldBlock` clears the
    /// readiness and gives [`TryIoError`].
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let r = would_block(f(self.fd));
        if r.is_err() {
            self.clear_ready();
        }
        r
    }

    /// The `AsyncFd`.
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.fd
    }

    /// The `AsyncFd`, mutably.
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.fd
    }

    /// The wrapped object.
    pub fn get_inner(&self) -> &T {
        self.fd.get_ref()
    }

    /// The wrapped object, mutably.
    pub fn get_inner_mut(&mut self) -> &mut T {
        self.fd.get_mut()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("fd", self.fd)
            .field("ready", &self.ready())
            .finish()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard")
            .field("fd", &*self.fd)
            .field("ready", &self.ready())
            .finish()
    }
}
