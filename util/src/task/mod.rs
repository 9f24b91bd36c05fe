//! Task utilities on numa_rt's scheduler (tokio-util's `task` module).
//!
//! | type | what |
//! |---|---|
//! | [`TaskTracker`] | counts a group of tasks; waits until it is closed and empty (graceful shutdown) |
//! | [`JoinMap`] | a `JoinSet` whose tasks have keys: abort or look up by key |
//! | [`JoinQueue`] | tasks whose results come out in spawn order |
//! | [`AbortOnDropHandle`], [`AbortOnDrop`] | handles that abort their task when dropped |
//! | [`LocalPoolHandle`] | a pool of threads where `!Send` futures run pinned |
//!
//! All spawn through numa_rt ([`numa_rt::spawn`], `spawn_local`,
//! `spawn_blocking`, or a [`Handle`](numa_rt::runtime::Handle)'s) and hand
//! out numa_rt's [`JoinHandle`](numa_rt::task::JoinHandle) and
//! [`AbortHandle`](numa_rt::task::AbortHandle).
//!
//! One difference from tokio-util: `spawn_local` works on any numa_rt
//! runtime (a task pinned to the calling M), where tokio needs a `LocalSet`
//! or a local runtime and panics otherwise. `spawn_local_on` takes numa_rt's
//! [`LocalSet`](numa_rt::task::LocalSet).

mod abort_on_drop;
mod join_map;
mod join_queue;
mod spawn_pinned;
pub mod task_tracker;

pub use abort_on_drop::{AbortOnDrop, AbortOnDropHandle};
pub use join_map::{JoinMap, JoinMapKeys};
pub use join_queue::JoinQueue;
pub use spawn_pinned::LocalPoolHandle;
#[doc(inline)]
pub use task_tracker::TaskTracker;
