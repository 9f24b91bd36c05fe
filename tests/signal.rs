//! `numa_rt::signal`: signals raised to this process reach every listener
//! made before the delivery, through the per-P pollers.
//!
//! Each test uses its own signal (tests of one binary run in parallel, and
//! a delivery is seen by every listener of the process). `libc::raise` runs
//! the handler before it returns, so "delivered" is a fact by the next line;
//! "not seen" is a poll that returns `Pending` (never a sleep). Every wait
//! runs under a generous `timeout`.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use numa_rt::signal::unix::{signal, SignalKind};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

fn raise(signum: libc::c_int) {
    // SAFETY: raise takes no pointers; numa_rt's handler is installed for
    // every signal a test raises (a listener exists), so the process lives.
    assert_eq!(unsafe { libc::raise(signum) }, 0, "raise({signum})");
}

#[test]
fn two_listeners_each_see_one_delivery() {
    rt().block_on(async {
        let mut a = signal(SignalKind::user_defined1()).unwrap();
        let mut b = signal(SignalKind::user_defined1()).unwrap();
        assert!(a.recv().now_or_never().is_none(), "nothing raised yet");
        raise(libc::SIGUSR1);
        timeout(GUARD, a.recv()).await.unwrap().unwrap();
        timeout(GUARD, b.recv()).await.unwrap().unwrap();
        // Each took its delivery; none is left.
        assert!(a.recv().now_or_never().is_none());
        assert!(b.recv().now_or_never().is_none());
    });
}

#[test]
fn a_listener_made_after_a_delivery_does_not_see_it() {
    rt().block_on(async {
        let mut early = signal(SignalKind::user_defined2()).unwrap();
        raise(libc::SIGUSR2); // not yet collected by anyone
        let mut late = signal(SignalKind::user_defined2()).unwrap();
        assert!(
            late.recv().now_or_never().is_none(),
            "a listener saw a signal delivered before it was made"
        );
        timeout(GUARD, early.recv()).await.unwrap().unwrap();
        raise(libc::SIGUSR2);
        timeout(GUARD, late.recv()).await.unwrap().unwrap();
        timeout(GUARD, early.recv()).await.unwrap().unwrap();
    });
}

#[test]
fn a_burst_coalesces_into_at_least_one_recv() {
    rt().block_on(async {
        let mut s = signal(SignalKind::window_change()).unwrap();
        for _ in 0..5 {
            raise(libc::SIGWINCH);
        }
        timeout(GUARD, s.recv()).await.unwrap().unwrap();
        assert!(s.recv().now_or_never().is_none(), "one burst, one recv");
    });
}

#[test]
fn ctrl_c_resolves_on_sigint() {
    rt().block_on(async {
        let mut c = std::pin::pin!(numa_rt::signal::ctrl_c());
        // The first poll makes the listener.
        assert!((&mut c).now_or_never().is_none());
        raise(libc::SIGINT);
        timeout(GUARD, c).await.unwrap().unwrap();
    });
}

/// A listener waiting in a task on a worker is woken by a signal another
/// thread sends to the whole process (any thread may run the handler).
#[test]
fn a_waiting_task_is_woken_by_kill_from_another_thread() {
    let rt = rt();
    let mut s = rt.block_on(async { signal(SignalKind::hangup()) }).unwrap();
    let waiter = rt.spawn(async move { s.recv().await });
    let killer = std::thread::spawn(|| {
        // SAFETY: kill and getpid take no pointers; SIGHUP has numa_rt's
        // handler (the listener above installed it).
        assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGHUP) }, 0);
    });
    killer.join().unwrap();
    let got = rt.block_on(async { timeout(GUARD, waiter).await });
    assert_eq!(got.unwrap().unwrap(), Some(()));
}

static PREVIOUS_CALLS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn previous_handler(_: libc::c_int) {
    PREVIOUS_CALLS.fetch_add(1, Ordering::Relaxed);
}

/// The handler installed before numa_rt's keeps being called.
#[test]
fn the_previous_handler_is_still_called() {
    let signum = libc::SIGRTMIN() + 3;
    // SAFETY: an all-zero sigaction is valid; it is filled in below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = previous_handler as *const () as usize;
    // SAFETY: `act` is a valid action whose handler has the one-argument
    // form (no SA_SIGINFO); the old action is not wanted.
    assert_eq!(
        unsafe { libc::sigaction(signum, &act, std::ptr::null_mut()) },
        0
    );
    rt().block_on(async {
        let mut s = signal(SignalKind::from_raw(signum)).unwrap();
        raise(signum);
        timeout(GUARD, s.recv()).await.unwrap().unwrap();
    });
    assert_eq!(PREVIOUS_CALLS.load(Ordering::Relaxed), 1);
}

#[test]
fn faults_and_uncatchable_signals_are_refused() {
    rt().block_on(async {
        for (signum, name) in [
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGSTOP, "SIGSTOP"),
            (libc::SIGSEGV, "fault"),
            (libc::SIGBUS, "fault"),
            (libc::SIGILL, "fault"),
            (libc::SIGFPE, "fault"),
            (0, "not a signal number"),
            (-3, "not a signal number"),
            (1000, "not a signal number"),
        ] {
            let e = signal(SignalKind::from_raw(signum)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{signum}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(name) && msg.contains(&signum.to_string()),
                "{msg}"
            );
        }
    });
}

/// A listener that outlives its runtime: `recv` says `None` at once.
#[test]
fn recv_after_the_runtime_is_gone_returns_none() {
    let rt = rt();
    let mut s = rt.block_on(async { signal(SignalKind::child()) }).unwrap();
    drop(rt);
    assert_eq!(s.recv().now_or_never(), Some(None));
}

#[test]
fn listeners_and_kinds_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<numa_rt::signal::unix::Signal>();
    send_sync::<SignalKind>();
    assert_eq!(SignalKind::from_raw(libc::SIGTERM), SignalKind::terminate());
    assert_eq!(SignalKind::terminate().as_raw_value(), libc::SIGTERM);
    assert_eq!(i32::from(SignalKind::from(libc::SIGHUP)), libc::SIGHUP);
}
