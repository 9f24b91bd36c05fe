//! Aborting a task drops its future promptly and reports cancellation.

mod common;
use common::{rt, DropCount, Forever, HANG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn abort_drops_an_idle_task_and_reports_cancelled() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let d = drops.clone();
    let h = rt.spawn(async move {
        started_tx.send(()).unwrap();
        Forever(DropCount(d)).await
    });
    started_rx.recv_timeout(HANG).expect("task started");
    h.abort();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(!err.is_panic());
    // The runtime dropped the future: wait for it (bounded), never sleep.
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move { tx.send(()).unwrap() });
    rx.recv_timeout(HANG).unwrap();
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "aborted future never dropped"
        );
        std::thread::yield_now();
    }
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let rt = rt(1);
    let h = rt.spawn(async { 5 });
    let deadline = std::time::Instant::now() + HANG;
    while !h.is_finished() {
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    }
    h.abort();
    assert_eq!(rt.block_on(h).unwrap(), 5);
}

#[test]
fn dropping_the_handle_detaches() {
    let rt = rt(2);
    let (tx, rx) = std::sync::mpsc::channel();
    drop(rt.spawn(async move { tx.send(9).unwrap() }));
    assert_eq!(rx.recv_timeout(HANG).unwrap(), 9);
}
