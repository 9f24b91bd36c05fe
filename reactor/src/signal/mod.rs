//! Asynchronous signal handling on numa_rt's own reactor (tokio's
//! `tokio::signal`): [`ctrl_c`] and [`unix::signal`].
//!
//! # Design
//!
//! A signal handler may interrupt any thread at any instruction, so it can
//! do almost nothing. numa_rt's handler (in `sys.rs`, with every other
//! system call of this module) sets the signal's *pending* flag (an atomic
//! store) and writes one byte into a process-wide *self-pipe*; then it
//! calls the handler that was installed before it, if there was one.
//!
//! Each listener ([`unix::Signal`]) owns a duplicate of the pipe's read end,
//! registered (edge-triggered, read interest) with the io poller of the P
//! that created it, through [`AsyncFd`](crate::net::AsyncFd). A write to a
//! pipe wakes every poller that watches it, so every listener's task is
//! woken by every delivery, whichever P it lives on, with no thread of its
//! own and no change to the driver.
//!
//! A woken listener *collects*: under one process-wide lock it empties the
//! pipe, then turns each set pending flag into one more *generation* of
//! that signal. A listener remembers the generation it last returned; when
//! the current one is newer, `recv` returns `Some(())` and catches up.
//! Hence:
//! - every listener sees every delivery made after it was created (it
//!   collects before taking its first generation, so nothing older is
//!   counted as new);
//! - deliveries that arrive before the listener looks again coalesce into
//!   one `recv` (as in tokio: at least one wake per burst, not one per
//!   signal — the kernel coalesces standard signals as well);
//! - no delivery is lost between the collect and the wait: the handler sets
//!   the flag before it writes, and a listener collects after its readiness
//!   is cleared, so a byte that arrives after the collect raises readiness
//!   again — unless another listener's collect drains that byte before this
//!   listener's poller looks (epoll reports an edge only if the pipe is
//!   still readable then). So a listener about to wait also leaves its
//!   waker in the registry, and every collect wakes the waiting listeners of
//!   each signal it counts.
//!
//! # What stays installed
//!
//! As in tokio, the handler for a signal is installed the first time a
//! listener for it is created and stays for the process's life: once a
//! program has listened for `SIGINT`, a `SIGINT` no longer ends it, even
//! after every listener is gone (it is counted, and seen by no one). The
//! handler that was installed before numa_rt's (by the program or another
//! library) is kept and called after numa_rt's on each delivery; the
//! default action and "ignore" are not (they cannot be called).
//! The pipe (two descriptors) also lives for the process; each listener's
//! duplicate is closed when the listener drops, including when its runtime
//! drops with a `recv` pending.
//!
//! `SIGKILL` and `SIGSTOP` cannot be caught, and `SIGSEGV`, `SIGBUS`,
//! `SIGILL` and `SIGFPE` report a fault of the thread that gets them (it
//! would fault again as soon as the handler returned): listening for any of
//! them is refused with an `InvalidInput` error.

mod sys;
pub mod unix;

use std::io;
use std::sync::Mutex;

/// Waits for the next `SIGINT` (ctrl-c in a terminal) delivered after the
/// first poll of the returned future.
///
/// The listener is created on first poll, and from then on `SIGINT` no
/// longer ends the process (see the [module docs](self)).
///
/// # Errors
/// When the handler cannot be installed or the pipe cannot be made.
///
/// # Panics
/// When first polled outside a numa_rt runtime.
///
/// ```no_run
/// # async fn serve() {}
/// # async fn f() -> std::io::Result<()> {
/// use futures::FutureExt;
/// futures::select! {
///     _ = serve().fuse() => {}
///     r = numa_rt_reactor::signal::ctrl_c().fuse() => r?,
/// }
/// # Ok(()) }
/// ```
pub async fn ctrl_c() -> io::Result<()> {
    let mut sig = unix::signal(unix::SignalKind::interrupt())?;
    // `None` only once the runtime has shut down: the caller is being
    // dropped anyway; report it as the end of the wait.
    sig.recv().await;
    Ok(())
}

