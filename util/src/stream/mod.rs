//! tokio-stream on numa_rt (feature `tokio-stream`).
//!
//! tokio-stream's runtime-free parts are re-exported as they are
//! ([`Stream`], [`StreamExt`], [`StreamMap`], [`iter`], [`once`], …, and in
//! [`wrappers`] the channel, broadcast, watch and I/O-line streams). Its
//! runtime-bound parts are written here with tokio-stream's names:
//! [`wrappers::TcpListenerStream`], [`wrappers::UnixListenerStream`],
//! [`wrappers::IntervalStream`], [`wrappers::SignalStream`],
//! [`wrappers::JoinSetStream`] and [`wrappers::ReadDirStream`] over
//! numa_rt's types, and the timed combinators `timeout`,
//! `timeout_repeating`, `throttle` and `chunks_timeout` on numa_rt's timer.
//!
//! # Porting
//!
//! Replace `tokio_stream` by `numa_rt_util::stream`. The timed combinators
//! are tokio-stream `StreamExt` methods, and another crate cannot add
//! methods to that trait, so they live in [`TimedStreamExt`]: a port that
//! calls one of them adds that trait to its `use` line:
//!
//! ```
//! use numa_rt_util::stream::{StreamExt, TimedStreamExt}; // was: tokio_stream::StreamExt
//! use std::time::Duration;
//!
//! #[numa_rt::main(max_procs = 1)]
//! async fn main() {
//!     let mut items = numa_rt_util::stream::iter([1, 2, 3]).throttle(Duration::from_millis(1));
//!     let mut seen = Vec::new();
//!     while let Some(x) = items.next().await {
//!         seen.push(x);
//!     }
//!     assert_eq!(seen, [1, 2, 3]);
//! }
//! ```
//!
//! Build tokio-stream without its `time` feature (`default-features =
//! false`) where the application names it itself: with it on, its
//! `StreamExt::timeout` would clash with this crate's
//! [`TimedStreamExt::timeout`] (and sleep on tokio's timer).

mod timed;
pub mod wrappers;

pub use timed::{ChunksTimeout, Elapsed, Throttle, TimedStreamExt, Timeout, TimeoutRepeating};
pub use tokio_stream::{
    empty, iter, once, pending, Empty, FromStream, Iter, Once, Pending, Stream, StreamExt,
    StreamMap, StreamNotifyClose,
};

/// tokio-stream's stream adapters (the types `StreamExt`'s methods return),
/// with this crate's timed ones beside them.
pub mod adapters {
    pub use super::timed::{ChunksTimeout, Throttle, Timeout, TimeoutRepeating};
    pub use tokio_stream::adapters::*;
}
