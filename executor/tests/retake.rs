//! sysmon's retake: a P whose thread is stuck inside one poll is handed,
//! with its queue, to another thread (see `scheduler::seat`).
//!
//! The blockers spin on a flag that only the task queued behind them sets:
//! without retake they would never return, so each spin is bounded by
//! `common::HANG` and fails the test when it runs out.

mod common;
use common::HANG;
use futures::channel::oneshot;
use numa_rt_executor::{spawn, spawn_local, Builder, Runtime};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn rt(retake: Option<Duration>) -> Runtime {
    Builder::new()
        .max_procs(1)
        .retake_threshold(retake)
        .stall_threshold(None)
        .build()
        .unwrap()
}

/// Spins (blocking the thread, never yielding) until `flag` is set; false
/// if it is not set within `HANG`.
fn spin_until(flag: &AtomicBool) -> bool {
    let t0 = Instant::now();
    while !flag.load(SeqCst) {
        if t0.elapsed() > HANG {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

fn retake_available(rt: &Runtime, test: &str) -> bool {
    match rt.metrics().retake_unavailable() {
        None => true,
        Some(why) => {
            common::skip(test, &format!("retake is unavailable here ({why})"));
            false
        }
    }
}

#[test]
fn a_task_queued_behind_a_stuck_poll_runs_before_it_returns() {
    let rt = rt(Some(Duration::from_millis(10)));
    if !retake_available(
        &rt,
        "a_task_queued_behind_a_stuck_poll_runs_before_it_returns",
    ) {
        return;
    }
    let ran = rt.block_on(async {
        spawn(async {
            let flag = Arc::new(AtomicBool::new(false));
            let f2 = flag.clone();
            // Queued on this P's runnext; the only P is stuck below.
            drop(spawn(async move { f2.store(true, SeqCst) }));
            spin_until(&flag)
        })
        .await
        .unwrap()
    });
    assert!(ran, "the child never ran while its P's thread was stuck");
    let m = rt.metrics().proc(0);
    assert!(m.retakes >= 1, "{m:?}");
    // The runtime goes on as usual afterwards, on whichever thread.
    let v = rt.block_on(async { spawn(async { 7 }).await.unwrap() });
    assert_eq!(v, 7);
}

#[test]
fn a_pinned_task_of_the_stuck_thread_runs_later_on_that_thread() {
    let rt = rt(Some(Duration::from_millis(10)));
    if !retake_available(
        &rt,
        "a_pinned_task_of_the_stuck_thread_runs_later_on_that_thread",
    ) {
        return;
    }
    let (pinned_tx, pinned_rx) = oneshot::channel();
    let (blocker_thread, child_ran) = rt.block_on(async move {
        spawn(async move {
            let me = std::thread::current().id();
            // Pinned to this thread: it cannot move with the P.
            drop(spawn_local(async move {
                let _ = pinned_tx.send(std::thread::current().id());
            }));
            let flag = Arc::new(AtomicBool::new(false));
            let f2 = flag.clone();
            drop(spawn(async move { f2.store(true, SeqCst) }));
            (me, spin_until(&flag))
        })
        .await
        .unwrap()
    });
    assert!(
        child_ran,
        "the child never ran while its P's thread was stuck"
    );
    // The stuck thread gets a P back when its poll returns (the P's new
    // holder gives it back when it runs out of work) and runs its task.
    let pinned_thread = rt.block_on(async {
        numa_rt_executor::spawn(async {
            // Keeps nothing busy: the P's holder soon parks and gives it back.
        })
        .await
        .unwrap();
        pinned_rx.await.expect("the pinned task runs")
    });
    assert_eq!(pinned_thread, blocker_thread, "a pinned task never moves");
}

#[test]
fn without_retake_the_child_waits_for_the_blocker() {
    let rt = rt(None);
    let ran_during = rt.block_on(async {
        let flag = Arc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        let during = spawn(async move {
            let f3 = f2.clone();
            drop(spawn(async move { f3.store(true, SeqCst) }));
            // Far past the default threshold; nothing else can take the P.
            std::thread::sleep(Duration::from_millis(300));
            f2.load(SeqCst)
        })
        .await
        .unwrap();
        // The child runs once the blocker's poll is over.
        let t0 = Instant::now();
        while !flag.load(SeqCst) {
            assert!(t0.elapsed() < HANG, "the child never ran");
            numa_rt_executor::task::yield_now().await;
        }
        during
    });
    assert!(!ran_during, "the child ran although retake is off");
    assert_eq!(rt.metrics().proc(0).retakes, 0);
}

/// A pinned task (here the body, a task pinned to its M) whose M lost its
/// P to retakes, then gave the P it got back away again, must still run
/// when woken: its M asks a P back (or is asked for by the waker) and the
/// holder hands it over. (tokio's process_issue_42, renamed, hung 8 runs in
/// 20: the woken body sat in the queue of an M waiting in its pool.)
#[test]
fn a_pinned_task_woken_after_retakes_runs() {
    let rt = Builder::new()
        .max_procs(1)
        .stall_threshold(None)
        // The lost wake leaves every thread idle: fail, don't hang.
        .deadlock(numa_rt_executor::DeadlockMode::Panic)
        .build()
        .unwrap();
    rt.run_on_worker(|| async {
        for _ in 0..20 {
            let tasks: Vec<_> = (0..10)
                .map(|_| {
                    spawn(async {
                        // Past the retake threshold (10 ms) every time.
                        std::thread::sleep(Duration::from_millis(15));
                        let wakes = (0..10).map(|_| {
                            let (tx, rx) = oneshot::channel::<()>();
                            std::thread::spawn(move || {
                                let _ = tx.send(());
                            });
                            rx
                        });
                        futures::future::join_all(wakes).await;
                    })
                })
                .collect();
            for t in futures::future::join_all(tasks).await {
                t.unwrap();
            }
        }
    });
}
