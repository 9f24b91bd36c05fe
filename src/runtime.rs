//! tokio's `runtime` module paths: [`Builder`] (with tokio's
//! `new_multi_thread`, `new_current_thread`, `worker_threads`,
//! `enable_all`), [`Runtime`], [`Handle`], [`EnterGuard`],
//! [`TryCurrentError`], the runtime's [`Id`] (`Handle::id`), and the
//! metrics as [`RuntimeMetrics`].
//!
//! ```
//! let rt = numa_rt::runtime::Builder::new_multi_thread()
//!     .worker_threads(2)
//!     .enable_all()
//!     .build()
//!     .unwrap();
//! let n = rt.block_on(async {
//!     let handle = numa_rt::runtime::Handle::current();
//!     handle.spawn(async { 6 * 7 }).await.unwrap()
//! });
//! assert_eq!(n, 42);
//! ```

pub use numa_rt_executor::{
    Builder, EnterGuard, Handle, Runtime, RuntimeFlavor, RuntimeId as Id, RuntimeMetrics,
    TryCurrentError,
};
