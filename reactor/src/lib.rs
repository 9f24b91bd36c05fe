//! numa_rt's reactor: one netpoller and one timer set per processor (P).
//!
//! The executor owns one [`Driver`] per P and parks its machines (M) in it; see
//! `docs/architecture.md` ("The per-P reactor"). Everything in here is usable
//! without the executor, which is how the unit tests drive it.
//!
//! The contract with the executor:
//! - [`Reactor::new`] builds the runtime-wide set of drivers, one per P.
//! - The M holding P `i` calls [`context::set_current_p`]`(Some(i))`, then
//!   [`Driver::poll_now`] every `event_interval` ticks and [`Driver::park`] when
//!   it has nothing to run. Wakers fired by either run on the calling thread,
//!   so the executor schedules the woken tasks onto that thread's P.
//! - [`Unparker::unpark`] wakes a machine parked in [`Driver::park`].
//! - Each task poll runs inside [`coop::budget`].

pub mod context;
pub mod coop;
mod driver;

pub use driver::{Driver, Reactor, Unparker};
