//! Misuse (bad time arguments, a nested block_on) panics at the caller's line, as
//! tokio's do (`#[track_caller]`): the report points at the user's code.
//! In a binary of its own: it swaps the process's panic hook (one test at
//! a time, through `HOOK`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

static HOOK: Mutex<()> = Mutex::new(());

fn panic_file(f: impl FnOnce() + std::panic::UnwindSafe) -> Option<String> {
    let _one_at_a_time = HOOK.lock().unwrap_or_else(|e| e.into_inner());
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
fn time_misuse_panics_at_the_caller() {
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

#[test]
fn block_on_misuse_panics_at_the_caller() {
    let here = Some(file!().to_string());
    let rt = numa_rt::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let set = numa_rt::task::LocalSet::new();
    // Nested in the runtime's own block_on: refused where it is written.
    assert_eq!(
        panic_file(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async { set.block_on(&rt, async {}) })
        })),
        here
    );
    assert_eq!(
        panic_file(|| rt.block_on(async { rt.block_on(async {}) })),
        here
    );
}
