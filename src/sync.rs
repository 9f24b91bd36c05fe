//! Synchronisation for tasks, with tokio's names and types: channels
//! ([`mpsc`], [`oneshot`], [`broadcast`], [`watch`]), [`Notify`],
//! [`Semaphore`], [`Mutex`], [`RwLock`], [`Barrier`], [`OnceCell`] and the
//! rest of `tokio::sync`.
//!
//! # Which implementation, and why
//!
//! These are tokio's own, re-exported: `tokio::sync` is runtime-agnostic
//! (its futures are woken through the `Waker` they are polled with, never
//! through a tokio runtime), it is the most used and most tested set of
//! async primitives in Rust, and keeping the types identical means a
//! library whose API takes a `tokio::sync::mpsc::Sender` takes numa_rt's.
//! The tokio crate is built with `sync` and no runtime feature.
//!
//! One difference from running them on tokio: tokio's runtime gives each
//! task a budget that these primitives spend, so a loop over a channel that
//! is always ready still yields now and then. numa_rt's budget
//! ([`crate::coop`]) is spent by numa_rt's sockets and timers, not by
//! tokio's primitives; a task that drains an always-full channel in a
//! tight loop holds its P until the channel is empty. A long loop can call
//! [`task::yield_now`](crate::task::yield_now) or
//! [`coop::poll_proceed`](crate::coop::poll_proceed) now and then.
//!
//! ```
//! use numa_rt::sync::{mpsc, oneshot, Semaphore};
//! use std::sync::Arc;
//!
//! # #[numa_rt::main(max_procs = 2)]
//! # async fn main() {
//! // A worker that answers requests over a channel.
//! let (tx, mut rx) = mpsc::channel::<(u64, oneshot::Sender<u64>)>(16);
//! numa_rt::spawn(async move {
//!     while let Some((n, reply)) = rx.recv().await {
//!         let _ = reply.send(n * n);
//!     }
//! });
//! let limit = Arc::new(Semaphore::new(4));
//! let mut sum = 0;
//! for n in 0..10 {
//!     let _permit = limit.clone().acquire_owned().await.unwrap();
//!     let (reply, answer) = oneshot::channel();
//!     tx.send((n, reply)).await.unwrap();
//!     sum += answer.await.unwrap();
//! }
//! assert_eq!(sum, 285);
//! # }
//! ```

pub use tokio::sync::*;