/// What the process-wide lock guards.
struct Registry {
    /// The pipe's read end, made with the first listener, never closed
    /// (listeners hold duplicates of it).
    read: Option<std::os::fd::OwnedFd>,
    /// Which signals have numa_rt's handler.
    installed: [bool; sys::SLOTS],
    /// Deliveries collected so far, per signal.
    generation: [u64; sys::SLOTS],
    /// Listeners waiting for a signal (slot, listener id, waker), woken by
    /// whichever collect counts a new generation of it. The pipe alone
    /// cannot wake them all: every listener reads the one pipe, and epoll
    /// reports an edge only if the pipe is still readable when the poller
    /// looks, so a byte another listener's collect drained first wakes
    /// nobody else (tests/signal.rs hung in 2 of 30 runs beside three busy
    /// loops before this list).
    waiting: Vec<(usize, u64, std::task::Waker)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    read: None,
    installed: [false; sys::SLOTS],
    generation: [0; sys::SLOTS],
    waiting: Vec::new(),
});

fn lock() -> std::sync::MutexGuard<'static, Registry> {
    // Nothing under the lock panics halfway through an update.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// Empties the pipe and counts each pending signal once; the listeners
    /// waiting for a signal counted here are moved to `wake` (woken by the
    /// caller once the lock is released).
    fn collect(&mut self, wake: &mut Vec<std::task::Waker>) {
        use std::os::fd::AsRawFd;
        let Some(read) = &self.read else { return };
        sys::drain(read.as_raw_fd());
        for signum in 1..sys::SLOTS {
            if self.installed[signum] && sys::take_pending(signum as libc::c_int) {
                self.generation[signum] += 1;
                let mut i = 0;
                while i < self.waiting.len() {
                    if self.waiting[i].0 == signum {
                        wake.push(self.waiting.swap_remove(i).2);
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }
}

/// Wakes the listeners a collect found a delivery for (outside the lock: a
/// waker may run anything).
fn wake_all(wake: Vec<std::task::Waker>) {
    for w in wake {
        w.wake();
    }
}

/// A number for each listener, to find its entry in `Registry::waiting`.
fn next_listener_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    // Relaxed: only uniqueness is needed.
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Sets up `signum` (pipe, handler) if needed and returns a duplicate of
/// the pipe's read end and the signal's current generation.
fn register(signum: libc::c_int) -> io::Result<(std::os::fd::OwnedFd, u64)> {
    let mut reg = lock();
    if reg.read.is_none() {
        let (read, write) = sys::pipe()?;
        sys::set_write_fd(write);
        reg.read = Some(read);
    }
    let slot = signum as usize;
    if !reg.installed[slot] {
        sys::install(signum).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("numa_rt::signal: installing a handler for signal {signum}: {e}"),
            )
        })?;
        reg.installed[slot] = true;
    }
    // What arrived before this listener is counted now, not later for it.
    let mut wake = Vec::new();
    reg.collect(&mut wake);
    let fd = sys::dup(reg.read.as_ref().expect("made above"));
    let generation = reg.generation[slot];
    drop(reg);
    wake_all(wake);
    Ok((fd?, generation))
}

/// Collects, then returns whether `signum` has a generation newer than
/// `*seen` (and catches `*seen` up). If not and `waiter` is given, the
/// listener `waiter.0` waits with waker `waiter.1`: the next collect that
/// counts `signum` wakes it, whoever runs it.
fn take_new(signum: libc::c_int, seen: &mut u64, waiter: Option<(u64, &std::task::Waker)>) -> bool {
    let mut wake = Vec::new();
    // A replaced waker is dropped after the lock, like every waker here:
    // dropping one may drop a task, whose future may hold a listener,
    // whose `Drop` takes the lock.
    let mut old = None;
    let mut reg = lock();
    reg.collect(&mut wake);
    let slot = signum as usize;
    let now = reg.generation[slot];
    let new = now != *seen;
    if new {
        *seen = now;
    } else if let Some((id, waker)) = waiter {
        match reg.waiting.iter_mut().find(|w| w.1 == id) {
            Some(w) if w.2.will_wake(waker) => {}
            Some(w) => old = Some(std::mem::replace(&mut w.2, waker.clone())),
            None => reg.waiting.push((slot, id, waker.clone())),
        }
    }
    drop(reg);
    drop(old);
    wake_all(wake);
    new
}

/// Forgets listener `id`'s waker (it is dropped), after the lock (see
/// `take_new`).
fn forget(id: u64) {
    let mut reg = lock();
    let gone = reg
        .waiting
        .iter()
        .position(|w| w.1 == id)
        .map(|i| reg.waiting.swap_remove(i));
    drop(reg);
    drop(gone);
}
