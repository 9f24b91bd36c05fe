//! `Builder::on_thread_park` / `on_thread_unpark`: run by a worker (an M
//! with its P) as it goes idle and as it comes back, in pairs, inside the
//! runtime; a panicking hook is reported and the worker carries on.
//!
//! Ignored until `Worker::park` (executor/src/scheduler/worker.rs) calls
//! `Config::before_park` and `Config::after_unpark`: the hooks are
//! configured here but run from there.

mod common;
use common::HANG;
use numa_rt_executor::{spawn, Builder};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};

#[test]
fn a_worker_runs_the_unpark_hook_before_the_task_that_woke_it() {
    let parks = Arc::new(AtomicUsize::new(0));
    let unparks = Arc::new(AtomicUsize::new(0));
    let (parked_tx, parked_rx) = mpsc::channel::<()>();
    let parked_tx = Mutex::new(parked_tx);
    let rt = Builder::new_current_thread()
        .on_thread_park({
            let parks = parks.clone();
            move || {
                parks.fetch_add(1, SeqCst);
                let _ = parked_tx.lock().unwrap().send(());
            }
        })
        .on_thread_unpark({
            let unparks = unparks.clone();
            move || {
                unparks.fetch_add(1, SeqCst);
            }
        })
        .build()
        .unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let task = rt.spawn({
        let unparks = unparks.clone();
        async move {
            rx.await.unwrap();
            unparks.load(SeqCst)
        }
    });
    // The only P has nothing to run but the task waiting on `rx`: its M parks.
    parked_rx.recv_timeout(HANG).expect("the park hook ran");
    tx.send(()).unwrap();
    let unparks_seen_by_task = rt.block_on(task).unwrap();
    // The M came back from that park (running the unpark hook) before it
    // could poll the task on its P.
    assert!(unparks_seen_by_task >= 1);
    drop(rt);
    // Every park hook call is followed by an unpark hook call, shutdown's too.
    assert_eq!(parks.load(SeqCst), unparks.load(SeqCst));
}

#[test]
fn a_task_spawned_by_the_park_hook_runs() {
    // tokio's example: the hook starts work only when the worker is idle.
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let tx = Mutex::new(Some(tx));
    let rt = Builder::new_current_thread()
        .on_thread_park(move || {
            if let Some(tx) = tx.lock().unwrap().take() {
                spawn(async move {
                    let _ = tx.send(7);
                });
            }
        })
        .build()
        .unwrap();
    assert_eq!(rt.block_on(rx).unwrap(), 7);
}

#[test]
fn panicking_hooks_are_reported_and_the_worker_carries_on() {
    let (parked_tx, parked_rx) = mpsc::channel::<()>();
    let parked_tx = Mutex::new(parked_tx);
    let rt = Builder::new_current_thread()
        .on_thread_park(move || {
            let _ = parked_tx.lock().unwrap().send(());
            panic!("park hook");
        })
        .on_thread_unpark(|| panic!("unpark hook"))
        .build()
        .unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let task = rt.spawn(async move { rx.await.unwrap() + 1 });
    parked_rx.recv_timeout(HANG).expect("the park hook ran");
    tx.send(41).unwrap();
    assert_eq!(rt.block_on(task).unwrap(), 42);
    assert_eq!(rt.block_on(async { spawn(async { 5 }).await.unwrap() }), 5);
}
