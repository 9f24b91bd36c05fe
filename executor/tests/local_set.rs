//! `LocalSet`: `!Send` tasks that run only while the set is driven, on the
//! driving thread; dropped with the set.

mod common;
use common::{rt, DropCount, Forever};
use futures::channel::oneshot;
use numa_rt_executor::task::LocalSet;
use numa_rt_executor::{spawn, spawn_local};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

#[test]
fn tasks_run_on_the_driving_thread_and_spawn_local_goes_to_the_set() {
    let rt = rt(2);
    let set = LocalSet::new();
    let here = std::thread::current().id();
    let ran = Rc::new(Cell::new(0));
    let r = ran.clone();
    let out = set.block_on(&rt, async move {
        let r2 = r.clone();
        let inner = spawn_local(async move {
            r2.set(r2.get() + 1);
            // Nested: still the set's.
            spawn_local(async move { std::thread::current().id() })
                .await
                .unwrap()
        });
        let id = inner.await.unwrap();
        r.set(r.get() + 1);
        id
    });
    assert_eq!(out, here);
    assert_eq!(ran.get(), 2);
}

#[test]
fn tasks_spawned_before_a_runtime_exists_run_when_the_set_is_driven() {
    let set = LocalSet::new();
    let flag = Rc::new(Cell::new(false));
    let f = flag.clone();
    let h = set.spawn_local(async move { f.set(true) });
    assert!(!flag.get());
    let rt = rt(1);
    set.block_on(&rt, h).unwrap();
    assert!(flag.get());
}

#[test]
fn tasks_do_not_run_while_the_set_is_not_driven() {
    let rt = rt(2);
    let set = LocalSet::new();
    let polls = Rc::new(Cell::new(0));
    let p = polls.clone();
    let h = set.spawn_local(async move { p.set(p.get() + 1) });
    // Another block_on that yields many times: the set is not driven.
    rt.block_on(async {
        for _ in 0..100 {
            numa_rt_executor::task::yield_now().await;
        }
    });
    assert_eq!(polls.get(), 0);
    set.block_on(&rt, h).unwrap();
    assert_eq!(polls.get(), 1);
}

#[test]
fn awaiting_the_set_waits_for_every_task_woken_from_other_threads() {
    let rt = rt(2);
    let done = Rc::new(Cell::new(0));
    rt.block_on(async {
        let set = LocalSet::new();
        for _ in 0..10 {
            let d = done.clone();
            let (tx, rx) = oneshot::channel::<u32>();
            // The sender is a Send task, on any P: the wake crosses threads.
            drop(spawn(async move { tx.send(1).unwrap() }));
            set.spawn_local(async move {
                let v = rx.await.unwrap();
                d.set(d.get() + v);
            });
        }
        set.await;
    });
    assert_eq!(done.get(), 10);
}

#[test]
fn run_until_returns_with_tasks_still_pending_and_they_resume_later() {
    let rt = rt(2);
    let set = LocalSet::new();
    let (tx, rx) = oneshot::channel::<()>();
    let finished = Rc::new(Cell::new(false));
    let f = finished.clone();
    let h = set.spawn_local(async move {
        rx.await.unwrap();
        f.set(true);
    });
    set.block_on(&rt, async { numa_rt_executor::task::yield_now().await });
    assert!(!finished.get());
    tx.send(()).unwrap();
    set.block_on(&rt, h).unwrap();
    assert!(finished.get());
}

#[test]
fn dropping_the_set_drops_every_pending_future() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let set = LocalSet::new();
    for _ in 0..5 {
        set.spawn_local(Forever(DropCount(drops.clone())));
    }
    set.block_on(&rt, async {
        for _ in 0..5 {
            spawn_local(Forever(DropCount(drops.clone())));
        }
        numa_rt_executor::task::yield_now().await;
    });
    assert_eq!(drops.load(SeqCst), 0);
    drop(set);
    assert_eq!(drops.load(SeqCst), 10);
}

#[test]
fn a_panicking_task_is_a_join_error_and_the_set_goes_on() {
    let rt = rt(1);
    let set = LocalSet::new();
    let out = set.block_on(&rt, async {
        let bad = spawn_local(async { panic!("boom in a local set") });
        let err = bad.await.unwrap_err();
        assert!(err.is_panic());
        spawn_local(async { 7 }).await.unwrap()
    });
    assert_eq!(out, 7);
}

#[test]
fn a_set_driven_inside_a_task_on_a_worker() {
    let rt = numa_rt_executor::Builder::new()
        .max_procs(1)
        .build()
        .unwrap();
    let out = rt.run_on_worker(|| async {
        let set = LocalSet::new();
        let rc = Rc::new(3);
        set.run_until(async move {
            let a = spawn_local(async move { *rc * 2 });
            a.await.unwrap()
        })
        .await
    });
    assert_eq!(out, 6);
}

#[test]
fn a_waker_kept_past_the_set_does_not_crash() {
    let rt = rt(2);
    let (tx, rx) = oneshot::channel::<()>();
    {
        let set = LocalSet::new();
        set.spawn_local(async move {
            let _ = rx.await;
        });
        set.block_on(&rt, numa_rt_executor::task::yield_now());
    }
    // The task's future was dropped with the set; this wake finds nothing.
    let _ = tx.send(());
    rt.block_on(async {});
}

#[test]
fn enter_makes_spawn_local_go_to_the_set() {
    let rt = rt(1);
    let set = LocalSet::new();
    let ran = Rc::new(Cell::new(false));
    let h = {
        let _g = set.enter();
        let r = ran.clone();
        spawn_local(async move { r.set(true) })
    };
    assert!(!ran.get());
    set.block_on(&rt, h).unwrap();
    assert!(ran.get());
}

#[test]
fn a_set_and_a_runtime_kept_in_a_thread_local_drop_at_thread_exit() {
    struct Kept {
        rt: numa_rt_executor::Runtime,
        set: LocalSet,
    }
    thread_local! {
        static KEPT: Kept = Kept { rt: rt(1), set: LocalSet::new() };
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    std::thread::spawn(move || {
        KEPT.with(|k| {
            k.set.block_on(&k.rt, async {
                spawn_local(Forever(DropCount(d)));
                numa_rt_executor::task::yield_now().await;
            })
        })
    })
    .join()
    .expect("the thread exits without a panic in its locals' destructors");
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn join_set_spawn_local_on_a_set() {
    let rt = rt(1);
    let set = LocalSet::new();
    let mut joins = numa_rt_executor::JoinSet::new();
    let rc = Rc::new(20);
    for i in 0..3 {
        let rc = rc.clone();
        joins.spawn_local_on(async move { *rc + i }, &set);
    }
    let mut got = set.block_on(&rt, async {
        let mut v = Vec::new();
        while let Some(r) = joins.join_next().await {
            v.push(r.unwrap());
        }
        v
    });
    got.sort();
    assert_eq!(got, [20, 21, 22]);
}
