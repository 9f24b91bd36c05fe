//! TaskMonitor: the per-task timings follow the task's life.

mod common;
use common::rt;
use futures::channel::oneshot;
use numa_rt_executor::{spawn, TaskMetrics, TaskMonitor};
use std::time::Duration;

#[test]
fn a_wait_is_counted_as_idle_then_scheduled() {
    let rt = rt(2);
    let monitor = TaskMonitor::new();
    rt.block_on(async {
        let (waiting_tx, waiting_rx) = oneshot::channel::<()>();
        let (go_tx, go_rx) = oneshot::channel::<u32>();
        let h = spawn(monitor.instrument(async move {
            waiting_tx.send(()).unwrap();
            go_rx.await.unwrap()
        }));
        // The task has run its first poll up to the wait, and that poll has
        // returned (it is counted as it returns).
        waiting_rx.await.unwrap();
        let deadline = std::time::Instant::now() + common::HANG;
        while monitor.cumulative().total_poll_count == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the first poll never ended"
            );
            std::thread::yield_now();
        }
        assert_eq!(monitor.cumulative().first_poll_count, 1);
        go_tx.send(7).unwrap();
        assert_eq!(h.await.unwrap(), 7);
    });
    let m = monitor.cumulative();
    assert_eq!(m.instrumented_count, 1);
    assert_eq!(m.dropped_count, 1);
    assert_eq!(m.first_poll_count, 1);
    // First poll: sends, then waits. Second poll: the value is there.
    assert_eq!(m.total_poll_count, 2, "{m:?}");
    assert_eq!(m.total_idled_count, 1, "{m:?}");
    assert_eq!(m.total_scheduled_count, 1, "{m:?}");
    assert!(m.total_poll_duration > Duration::ZERO);
}

#[test]
fn slow_polls_are_counted_over_the_threshold() {
    let rt = rt(1);
    let monitor = TaskMonitor::with_slow_poll_threshold(Duration::from_millis(1));
    rt.block_on(async {
        spawn(monitor.instrument(async {
            std::thread::sleep(Duration::from_millis(3));
        }))
        .await
        .unwrap();
    });
    let m = monitor.cumulative();
    assert_eq!(m.total_slow_poll_count, 1, "{m:?}");
    assert!(
        m.total_slow_poll_duration >= Duration::from_millis(3),
        "{m:?}"
    );
    assert!(m.slow_poll_ratio() > 0.99);
    assert!(m.mean_poll_duration() >= Duration::from_millis(3));
}

#[test]
fn intervals_give_the_growth_since_the_previous_one() {
    let rt = rt(1);
    let monitor = TaskMonitor::new();
    let mut intervals = monitor.intervals();
    rt.block_on(async {
        for _ in 0..5 {
            spawn(monitor.instrument(async {})).await.unwrap();
        }
    });
    let first = intervals.next().unwrap();
    assert_eq!(first, monitor.cumulative());
    assert_eq!(first.instrumented_count, 5);
    let second = intervals.next().unwrap();
    assert_eq!(second, TaskMetrics::default());
}

#[test]
fn a_cancelled_instrumented_future_is_counted_as_dropped() {
    let rt = rt(1);
    let monitor = TaskMonitor::new();
    rt.block_on(async {
        let h = spawn(monitor.instrument(futures::future::pending::<()>()));
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
    });
    // The abort drops the future on a worker: wait (bounded) for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while monitor.cumulative().dropped_count == 0 {
        assert!(std::time::Instant::now() < deadline, "never dropped");
        std::thread::yield_now();
    }
    assert_eq!(monitor.cumulative().instrumented_count, 1);
}
