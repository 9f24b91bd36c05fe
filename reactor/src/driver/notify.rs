//! The unpark flag in front of a P's eventfd (pair 3 of docs/architecture.md,
//! "Why no wake-up is lost").
//!
//! `notified` saves an eventfd write (a syscall) per unpark while an unpark
//! is already pending. The order of the two steps on the consuming side
//! matters: drain the eventfd first, then clear the flag. The other order
//! loses wake-ups for good (an unpark between the two sets the flag and
//! signals; the drain swallows the signal; the flag stays set with nothing
//! to read, and every later unpark skips signalling). The loom model below
//! checks the chosen order; the eventfd is passed in as closures so the model
//! runs this very code with an atomic counter standing in for it.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) struct Notify {
    /// True from an unpark until the parked M consumes it.
    notified: AtomicBool,
}

impl Notify {
    pub(super) fn new() -> Self {
        Notify {
            notified: AtomicBool::new(false),
        }
    }

    /// Unpark: `signal` (the eventfd write) only if no unpark is pending.
    pub(super) fn unpark(&self, signal: impl FnOnce()) {
        // AcqRel: Release publishes what the unparker did before (queued a
        // task) to the M's `consume`; Acquire makes a skipped signal safe.
        if !self.notified.swap(true, Ordering::AcqRel) {
            signal();
        }
    }

    /// The parked M saw the eventfd readable: `drain` it, then clear the flag.
    pub(super) fn consume(&self, drain: impl FnOnce()) {
        drain();
        // AcqRel pairs with the swap in `unpark`: the unparker's work is
        // visible to our queue reads even when it skipped signalling.
        self.notified.swap(false, Ordering::AcqRel);
    }
}

#[cfg(all(test, loom))]
mod models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;
    use std::sync::Arc;

    /// Two unparkers race a parked M consuming an earlier unpark. After all
    /// is done, the M must not be able to block with an unpark pending: if
    /// the flag says "pending", the eventfd must be readable.
    #[test]
    fn no_lost_unpark() {
        loom::model(|| {
            let n = Arc::new(Notify::new());
            let counter = Arc::new(AtomicUsize::new(0));
            // A first unpark, which the M is consuming below.
            n.unpark(|| {
                counter.fetch_add(1, Ordering::SeqCst);
            });
            let (n2, c2) = (n.clone(), counter.clone());
            let unparker = thread::spawn(move || {
                n2.unpark(|| {
                    c2.fetch_add(1, Ordering::SeqCst);
                })
            });
            n.consume(|| {
                counter.store(0, Ordering::SeqCst);
            });
            unparker.join().unwrap();
            let pending = n.notified.load(Ordering::SeqCst);
            let readable = counter.load(Ordering::SeqCst) > 0;
            assert!(
                !pending || readable,
                "unpark pending but the eventfd is empty: the M would sleep forever"
            );
        });
    }
}
