//! Bad arguments to the time functions panic at the caller's line, as
//! tokio's do (`#[track_caller]`): the report points at the user's code.
//! One test in its own binary: it swaps the process's panic hook.

use std::sync::{Arc, Mutex};
use std::time::Duration;

fn panic_file(f: impl FnOnce() + std::panic::UnwindSafe) -> Option<String> {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        *s.lock().unwrap() = info.location().map(|l| l.file().to_string());
    }));
    let r = std::panic::catch_unwind(f);
    std::panic::set_hook(prev);
    assert!(r.is_err(), "no panic");
    let file = seen.lock().unwrap().take();
    file
}

#[test]
fn zero_periods_and_double_pauses_panic_at_the_caller() {
    let here = Some(file!().to_string());
    assert_eq!(
        panic_file(|| drop(numa_rt::time::interval(Duration::ZERO))),
        here
    );
    assert_eq!(
        panic_file(|| drop(numa_rt::time::interval_at(
            numa_rt::time::Instant::now(),
            Duration::ZERO
        ))),
        here
    );
    let rt = numa_rt::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(
        panic_file(|| rt.block_on(async {
            numa_rt::time::pause();
            numa_rt::time::pause();
        })),
        here
    );
}
