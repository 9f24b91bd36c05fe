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
        eprintln!("{test}: skipped, two simulated nodes need two allowed CPUs");
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
