//! tower's time-based and spawning middleware on numa_rt's timer and
//! scheduler (feature `tower`).
//!
//! tower's own [`Timeout`](::tower::timeout::Timeout),
//! `RateLimit`, retry backoff and
//! [`Buffer::new`](::tower::buffer::Buffer::new) sleep on tokio's timer or
//! call `tokio::spawn`, which do not run inside numa_rt. The types here
//! have tower's names, constructors and semantics, and keep tower's types
//! where a caller can see them:
//!
//! - [`Timeout`] / [`TimeoutLayer`] fail with tower's own
//!   [`Elapsed`](::tower::timeout::error::Elapsed), boxed as tower boxes it,
//!   so `err.is::<tower::timeout::error::Elapsed>()` keeps working.
//! - [`RateLimit`] / [`RateLimitLayer`]: at most `num` requests per `per`.
//! - [`ExponentialBackoffMaker`] / [`ExponentialBackoff`] implement tower's
//!   [`MakeBackoff`](::tower::retry::backoff::MakeBackoff) and
//!   [`Backoff`](::tower::retry::backoff::Backoff), for tower's `Retry`.
//! - [`Buffer::new`] / [`BufferLayer`] return tower's own
//!   [`Buffer`](::tower::buffer::Buffer), its worker spawned on numa_rt.
//!
//! A port changes the `use` lines only:
//!
//! ```
//! use numa_rt_util::tower::TimeoutLayer; // was: tower::timeout::TimeoutLayer
//! use std::time::Duration;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! #[numa_rt::main(max_procs = 1)]
//! async fn main() {
//!     let svc = ServiceBuilder::new()
//!         .layer(TimeoutLayer::new(Duration::from_millis(10)))
//!         .service(service_fn(|()| async {
//!             numa_rt::time::sleep(Duration::from_secs(1)).await;
//!             Ok::<_, std::io::Error>("late")
//!         }));
//!     let err = svc.oneshot(()).await.unwrap_err();
//!     assert!(err.is::<tower::timeout::error::Elapsed>());
//! }
//! ```

mod backoff;
mod buffer;
mod rate_limit;
mod timeout;

pub use backoff::{ExponentialBackoff, ExponentialBackoffMaker, InvalidBackoff};
pub use buffer::{Buffer, BufferLayer};
pub use rate_limit::{Rate, RateLimit, RateLimitLayer};
pub use timeout::{ResponseFuture, Timeout, TimeoutLayer};

/// tower's boxed error type (`tower::BoxError`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(feature = "tower-http")]
pub use crate::tower_http::{RequestTimeout, RequestTimeoutFuture, RequestTimeoutLayer};
