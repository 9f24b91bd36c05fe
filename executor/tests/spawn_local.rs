//! spawn_local pins !Send tasks to their thread.

mod common;
use common::{rt, HANG};
use numa_rt_executor::{spawn, spawn_local, task::yield_now};
use std::rc::Rc;

#[test]
fn local_tasks_run_on_the_block_on_thread() {
    let rt = rt(2);
    let me = std::thread::current().id();
    rt.block_on(async move {
        let rc = Rc::new(std::cell::Cell::new(0));
        let mut hs = Vec::new();
        for _ in 0..10 {
            let rc = rc.clone();
            hs.push(spawn_local(async move {
                for _ in 0..10 {
                    assert_eq!(std::thread::current().id(), me);
                    rc.set(rc.get() + 1);
                    yield_now().await;
                }
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
        assert_eq!(rc.get(), 100);
    });
}

#[test]
fn local_tasks_on_a_worker_stay_on_that_worker() {
    let rt = rt(2);
    let ok = rt.block_on(rt.spawn(async {
        let home = std::thread::current().id();
        let mut hs = Vec::new();
        for _ in 0..20 {
            hs.push(spawn_local(async move {
                let rc = Rc::new(());
                for _ in 0..50 {
                    yield_now().await;
                    if std::thread::current().id() != home {
                        return false;
                    }
                }
                drop(rc);
                true
            }));
            // Load on the same worker to tempt thieves.
            drop(spawn(async {
                for _ in 0..10 {
                    yield_now().await;
                }
            }));
        }
        let mut all = true;
        for h in hs {
            all &= h.await.unwrap();
        }
        all
    }));
    assert!(ok.unwrap(), "a pinned task moved to another thread");
}

#[test]
fn local_task_woken_from_another_thread() {
    let rt = rt(2);
    rt.block_on(async {
        let (tx, rx) = futures::channel::oneshot::channel::<u8>();
        let h = spawn_local(async move { rx.await.unwrap() });
        std::thread::spawn(move || tx.send(3).unwrap());
        assert_eq!(h.await.unwrap(), 3);
    });
    // Same from a worker: the pinned task's M may be parked in its driver.
    let v = rt.block_on(rt.spawn(async {
        let (tx, rx) = futures::channel::oneshot::channel::<u8>();
        let h = spawn_local(async move { rx.await.unwrap() });
        std::thread::spawn(move || tx.send(4).unwrap());
        h.await.unwrap()
    }));
    assert_eq!(v.unwrap(), 4);
    let _ = HANG;
}

#[test]
fn spawn_local_outside_panics_with_message() {
    let err = std::panic::catch_unwind(|| drop(spawn_local(async {}))).unwrap_err();
    let msg = common::panic_message(&*err);
    assert!(
        msg.starts_with("`spawn_local` called from outside of a `task::LocalSet`")
            && msg.contains("call it from a numa_rt worker thread"),
        "{msg}"
    );
}
