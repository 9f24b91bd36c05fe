//! Thread-local context: which processor (P) this thread's machine holds, and
//! which reactor it belongs to.

use std::cell::Cell;

thread_local! {
    static CURRENT_P: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Records the P this thread's M now holds (`None` when it holds none).
/// I/O sources first polled on this thread register with that P's poller.
pub fn set_current_p(p: Option<usize>) {
    CURRENT_P.with(|c| c.set(p));
}

/// The P this thread's M holds, if any.
pub fn current_p() -> Option<usize> {
    CURRENT_P.with(|c| c.get())
}
