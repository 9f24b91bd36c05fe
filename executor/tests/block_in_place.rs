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
