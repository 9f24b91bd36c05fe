//! A runtime's identity ([`Id`]), apart from the runtime itself so that
//! the configuration can hold it without importing the runtime.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// An opaque id that tells a runtime from every other live runtime
/// ([`Handle::id`](crate::Handle::id), tokio's `runtime::Id`). Ids are not sequential and say
/// nothing of the order runtimes started in; a dropped runtime's id may be
/// given to a later one (numa_rt gives each its own, from a process-wide
/// counter, but promises only what tokio does). Its `Display` prints a
/// number.
///
/// ```
/// let a = numa_rt_executor::Runtime::new().unwrap();
/// let b = numa_rt_executor::Runtime::new().unwrap();
/// assert_ne!(a.handle().id(), b.handle().id());
/// assert_eq!(a.handle().id(), a.handle().clone().id());
/// println!("runtime {}", a.handle().id());
/// ```
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Id(NonZeroU64);

impl Id {
    /// A fresh id, one for each runtime `Builder::build` makes.
    pub(crate) fn next() -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Relaxed: only uniqueness matters, which the RMW gives.
        let n = NEXT.fetch_add(1, Relaxed);
        Id(NonZeroU64::new(n).expect("2^64 runtimes built"))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
