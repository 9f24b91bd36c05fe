//! Shutdown stops every thread and drops every pending future.

mod common;
use common::{rt, DropCount, Forever, HANG};
use numa_rt_executor::{spawn, spawn_local};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn drop_runtime_drops_every_pending_future() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = rt(2);
    const N: usize = 1_000;
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..N {
        let d = drops.clone();
        let tx = tx.clone();
        // Half are spawned from inside tasks (they sit in local queues or
        // idle), half from outside.
        if i % 2 == 0 {
            drop(rt.spawn(async move {
                tx.send(()).unwrap();
                Forever(DropCount(d)).await
            }));
        } else {
            drop(rt.spawn(async move {
                drop(spawn(Forever(DropCount(d))));
                tx.send(()).unwrap();
            }));
        }
    }
    for _ in 0..N {
        rx.recv_timeout(HANG).unwrap();
    }
    // Plus tasks that never got polled at all.
    for _ in 0..100 {
        drop(rt.spawn(Forever(DropCount(drops.clone()))));
    }
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), N + 100);
}

/// Wakers that outlive their runtime (kept by another thread, as a channel
/// of another runtime would keep them): waking them afterwards finds the
/// runtime gone and does nothing; and while the runtime lives, a wake from
/// a thread that is none of its M's (the schedule function then finds the
/// runtime through the task's registry) still runs the task.
#[test]
fn wakes_from_other_threads_run_the_task_and_are_harmless_after_shutdown() {
    use std::future::poll_fn;
    use std::sync::Mutex;
    use std::task::{Poll, Waker};
    let rt = rt(2);
    let wakers: Arc<Mutex<Vec<Waker>>> = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let drops = Arc::new(AtomicUsize::new(0));
    const N: usize = 64;
    for _ in 0..N {
        let (wakers, tx, d) = (wakers.clone(), tx.clone(), drops.clone());
        drop(rt.spawn(async move {
            let _count = DropCount(d);
            let mut polls = 0;
            poll_fn(|cx| {
                polls += 1;
                wakers.lock().unwrap().push(cx.waker().clone());
                tx.send(polls).unwrap();
                Poll::<()>::Pending
            })
            .await
        }));
    }
    for _ in 0..N {
        assert_eq!(rx.recv_timeout(HANG).unwrap(), 1);
    }
    // Woken from this thread (no M of the runtime): every task runs again.
    let first: Vec<Waker> = std::mem::take(&mut *wakers.lock().unwrap());
    for w in &first {
        w.wake_by_ref();
    }
    for _ in 0..N {
        assert_eq!(rx.recv_timeout(HANG).unwrap(), 2);
    }
    drop(rt);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        N,
        "shutdown dropped every future"
    );
    // The runtime is gone: waking by reference and by value does nothing.
    for w in &first {
        w.wake_by_ref();
    }
    for w in std::mem::take(&mut *wakers.lock().unwrap()) {
        w.wake();
    }
    assert!(
        rx.try_recv().is_err(),
        "a task ran after its runtime was dropped"
    );
    assert_eq!(drops.load(Ordering::SeqCst), N);
}

#[test]
fn pinned_tasks_are_dropped_on_their_thread() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = rt(2);
    let d = drops.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    drop(rt.spawn(async move {
        for _ in 0..10 {
            // The counter is captured, not built inside the block: a pinned
            // task may still be unpolled when shutdown drops it.
            let counter = DropCount(d.clone());
            let rc = std::rc::Rc::new(());
            drop(spawn_local(async move {
                let _keep = (counter, rc);
                std::future::pending::<()>().await
            }));
        }
        tx.send(()).unwrap();
    }));
    rx.recv_timeout(HANG).unwrap();
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

#[test]
fn join_handle_of_a_dropped_task_reports_cancelled() {
    let rt = rt(1);
    let h = rt.spawn(std::future::pending::<()>());
    drop(rt);
    let err = futures::executor::block_on(h).unwrap_err();
    assert!(err.is_cancelled());
}

#[test]
fn shutdown_timeout_returns_with_a_stuck_task() {
    let rt = rt(2);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    drop(rt.spawn(async move {
        started_tx.send(()).unwrap();
        // A task that blocks its worker (bad, but must not hang shutdown).
        let _ = release_rx.recv_timeout(Duration::from_secs(60));
    }));
    started_rx.recv_timeout(HANG).unwrap();
    rt.shutdown_timeout(Duration::from_millis(50));
    drop(release_tx); // lets the stuck worker finish and exit
}

