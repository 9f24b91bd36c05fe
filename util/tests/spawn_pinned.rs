//! LocalPoolHandle: !Send futures pinned to pool threads, from any thread.
//!
//! These tests wait with `futures::executor::block_on` on plain threads:
//! the pool needs no runtime of the caller's.

use futures::executor::block_on;
use numa_rt_util::task::LocalPoolHandle;
use std::rc::Rc;
use std::sync::Arc;

#[test]
fn a_not_send_future_stays_on_one_thread() {
    let pool = LocalPoolHandle::new(2);
    let (first, later) = block_on(pool.spawn_pinned(|| {
        let rc = Rc::new(()); // !Send, across awaits
        async move {
            let first = std::thread::current().id();
            for _ in 0..20 {
                numa_rt::task::yield_now().await;
            }
            drop(rc);
            (first, std::thread::current().id())
        }
    }))
    .unwrap();
    assert_eq!(first, later);
    assert_ne!(first, std::thread::current().id());
}

#[test]
fn the_task_runs_without_its_handle() {
    let pool = LocalPoolHandle::new(1);
    let (tx, rx) = std::sync::mpsc::channel();
    drop(pool.spawn_pinned(move || async move { tx.send(7).unwrap() }));
    assert_eq!(rx.recv().unwrap(), 7);
}

#[test]
fn timers_and_spawns_work_inside() {
    let pool = LocalPoolHandle::new(1);
    let out = block_on(pool.spawn_pinned(|| async {
        numa_rt::time::sleep(std::time::Duration::from_millis(1)).await;
        numa_rt::spawn(async { 5 }).await.unwrap()
    }))
    .unwrap();
    assert_eq!(out, 5);
}

#[test]
fn panics_reach_the_join_handle_and_the_worker_lives_on() {
    let pool = LocalPoolHandle::new(1);
    let err = block_on(pool.spawn_pinned(|| async { panic!("in the future") })).unwrap_err();
    assert_eq!(
        *err.into_panic().downcast::<&str>().unwrap(),
        "in the future"
    );

    let err =
        block_on(pool.spawn_pinned(|| -> std::future::Ready<()> { panic!("in the closure") }))
            .unwrap_err();
    assert_eq!(
        *err.into_panic().downcast::<&str>().unwrap(),
        "in the closure"
    );

    assert_eq!(block_on(pool.spawn_pinned(|| async { 1 })).unwrap(), 1);
}

#[test]
fn aborting_the_handle_aborts_the_pinned_task() {
    let pool = LocalPoolHandle::new(1);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (dropped_tx, dropped_rx) = std::sync::mpsc::channel::<()>();
    let marker = Arc::new(());
    let weak = Arc::downgrade(&marker);
    let handle = pool.spawn_pinned(move || async move {
        let _dropped = dropped_tx; // disconnects when the future is dropped
        let _marker = marker;
        started_tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    started_rx.recv().unwrap();
    handle.abort();
    assert!(dropped_rx.recv().is_err(), "the pinned future was dropped");
    assert!(weak.upgrade().is_none());
    assert!(block_on(handle).unwrap_err().is_cancelled());
}

#[test]
fn loads_and_placement() {
    let pool = LocalPoolHandle::new(3);
    assert_eq!(pool.num_threads(), 3);
    let (go_tx, go_rx) = numa_rt::sync::watch::channel(false);
    let mut handles = Vec::new();
    for idx in [0, 0, 1] {
        let mut go = go_rx.clone();
        handles.push(pool.spawn_pinned_by_idx(
            move || async move {
                go.wait_for(|g| *g).await.unwrap();
                std::thread::current().id()
            },
            idx,
        ));
    }
    assert_eq!(pool.get_task_loads_for_each_worker(), [2, 1, 0]);
    // The least loaded worker is 2.
    let mut go = go_rx.clone();
    handles.push(pool.spawn_pinned(move || async move {
        go.wait_for(|g| *g).await.unwrap();
        std::thread::current().id()
    }));
    assert_eq!(pool.get_task_loads_for_each_worker(), [2, 1, 1]);
    go_tx.send(true).unwrap();
    let threads: Vec<_> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    assert_eq!(threads[0], threads[1]);
    assert_ne!(threads[0], threads[2]);
    assert_ne!(threads[2], threads[3]);
    assert_ne!(threads[0], threads[3]);
    assert_eq!(pool.get_task_loads_for_each_worker(), [0, 0, 0]);
}

#[test]
#[should_panic(expected = "pool_size > 0")]
fn a_pool_needs_a_worker() {
    let _ = LocalPoolHandle::new(0);
}

#[test]
#[should_panic(expected = "worker 3 of a pool of 3")]
fn spawn_by_idx_out_of_range() {
    let pool = LocalPoolHandle::new(3);
    drop(pool.spawn_pinned_by_idx(|| async {}, 3));
}
