//! Registering a socket with a P's io poller, lazily, and driving operations
//! on it.
//!
//! [`PollEvented`] owns a mio socket and registers it the first time it is
//! polled, with the poller of the P that polls it (a connection lives where
//! its task runs). Its operations follow one loop: take a unit of coop budget,
//! wait for readiness, try the syscall, and on `WouldBlock` forget the
//! readiness and wait again.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{ready, Context, Poll};

use mio::unix::SourceFd;
use mio::{Interest, Token};

use super::io::{shutdown_error, Direction, Kind, ReadyEvent, ScheduledIo, Wakeups, CLOSED};
use super::Shared;
use crate::{context, coop};

/// A source's membership in one P's io poller; deregisters on drop.
pub(crate) struct Registration {
    shared: Arc<Shared>,
    p: usize,
    token: usize,
    fd: RawFd,
    io: Arc<ScheduledIo>,
}

impl Registration {
    /// Registers `fd` with the current P's poller (round-robin off-worker).
    fn new(fd: RawFd, interest: Interest, kind: Kind) -> io::Result<Registration> {
        let (shared, p) = context::with_current(|r| (r.shared.clone(), r.pick_p()));
        let ps = &shared.ps[p];
        let io = Arc::new(ScheduledIo::new(kind));
        let token = {
            let mut sources = ps.sources.lock().unwrap_or_else(|e| e.into_inner());
            if shared.is_shutdown() {
                return Err(shutdown_error());
            }
            sources.insert(io.clone())
        };
        if let Err(e) = ps
            .registry
            .register(&mut SourceFd(&fd), Token(token), interest)
        {
            ps.sources
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(token);
            return Err(e);
        }
        Ok(Registration {
            shared,
            p,
            token,
            fd,
            io,
        })
    }

    fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        self.io.poll_ready(cx, dir)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let ps = &self.shared.ps[self.p];
        // The fd is still open (the owner drops its socket after this), so
        // this cannot hit a recycled descriptor. Failure (ENOENT after a
        // shutdown race) leaves nothing to undo.
        let _ = ps.registry.deregister(&mut SourceFd(&self.fd));
        let removed = ps
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.token);
        drop(removed);
        // Anyone still waiting (through a clone of a waker) learns the socket
        // is gone instead of hanging.
        let mut wakeups = Wakeups::default();
        self.io.set_readiness(CLOSED, &mut wakeups);
        wakeups.fire();
    }
}

/// A mio socket plus its lazy registration.
pub(crate) struct PollEvented<S: AsRawFd> {
    // Declared first so it drops (deregisters) before the socket closes.
    reg: OnceLock<Registration>,
    init: Mutex<()>,
    io: S,
    interest: Interest,
    kind: Kind,
}

impl<S: AsRawFd> PollEvented<S> {
    /// Wraps a nonblocking socket; nothing is registered until first use.
    pub(crate) fn new(io: S, interest: Interest, kind: Kind) -> PollEvented<S> {
        PollEvented {
            reg: OnceLock::new(),
            init: Mutex::new(()),
            io,
            interest,
            kind,
        }
    }

    pub(crate) fn get_ref(&self) -> &S {
        &self.io
    }

    /// The socket, mutably. The caller must not replace its descriptor: the
    /// registration (and its deregistration on drop) names the original fd.
    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// Registers now rather than at first use (`AsyncFd::new` reports a
    /// descriptor the poller refuses, such as a regular file, at once).
    pub(crate) fn register_now(&self) -> io::Result<()> {
        self.registration().map(drop)
    }

    fn registration(&self) -> io::Result<&Registration> {
        if let Some(r) = self.reg.get() {
            return Ok(r);
        }
        // Two tasks may poll a shared socket for the first time at once; the
        // init lock makes exactly one of them register it.
        let _init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.reg.get() {
            return Ok(r);
        }
        let r = Registration::new(self.io.as_raw_fd(), self.interest, self.kind)?;
        Ok(self.reg.get_or_init(|| r))
    }

    /// Waits for readiness in `dir` (taking one unit of coop budget).
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        ready!(coop::poll_proceed(cx));
        self.registration()?.poll_ready(cx, dir)
    }

    /// Waits until the socket is ready in at least one of the directions
    /// asked for, returning what each of them reported (taking one unit of
    /// coop budget). Both waker slots hold the task while it waits.
    pub(crate) fn poll_ready_any(
        &self,
        cx: &mut Context<'_>,
        read: bool,
        write: bool,
    ) -> Poll<io::Result<[Option<ReadyEvent>; 2]>> {
        ready!(coop::poll_proceed(cx));
        let reg = self.registration()?;
        let mut out = [None, None];
        for (i, dir) in [(read, Direction::Read), (write, Direction::Write)]
            .into_iter()
            .enumerate()
            .filter_map(|(i, (on, d))| on.then_some((i, d)))
        {
            if let Poll::Ready(r) = reg.poll_ready(cx, dir) {
                out[i] = Some(r?);
            }
        }
        if out.iter().all(Option::is_none) {
            return Poll::Pending;
        }
        Poll::Ready(Ok(out))
    }

    /// Runs `op` once if the socket is ready in one of the directions asked
    /// for, without waiting: not ready gives `WouldBlock` with no syscall,
    /// and `WouldBlock` from `op` forgets the readiness it was tried on.
    pub(crate) fn try_io<R>(
        &self,
        read: bool,
        write: bool,
        op: impl FnOnce(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let reg = self.registration()?;
        let mut evs = [None, None];
        for (i, dir) in [(read, Direction::Read), (write, Direction::Write)]
            .into_iter()
            .enumerate()
            .filter_map(|(i, (on, d))| on.then_some((i, d)))
        {
            evs[i] = reg.io.ready_now(dir).transpose()?;
        }
        if evs.iter().all(Option::is_none) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let r = op(&self.io);
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            for ev in evs.into_iter().flatten() {
                reg.io.clear_readiness(ev);
            }
        }
        r
    }

    /// Forgets readiness after an operation returned `WouldBlock`.
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        if let Some(r) = self.reg.get() {
            r.io.clear_readiness(ev);
        }
    }

    /// Runs `op` when the socket is ready in `dir`, retrying on `WouldBlock`.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        ready!(coop::poll_proceed(cx));
        let reg = self.registration()?;
        loop {
            let ev = ready!(reg.poll_ready(cx, dir))?;
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => reg.io.clear_readiness(ev),
                r => return Poll::Ready(r),
            }
        }
    }

    /// Like [`poll_io`](Self::poll_io) for stream reads and writes of `len`
    /// bytes: a transfer shorter than asked (but not 0, which is end of file
    /// for reads) means the socket is drained (edge-triggered: no more data,
    /// or no more send-buffer room), so readiness is cleared right away
    /// instead of costing one more syscall that returns `WouldBlock` (tokio
    /// does the same). Readiness that arrived meanwhile is kept (ticks).
    pub(crate) fn poll_stream_io(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        ready!(coop::poll_proceed(cx));
        let reg = self.registration()?;
        loop {
            let ev = ready!(reg.poll_ready(cx, dir))?;
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => reg.io.clear_readiness(ev),
                Ok(n) if n > 0 && n < len => {
                    reg.io.clear_readiness(ev);
                    return Poll::Ready(Ok(n));
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Deregisters and returns the socket (still in nonblocking mode).
    pub(crate) fn into_inner(self) -> S {
        let PollEvented { reg, io, .. } = self;
        drop(reg);
        io
    }
}

impl<S: AsRawFd + std::fmt::Debug> std::fmt::Debug for PollEvented<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.io.fmt(f)
    }
}
