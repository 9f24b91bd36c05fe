//! Spawning and joining, from block_on, from tasks, nested; JoinHandle poll by poll.

mod common;
use common::rt;
use numa_rt_executor::{spawn, Handle};
use tokio_test::{assert_pending, assert_ready, task};

#[test]
fn spawn_from_block_on_and_join() {
    let rt = rt(2);
    let v = rt.block_on(async { spawn(async { 40 + 2 }).await.unwrap() });
    assert_eq!(v, 42);
}

#[test]
fn runtime_spawn_from_outside() {
    let rt = rt(2);
    let h = rt.spawn(async { "hi" });
    assert_eq!(rt.block_on(h).unwrap(), "hi");
}

#[test]
fn nested_spawns_join() {
    let rt = rt(2);
    let total = rt.block_on(async {
        let outer: Vec<_> = (0..50u64)
            .map(|i| {
                spawn(async move {
                    let inner: Vec<_> = (0..20u64).map(|j| spawn(async move { i * j })).collect();
                    let mut s = 0;
                    for h in inner {
                        s += h.await.unwrap();
                    }
                    s
                })
            })
            .collect();
        let mut s = 0;
        for h in outer {
            s += h.await.unwrap();
        }
        s
    });
    let expect: u64 = (0..50u64)
        .flat_map(|i| (0..20u64).map(move |j| i * j))
        .sum();
    assert_eq!(total, expect);
}

#[test]
fn join_handle_step_by_step() {
    let rt = rt(1);
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let h = rt.spawn(async move { rx.await.unwrap() * 2 });
    assert!(!h.is_finished());
    let mut h = task::spawn(h);
    assert_pending!(h.poll());
    tx.send(21).unwrap();
    // The task runs on a worker; we are woken when it completes.
    let deadline = std::time::Instant::now() + common::HANG;
    while !h.is_woken() {
        assert!(
            std::time::Instant::now() < deadline,
            "join handle never woken"
        );
        std::thread::yield_now();
    }
    assert_eq!(assert_ready!(h.poll()).unwrap(), 42);
}

#[test]
fn task_ids_are_unique_and_handle_current_works_in_tasks() {
    let rt = rt(2);
    let a = rt.spawn(async { Handle::try_current().is_ok() });
    let b = rt.spawn(async {});
    assert_ne!(a.id(), b.id());
    assert!(rt.block_on(a).unwrap(), "Handle::current inside a task");
}

#[test]
fn spawn_outside_runtime_panics_with_message() {
    let err = std::panic::catch_unwind(|| drop(spawn(async {}))).unwrap_err();
    let msg = common::panic_message(&*err);
    assert!(
        msg.contains("must be called from a numa_rt runtime"),
        "{msg}"
    );
}

#[test]
fn futures_spawn_trait() {
    use futures::task::{LocalSpawnExt, SpawnExt};
    let rt = rt(2);
    let h = rt.handle().clone();
    let out = rt.block_on(async move {
        let a = h.spawn_with_handle(async { 7 }).unwrap();
        let rc = std::rc::Rc::new(3);
        let b = h.spawn_local_with_handle(async move { *rc }).unwrap();
        a.await + b.await
    });
    assert_eq!(out, 10);
}
