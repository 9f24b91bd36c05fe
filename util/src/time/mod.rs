//! Timer utilities on numa_rt's timers (tokio-util's `time` module):
//! [`DelayQueue`] and the timeouts of [`FutureExt`].
//!
//! Deadlines are numa_rt's [`Instant`](numa_rt::time::Instant), which
//! follows a paused clock (`numa_rt::time::pause`, or
//! `#[numa_rt::test(start_paused = true)]`), so timer code is tested in no
//! time as on tokio.

pub mod delay_queue;

#[doc(inline)]
pub use crate::future::FutureExt;
#[doc(inline)]
pub use delay_queue::DelayQueue;
