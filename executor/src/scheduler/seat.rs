//! Where a P's core sits while its M polls a task, and **retake**: how
//! sysmon takes that core from an M stuck inside one poll (Go's `retake`
//! of a P whose M sits in a syscall). docs/architecture.md, "sysmon", has
//! the same argument with the rest of sysmon.
//!
//! # The seat
//!
//! Each M has a [`Seat`]. While the M runs a task, the P's `Core` sits in
//! it, so that code inside the poll can reach the core: a wake or a spawn
//! pushes to the local queue (`context::with_core`), a root spawn reads the
//! P's index (`context::current_p_of`), `block_in_place` takes the core to
//! hand it away (and puts it back if no M could take it). The same seat
//! holds the core while the M is in its P's driver (`Worker::poll_driver`),
//! polling or parked, so the wakers the driver fires reach the P's queue
//! (docs/architecture.md, "Parking, step by step", step 5).
//!
//! # Retake
//!
//! A task that blocks its thread (a long computation, a blocking call)
//! holds its P's queue, reactor and timers with it. sysmon (the monitor
//! thread) sees the P stuck in one poll (`in_task` set, poll counter
//! unchanged) and, past the retake threshold and when the P has other
//! work, takes the core out of the seat and hands it to another M through
//! `lifecycle::handoff`, exactly as `block_in_place` does from inside the
//! poll. When the poll returns, the stuck M finds the seat empty and goes
//! on like an M returning from `block_in_place`: without a P, asking for it
//! back.
//!
//! The owner may touch the core at any moment of the poll, so the two sides
//! need mutual exclusion, and the owner's side runs on every wake and every
//! poll. It is an **asymmetric Dekker pair**:
//!
//! - `in_use` (written by the owner only) is set whenever the owner may
//!   touch the seat: all the time outside a task's poll (the run loop and
//!   the driver), and inside a poll only around each access;
//! - `retake` is the monitor's request: `IDLE`, `REQUESTED`, `TAKEN`.
//!
//! **Owner**, entering an access inside a poll: `in_use = true` (a plain
//! store), a *compiler* fence, then load `retake`; if it is not `IDLE` it
//! clears `in_use` and does not touch the core (a wake then goes to the
//! node queue, as on a thread without a P; `block_in_place` runs its
//! closure without handing anything over); otherwise it accesses the core
//! and clears `in_use` with a Release store. Leaving the poll is the same
//! entry, except that on `REQUESTED` it waits for the monitor's decision
//! (a few microseconds: a system call and a load), and on `TAKEN` it knows
//! the core is gone.
//!
//! **Monitor**: `retake = REQUESTED`; `membarrier(PRIVATE_EXPEDITED)`; load
//! `in_use` (Acquire); only if it is clear does it take the core — and only
//! if it is still the stuck P's core in the same poll — then hands it off
//! (forgetting the old M as the P's holder first, so that no later round
//! asks it again) and publishes `TAKEN` (Release), or `IDLE` if it took
//! nothing.
//!
//! **Why the plain store is enough.** This is the store-buffering pattern
//! (each side stores its flag, then loads the other's): with a full fence
//! on both sides, at least one side sees the other's store. The owner has
//! only a compiler fence, which keeps the compiler from moving its load
//! above its store but lets the CPU do it (x86's store buffer does). The
//! monitor's `membarrier` supplies the owner's fence: when it returns,
//! every thread of the process has run a full barrier at some point T of
//! its instruction stream during the call (or will at its next context
//! switch, if it was not running). Split the owner's store S and load L at
//! T: S and L both before T — S is visible when `membarrier` returns, so
//! the monitor sees `in_use`; both after T — L comes after the monitor's
//! `REQUESTED` store was made visible, so the owner sees the request;
//! S before and L after — both see each other. L before S cannot happen
//! (program order, kept by the compiler fence). So the monitor and the
//! owner never both go ahead. This is the scheme of liburcu's membarrier
//! flavour and folly's `asymmetricLightBarrier`/`asymmetricHeavyBarrier`.
//! The end of an access is ordinary release/acquire: the owner's Release
//! store of `in_use = false` publishes its writes to the core to the
//! monitor's Acquire load, and the monitor's Release store of `IDLE` or
//! `TAKEN` publishes its own to the owner's Acquire load of `retake`.
//!
//! **Cost on the hot path.** Per poll: a Release store before it (`in_use
//! = false`); after it a plain store, the compiler fence, an Acquire load
//! and a branch. Per core access inside a poll (a wake, a spawn): a load of
//! the owner's own flag, a plain store, the compiler fence, an Acquire load,
//! a branch and a Release store. On x86 each of these is a plain `mov`
//! (and the fence emits nothing); on AArch64 the Release store is `stlr`
//! and the Acquire load `ldar`. No read-modify-write and no hardware fence:
//! the `RefCell` that held the core before cost a flag check and two flag
//! stores per access too. The price is on the monitor's side: one
//! `membarrier` per retake attempt, only for a P stuck past the threshold
//! with other work.
//!
//! **Without membarrier** (kernels before 4.14, seccomp filters that refuse
//! it: `ENOSYS`, `EINVAL`, `EPERM`) the pair has no owner-side fence, so
//! retake is off: the registration at runtime start fails, one line on
//! stderr says why, `RuntimeMetrics::retake_unavailable` keeps the reason,
//! and everything else runs as before.
//!
//! **loom** cannot model `membarrier` or a compiler fence; the model below
//! runs this very code with a SeqCst fence on both sides, the strength the
//! argument above gives them, and checks that the core is never touched by
//! both threads and never lost.

