//! block_in_place hands the P to another M while the closure blocks.

mod common;
use common::{rt, HANG};
use numa_rt_executor::{block_in_place, spawn};

#[test]
fn the_p_keeps_running_tasks_while_its_m_blocks() {
    // One P. The task below blocks its M until another task runs: that can
    // only happen if the P (with its queue) moved to another M.
    let rt = rt(1);
    let ok = rt.block_on(rt.spawn(async {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = spawn(async move { tx.send(()).unwrap() });
        let got = block_in_place(move || rx.recv_timeout(HANG).is_ok());
        other.await.unwrap();
        // And the runtime still works afterwards.
        spawn(async { 1 }).await.unwrap();
        got
    }));
    assert!(
        ok.unwrap(),
        "queued task did not run while its M was blocked"
    );
    assert!(rt.metrics().num_machines() >= 2);
}

#[test]
fn outside_a_worker_it_just_runs() {
    assert_eq!(block_in_place(|| 5), 5);
    let rt = rt(1);
    assert_eq!(rt.block_on(async { block_in_place(|| 6) }), 6);
}

#[test]
fn many_block_in_place_calls() {
    let rt = rt(2);
    rt.block_on(async {
        let hs: Vec<_> = (0..50u64)
            .map(|i| spawn(async move { block_in_place(move || i * 2) }))
            .collect();
        let mut s = 0;
        for h in hs {
            s += h.await.unwrap();
        }
        assert_eq!(s, (0..50u64).map(|i| i * 2).sum::<u64>());
    });
}

#[test]
fn pinned_tasks_run_again_after_block_in_place() {
    // The M gives its P away, so its pinned task can only run once the M
    // gets a P back: the P's new holder returns it when it would park.
    let rt = rt(1);
    let v = rt.block_on(rt.spawn(async {
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        let local = numa_rt_executor::spawn_local(async move {
            let rc = std::rc::Rc::new(rx.await.unwrap());
            *rc + 1
        });
        block_in_place(|| tx.send(41).unwrap());
        local.await.unwrap()
    }));
    assert_eq!(v.unwrap(), 42);
    let handbacks: u64 = rt.metrics().procs().iter().map(|p| p.handbacks).sum();
    assert!(handbacks >= 1, "the P was never handed back");
}

/// tokio's documented pattern: a task blocks on a future of its own runtime
/// from inside `block_in_place`. It used to panic ("Cannot block_on from
/// inside a numa_rt worker thread"), though the message recommended
/// block_in_place.
#[test]
fn block_on_of_the_same_runtime_inside_block_in_place() {
    let rt = rt(2);
    let got = rt.block_on(rt.spawn(async {
        block_in_place(|| {
            let h = numa_rt_executor::Handle::current();
            // The inner future spawns on the runtime and awaits it: the
            // runtime keeps running while this M blocks.
            h.block_on(async { spawn(async { 40 }).await.unwrap() + 2 })
        })
    }));
    assert_eq!(got.unwrap(), 42);
    // The M got its worker role back: a direct block_on from a task still
    // panics with the clear message.
    let direct = rt.block_on(rt.spawn(async {
        let h = numa_rt_executor::Handle::current();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.block_on(async {}))).is_err()
    }));
    assert!(direct.unwrap(), "block_on directly in a task still panics");
}

/// Another runtime's `block_on` inside `block_in_place`.
#[test]
fn block_on_of_another_runtime_inside_block_in_place() {
    let a = rt(1);
    let b = rt(1);
    let hb = b.handle().clone();
    let got = a.block_on(a.spawn(async move {
        block_in_place(move || hb.block_on(async { spawn(async { 7 }).await.unwrap() }))
    }));
    assert_eq!(got.unwrap(), 7);
}

/// On a `block_on` thread (no worker) block_in_place also leaves the
/// runtime's `block_on` context, so a nested `block_on` works there too.
#[test]
fn block_on_inside_block_in_place_on_a_block_on_thread() {
    let rt = rt(1);
    let h = rt.handle().clone();
    let got = rt.block_on(async move { block_in_place(|| h.block_on(async { 3 })) });
    assert_eq!(got, 3);
}
