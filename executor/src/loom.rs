//! Synchronisation primitives, swapped for loom's under `cfg(loom)`.
//!
//! Every atomic, lock and thread the scheduler's protocols use comes from here,
//! so the loom models in `tests`-modules exercise the real code.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex};

#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex};

/// Spin hint (a loom yield under loom, so models make progress).
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
