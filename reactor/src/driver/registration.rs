//! Registering a socket with a P's io poller, lazily, and driving operations
//! on it.
//!
//! [`PollEvented`] owns a mio socket and registers it the first time it is
//! polled, with the poller of the P that polls it (a connection lives where
//! its task runs). Its operations follow one loop: take a unit of coop budget,
//! wait for readiness, try the syscall, and on `WouldBlock` forget the
//! readiness and wait again.
//!
//! # A source follows its task
//!
//! Tasks move: a watcher that drains another P's poller runs the woken task
//! on its own P, a spinner steals half a queue. A socket left registered
//! with its first P then reports every event through that P's poller, and
//! the M running the task sees it one nesting level late: at one echo
//! connection on 2 P's that was 4 `epoll_wait`s per round trip (its own
//! poller empty, the watch, the other P's poller, then its own again)
//! against tokio's 2. So once a source has been polled from the same other
//! P of its runtime [`MOVE_AFTER`] times in a row (twice that after each
//! move it has made: see `Registration::moves`), it moves there: added to
//! the new poller (whose `EPOLL_CTL_ADD` reports current readiness, so no
//! edge is lost), then removed from the old one. Events that land on both
//! in between set readiness on the same [`ScheduledIo`] twice, which is
//! harmless. The streak keeps a task that a steal moves once and back from
//! paying the two `epoll_ctl`s each way.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{ready, Context, Poll};

use mio::unix::SourceFd;
use mio::{Interest, Token};

use super::io::{
    shutdown_error, Direction, Kind, ReadyEvent, ScheduledIo, Wakeups, CLOSED, READABLE, WRITABLE,
};
use super::Shared;
use crate::{context, coop};

pub(crate) use crate::tuning::{MAX_BACKOFF, MOVE_AFTER};

/// A source's membership in one P's io poller; deregisters on drop.
pub(crate) struct Registration {
    shared: Arc<Shared>,
    /// The P whose poller holds the fd, and its token there. Both change
    /// only in [`Registration::move_to`], under the owning `PollEvented`'s
    /// init lock; other readers (the follow check) only take a hint from
    /// them (Relaxed).
    p: AtomicUsize,
    token: AtomicUsize,
    /// Polls from another P in a row: `(p + 1) << 32 | count`, 0 for none.
    /// A heuristic only (Relaxed; a lost update delays a move by a poll).
    streak: AtomicU64,
    /// Moves so far (saturating at `MAX_BACKOFF`): the streak a move needs
    /// doubles with each, so a task that keeps changing P's (stolen, woken
    /// by whichever watcher sees its event) stops dragging its socket along
    /// after a few moves.
    moves: AtomicU32,
    fd: RawFd,
    io: Arc<ScheduledIo>,
}

