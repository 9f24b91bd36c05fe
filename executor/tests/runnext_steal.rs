//! A task left in the runnext slot of a worker that then blocks is stolen
//! by another P (Go's rule: last steal pass, after a few microseconds) —
//! the case tokio cannot handle (tokio issue 4941). When the thief is slow
//! to come (ThreadSanitizer's slowdown once left one iteration to it),
//! sysmon's retake (10 ms) hands the stuck P, runnext and all, to another M
//! instead: either way the task runs without the blocker.

mod common;
use common::{rt, HANG};
use numa_rt_executor::spawn;

#[test]
fn a_blocked_workers_runnext_task_still_runs() {
    let rt = rt(2);
    for _ in 0..20 {
        let ok = rt.block_on(rt.spawn(async {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            // Goes to this worker's runnext...
            drop(spawn(async move { tx.send(()).unwrap() }));
            // ...and this worker now blocks without yielding (a bad task, but
            // the runnext task must not wait for it).
            rx.recv_timeout(HANG).is_ok()
        }));
        assert!(
            ok.unwrap(),
            "runnext task was not stolen from a blocked worker"
        );
    }
    let procs = rt.metrics().procs();
    let stolen: u64 = procs.iter().map(|p| p.tasks_stolen).sum();
    let retaken: u64 = procs.iter().map(|p| p.retakes).sum();
    assert!(
        stolen + retaken >= 20,
        "steals recorded: {stolen}, retakes: {retaken}"
    );
}