use crate::loom::atomic::{AtomicBool, AtomicU8, Ordering::*};
use crate::loom::cell::UnsafeCell;

/// No request: the owner may touch the seat.
const IDLE: u8 = 0;
/// The monitor is deciding whether to take the core: the owner keeps off.
const REQUESTED: u8 = 1;
/// The monitor took the core; the owner resets the flag when its poll ends.
const TAKEN: u8 = 2;

/// The place a P's core sits on its M while a task is polled (module docs).
pub(crate) struct Seat<T> {
    slot: UnsafeCell<Option<T>>,
    /// Set while the owner may touch `slot`; written by the owner only.
    in_use: AtomicBool,
    /// The monitor's request: `IDLE`, `REQUESTED` or `TAKEN`.
    retake: AtomicU8,
}

// SAFETY: the slot is reached by two threads only: the owner (the M whose
// seat it is, through the `unsafe` owner methods, whose callers promise to
// be that thread) and the monitor (`try_take`), which touches it only after
// the Dekker pair above has excluded the owner. Moving a `T` between them
// needs `T: Send`.
unsafe impl<T: Send> Sync for Seat<T> {}

/// The owner's fence between its `in_use` store and its `retake` load: a
/// compiler fence, made a full one by the monitor's `membarrier`.
#[inline(always)]
fn light_barrier() {
    #[cfg(not(loom))]
    std::sync::atomic::compiler_fence(SeqCst);
    #[cfg(loom)]
    crate::loom::atomic::fence(SeqCst);
}

/// The monitor's fence between its `retake` store and its `in_use` load.
fn heavy_barrier() -> std::io::Result<()> {
    #[cfg(not(loom))]
    {
        numa_rt_numa::sys::membarrier()
    }
    #[cfg(loom)]
    {
        crate::loom::atomic::fence(SeqCst);
        Ok(())
    }
}

/// Registers the process for `membarrier` once; the error says why retake
/// is unavailable (see the module docs).
pub(crate) fn register() -> Result<(), String> {
    #[cfg(not(loom))]
    {
        static ONCE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
        ONCE.get_or_init(|| {
            numa_rt_numa::sys::membarrier_register().map_err(|e| {
                format!("membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) failed: {e}")
            })
        })
        .clone()
    }
    #[cfg(loom)]
    Ok(())
}

impl<T> Seat<T> {
    pub(crate) fn new() -> Self {
        Seat {
            slot: UnsafeCell::new(None),
            in_use: AtomicBool::new(true),
            retake: AtomicU8::new(IDLE),
        }
    }

    /// The owner, outside a task's poll (the run loop, the driver): the
    /// monitor keeps off while `in_use` is set, so no protocol is needed.
    ///
    /// # Safety
    /// Only the owning M's thread may call the owner methods.
    #[inline]
    pub(crate) unsafe fn with_owned<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> R {
        // Relaxed: the owner reads its own flag.
        debug_assert!(self.in_use.load(Relaxed), "outside a poll only");
        // SAFETY: we are the owner (caller's promise) and `in_use` is set,
        // so the monitor does not touch the slot (module docs); `f` is
        // crate code that does not re-enter the seat.
        self.slot.with_mut(|s| f(unsafe { &mut *s }))
    }