impl Registration {
    /// Registers `fd` with the current P's poller (round-robin off-worker).
    ///
    /// `home` is the runtime that was current when the socket was made.
    /// If it has been dropped or shut down since, this fails with the
    /// shutdown error instead of registering (tokio returns an error for a
    /// socket polled after its runtime is gone). Outside any runtime, the
    /// socket registers with its home, round-robin; a socket that never had
    /// one panics there, as tokio's constructors do outside a runtime.
    ///
    /// The source starts with the readiness bits `initial` (see
    /// [`PollEvented::reported`] and [`PollEvented::assume_ready`]).
    fn new(
        home: Option<&Weak<Shared>>,
        fd: RawFd,
        interest: Interest,
        kind: Kind,
        initial: usize,
    ) -> io::Result<Registration> {
        let home = match home.map(Weak::upgrade) {
            Some(None) => return Err(shutdown_error()),
            Some(Some(h)) if h.is_shutdown() => return Err(shutdown_error()),
            Some(Some(h)) => Some(h),
            None => None,
        };
        let (shared, p) = match (
            context::try_with_current(|r| (r.shared.clone(), r.pick_p())),
            home,
        ) {
            (Some(current), _) => current,
            (None, Some(h)) => {
                // Relaxed: only spreads load, as `Reactor::pick_p` does.
                let p = h.next_p.fetch_add(1, Relaxed) % h.ps.len();
                (h, p)
            }
            (None, None) => context::with_current(|r| (r.shared.clone(), r.pick_p())),
        };
        let ps = &shared.ps[p];
        let io = Arc::new(ScheduledIo::with_readiness(kind, initial));
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
            p: AtomicUsize::new(p),
            token: AtomicUsize::new(token),
            streak: AtomicU64::new(0),
            moves: AtomicU32::new(0),
            fd,
            io,
        })
    }

    /// Counts a poll from P `here` (the calling thread's) and says whether
    /// the source should now move there. Inline: one thread-local read and
    /// one compare on the usual path, where the task runs on the source's P.
    #[inline]
    fn polled_from(&self, here: usize) -> bool {
        if here == self.p.load(Relaxed) {
            if self.streak.load(Relaxed) != 0 {
                self.streak.store(0, Relaxed);
            }
            return false;
        }
        self.polled_away(here)
    }

    #[cold]
    #[inline(never)]
    fn polled_away(&self, here: usize) -> bool {
        let s = self.streak.load(Relaxed);
        let key = (here as u64 + 1) << 32;
        let n = if s & !0xffff_ffff == key {
            (s as u32).saturating_add(1)
        } else {
            1
        };
        if n < MOVE_AFTER << self.moves.load(Relaxed) {
            self.streak.store(key | u64::from(n), Relaxed);
            return false;
        }
        self.streak.store(0, Relaxed);
        // Only to a P of this source's own runtime (a socket of one
        // runtime may be polled by a task of another).
        here < self.shared.ps.len() && crate::context::is_current_shared(&self.shared)
    }

    /// Moves the fd to P `to`'s poller: added there first (the add reports
    /// what is ready now), then removed from the old one. Must be called
    /// under the owning `PollEvented`'s init lock (one mover at a time).
    /// On any failure the source stays where it was.
    fn move_to(&self, to: usize, interest: Interest) {
        let from = self.p.load(Relaxed);
        if from == to {
            return;
        }
        let shared = &*self.shared;
        let new = &shared.ps[to];
        let token = {
            let mut sources = new.sources.lock().unwrap_or_else(|e| e.into_inner());
            if shared.is_shutdown() {
                return;
            }
            sources.insert(self.io.clone())
        };
        if new
            .registry
            .register(&mut SourceFd(&self.fd), Token(token), interest)
            .is_err()
        {
            new.sources
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(token);
            return;
        }
        let old = &shared.ps[from];
        // The fd is open (its owner holds it), so this cannot hit a
        // recycled descriptor; a failure leaves a stale entry that reports
        // into the same ScheduledIo until the fd closes.
        let _ = old.registry.deregister(&mut SourceFd(&self.fd));
        let removed = old
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.token.load(Relaxed));
        drop(removed);
        self.p.store(to, Relaxed);
        self.token.store(token, Relaxed);
        let moves = self.moves.load(Relaxed);
        self.moves.store((moves + 1).min(MAX_BACKOFF), Relaxed);
        new.stats.moves_in.fetch_add(1, Relaxed);
    }

    fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        self.io.poll_ready(cx, dir)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let ps = &self.shared.ps[*self.p.get_mut()];
        // The fd is still open (the owner drops its socket after this), so
        // this cannot hit a recycled descriptor. Failure (ENOENT after a
        // shutdown race) leaves nothing to undo.
        let _ = ps.registry.deregister(&mut SourceFd(&self.fd));
        let removed = ps
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(*self.token.get_mut());
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
    /// The runtime current when the socket was made (see
    /// [`Registration::new`]): weak, so a socket does not keep a dropped
    /// runtime's drivers alive.
    home: Option<Weak<Shared>>,
    init: Mutex<()>,
    io: S,
    interest: Interest,
    kind: Kind,
    /// The readiness the source starts with when it registers: assumed
    /// ready both ways unless [`reported`](Self::reported) or
    /// [`assume_ready`](Self::assume_ready) said otherwise.
    initial: usize,
}

