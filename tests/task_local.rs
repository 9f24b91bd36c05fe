//! tokio's `task_local!`, `task::consume_budget`, `task::unconstrained` and
//! `Handle::runtime_flavor` under their numa_rt names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use numa_rt::runtime::{Handle, RuntimeFlavor};
use numa_rt::task;

numa_rt::task_local! {
    static NAME: String;
    pub(crate) static DEPTH: u32;
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_holds_across_awaits_and_not_in_spawned_tasks() {
    let (inside, spawned) = NAME
        .scope("outer".to_string(), async {
            let mut seen = Vec::new();
            for _ in 0..50 {
                // Yields let the task be resumed by either P.
                task::yield_now().await;
                seen.push(NAME.get());
            }
            let spawned = numa_rt::spawn(async { NAME.try_with(|n| n.clone()).is_err() })
                .await
                .unwrap();
            (seen, spawned)
        })
        .await;
    assert!(inside.iter().all(|n| n == "outer"), "{inside:?}");
    assert!(spawned, "a spawned task does not inherit the scope");
    let err = NAME.try_with(|_| ()).unwrap_err();
    assert!(err.to_string().contains("not set"), "{err}");
}

#[numa_rt::test]
async fn nested_scopes_shadow_and_restore() {
    DEPTH
        .scope(1, async {
            assert_eq!(DEPTH.get(), 1);
            DEPTH
                .scope(2, async {
                    task::yield_now().await;
                    assert_eq!(DEPTH.get(), 2);
                })
                .await;
            assert_eq!(DEPTH.get(), 1);
            DEPTH.sync_scope(3, || assert_eq!(DEPTH.get(), 3));
            assert_eq!(DEPTH.with(|d| *d + 1), 2);
        })
        .await;
}

#[test]
fn sync_scope_restores_the_outer_value_after_a_panic() {
    DEPTH.sync_scope(1, || {
        let r = std::panic::catch_unwind(|| DEPTH.sync_scope(2, || panic!("inner")));
        assert!(r.is_err());
        assert_eq!(DEPTH.get(), 1);
    });
    assert!(DEPTH.try_with(|_| ()).is_err());
}

#[test]
fn entering_a_scope_inside_with_on_the_same_key_panics_clearly() {
    let r = std::panic::catch_unwind(|| {
        DEPTH.sync_scope(1, || DEPTH.with(|_| DEPTH.sync_scope(2, || ())))
    });
    let payload = r.unwrap_err();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(msg.contains("borrowed"), "{msg}");
}

#[numa_rt::test]
async fn a_future_dropped_before_completion_is_dropped_inside_its_scope() {
    struct ReadsOnDrop(Arc<std::sync::Mutex<Option<String>>>);
    impl Drop for ReadsOnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = NAME.try_with(|n| n.clone()).ok();
        }
    }
    let seen = Arc::new(std::sync::Mutex::new(None));
    let guard = ReadsOnDrop(seen.clone());
    let handle = numa_rt::spawn(NAME.scope("task".to_string(), async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    }));
    task::yield_now().await;
    handle.abort();
    assert!(handle.await.unwrap_err().is_cancelled());
    assert_eq!(seen.lock().unwrap().as_deref(), Some("task"));
}

#[numa_rt::test]
async fn take_value_gives_the_value_back() {
    let mut fut = std::pin::pin!(NAME.scope("v".to_string(), async {}));
    assert_eq!(fut.as_mut().take_value().as_deref(), Some("v"));
    assert_eq!(fut.as_mut().take_value(), None);
}

#[numa_rt::test]
async fn consume_budget_lets_the_other_tasks_of_its_processor_run() {
    // One P: without a yield the loop below would starve `setter` until the
    // bound ran out.
    let flag = Arc::new(AtomicBool::new(false));
    let setter = numa_rt::spawn({
        let flag = flag.clone();
        async move { flag.store(true, Ordering::Relaxed) }
    });
    let mut spins = 0u32;
    while !flag.load(Ordering::Relaxed) && spins < 100_000 {
        task::consume_budget().await;
        spins += 1;
    }
    assert!(
        flag.load(Ordering::Relaxed),
        "setter never ran in {spins} rounds"
    );
    assert!(spins <= 2 * 128, "yielded only after {spins} rounds");
    setter.await.unwrap();
}

/// How many of 1,000 budget checks in a row say "yield".
async fn budget_refusals() -> u32 {
    let mut refusals = 0;
    for _ in 0..1_000 {
        let mut refused = false;
        std::future::poll_fn(|cx| {
            refused = numa_rt::coop::poll_proceed(cx).is_pending();
            std::task::Poll::Ready(())
        })
        .await;
        refusals += u32::from(refused);
    }
    refusals
}

#[numa_rt::test]
async fn unconstrained_never_yields_for_budget() {
    assert_eq!(task::unconstrained(budget_refusals()).await, 0);
    // Constrained, the same loop runs out of budget.
    assert!(budget_refusals().await > 0);
}

#[numa_rt::test]
async fn a_test_runs_on_the_current_thread_flavor() {
    assert_eq!(
        Handle::current().runtime_flavor(),
        RuntimeFlavor::CurrentThread
    );
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_is_multi_thread() {
    assert_eq!(
        Handle::current().runtime_flavor(),
        RuntimeFlavor::MultiThread
    );
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_metric_names() {
    let m = Handle::current().metrics();
    assert_eq!(m.num_workers(), 2);
    let pending = numa_rt::spawn(std::future::pending::<()>());
    assert!(m.num_alive_tasks() >= 1);
    pending.abort();
}
