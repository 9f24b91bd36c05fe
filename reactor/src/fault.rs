//! Containing panics of user code that the runtime itself calls.
//!
//! The runtime calls user code outside any task: wakers stored by futures
//! (fired by the drivers when a timer is due or a socket becomes ready, and
//! at shutdown) and the builder's hooks (run by the executor on its
//! threads). A panic there must not unwind through a machine's loop: the
//! thread would die holding its processor, and every task queued on that
//! processor would wait forever. So each such call is wrapped in
//! [`std::panic::catch_unwind`], and a panic becomes one line on stderr:
//!
//! ```text
//! numa_rt: a timer's waker panicked in wake() ("boom"); the runtime carries on
//! ```
//!
//! (after the usual `thread '…' panicked at …` line of the panic hook). The
//! caller then carries on as if the call had returned.
//!
//! Cost: `catch_unwind` compiles to a plain call plus an unwinding landing
//! pad, which costs nothing until something panics; nothing is allocated per
//! call. The closure is `AssertUnwindSafe` because no runtime state is
//! borrowed across the call: the drivers fire wakers after releasing every
//! lock, from buffers they own.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// Wakes `waker`, containing a panic of its `wake()` (reported on stderr as
/// `what`, e.g. "a timer's waker").
#[inline]
pub fn wake(waker: Waker, what: &str) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || waker.wake())) {
        report(&format!("{what} panicked in wake()"), &*payload);
    }
}

/// Runs `f`, containing a panic (reported on stderr as `what`, followed by
/// `then`, what the runtime does next). `None` if it panicked.
pub fn contain<R>(what: &str, then: &str, f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            report_then(&format!("{what} panicked"), &*payload, then);
            None
        }
    }
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a non-string payload"
    }
}

#[cold]
fn report(what: &str, payload: &(dyn Any + Send)) {
    report_then(what, payload, "the runtime carries on");
}

#[cold]
fn report_then(what: &str, payload: &(dyn Any + Send), then: &str) {
    // A failed write to stderr has nowhere else to go; it is ignored.
    use std::io::Write;
    let msg = panic_message(payload);
    let _ = writeln!(std::io::stderr(), "numa_rt: {what} ({msg:?}); {then}");
    // The payload is dropped by the caller's scope; a payload whose own Drop
    // panics would abort (as it would anywhere in Rust).
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Panicky(AtomicUsize);
    impl Wake for Panicky {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
            panic!("waker boom");
        }
    }

    #[test]
    fn a_panicking_waker_is_contained() {
        let w = Arc::new(Panicky(AtomicUsize::new(0)));
        wake(Waker::from(w.clone()), "a test waker");
        wake(Waker::from(w.clone()), "a test waker");
        assert_eq!(w.0.load(Ordering::Relaxed), 2, "both calls reached wake()");
    }

    #[test]
    fn contain_returns_the_value_or_none() {
        assert_eq!(contain("a test hook", "carrying on", || 7), Some(7));
        let r: Option<()> = contain("a test hook", "carrying on", || panic!("hook boom"));
        assert_eq!(r, None);
        let msg = String::from("owned");
        let p = catch_unwind(move || std::panic::panic_any(msg)).unwrap_err();
        assert_eq!(panic_message(&*p), "owned");
        let p = catch_unwind(|| std::panic::panic_any(5u8)).unwrap_err();
        assert_eq!(panic_message(&*p), "a non-string payload");
    }
}