#[test]
fn threads_exit_on_drop() {
    let stops = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (starts.clone(), stops.clone());
    let rt = numa_rt_executor::Builder::new()
        .max_procs(2)
        .on_thread_start(move || {
            s1.fetch_add(1, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            s2.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    rt.block_on(async {
        spawn(async {}).await.unwrap();
    });
    drop(rt);
    assert_eq!(starts.load(Ordering::SeqCst), stops.load(Ordering::SeqCst));
    assert!(starts.load(Ordering::SeqCst) >= 2);
}

#[test]
fn shutdown_timeout_of_duration_max_waits_without_overflow() {
    let rt = common::rt(2);
    rt.block_on(async {
        drop(numa_rt_executor::spawn(std::future::pending::<()>()));
    });
    rt.shutdown_timeout(std::time::Duration::MAX);
}

#[test]
fn futures_dropped_at_shutdown_see_their_runtime() {
    struct SeesRuntime(Arc<AtomicUsize>);
    impl Drop for SeesRuntime {
        fn drop(&mut self) {
            if numa_rt_executor::Handle::try_current().is_ok() {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let rt = rt(2);
    // Idle: polled once, then nobody holds a waker. Shutdown's first wake
    // drops them on the dropping thread (this one).
    let (polled_tx, polled) = std::sync::mpsc::channel();
    for _ in 0..4 {
        let s = SeesRuntime(seen.clone());
        let polled_tx = polled_tx.clone();
        drop(rt.spawn(async move {
            let _s = s;
            polled_tx.send(()).unwrap();
            std::future::pending::<()>().await
        }));
    }
    for _ in 0..4 {
        polled.recv().unwrap();
    }
    // Most likely never polled (queued) when the runtime drops, else idle.
    for _ in 0..4 {
        let s = SeesRuntime(seen.clone());
        drop(rt.spawn(async move {
            let _s = s;
            std::future::pending::<()>().await
        }));
    }
    drop(rt);
    assert_eq!(seen.load(Ordering::SeqCst), 8);
}

/// Tasks that finish, or are dropped, before their first `Pending` hold no
/// count of their runtime's task registry (issue 39): their handles, freed
/// after the runtime, and spawns racing with its drop from another thread
/// must not touch the registry once it is gone. Run under a sanitizer
/// (`.ci/run`'s ThreadSanitizer, or AddressSanitizer by hand), a use after
/// free here is reported; without one, the results are still checked.
#[test]
fn handles_of_tasks_that_never_waited_outlive_their_runtime() {
    let rt = rt(2);
    const N: usize = 1_000;
    let mut done = Vec::with_capacity(N);
    for i in 0..N {
        done.push(rt.spawn(async move { i }));
    }
    // Spawned from inside a task: the inner tasks never wait either. They
    // say they ran, so that all have finished before the runtime drops.
    let (ran_tx, ran_rx) = std::sync::mpsc::channel();
    let inner = rt.block_on(async {
        (0..N)
            .map(|i| {
                let ran_tx = ran_tx.clone();
                spawn(async move {
                    ran_tx.send(()).unwrap();
                    i
                })
            })
            .collect::<Vec<_>>()
    });
    for _ in 0..N {
        ran_rx.recv_timeout(HANG).unwrap();
    }
    let results: Vec<usize> = rt.block_on(async {
        let mut v = Vec::with_capacity(N);
        for h in done.iter_mut() {
            v.push(h.await.unwrap());
        }
        v
    });
    assert_eq!(results, (0..N).collect::<Vec<_>>());
    // A thread spawning through a handle while the runtime is dropped: its
    // spawns either run, or are dropped by the drain or refused.
    let handle = rt.handle().clone();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let spawner = std::thread::spawn(move || {
        let mut hs = Vec::new();
        for i in 0..N {
            hs.push(handle.spawn(async move { i }));
            if i == 10 {
                started_tx.send(()).unwrap();
            }
        }
        drop(handle);
        hs
    });
    started_rx.recv_timeout(HANG).unwrap();
    // And tasks queued just before the drop, most never polled.
    let late: Vec<_> = (0..100).map(|i| rt.spawn(async move { i })).collect();
    drop(rt);
    let raced = spawner.join().unwrap();
    // Every handle is read and freed after the runtime is gone.
    for (i, h) in inner.into_iter().enumerate() {
        assert_eq!(futures::executor::block_on(h).unwrap(), i);
    }
    let (mut ran, mut dropped) = (0, 0);
    for (i, h) in late
        .into_iter()
        .enumerate()
        .chain(raced.into_iter().enumerate())
    {
        match futures::executor::block_on(h) {
            Ok(v) => {
                assert_eq!(v, i, "a late task's output");
                ran += 1;
            }
            Err(e) => {
                assert!(e.is_cancelled(), "{e}");
                dropped += 1;
            }
        }
    }
    assert_eq!(ran + dropped, 100 + N);
    drop(done);
}
