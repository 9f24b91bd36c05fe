//! A `JoinHandle` (or a `JoinSet`) polled with a waker whose `wake`, `clone`
//! or `drop` panics never aborts the process, and the runtime goes on.
//!
//! async-task calls the awaiter's waker where a panic aborts, so each case
//! runs in a child process (this binary re-executed with `CASE_ENV` set).

mod common;
use common::HANG;
use numa_rt_executor::task::JoinSet;
use numa_rt_executor::Runtime;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

const CASE_ENV: &str = "NUMA_RT_TEST_JOIN_WAKER_PANIC_CASE";

/// Which operation of the waker panics.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Wake,
    Clone,
    Drop,
}

static WAKE: Mode = Mode::Wake;
static CLONE: Mode = Mode::Clone;
static DROP: Mode = Mode::Drop;

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

fn mode(data: *const ()) -> Mode {
    // SAFETY: every waker of this vtable points at one of the statics above.
    unsafe { *(data as *const Mode) }
}

fn clone(data: *const ()) -> RawWaker {
    if mode(data) == Mode::Clone {
        panic!("waker clone boom");
    }
    RawWaker::new(data, &VTABLE)
}

/// Counts the panicking wakes and drops, so a child can wait for one.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn boom(msg: &str) -> ! {
    PANICS.fetch_add(1, SeqCst);
    panic!("{msg}")
}

fn wake(data: *const ()) {
    match mode(data) {
        Mode::Wake => boom("waker wake boom"),
        Mode::Drop => boom("waker drop boom"), // waking by value drops it
        Mode::Clone => {}
    }
}

fn wake_by_ref(data: *const ()) {
    if mode(data) == Mode::Wake {
        boom("waker wake boom");
    }
}

fn drop_waker(data: *const ()) {
    if mode(data) == Mode::Drop {
        boom("waker drop boom");
    }
}

fn panicky(m: &'static Mode) -> Waker {
    // SAFETY: the vtable's functions only read the `'static` mode.
    unsafe { Waker::from_raw(RawWaker::new(m as *const Mode as *const (), &VTABLE)) }
}

fn run_child(case: &str) -> String {
    common::run_child(CASE_ENV, case)
}

fn still_runs(rt: &Runtime) {
    let h = rt.spawn(async { numa_rt_executor::spawn(async { 40 }).await.unwrap() + 2 });
    assert_eq!(rt.block_on(h).unwrap(), 42);
}

fn poll_with<F: Future + Unpin>(f: &mut F, w: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(w))
}

/// A task that finishes when the returned sender fires.
fn gated(
    rt: &Runtime,
) -> (
    numa_rt_executor::JoinHandle<u32>,
    futures::channel::oneshot::Sender<()>,
) {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let h = rt.spawn(async move {
        rx.await.unwrap();
        7
    });
    (h, tx)
}

/// Waits until the worker that finished the task has called the waker.
fn wait_for_a_panic() {
    let deadline = std::time::Instant::now() + HANG;
    while PANICS.load(SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the waker was never called"
        );
        std::thread::yield_now();
    }
}

#[test]
fn child() {
    let Ok(case) = std::env::var(CASE_ENV) else {
        return;
    };
    let rt = common::rt(2);
    match case.as_str() {
        "wake" | "drop" => {
            let w = panicky(if case == "wake" { &WAKE } else { &DROP });
            let (mut h, tx) = gated(&rt);
            assert!(poll_with(&mut h, &w).is_pending());
            // The task finishes on a worker, which wakes the awaiter.
            tx.send(()).unwrap();
            wait_for_a_panic();
            assert!(matches!(
                poll_with(&mut h, Waker::noop()),
                Poll::Ready(Ok(7))
            ));
            // Forgotten: dropping it here would panic in this thread, which
            // is this test's own business, not the runtime's.
            std::mem::forget(w);
        }
        "clone" => {
            let w = panicky(&CLONE);
            let (mut h, tx) = gated(&rt);
            let p = catch_unwind(AssertUnwindSafe(|| poll_with(&mut h, &w))).unwrap_err();
            assert_eq!(common::panic_message(&*p), "waker clone boom");
            // The panic reached the caller of `poll`; the handle still works.
            tx.send(()).unwrap();
            assert_eq!(rt.block_on(h).unwrap(), 7);
        }
        "replaced_drop" => {
            // A stored waker whose drop panics, replaced by a new one and
            // then dropped with the handle: contained both times.
            let w = panicky(&DROP);
            let (mut h, tx) = gated(&rt);
            assert!(poll_with(&mut h, &w).is_pending());
            assert!(poll_with(&mut h, Waker::noop()).is_pending());
            assert!(poll_with(&mut h, &w).is_pending());
            drop(h);
            tx.send(()).unwrap();
            std::mem::forget(w);
        }
        "joinset_wake" => {
            let w = panicky(&WAKE);
            let mut set = JoinSet::new();
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            {
                let _e = rt.enter();
                set.spawn(async move {
                    rx.await.unwrap();
                    9
                });
            }
            assert!(set
                .poll_join_next(&mut Context::from_waker(&w))
                .is_pending());
            tx.send(()).unwrap();
            wait_for_a_panic();
            let deadline = std::time::Instant::now() + HANG;
            let out = loop {
                if let Some(r) = set.try_join_next() {
                    break r.unwrap();
                }
                assert!(std::time::Instant::now() < deadline, "never finished");
                std::thread::yield_now();
            };
            assert_eq!(out, 9);
            std::mem::forget(w);
        }
        other => panic!("unknown case {other}"),
    }
    still_runs(&rt);
    drop(rt);
}

#[test]
fn a_join_handle_waker_that_panics_in_wake() {
    let stderr = run_child("wake");
    assert!(
        stderr.contains("waker wake boom"),
        "the waker was never woken:\n{stderr}"
    );
}

#[test]
fn a_join_handle_waker_that_panics_in_clone() {
    run_child("clone");
}

#[test]
fn a_join_handle_waker_that_panics_in_drop() {
    let stderr = run_child("drop");
    assert!(
        stderr.contains("waker drop boom"),
        "the waker was never dropped:\n{stderr}"
    );
}

#[test]
fn a_replaced_join_handle_waker_that_panics_in_drop() {
    let stderr = run_child("replaced_drop");
    assert_eq!(stderr.matches("waker drop boom").count(), 2, "{stderr}");
}

#[test]
fn a_join_set_waiter_that_panics_in_wake() {
    let stderr = run_child("joinset_wake");
    assert!(
        stderr.contains("waker wake boom"),
        "the waiter was never woken:\n{stderr}"
    );
}
