//! sysmon re-reads the CPU quota when `max_procs` is left to its default:
//! P's above a shrunk quota retire (take no work) until it grows back.
//! The quota comes from a test source (`Builder::max_procs_source`), which
//! sysmon calls about once a second.

mod common;
use common::HANG;
use numa_rt_executor::{spawn, spawn_local, Builder, Runtime};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < HANG, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A runtime whose default `max_procs` follows `quota`, kept awake by a
/// task ticking every 2 ms: sysmon re-reads the quota only while the
/// runtime is not idle.
fn rt_with(quota: &Arc<AtomicUsize>) -> Runtime {
    let q = quota.clone();
    let rt = Builder::new()
        .max_procs_source(move || q.load(SeqCst))
        .build()
        .unwrap();
    drop(rt.spawn(async {
        loop {
            numa_rt_reactor::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }));
    rt
}

/// The P each of `n` tasks ran on (spawned from outside and from a task).
fn where_tasks_run(rt: &Runtime, n: usize) -> Vec<usize> {
    rt.block_on(async move {
        let mut hs = Vec::new();
        for _ in 0..n {
            hs.push(spawn(async {
                let inner = spawn(async { numa_rt_reactor::context::current_p() });
                let here = numa_rt_reactor::context::current_p();
                vec![here, inner.await.unwrap()]
            }));
        }
        let mut ps = Vec::new();
        for h in hs {
            ps.extend(h.await.unwrap().into_iter().map(|p| p.expect("ran on a P")));
        }
        ps
    })
}

#[test]
fn procs_above_a_shrunk_quota_take_no_work_until_it_grows_back() {
    let quota = Arc::new(AtomicUsize::new(4));
    let rt = rt_with(&quota);
    let m = rt.metrics();
    assert_eq!((m.num_procs(), m.active_procs()), (4, 4));

    // Shrinks below the floor: 2 P's stay.
    quota.store(1, SeqCst);
    wait_for("the quota re-read", || m.active_procs() == 2);
    wait_for("P2 and P3 to retire", || {
        m.proc(2).retired && m.proc(3).retired
    });
    for p in where_tasks_run(&rt, 200) {
        assert!(p < 2, "a task ran on retired P{p}");
    }

    // Grows back.
    quota.store(4, SeqCst);
    wait_for("the quota re-read", || m.active_procs() == 4);
    wait_for("P2 and P3 to work again", || {
        !m.proc(2).retired && !m.proc(3).retired
    });
    assert_eq!(where_tasks_run(&rt, 50).len(), 100);
}

#[test]
fn a_retired_ps_thread_still_runs_its_pinned_tasks() {
    let quota = Arc::new(AtomicUsize::new(3));
    let rt = rt_with(&quota);
    let m = rt.metrics();
    // Park a pinned task on P2's thread, waiting for a message.
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let (started_tx, started_rx) = futures::channel::oneshot::channel();
    let pinned = rt.block_on(async move {
        // Round-robin placement is not ours to pick: spawn until a task
        // lands on P2, and pin there.
        let mut rx = Some(rx);
        let mut started_tx = Some(started_tx);
        loop {
            let (r, s) = (rx.take().unwrap(), started_tx.take().unwrap());
            let h = spawn(async move {
                if numa_rt_reactor::context::current_p() != Some(2) {
                    return Err((r, s));
                }
                let thread = std::thread::current().id();
                let j = spawn_local(async move {
                    let _ = s.send(());
                    let _ = r.await;
                    std::thread::current().id()
                });
                Ok((thread, j))
            });
            match h.await.unwrap() {
                Ok(x) => break x,
                Err((r, s)) => {
                    rx = Some(r);
                    started_tx = Some(s);
                    numa_rt_executor::task::yield_now().await;
                }
            }
        }
    });
    let (thread, join) = pinned;
    rt.block_on(async { started_rx.await.unwrap() });
    quota.store(2, SeqCst);
    wait_for("P2 to retire", || m.proc(2).retired);
    tx.send(()).unwrap();
    let ran_on = rt.block_on(join).unwrap();
    assert_eq!(ran_on, thread, "a pinned task never moves");
    assert!(m.proc(2).retired, "running a pinned task does not unretire");
}
