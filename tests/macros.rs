//! `#[numa_rt::main]` and `#[numa_rt::test]`.
//!
//! `ui` compiles every case under tests/ui: the ones at the top level must fail with exactly the
//! committed `.stderr` (one error each, pointing at the bad argument or the user's code), the ones
//! in tests/ui/pass must build and run. Regenerate the `.stderr` files after an intended change
//! with `TRYBUILD=overwrite cargo test --test macros`, then read them.
//!
//! The other tests use `#[numa_rt::test]` itself, so the test harness runs what the macro emits.

use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

#[numa_rt::test]
async fn runs_the_body() {
    static RAN: AtomicUsize = AtomicUsize::new(0);
    async { RAN.fetch_add(1, Ordering::SeqCst) }.await;
    assert_eq!(RAN.load(Ordering::SeqCst), 1);
}

#[numa_rt::test]
async fn body_runs_inside_the_runtime() {
    let handle = numa_rt::spawn(async { 6 * 7 });
    assert_eq!(handle.await.unwrap(), 42);
}

#[numa_rt::test(max_procs = 1)]
async fn with_max_procs() {
    let handles: Vec<_> = (0..10).map(|i| numa_rt::spawn(async move { i })).collect();
    let mut sum = 0;
    for h in handles {
        sum += h.await.unwrap();
    }
    assert_eq!(sum, 45);
}

#[numa_rt::test(max_procs = 2, global_queue_interval = 31)]
async fn with_several_arguments() {
    assert_eq!(numa_rt::spawn(async { "ok" }).await.unwrap(), "ok");
}

#[numa_rt::test]
async fn returns_ok() -> Result<(), std::num::ParseIntError> {
    // `?` converts into the declared error type.
    let n: u32 = "7".parse()?;
    assert_eq!(n, 7);
    Ok(())
}

#[numa_rt::test]
async fn early_return_has_the_declared_type() -> Result<(), String> {
    if std::hint::black_box(false) {
        return Err("unreachable".to_string());
    }
    Ok(())
}

#[numa_rt::test]
#[should_panic(expected = "boom from the body")]
async fn should_panic_is_kept() {
    panic!("boom from the body");
}

#[numa_rt::test]
#[ignore = "checks that #[ignore] is kept: this would fail if it ran"]
async fn ignore_is_kept() {
    panic!("an ignored test ran");
}

/// `#[numa_rt::test]` turns the deadlock diagnostic to `panic`: a test whose
/// tasks all wait on each other fails with the diagnostic instead of hanging.
#[numa_rt::test(max_procs = 1)]
#[should_panic(expected = "all tasks are asleep - possible deadlock")]
async fn a_deadlocked_test_fails_instead_of_hanging() {
    let (_tx, rx) = futures::channel::oneshot::channel::<()>();
    let _ = rx.await;
}

/// `deadlock = "..."` chooses another mode; a wait that ends is never reported.
#[numa_rt::test(deadlock = "warn")]
async fn the_deadlock_mode_can_be_chosen() {
    numa_rt::spawn(async {}).await.unwrap();
}
