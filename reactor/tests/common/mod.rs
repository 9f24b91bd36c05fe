//! A tiny single-threaded harness: a reactor with a few drivers, and a
//! `block_on` that polls a future and parks driver 0 (or a given driver)
//! between polls. No executor involved.
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use numa_rt_reactor::{context, Driver, Reactor, Unparker};

/// A reactor with `procs` drivers; this thread holds P 0 and has the
/// reactor entered until the returned guard drops.
pub fn setup(procs: usize) -> (Reactor, Vec<Driver>, context::EnterGuard) {
    let reactor = Reactor::new(procs).expect("reactor");
    let drivers = (0..procs).map(|i| reactor.driver(i)).collect();
    let guard = context::enter(&reactor);
    context::set_current_p(Some(0));
    (reactor, drivers, guard)
}

struct Flag {
    woken: AtomicBool,
    unparker: Unparker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.unparker.unpark();
    }
}

/// Upper bound on a test's wall time: a hang guard, not a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Polls `fut` to completion, parking `driver` whenever it is pending.
pub fn block_on<F: Future>(driver: &mut Driver, fut: F) -> F::Output {
    let flag = Arc::new(Flag {
        woken: AtomicBool::new(true),
        unparker: driver.unparker(),
    });
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let start = Instant::now();
    loop {
        flag.woken.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        if flag.woken.load(Ordering::SeqCst) {
            driver.poll_now();
        } else {
            driver.park(Some(Duration::from_secs(1)));
        }
        assert!(start.elapsed() < HANG_GUARD, "block_on hung");
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
pub struct CountWaker(pub AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn count_waker() -> (Arc<CountWaker>, Waker) {
    let c = Arc::new(CountWaker::default());
    (c.clone(), Waker::from(c))
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

use std::pin::Pin;
