//! Awaiting a handle after `abort` resolves only after the task's future has
//! been dropped (tokio's order), for idle and running tasks, through
//! `JoinHandle::abort` and `AbortHandle::abort`.

mod common;
use common::{rt, HANG};
use numa_rt_executor::task::AbortHandle;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Sets its flag when dropped, after waiting for `release` (if any): a
/// destructor that takes a while, so that an awaiter resolving too early is
/// caught deterministically.
struct DropGuard {
    dropped: Arc<AtomicBool>,
    release: Option<mpsc::Receiver<()>>,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(rx) = self.release.take() {
            rx.recv_timeout(HANG).expect("the test releases the drop");
        }
        self.dropped.store(true, SeqCst);
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn abort_of_an_idle_task_resolves_after_its_future_is_dropped() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let (release_tx, release_rx) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::channel();
    let guard = DropGuard {
        dropped: dropped.clone(),
        release: Some(release_rx),
    };
    let mut h = rt.spawn(async move {
        let _guard = guard;
        started_tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    started_rx.recv_timeout(HANG).expect("task started");
    h.abort();
    // The drop waits for `release`: the handle must not be ready yet.
    assert!(
        poll_once(&mut h).is_pending(),
        "the handle resolved before the aborted future was dropped"
    );
    release_tx.send(()).unwrap();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(dropped.load(SeqCst), "resolved before the drop finished");
}

#[test]
fn abort_of_a_running_task_resolves_after_the_poll_returns_and_the_drop() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let (in_poll_tx, in_poll_rx) = mpsc::channel();
    let (finish_poll_tx, finish_poll_rx) = mpsc::channel::<()>();
    let guard = DropGuard {
        dropped: dropped.clone(),
        release: None,
    };
    let mut h = rt.spawn(async move {
        let _guard = guard;
        poll_fn(move |_| {
            // Only ever polled once: nothing wakes it.
            in_poll_tx.send(()).unwrap();
            finish_poll_rx
                .recv_timeout(HANG)
                .expect("the test ends the poll");
            Poll::<()>::Pending
        })
        .await
    });
    in_poll_rx.recv_timeout(HANG).expect("task is being polled");
    h.abort();
    assert!(
        poll_once(&mut h).is_pending(),
        "the handle resolved while the aborted task was still in its poll"
    );
    assert!(!h.is_finished());
    finish_poll_tx.send(()).unwrap();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(
        dropped.load(SeqCst),
        "resolved before the future was dropped"
    );
}

#[test]
fn awaiting_in_a_task_sees_the_guard_released() {
    // The tokio pattern: a guard held by the aborted future is released
    // before the task awaiting the handle goes on.
    let rt = rt(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    let seen = rt.block_on(async move {
        let (started_tx, started_rx) = futures::channel::oneshot::channel();
        let h = numa_rt_executor::spawn(async move {
            let _guard = DropGuard {
                dropped: d,
                release: None,
            };
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await
        });
        started_rx.await.unwrap();
        h.abort();
        let watcher = numa_rt_executor::spawn(async move {
            let err = h.await.unwrap_err();
            assert!(err.is_cancelled());
            dropped.load(SeqCst)
        });
        watcher.await.unwrap()
    });
    assert!(seen);
}

#[test]
fn abort_handle_aborts_from_another_thread_and_reports_finished() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<AbortHandle>();

    let rt = rt(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = mpsc::channel();
    let guard = DropGuard {
        dropped: dropped.clone(),
        release: None,
    };
    let h = rt.spawn(async move {
        let _guard = guard;
        started_tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    let ah = h.abort_handle();
    assert_eq!(ah.id(), h.id());
    assert!(!ah.is_finished());
    started_rx.recv_timeout(HANG).expect("task started");
    let ah2 = ah.clone();
    std::thread::spawn(move || ah2.abort()).join().unwrap();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(err.id(), ah.id());
    assert!(dropped.load(SeqCst));
    assert!(
        ah.is_finished(),
        "the future is gone, so the task is finished"
    );
    ah.abort(); // no effect, no panic
}

#[test]
fn abort_handle_outliving_its_join_handle_still_aborts() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = DropGuard {
        dropped: dropped.clone(),
        release: None,
    };
    let h = rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await
    });
    let ah = h.abort_handle();
    drop(h);
    ah.abort();
    let deadline = std::time::Instant::now() + HANG;
    while !ah.is_finished() {
        assert!(std::time::Instant::now() < deadline, "never dropped");
        std::thread::yield_now();
    }
    assert!(dropped.load(SeqCst), "is_finished shows the drop's effects");
}

#[test]
fn abort_after_completion_keeps_the_output_for_both_handles() {
    let rt = rt(1);
    let h = rt.spawn(async { 5 });
    let ah = h.abort_handle();
    let deadline = std::time::Instant::now() + HANG;
    while !h.is_finished() {
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    }
    assert!(ah.is_finished());
    ah.abort();
    h.abort();
    assert_eq!(rt.block_on(h).unwrap(), 5);
}

#[test]
fn abort_of_a_queued_blocking_closure_keeps_it_from_running() {
    let rt = numa_rt_executor::Builder::new()
        .max_procs(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let busy = rt.spawn_blocking(move || go_rx.recv_timeout(HANG).is_ok());
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    // Queued behind `busy` on the only blocking thread.
    let queued = rt.spawn_blocking(move || r.store(true, SeqCst));
    queued.abort();
    go_tx.send(()).unwrap();
    assert!(rt.block_on(busy).unwrap());
    let err = rt.block_on(queued).unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(
        !ran.load(SeqCst),
        "an aborted closure that had not started ran"
    );
}

#[test]
fn abort_of_a_local_task_drops_it_on_its_thread() {
    let rt = rt(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    rt.block_on(async move {
        let h = numa_rt_executor::spawn_local(async move {
            let _guard = DropGuard {
                dropped: d,
                release: None,
            };
            std::future::pending::<()>().await
        });
        numa_rt_executor::task::yield_now().await;
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        assert!(dropped.load(SeqCst));
    });
}
