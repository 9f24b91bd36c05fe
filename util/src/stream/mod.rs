//! tokio-stream on numa_rt (feature `tokio-stream`).
//!
//! tokio-stream's runtime-free parts are re-exported as they are
//! ([`Stream`], [`StreamMap`], [`iter`], [`once`], …, and in
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
//! Replace `tokio_stream` by `numa_rt_util::stream`. [`StreamExt`] is this
//! crate's: every method of tokio-stream's, the timed ones on numa_rt's
//! timer, so one `use` line changes and nothing else, whichever of
//! tokio-stream's features other crates switch on:
//!
//! ```
//! use numa_rt_util::stream::StreamExt; // was: tokio_stream::StreamExt
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
//! Importing tokio-stream's `StreamExt` beside it makes every method
//! ambiguous: import one of the two.

mod ext;
mod timed;
pub mod wrappers;

pub use ext::StreamExt;
pub use timed::{ChunksTimeout, Elapsed, Throttle, Timeout, TimeoutRepeating};
pub use tokio_stream::{
    empty, iter, once, pending, Empty, FromStream, Iter, Once, Pending, Stream, StreamMap,
    StreamNotifyClose,
};

/// tokio-stream's stream adapters (the types `StreamExt`'s methods return),
/// with this crate's timed ones beside them.
pub mod adapters {
    pub use super::timed::{ChunksTimeout, Throttle, Timeout, TimeoutRepeating};
    pub use tokio_stream::adapters::*;
}
