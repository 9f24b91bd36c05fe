//! Synchronisation primitives, swapped for loom's under `cfg(loom)`.
//!
//! The atomics and locks of the modelled protocols (run queue, idle/spinning
//! state, node queues) come from here, so the loom models in the `tests`
//! modules exercise the real code. `Arc` stays std's (loom's cannot be a
//! method receiver, and std's is fine inside models); thread parking of the
//! M pool is std's too (not modelled).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

/// Spin hint (a loom yield under loom, so models make progress).
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// An `UnsafeCell` with loom's closure API, so a loom model can check that
/// two threads never touch it at once (`scheduler::seat`).
#[cfg(not(loom))]
pub(crate) mod cell {
    /// `std::cell::UnsafeCell` behind loom's `with_mut`.
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a pointer to the value; what `f` may do with it is
        /// the caller's protocol.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
#[cfg(loom)]
pub(crate) use loom::cell;
