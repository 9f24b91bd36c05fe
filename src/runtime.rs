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
    worker_index, Builder, EnterGuard, Handle, LocalOptions, LocalRuntime, Runtime, RuntimeFlavor,
    RuntimeId as Id, RuntimeMetrics, TryCurrentError,
};

/// Whether `err` is the error numa_rt's I/O fails with once its runtime
/// has shut down (tokio's function of the name).
///
/// ```
/// use numa_rt::net::TcpListener;
/// use numa_rt::runtime::Runtime;
///
/// let rt1 = Runtime::new().unwrap();
/// let rt2 = Runtime::new().unwrap();
/// let listener = rt1.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
/// drop(rt1);
/// rt2.block_on(async {
///     let err = listener.accept().await.unwrap_err();
///     assert!(numa_rt::runtime::is_rt_shutdown_err(&err));
/// });
/// ```
pub fn is_rt_shutdown_err(err: &std::io::Error) -> bool {
    numa_rt_reactor::is_shutdown_error(err)
}