    /// The owner: a task's poll begins with `core` in the seat; from now on
    /// the monitor may take it between accesses.
    ///
    /// # Safety
    /// As [`Seat::with_owned`].
    #[inline]
    pub(crate) unsafe fn enter_poll(&self, core: T) {
        // SAFETY: `in_use` is still set (outside a poll): see `with_owned`.
        self.slot.with_mut(|s| unsafe { *s = Some(core) });
        // Release: pairs with the monitor's Acquire load in `try_take`, which
        // then sees the core (and the poll counter bumped before it).
        self.in_use.store(false, Release);
    }

    /// The owner: the poll returned. The core, or `None` if sysmon took it
    /// (or `block_in_place` handed it away).
    ///
    /// # Safety
    /// As [`Seat::with_owned`].
    #[inline]
    pub(crate) unsafe fn leave_poll(&self) -> Option<T> {
        loop {
            // SAFETY: forwarded from our caller (the owner).
            match unsafe { self.claim() } {
                IDLE => {
                    // SAFETY: claimed: the monitor keeps off (module docs).
                    return self.slot.with_mut(|s| unsafe { (*s).take() });
                }
                TAKEN => {
                    // The monitor is done with this seat (it published TAKEN
                    // after its last access); `in_use` stays set: we are
                    // outside a poll now. The monitor cleared the P's
                    // `holder` before handing the core on, so it makes no
                    // new request here until this M holds a P again (after
                    // this reset, through the `holder` lock). Still a
                    // compare-exchange rather than a store, so that a
                    // request could never be erased; once per retake, never
                    // per poll. Relaxed: orders nothing; the slot is
                    // reached only through `claim`.
                    let _ = self.retake.compare_exchange(TAKEN, IDLE, Relaxed, Relaxed);
                    return None;
                }
                _ => self.wait_for_decision(),
            }
        }
    }

    /// The owner, inside a poll: one access to the core. `None` (and `f`
    /// not run) while the monitor is taking it or has taken it.
    ///
    /// # Safety
    /// As [`Seat::with_owned`]; `f` must not re-enter the seat.
    #[inline]
    pub(crate) unsafe fn access<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> Option<R> {
        // Relaxed: the owner reads its own flag. Set: outside a poll (the
        // driver firing wakers), where the seat is the owner's alone.
        let outside_poll = self.in_use.load(Relaxed);
        // SAFETY: forwarded from our caller (the owner).
        if !outside_poll && unsafe { self.claim() } != IDLE {
            // Release: like the end of an access (the monitor may now go).
            self.in_use.store(false, Release);
            return None;
        }
        // SAFETY: outside a poll the seat is ours (as `with_owned`); inside
        // one we claimed it. `f` does not re-enter the seat (our caller).
        // One call site for `f`, so that the schedule function's closure is
        // inlined here rather than made a function of its own.
        let r = self.slot.with_mut(|s| f(unsafe { &mut *s }));
        if !outside_poll {
            // Release: pairs with the monitor's Acquire load of `in_use`:
            // our writes to the core happen before anything it does with it.
            self.in_use.store(false, Release);
        }
        Some(r)
    }

    /// The owner, inside a poll: puts back the core `block_in_place` took
    /// and could not hand away, waiting out a retake attempt (which finds
    /// the seat empty and takes nothing).
    ///
    /// # Safety
    /// As [`Seat::with_owned`].
    pub(crate) unsafe fn put_back(&self, core: T) {
        loop {
            // SAFETY: forwarded from our caller (the owner).
            match unsafe { self.claim() } {
                IDLE => {
                    // SAFETY: claimed: the monitor keeps off.
                    self.slot.with_mut(|s| unsafe { *s = Some(core) });
                    // Release: as at the end of `access`.
                    self.in_use.store(false, Release);
                    return;
                }
                s => {
                    // TAKEN needs a core in the seat; this one was empty.
                    debug_assert_eq!(s, REQUESTED);
                    self.wait_for_decision();
                }
            }
        }
    }

    /// The owner's side of the pair: announce, fence, read the request.
    /// Leaves `in_use` set.
    #[inline(always)]
    unsafe fn claim(&self) -> u8 {
        // A plain store: the owner is its only writer. Its partner is the
        // monitor's `membarrier` in `try_take` (module docs).
        self.in_use.store(true, Relaxed);
        light_barrier();
        // Acquire: pairs with the monitor's Release store of IDLE or TAKEN,
        // so its accesses to the slot happen before ours.
        self.retake.load(Acquire)
    }

