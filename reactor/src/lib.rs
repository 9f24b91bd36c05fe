//! numa_rt's reactor: one netpoller and one timer set per processor (P).
//!
//! The executor owns one [`Driver`] per P and parks its machines (M) in it;
//! the design (per node, one parked M — the watcher — blocks on every P's io
//! poller and runs what they wake, the other parked M's sleep on their own
//! eventfds, so one event wakes one thread) and the park/unpark protocol the
//! two crates share are described in `docs/architecture.md` ("Idle P's and
//! parked M's: the park/unpark protocol", "The per-P reactor").
//! Everything in here is usable without the executor, which is how the tests
//! drive it.
//!
//! The contract with the executor:
//! - [`Reactor::new`] (or [`Reactor::with_nodes`]) builds the runtime-wide set
//!   of drivers, one per P.
//! - Worker threads, `block_on` and `Handle::enter` call [`context::enter`] so
//!   I/O types and timers find the reactor.
//! - The M holding P `i` calls [`context::set_current_p`]`(Some(i))`, then
//!   [`Driver::poll_now`] every `event_interval` ticks and when it runs out
//!   of work (unless [`Driver::watches`] says its park would look anyway),
//!   and [`Driver::park`] when it has nothing to run. Wakers fired by either run on the calling
//!   thread, so the executor schedules the woken tasks onto that thread's P,
//!   in firing order: timers, then write readiness, read, and accepts last.
//! - [`Unparker::unpark`] wakes a machine parked in [`Driver::park`].
//! - Each task poll runs inside [`coop::budget`]; after it, spawn consults
//!   [`context::take_accepted`] to spread connection tasks round-robin.
//! - The executor's sysmon runs on the reactor's monitor thread
//!   ([`Reactor::set_sysmon`], [`SysmonHook`]).
//! - [`Reactor::shutdown`] at runtime shutdown.

#![warn(missing_docs)]

mod clock;
pub mod context;
pub mod coop;
mod current;
mod driver;
#[doc(hidden)]
pub mod fault;
pub mod net;
pub mod signal;
mod sys;
pub mod time;
mod tuning;

pub use driver::io::is_shutdown_error;
pub use driver::{
    Driver, DriverStats, EventsPerTick, Reactor, SysmonHook, Unparker, EVENTS_PER_TICK,
    FDS_PER_PROC,
};
pub use tuning::TIMER_TICK;

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}

    #[test]
    fn handles_cross_threads() {
        send_sync::<crate::Reactor>();
        send_sync::<crate::Unparker>();
        send::<crate::Driver>();
        send_sync::<crate::time::Sleep>();
        send_sync::<crate::time::Interval>();
        send_sync::<crate::net::TcpStream>();
        send_sync::<crate::net::TcpListener>();
        send_sync::<crate::net::UdpSocket>();
        send_sync::<crate::net::UnixStream>();
        send_sync::<crate::net::UnixDatagram>();
        send_sync::<crate::net::OwnedWriteHalf<crate::net::TcpStream>>();
        send_sync::<crate::net::TcpSocket>();
        send_sync::<crate::net::AsyncFd<std::os::fd::OwnedFd>>();
        send_sync::<crate::net::Interest>();
        send_sync::<crate::net::Ready>();
    }
}
