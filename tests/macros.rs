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
    // `tokio_compat` without numa_rt's feature: only then is it an error.
    #[cfg(not(feature = "tokio-compat"))]
    t.compile_fail("tests/ui/no_compat/*.rs");
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

/// tokio's test default: one P, the body a task on it. The racy
/// expiry: a spawned task expires a key when its deadline passes; after
/// `advance` the body's next step must see the key gone. With the body
/// polled by `block_on` on the test thread it raced the purge task on the
/// worker (12 of 20 runs failed); here the purge task runs before the body
/// goes on, every time.
#[numa_rt::test(start_paused = true)]
async fn the_body_does_not_race_its_own_tasks() {
    use numa_rt::time::{advance, sleep_until, Duration, Instant};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    for round in 0..20 {
        let db: Arc<Mutex<HashMap<&str, Instant>>> = Arc::default();
        let expires = Instant::now() + Duration::from_secs(1);
        db.lock().unwrap().insert("key", expires);
        let purge = numa_rt::spawn({
            let db = db.clone();
            async move {
                sleep_until(expires).await;
                let now = Instant::now();
                db.lock().unwrap().retain(|_, at| *at > now);
            }
        });
        // Let the purge task register its timer, as a server's would be
        // by the time a request comes.
        numa_rt::task::yield_now().await;
        advance(Duration::from_secs(1)).await;
        assert!(
            !db.lock().unwrap().contains_key("key"),
            "round {round}: the key has not expired yet"
        );
        purge.await.unwrap();
    }
}

/// A `current_thread` body that deadlocks fails with the diagnostic too.
#[numa_rt::test]
#[should_panic(expected = "all tasks are asleep - possible deadlock")]
async fn a_deadlocked_current_thread_test_fails() {
    let (_tx, rx) = futures::channel::oneshot::channel::<()>();
    let _ = rx.await;
}

/// A `current_thread` body may hold `!Send` values across awaits and
/// return a `!Send` error; its tasks run on the same one P.
#[numa_rt::test(flavor = "current_thread")]
async fn current_thread_body_is_not_send() -> Result<(), Box<dyn std::error::Error>> {
    let rc = std::rc::Rc::new(std::cell::Cell::new(0));
    let body_thread = std::thread::current().id();
    let task_thread = numa_rt::spawn(async { std::thread::current().id() })
        .await
        .unwrap();
    rc.set(rc.get() + 1);
    assert_eq!(body_thread, task_thread, "one P, one worker thread");
    assert_eq!(numa_rt::Handle::current().metrics().num_procs(), 1);
    let _: u32 = "7".parse()?;
    Ok(())
}

/// `flavor = "multi_thread", worker_threads = N` is `max_procs = N`.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 3)]
async fn multi_thread_worker_threads() {
    assert_eq!(numa_rt::Handle::current().metrics().num_procs(), 3);
}

/// `flavor = "local"` (tokio's local runtime): one thread for the body and
/// every task, `!Send` tasks spawned with `spawn_local`.
#[numa_rt::test(flavor = "local")]
async fn local_flavor_runs_not_send_tasks_on_the_body_s_thread() {
    let rc = std::rc::Rc::new(5);
    let body_thread = std::thread::current().id();
    let r = rc.clone();
    let (v, thread) =
        numa_rt::task::spawn_local(async move { (*r + 1, std::thread::current().id()) })
            .await
            .unwrap();
    assert_eq!((v, thread), (6, body_thread));
    assert_eq!(numa_rt::Handle::current().metrics().num_procs(), 1);
}

/// `name = ".."` names the runtime (`Builder::name`).
#[numa_rt::test(name = "named by the attribute")]
async fn the_name_argument_names_the_runtime() {
    assert_eq!(
        numa_rt::Handle::current().name(),
        Some("named by the attribute")
    );
}

/// A `#[numa_rt::main]` method taking `self` (tokio allows parameters on
/// any such function but `main`): the body runs on the calling thread.
#[test]
fn main_on_a_method_taking_self() {
    struct Service(u32);
    impl Service {
        #[numa_rt::main(flavor = "current_thread")]
        async fn run(self, add: u32) -> u32 {
            numa_rt::spawn(async move { self.0 + add }).await.unwrap()
        }
    }
    assert_eq!(Service(40).run(2), 42);
}