    /// The owner backs off while the monitor decides (a system call and a
    /// load away).
    #[cold]
    fn wait_for_decision(&self) {
        // Release: as at the end of an access (the monitor may go ahead).
        self.in_use.store(false, Release);
        // Acquire: see `claim`.
        while self.retake.load(Acquire) == REQUESTED {
            #[cfg(not(loom))]
            std::thread::yield_now();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }

    /// The monitor: takes the core if the owner is inside a poll and not
    /// touching it, and `check` accepts it (the monitor's view may be a
    /// round old). `give` then runs with the core while the owner still
    /// keeps off; it may give the core back (no M could take it), and the
    /// core returns to the seat. `Ok(true)`: the core is gone for good.
    /// `Err`: `membarrier` failed; nothing was touched.
    ///
    /// Only the monitor thread calls it.
    pub(crate) fn try_take(
        &self,
        check: impl FnOnce(&T) -> bool,
        give: impl FnOnce(T) -> Result<(), T>,
    ) -> std::io::Result<bool> {
        // Relaxed: ordered by the barrier that follows.
        self.retake.store(REQUESTED, Relaxed);
        if let Err(e) = heavy_barrier() {
            // Release: as below.
            self.retake.store(IDLE, Release);
            return Err(e);
        }
        // Acquire: pairs with the owner's Release stores of `in_use = false`
        // (its accesses to the core happen before ours).
        let taken = !self.in_use.load(Acquire)
            && self.slot.with_mut(|s| {
                // SAFETY: `in_use` was clear after `REQUESTED` was made
                // visible to the owner: it will not touch the slot until we
                // publish IDLE or TAKEN (module docs).
                let slot = unsafe { &mut *s };
                match slot.take() {
                    Some(core) if check(&core) => match give(core) {
                        Ok(()) => true,
                        Err(core) => {
                            *slot = Some(core);
                            false
                        }
                    },
                    other => {
                        *slot = other;
                        false
                    }
                }
            });
        // Release: pairs with the owner's Acquire load of `retake` in
        // `claim`: our accesses to the slot happen before its next ones.
        self.retake.store(if taken { TAKEN } else { IDLE }, Release);
        Ok(taken)
    }
}

#[cfg(loom)]
mod models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The owner polls with the core in its seat, makes one access (a
    /// wake), and leaves the poll; the monitor tries to retake the core
    /// meanwhile. loom's cell checks that the slot is never touched by both
    /// at once; the asserts that the core ends up in exactly one place,
    /// with the owner's access applied exactly when the owner made it.
    #[test]
    fn retake_excludes_the_owner() {
        loom::model(|| {
            let seat = Arc::new(Seat::<u32>::new());
            // SAFETY: this thread is the owner until the spawn below, and
            // the owner thread takes over after it (happens-before).
            unsafe { seat.enter_poll(0) };
            let s2 = seat.clone();
            let owner = thread::spawn(move || {
                // SAFETY: this thread is the owner from now on.
                let accessed = unsafe { s2.access(|c| c.as_mut().map(|c| *c += 1)) };
                // SAFETY: as above.
                let back = unsafe { s2.leave_poll() };
                (accessed.flatten().is_some(), back)
            });
            let mut got = None;
            let taken = seat
                .try_take(
                    |_| true,
                    |c| {
                        got = Some(c);
                        Ok(())
                    },
                )
                .unwrap();
            let (accessed, back) = owner.join().unwrap();
            assert_eq!(taken, got.is_some());
            assert!(back.is_some() != taken, "the core is in exactly one place");
            let value = back.or(got).unwrap();
            // The access touched the core iff it said so, and a retake
            // never overtook an access in progress.
            assert_eq!(value, u32::from(accessed));
        });
    }

    /// The monitor takes the core but cannot hand it away: it returns to
    /// the seat, and the owner gets it back at the end of the poll.
    #[test]
    fn a_failed_hand_off_puts_the_core_back() {
        loom::model(|| {
            let seat = Arc::new(Seat::<u32>::new());
            // SAFETY: as in the model above.
            unsafe { seat.enter_poll(7) };
            let s2 = seat.clone();
            // SAFETY: the spawned thread is the owner.
            let owner = thread::spawn(move || unsafe { s2.leave_poll() });
            let taken = seat.try_take(|_| true, Err).unwrap();
            assert!(!taken);
            assert_eq!(owner.join().unwrap(), Some(7));
        });
    }
}
