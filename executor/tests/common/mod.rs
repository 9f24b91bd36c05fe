//! Helpers shared by the behaviour tests: futures that count their drops.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Generous bound for "this must happen": only reached when the behaviour is broken.
pub const HANG: Duration = Duration::from_secs(30);

pub fn rt(procs: usize) -> numa_rt_executor::Runtime {
    numa_rt_executor::Builder::new()
        .max_procs(procs)
        .build()
        .expect("runtime builds")
}

/// Increments its counter when dropped.
pub struct DropCount(pub Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Never completes; counts its drop.
pub struct Forever(pub DropCount);
impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// Says that `test` checked nothing on this machine, and why. A test that
/// cannot check its behaviour here (too few CPUs, a refused syscall, a run
/// the machine disturbed) returns after this instead of passing silently:
/// libtest captures `eprintln!` and shows it only for a failed test, so this
/// writes to the process's stderr itself, where `cargo test` shows it beside
/// the test's `ok`.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

/// The message of a caught panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

// ------------------------------------------------------------ NUMA helpers

use numa_rt_executor::Handle;
use numa_rt_numa::{sys, Topology};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// "0;1" on this machine: the first two allowed CPUs as two nodes.
pub fn two_node_topology(test: &str) -> Option<Topology> {
    let cpus: Vec<usize> = sys::allowed_cpus().unwrap().iter().take(2).collect();
    if cpus.len() < 2 {
        skip(test, "two simulated nodes need two allowed CPUs");
        return None;
    }
    Some(Topology::from_spec(&format!("{};{}", cpus[0], cpus[1])).unwrap())
}

/// Holds workers in `on_thread_start` until opened (or `HANG` passes).
#[derive(Clone, Default)]
pub struct Gate(pub Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn wait(&self) {
        let (open, cv) = &*self.0;
        let deadline = Instant::now() + HANG;
        let mut open = open.lock().unwrap();
        while !*open {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            open = cv.wait_timeout(open, deadline - now).unwrap().0;
        }
    }

    pub fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
}

/// Runs `f` to completion with `handle.block_on` on a helper thread, failing
/// the test instead of hanging if it takes more than `HANG`.
pub fn block_on_guarded<F>(handle: &Handle, what: &str, f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let h = handle.clone();
    std::thread::spawn(move || {
        let _ = tx.send(h.block_on(f));
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|e| panic!("{what}: not done after {HANG:?} ({e})"))
}

/// Runs this test binary's test named `child` in a child process, with
/// `env` set to `case` (the child reads it to pick what to do): for cases
/// that end the process or print from the runtime's threads. Fails unless
/// the child ran that one test and passed; returns its stderr.
pub fn run_child(env: &str, case: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(env, case)
        .output()
        .expect("the test binary runs as a child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child `{case}` failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run:\n{stdout}\n{stderr}"
    );
    stderr
}

/// A hub: each round it releases every waiting worker in one poll (as a
/// fan-in's consumer taking values from a full channel wakes its blocked
/// producers), then waits until all of them have checked in. SeqCst
/// throughout: a waiter registers and then re-reads, the releaser stores
/// and then wakes, so no wake-up is lost.
#[derive(Default)]
pub struct Hub {
    round: std::sync::atomic::AtomicU64,
    checked_in: std::sync::atomic::AtomicU64,
    waiting: std::sync::Mutex<Vec<std::task::Waker>>,
    hub: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Hub {
    /// Opens round `r` and wakes every waiting worker, in this one poll.
    pub fn release(&self, r: u64) {
        self.round.store(r, Ordering::SeqCst);
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap());
        for w in waiting {
            w.wake();
        }
    }

    /// A worker's wait for round `r` to open.
    pub async fn wait_round(&self, r: u64) {
        futures::future::poll_fn(|cx| {
            if self.round.load(Ordering::SeqCst) >= r {
                return Poll::Ready(());
            }
            self.waiting.lock().unwrap().push(cx.waker().clone());
            if self.round.load(Ordering::SeqCst) >= r {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// A worker checks in for round `r` of `workers`; the last one wakes
    /// the hub.
    pub fn check_in(&self, r: u64, workers: u64) {
        if self.checked_in.fetch_add(1, Ordering::SeqCst) + 1 == workers * r {
            if let Some(w) = self.hub.lock().unwrap().take() {
                w.wake();
            }
        }
    }

    /// The hub's wait until all `workers` have checked in for round `r`.
    pub async fn wait_checked_in(&self, r: u64, workers: u64) {
        futures::future::poll_fn(|cx| {
            if self.checked_in.load(Ordering::SeqCst) >= workers * r {
                return Poll::Ready(());
            }
            *self.hub.lock().unwrap() = Some(cx.waker().clone());
            if self.checked_in.load(Ordering::SeqCst) >= workers * r {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Check-ins so far.
    pub fn checked_in(&self) -> u64 {
        self.checked_in.load(Ordering::SeqCst)
    }
}
