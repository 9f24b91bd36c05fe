//! `JoinSet`: results in completion order, aborting, shutdown, drop.

mod common;
use common::{rt, DropCount, Forever, HANG};
use numa_rt_executor::task::JoinSet;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};

#[test]
fn sets_and_handles_of_send_outputs_are_send_and_sync() {
    fn assert_traits<T: Send + Sync + 'static>() {}
    assert_traits::<JoinSet<u32>>();
    assert_traits::<numa_rt_executor::JoinHandle<u32>>();
    assert_traits::<numa_rt_executor::task::AbortHandle>();
    assert_traits::<numa_rt_executor::task::Id>();
}

#[test]
fn join_next_returns_every_result_then_none() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        let mut ids = HashSet::new();
        for i in 0..100u64 {
            ids.insert(set.spawn(async move { i }).id());
        }
        assert_eq!(set.len(), 100);
        let mut seen = HashSet::new();
        while let Some(res) = set.join_next().await {
            assert!(seen.insert(res.unwrap()));
        }
        assert_eq!(seen, (0..100).collect());
        assert!(set.is_empty());
        assert_eq!(ids.len(), 100, "ids are unique");
    });
}

#[test]
fn join_next_returns_in_completion_order() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let (tx1, rx1) = futures::channel::oneshot::channel::<()>();
        let (tx2, rx2) = futures::channel::oneshot::channel::<()>();
        set.spawn(async move {
            rx1.await.unwrap();
            1
        });
        set.spawn(async move {
            rx2.await.unwrap();
            2
        });
        tx2.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 2);
        tx1.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 1);
        assert!(set.join_next().await.is_none());
    });
}

#[test]
fn one_finished_task_among_many_pending_is_found() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..1000 {
            // Counted even if the task is aborted before its first poll.
            let guard = Forever(DropCount(d.clone()));
            set.spawn(async move {
                guard.await;
                0
            });
        }
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        set.spawn(async move {
            rx.await.unwrap();
            7
        });
        // Let every entry register before the one finishes.
        assert!(set.try_join_next().is_none());
        tx.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 7);
        assert_eq!(set.len(), 1000);
    });
    // The set was dropped at the end of block_on: every task aborted.
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 1000 {
        assert!(std::time::Instant::now() < deadline, "tasks not dropped");
        std::thread::yield_now();
    }
}

#[test]
fn try_join_next_takes_only_finished_tasks() {
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let mut set = JoinSet::new();
    {
        let _e = rt.enter();
        set.spawn(async move {
            done_tx.send(()).unwrap();
            3
        });
        set.spawn(async move {
            let _ = numa_rt_executor::spawn_blocking(move || rx.recv_timeout(HANG)).await;
            4
        });
    }
    done_rx.recv_timeout(HANG).unwrap();
    let deadline = std::time::Instant::now() + HANG;
    let first = loop {
        if let Some(r) = set.try_join_next() {
            break r.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a finished task was never returned"
        );
        std::thread::yield_now();
    };
    assert_eq!(first, 3);
    assert!(
        set.try_join_next().is_none(),
        "the other task is not finished"
    );
    tx.send(()).unwrap();
    assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 4);
    assert!(set.try_join_next().is_none());
}

#[test]
fn abort_all_cancels_and_keeps_results_coming() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..10 {
            // Counted even if the task is aborted before its first poll.
            let guard = Forever(DropCount(d.clone()));
            set.spawn(guard);
        }
        set.abort_all();
        assert_eq!(set.len(), 10);
        let mut cancelled = 0;
        while let Some(res) = set.join_next().await {
            assert!(res.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, 10);
        // Each result came after its future was dropped.
        assert_eq!(d.load(SeqCst), 10);
    });
    assert_eq!(drops.load(SeqCst), 10);
}

#[test]
fn shutdown_waits_for_every_future_to_be_dropped() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..20 {
            set.spawn(Forever(DropCount(d.clone())));
        }
        set.shutdown().await;
        assert!(set.is_empty());
        assert_eq!(d.load(SeqCst), 20);
    });
}

#[test]
fn dropping_the_set_aborts_every_task() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = mpsc::channel();
    let mut set = JoinSet::new();
    {
        let _e = rt.enter();
        for _ in 0..10 {
            let (d, started_tx) = (drops.clone(), started_tx.clone());
            set.spawn(async move {
                started_tx.send(()).unwrap();
                Forever(DropCount(d)).await
            });
        }
    }
    for _ in 0..10 {
        started_rx.recv_timeout(HANG).unwrap();
    }
    drop(set);
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 10 {
        assert!(std::time::Instant::now() < deadline, "tasks not dropped");
        std::thread::yield_now();
    }
}

#[test]
fn join_all_collects_every_output() {
    let rt = rt(2);
    let mut out = rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..50u32 {
            set.spawn(async move { i });
        }
        set.join_all().await
    });
    out.sort();
    assert_eq!(out, (0..50).collect::<Vec<_>>());
}

#[test]
fn join_all_resumes_a_task_panic_and_aborts_the_rest() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let err = rt
        .block_on(rt.spawn(async move {
            let mut set = JoinSet::new();
            for _ in 0..5 {
                let guard = Forever(DropCount(d.clone()));
                set.spawn(async move {
                    guard.await;
                    0
                });
            }
            set.spawn(async { panic!("boom in a set") });
            set.join_all().await
        }))
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(common::panic_message(&*err.into_panic()), "boom in a set");
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 5 {
        assert!(std::time::Instant::now() < deadline, "rest not aborted");
        std::thread::yield_now();
    }
}

#[test]
fn spawn_local_on_and_blocking_go_in_the_same_set() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let rc = std::rc::Rc::new(1);
        set.spawn_local(async move { *rc });
        set.spawn_on(0, async { 2 });
        set.spawn_blocking(|| 3);
        set.spawn(async { 4 });
        let mut sum = 0;
        while let Some(r) = set.join_next().await {
            sum += r.unwrap();
        }
        assert_eq!(sum, 10);
    });
}

#[test]
fn the_set_is_usable_from_a_task_and_default() {
    let rt = rt(2);
    let n = rt.block_on(rt.spawn(async {
        let mut set: JoinSet<usize> = JoinSet::default();
        for i in 0..200 {
            set.spawn(async move {
                numa_rt_executor::task::yield_now().await;
                i
            });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            r.unwrap();
            n += 1;
        }
        n
    }));
    assert_eq!(n.unwrap(), 200);
}
