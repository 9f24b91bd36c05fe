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
//!   again.
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
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    read: None,
    installed: [false; sys::SLOTS],
    generation: [0; sys::SLOTS],
});

fn lock() -> std::sync::MutexGuard<'static, Registry> {
    // Nothing under the lock panics halfway through an update.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// Empties the pipe and counts each pending signal once.
    fn collect(&mut self) {
        use std::os::fd::AsRawFd;
        let Some(read) = &self.read else { return };
        sys::drain(read.as_raw_fd());
        for signum in 1..sys::SLOTS {
            if self.installed[signum] && sys::take_pending(signum as libc::c_int) {
                self.generation[signum] += 1;
            }
        }
    }
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
    reg.collect();
    let fd = sys::dup(reg.read.as_ref().expect("made above"))?;
    Ok((fd, reg.generation[slot]))
}

/// Collects, then returns whether `signum` has a generation newer than
/// `*seen` (and catches `*seen` up).
fn take_new(signum: libc::c_int, seen: &mut u64) -> bool {
    let mut reg = lock();
    reg.collect();
    let now = reg.generation[signum as usize];
    if now != *seen {
        *seen = now;
        true
    } else {
        false
    }
}
