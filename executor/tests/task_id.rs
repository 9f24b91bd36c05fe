//! `task::id()` / `try_id()` inside tasks equal the handle's id; outside a
//! task `try_id` is `None` and `id` panics with a clear message.

mod common;
use common::{rt, HANG};
use numa_rt_executor::task::{self, Id, JoinSet};
use std::sync::mpsc;

#[test]
fn id_inside_a_task_equals_its_handles_id() {
    let rt = rt(2);
    let h = rt.spawn(async { (task::id(), task::try_id()) });
    let id = h.id();
    let (a, b) = rt.block_on(h).unwrap();
    assert_eq!(a, id);
    assert_eq!(b, Some(id));
}

#[test]
fn every_kind_of_task_sees_its_own_id() {
    let rt = rt(2);
    rt.block_on(async {
        let local = numa_rt_executor::spawn_local(async { task::id() });
        let id = local.id();
        assert_eq!(local.await.unwrap(), id);

        let blocking = numa_rt_executor::spawn_blocking(task::id);
        let id = blocking.id();
        assert_eq!(blocking.await.unwrap(), id);

        let on = numa_rt_executor::numa::spawn_on(0, async { task::id() });
        let id = on.id();
        assert_eq!(on.await.unwrap(), id);

        let mut set = JoinSet::new();
        let ah = set.spawn(async { task::id() });
        assert_eq!(set.join_next().await.unwrap().unwrap(), ah.id());
    });
}

#[test]
fn nested_tasks_restore_the_outer_id() {
    let rt = rt(2);
    let h = rt.spawn(async {
        let outer = task::id();
        let inner = numa_rt_executor::spawn(async { task::id() });
        let inner_id = inner.id();
        assert_eq!(inner.await.unwrap(), inner_id);
        assert_ne!(inner_id, outer);
        // A local task polled while this one waits runs on this thread too;
        // this task's id is back afterwards.
        let local = numa_rt_executor::spawn_local(async { task::id() });
        let local_id = local.id();
        assert_eq!(local.await.unwrap(), local_id);
        (outer, task::id())
    });
    let id = h.id();
    let (outer, after) = rt.block_on(h).unwrap();
    assert_eq!(outer, id);
    assert_eq!(after, id);
}

#[test]
fn the_id_is_known_while_an_aborted_future_is_dropped() {
    struct Report(mpsc::Sender<Option<Id>>);
    impl Drop for Report {
        fn drop(&mut self) {
            let _ = self.0.send(task::try_id());
        }
    }
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::channel();
    let h = rt.spawn(async move {
        let _r = Report(tx);
        started_tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    started_rx.recv_timeout(HANG).unwrap();
    h.abort();
    assert_eq!(rx.recv_timeout(HANG).unwrap(), Some(h.id()));
}

#[test]
fn outside_a_task_try_id_is_none_and_id_panics() {
    assert_eq!(task::try_id(), None);
    let rt = rt(1);
    // block_on's future is not a task.
    assert_eq!(rt.block_on(async { task::try_id() }), None);
    let p = std::panic::catch_unwind(task::id).unwrap_err();
    let msg = common::panic_message(&*p);
    assert!(msg.contains("task::id() called outside a task"), "{msg}");
    assert!(msg.contains("try_id"), "{msg}");
}

#[test]
fn ids_are_unique_and_error_ids_match() {
    let rt = rt(2);
    let a = rt.spawn(async {});
    let b = rt.spawn(async { panic!("id check") });
    assert_ne!(a.id(), b.id());
    assert_ne!(a.id().as_u64(), 0);
    let bid = b.id();
    rt.block_on(a).unwrap();
    assert_eq!(rt.block_on(b).unwrap_err().id(), bid);
}

/// An output whose destructor reports `try_id()`.
struct ReportsId(Option<std::sync::mpsc::Sender<Option<numa_rt_executor::task::Id>>>);
impl Drop for ReportsId {
    fn drop(&mut self) {
        let _ = self
            .0
            .take()
            .unwrap()
            .send(numa_rt_executor::task::try_id());
    }
}

#[test]
fn an_output_dropped_with_its_handle_sees_its_own_task_s_id() {
    let rt = common::rt(1);
    let (tx, rx) = std::sync::mpsc::channel();
    let (id, reported) = rt
        .block_on(rt.spawn(async move {
            let h = numa_rt_executor::spawn(async move { ReportsId(Some(tx)) });
            let id = h.id();
            // Finished but not taken: dropping the handle drops the output
            // here, inside another task.
            while !h.is_finished() {
                numa_rt_executor::task::yield_now().await;
            }
            drop(h);
            (id, rx.recv().unwrap())
        }))
        .unwrap();
    assert_eq!(reported, Some(id));
}

#[test]
fn an_output_nobody_awaits_sees_its_own_task_s_id() {
    let rt = common::rt(1);
    let (tx, rx) = std::sync::mpsc::channel();
    let h = rt.spawn(async move {
        numa_rt_executor::task::yield_now().await;
        ReportsId(Some(tx))
    });
    let id = h.id();
    drop(h); // before completion: the runtime drops the output
    assert_eq!(rx.recv_timeout(common::HANG).unwrap(), Some(id));
}