impl<S: AsRawFd> PollEvented<S> {
    /// Wraps a nonblocking socket; nothing is registered until first use.
    pub(crate) fn new(io: S, interest: Interest, kind: Kind) -> PollEvented<S> {
        PollEvented {
            reg: OnceLock::new(),
            home: context::current_home(),
            init: Mutex::new(()),
            io,
            interest,
            kind,
            initial: READABLE | WRITABLE,
        }
    }

    /// Makes the source start ready in no direction when it registers, so
    /// that its first readiness is what the poller reports (edge-triggered
    /// `EPOLL_CTL_ADD` reports the current state: a socket is writable at
    /// once, not readable) instead of "assumed ready both ways". tokio
    /// starts every source so (`AsyncFd`, a connecting or bound socket, one
    /// made `from_std`), except those below.
    pub(crate) fn reported(self) -> PollEvented<S> {
        self.assume_ready(0)
    }

    /// Makes the source start with the readiness bits `bits` (`READABLE`,
    /// `WRITABLE` of `driver::io`) assumed, before any event: tokio assumes
    /// an accepted stream readable and writable (its first read tries the
    /// socket at once), and each end of a fresh `pair()` writable.
    pub(crate) fn assume_ready(mut self, bits: usize) -> PollEvented<S> {
        self.initial = bits & (READABLE | WRITABLE);
        self
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

    /// The registration, made on first use, moved to the calling thread's
    /// P once the source keeps being polled from there (module docs).
    #[inline]
    fn registration(&self) -> io::Result<&Registration> {
        if let Some(r) = self.reg.get() {
            if let Some(here) = crate::current::current_p() {
                if r.polled_from(here) {
                    let _init = self.init.lock().unwrap_or_else(|e| e.into_inner());
                    r.move_to(here, self.interest);
                }
            }
            return Ok(r);
        }
        self.register_first()
    }

    #[cold]
    fn register_first(&self) -> io::Result<&Registration> {
        // Two tasks may poll a shared socket for the first time at once; the
        // init lock makes exactly one of them register it.
        let _init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.reg.get() {
            return Ok(r);
        }
        let r = Registration::new(
            self.home.as_ref(),
            self.io.as_raw_fd(),
            self.interest,
            self.kind,
            self.initial,
        )?;
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

    /// Waits until any of the readiness bits in `mask` is set (taking one
    /// unit of coop budget). `woken_is_ready`: see
    /// [`ScheduledIo::poll_mask`].
    pub(crate) fn poll_ready_mask(
        &self,
        cx: &mut Context<'_>,
        mask: usize,
        woken_is_ready: bool,
    ) -> Poll<io::Result<ReadyEvent>> {
        ready!(coop::poll_proceed(cx));
        self.registration()?.io.poll_mask(cx, mask, woken_is_ready)
    }

    /// Runs `op` once if any of the readiness bits in `mask` is set, without
    /// waiting: not ready gives `WouldBlock` without calling `op`, and
    /// `WouldBlock` from `op` forgets the readiness it ran on.
    pub(crate) fn try_io_mask<R>(
        &self,
        mask: usize,
        op: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        let Some(ev) = self.ready_now_mask(mask)? else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let r = op();
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.clear_readiness(ev);
        }
        r
    }

    /// The readiness in `mask` right now, without waiting or storing a
    /// waker (`None` when not ready): for `AsyncFd::try_io`.
    pub(crate) fn ready_now_mask(&self, mask: usize) -> io::Result<Option<ReadyEvent>> {
        self.registration()?.io.ready_now_mask(mask).transpose()
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
