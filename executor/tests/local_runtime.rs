//! `LocalRuntime`: `!Send` tasks on the thread that made the runtime.

mod common;
use common::{DropCount, Forever};
use numa_rt_executor::{spawn, spawn_local, Builder, LocalOptions, LocalRuntime};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

fn local() -> LocalRuntime {
    Builder::new_current_thread()
        .build_local(LocalOptions::default())
        .unwrap()
}

#[test]
fn spawn_local_with_the_enter_guard_runs_on_this_thread() {
    let rt = local();
    let here = std::thread::current().id();
    let seen = Rc::new(Cell::new(None));
    let s = seen.clone();
    let h = {
        let _g = rt.enter();
        spawn_local(async move { s.set(Some(std::thread::current().id())) })
    };
    rt.block_on(h).unwrap();
    assert_eq!(seen.get(), Some(here));
}

#[test]
fn send_tasks_run_on_the_runtime_s_p() {
    let rt = local();
    let (tx, rx) = futures::channel::oneshot::channel();
    rt.handle().spawn(async move { tx.send(5).unwrap() });
    assert_eq!(rt.block_on(rx).unwrap(), 5);
    let v = rt.block_on(async { spawn(async { 6 }).await.unwrap() });
    assert_eq!(v, 6);
}

#[test]
fn dropping_the_runtime_drops_pending_local_tasks_on_this_thread() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = local();
    rt.spawn_local(Forever(DropCount(drops.clone())));
    rt.block_on(async {
        spawn_local(Forever(DropCount(drops.clone())));
        numa_rt_executor::task::yield_now().await;
    });
    assert_eq!(drops.load(SeqCst), 0);
    drop(rt);
    assert_eq!(drops.load(SeqCst), 2);
}

#[test]
fn shutdown_timeout_drops_local_tasks_too() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = local();
    rt.spawn_local(Forever(DropCount(drops.clone())));
    rt.shutdown_timeout(std::time::Duration::from_secs(30));
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn block_on_with_the_enter_guard_held() {
    let rt = local();
    let _guard = rt.enter();
    let (tx, rx) = futures::channel::oneshot::channel();
    spawn_local(async move {
        numa_rt_executor::task::yield_now().await;
        tx.send(5).unwrap();
    });
    assert_eq!(rt.block_on(rx).unwrap(), 5);
}
