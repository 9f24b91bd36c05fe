//! spawn_blocking runs closures on threads without a P, with a cap.

mod common;
use common::{rt, HANG};
use numa_rt_executor::{spawn_blocking, Builder};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

#[test]
fn runs_off_the_workers_and_returns_the_value() {
    let rt = rt(1);
    let v = rt.block_on(async {
        spawn_blocking(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap()
    });
    assert!(v.is_some());
}

#[test]
fn blocking_work_does_not_stall_tasks() {
    // One P: if a blocking closure ran on it, the task below could not run.
    let rt = rt(1);
    rt.block_on(async {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let b = spawn_blocking(move || rx.recv_timeout(HANG).is_ok());
        numa_rt_executor::spawn(async move { tx.send(()).unwrap() })
            .await
            .unwrap();
        assert!(b.await.unwrap());
    });
}

#[test]
fn the_cap_is_respected() {
    let rt = Builder::new()
        .max_procs(1)
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Barrier::new(2));
    let hs: Vec<_> = (0..6)
        .map(|_| {
            let (running, peak, gate) = (running.clone(), peak.clone(), gate.clone());
            rt.spawn_blocking(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                // Pairs of closures meet here: needs two threads at once.
                gate.wait();
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    rt.block_on(async {
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert!(rt.metrics().blocking_threads() <= 2);
}

thread_local! {
    /// Set by the `on_thread_start` hook on the thread it runs on.
    static HOOK_RAN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn blocking_threads_run_the_thread_hooks() {
    // Issue 12: the hooks ran on M's only, so a blocking closure found
    // nothing its thread's on_thread_start had set up (tokio's hooks run on
    // blocking threads too).
    let stops = Arc::new(AtomicUsize::new(0));
    let s = stops.clone();
    let rt = Builder::new()
        .max_procs(1)
        .on_thread_start(|| HOOK_RAN.with(|c| c.set(c.get() + 1)))
        .on_thread_stop(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let (ran, name) = rt.block_on(async {
        spawn_blocking(|| {
            let name = std::thread::current().name().map(str::to_owned);
            (HOOK_RAN.with(|c| c.get()), name)
        })
        .await
        .unwrap()
    });
    assert_eq!(ran, 1, "on_thread_start ran once on the blocking thread");
    assert_ne!(name.as_deref(), std::thread::current().name());
    drop(rt);
    // One M and one blocking thread at least; each ran its stop hook
    // before shutdown returned.
    assert!(stops.load(Ordering::SeqCst) >= 2, "{stops:?}");
}

/// Two closures pushed back to back while one thread sleeps: the first
/// claims it, the second must get a thread of its own. (Counting the
/// sleeper out only once it ran again let both pushes count it: the
/// second closure then waited behind the first, which blocks.)
#[test]
fn two_pushes_never_count_the_same_idle_thread() {
    let rt = rt(1);
    let pool = || rt.handle().metrics();
    for _ in 0..20 {
        rt.block_on(rt.handle().spawn_blocking(|| {})).unwrap();
        // Wait (spinning, bounded) for the pool's thread to sleep again.
        let until = std::time::Instant::now() + HANG;
        while pool().num_idle_blocking_threads() == 0 {
            assert!(std::time::Instant::now() < until, "no thread went idle");
            std::thread::yield_now();
        }
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let h = rt.handle();
        // Blocks until released: whichever thread takes it is gone.
        let first = h.spawn_blocking(move || blocked.recv_timeout(HANG).is_ok());
        let second = h.spawn_blocking(move || done_tx.send(()).unwrap());
        assert!(
            done.recv_timeout(HANG).is_ok(),
            "the second closure waited behind the first"
        );
        release.send(()).unwrap();
        assert!(rt.block_on(first).unwrap());
        rt.block_on(second).unwrap();
    }
}

/// A closure spawned before shutdown still runs (queued behind a busy
/// thread, too) and its handle gets the value; one spawned after is
/// dropped (tokio's rules).
#[test]
fn closures_queued_before_shutdown_still_run() {
    let rt = Builder::new()
        .max_procs(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let h = rt.handle().clone();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    // The one thread is busy until released; the second closure queues.
    let first = h.spawn_blocking(move || wait.recv_timeout(HANG).is_ok());
    let second = h.spawn_blocking(|| 42);
    let probe = h.clone();
    let releaser = std::thread::spawn(move || {
        // Released only once the pool's shutdown has begun (a new closure
        // is refused: its handle is cancelled at once): the second closure
        // is still queued then, behind the first.
        let until = std::time::Instant::now() + HANG;
        loop {
            use futures::FutureExt;
            match probe.spawn_blocking(|| ()).now_or_never() {
                Some(Err(e)) if e.is_cancelled() => break,
                _ => {}
            }
            assert!(std::time::Instant::now() < until, "shutdown never began");
            std::thread::yield_now();
        }
        let _ = go.send(());
    });
    rt.shutdown_timeout(HANG);
    releaser.join().unwrap();
    let other = numa_rt_executor::Runtime::new().unwrap();
    assert!(other.block_on(first).unwrap());
    assert_eq!(other.block_on(second).unwrap(), 42);
    let late = h.spawn_blocking(|| 7);
    assert!(other.block_on(late).unwrap_err().is_cancelled());
}
