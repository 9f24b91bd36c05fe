//! # numa_rt_util
//!
//! tokio-util 0.7's API on numa_rt, so that code written for `tokio_util`
//! ports by the same rename as the rest (`tokio` → `numa_rt`, which turns
//! `tokio_util` into `numa_rt_util`).
//!
//! tokio-util has two halves, and this crate treats them apart:
//!
//! - **Runtime-free** modules are tokio-util's own code, re-exported as they
//!   are: [`codec`] (framing over tokio's `AsyncRead`/`AsyncWrite`, which
//!   numa_rt's sockets implement), [`compat`] (tokio ↔ futures-io traits),
//!   [`sync`] (`CancellationToken`, `PollSender`, `PollSemaphore`,
//!   `ReusableBoxFuture`), [`either`], most of [`io`] and [`bytes`]. A
//!   library that names `tokio_util::codec::Framed<S, C>` in its API gets
//!   the very same type from `numa_rt_util::codec`.
//! - **Runtime-bound** modules are written here for numa_rt's scheduler,
//!   timers and sockets, with tokio-util's names and signatures: [`task`]
//!   (`TaskTracker`, `JoinMap`, `JoinQueue`, `AbortOnDropHandle`,
//!   `LocalPoolHandle`), [`time`] (`DelayQueue`, [`FutureExt::timeout`](
//!   future::FutureExt::timeout)), [`udp`] (`UdpFramed`), [`context`]
//!   (`RuntimeExt::wrap`), [`net`] (`Listener`), and in [`io`]
//!   `SyncIoBridge` and `read_exact_arc`. tokio-util's versions of these
//!   call tokio's runtime (`tokio::spawn`, tokio's timer and `Instant`,
//!   tokio's `Handle`), which does not run inside numa_rt.
//!
//! No tokio runtime is compiled in: tokio-util is built without its `rt`,
//! `time`, `net` and `io-util` features, and tokio with `sync` and
//! `io-util` only.
//!
//! ## The web stack's runtime-bound parts (optional features)
//!
//! Each feature is named after the crate whose runtime-bound parts it
//! replaces, and none starts or calls a tokio runtime:
//!
//! | feature | module | replaces |
//! |---|---|---|
//! | `tower` | `tower` | tower's `Timeout`, `RateLimit`, retry backoff, `Buffer::new` |
//! | `tower-http` | `tower_http` | tower-http's `TimeoutLayer` (408) and body timeouts |
//! | `tokio-stream` | `stream` | tokio-stream's listener, interval and signal wrappers; `timeout`, `throttle`, `chunks_timeout` |
//! | `tokio-postgres` | `postgres` | tokio-postgres's `connect` (resolve, connect timeout, keepalive, spawn) |
//! | `redis` | `redis` | redis-rs's connection set-up and response timeouts |
//!
//! Two of them compile parts of tokio's runtime in without starting them:
//! `tower` (tower's `buffer`, `timeout` and `retry` features, for tower's
//! own `Buffer` and `Elapsed` types) and `redis` (redis-rs 1.x does not
//! compile its async API without `tokio-comp`; see the module).
//!
//! ```
//! use numa_rt_util::sync::CancellationToken;
//! use numa_rt_util::task::TaskTracker;
//!
//! #[numa_rt::main(max_procs = 2)]
//! async fn main() {
//!     let tracker = TaskTracker::new();
//!     let token = CancellationToken::new();
//!     for i in 0..4u64 {
//!         let token = token.clone();
//!         tracker.spawn(async move {
//!             token.cancelled().await; // a worker that runs until shutdown
//!             i
//!         });
//!     }
//!     // Shutdown: no new tasks, tell the running ones, wait for them all.
//!     tracker.close();
//!     token.cancel();
//!     tracker.wait().await;
//!     assert!(tracker.is_empty());
//! }
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub use bytes;

/// Adaptors from `AsyncRead`/`AsyncWrite` to `Stream`/`Sink` of frames
/// (tokio-util's `codec` module, re-exported as it is).
///
/// ```
/// use futures::{SinkExt, StreamExt};
/// use numa_rt_util::codec::{Framed, LinesCodec};
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() {
/// let (a, b) = numa_rt::io::duplex(64);
/// let mut left = Framed::new(a, LinesCodec::new());
/// let mut right = Framed::new(b, LinesCodec::new());
/// left.send("hello").await.unwrap();
/// assert_eq!(right.next().await.unwrap().unwrap(), "hello");
/// # }
/// ```
pub mod codec {
    pub use tokio_util::codec::*;
}

/// Compatibility between tokio's and futures-io's I/O traits (tokio-util's
/// `compat` module, re-exported).
pub mod compat {
    pub use tokio_util::compat::*;
}

/// Synchronization primitives: `CancellationToken`, `PollSender`,
/// `PollSemaphore`, `ReusableBoxFuture` (tokio-util's `sync` module,
/// re-exported: they need no runtime).
pub mod sync {
    pub use tokio_util::sync::*;
}

/// `Either`, a future, stream and `AsyncRead`/`AsyncWrite` of two kinds
/// (tokio-util's, re-exported).
pub mod either {
    pub use tokio_util::either::*;
}

pub mod context;
pub mod future;
pub mod io;
pub mod net;
pub mod task;
pub mod time;
pub mod udp;

#[cfg(feature = "tokio-postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "tokio-stream")]
pub mod stream;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "tower-http")]
pub mod tower_http;
