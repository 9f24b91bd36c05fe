//! `JoinSet`: results in completion order, aborting, shutdown, drop.

mod common;
use common::{rt, DropCount, Forever, HANG};
use numa_rt_executor::task::JoinSet;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};

#[test]
fn sets_and_handles_of_send_outputs_are_send_and_sync() {
    fn assert_traits<T: Send + Sync + 'static>() {}
    assert_traits::<JoinSet<u32>>();
    assert_traits::<numa_rt_executor::JoinHandle<u32>>();
    assert_traits::<numa_rt_executor::task::AbortHandle>();
    assert_traits::<numa_rt_executor::task::Id>();
}

#[test]
fn join_next_returns_every_result_then_none() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        let mut ids = HashSet::new();
        for i in 0..100u64 {
            ids.insert(set.spawn(async move { i }).id());
        }
        assert_eq!(set.len(), 100);
        let mut seen = HashSet::new();
        while let Some(res) = set.join_next().await {
            assert!(seen.insert(res.unwrap()));
        }
        assert_eq!(seen, (0..100).collect());
        assert!(set.is_empty());
        assert_eq!(ids.len(), 100, "ids are unique");
    });
}

#[test]
fn join_next_returns_in_completion_order() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let (tx1, rx1) = futures::channel::oneshot::channel::<()>();
        let (tx2, rx2) = futures::channel::oneshot::channel::<()>();
        set.spawn(async move {
            rx1.await.unwrap();
            1
        });
        set.spawn(async move {
            rx2.await.unwrap();
            2
        });
        tx2.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 2);
        tx1.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 1);
        assert!(set.join_next().await.is_none());
    });
}

#[test]
fn one_finished_task_among_many_pending_is_found() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..1000 {
            // Counted even if the task is aborted before its first poll.
            let guard = Forever(DropCount(d.clone()));
            set.spawn(async move {
                guard.await;
                0
            });
        }
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        set.spawn(async move {
            rx.await.unwrap();
            7
        });
        // Let every entry register before the one finishes.
        assert!(set.try_join_next().is_none());
        tx.send(()).unwrap();
        assert_eq!(set.join_next().await.unwrap().unwrap(), 7);
        assert_eq!(set.len(), 1000);
    });
    // The set was dropped at the end of block_on: every task aborted.
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 1000 {
        assert!(std::time::Instant::now() < deadline, "tasks not dropped");
        std::thread::yield_now();
    }
}

#[test]
fn try_join_next_takes_only_finished_tasks() {
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let mut set = JoinSet::new();
    {
        let _e = rt.enter();
        set.spawn(async move {
            done_tx.send(()).unwrap();
            3
        });
        set.spawn(async move {
            let _ = numa_rt_executor::spawn_blocking(move || rx.recv_timeout(HANG)).await;
            4
        });
    }
    done_rx.recv_timeout(HANG).unwrap();
    let deadline = std::time::Instant::now() + HANG;
    let first = loop {
        if let Some(r) = set.try_join_next() {
            break r.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a finished task was never returned"
        );
        std::thread::yield_now();
    };
    assert_eq!(first, 3);
    assert!(
        set.try_join_next().is_none(),
        "the other task is not finished"
    );
    tx.send(()).unwrap();
    assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 4);
    assert!(set.try_join_next().is_none());
}

#[test]
fn abort_all_cancels_and_keeps_results_coming() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..10 {
            // Counted even if the task is aborted before its first poll.
            let guard = Forever(DropCount(d.clone()));
            set.spawn(guard);
        }
        set.abort_all();
        assert_eq!(set.len(), 10);
        let mut cancelled = 0;
        while let Some(res) = set.join_next().await {
            assert!(res.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, 10);
        // Each result came after its future was dropped.
        assert_eq!(d.load(SeqCst), 10);
    });
    assert_eq!(drops.load(SeqCst), 10);
}

#[test]
fn shutdown_waits_for_every_future_to_be_dropped() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for _ in 0..20 {
            set.spawn(Forever(DropCount(d.clone())));
        }
        set.shutdown().await;
        assert!(set.is_empty());
        assert_eq!(d.load(SeqCst), 20);
    });
}

#[test]
fn dropping_the_set_aborts_every_task() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = mpsc::channel();
    let mut set = JoinSet::new();
    {
        let _e = rt.enter();
        for _ in 0..10 {
            let (d, started_tx) = (drops.clone(), started_tx.clone());
            set.spawn(async move {
                started_tx.send(()).unwrap();
                Forever(DropCount(d)).await
            });
        }
    }
    for _ in 0..10 {
        started_rx.recv_timeout(HANG).unwrap();
    }
    drop(set);
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 10 {
        assert!(std::time::Instant::now() < deadline, "tasks not dropped");
        std::thread::yield_now();
    }
}

#[test]
fn join_all_collects_every_output() {
    let rt = rt(2);
    let mut out = rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..50u32 {
            set.spawn(async move { i });
        }
        set.join_all().await
    });
    out.sort();
    assert_eq!(out, (0..50).collect::<Vec<_>>());
}

#[test]
fn join_all_resumes_a_task_panic_and_aborts_the_rest() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let err = rt
        .block_on(rt.spawn(async move {
            let mut set = JoinSet::new();
            for _ in 0..5 {
                let guard = Forever(DropCount(d.clone()));
                set.spawn(async move {
                    guard.await;
                    0
                });
            }
            set.spawn(async { panic!("boom in a set") });
            set.join_all().await
        }))
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(common::panic_message(&*err.into_panic()), "boom in a set");
    let deadline = std::time::Instant::now() + HANG;
    while drops.load(SeqCst) < 5 {
        assert!(std::time::Instant::now() < deadline, "rest not aborted");
        std::thread::yield_now();
    }
}

#[test]
fn spawn_local_on_and_blocking_go_in_the_same_set() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let rc = std::rc::Rc::new(1);
        set.spawn_local(async move { *rc });
        set.spawn_on_node(0, async { 2 });
        set.spawn_blocking(|| 3);
        set.spawn(async { 4 });
        let mut sum = 0;
        while let Some(r) = set.join_next().await {
            sum += r.unwrap();
        }
        assert_eq!(sum, 10);
    });
}

#[test]
fn the_set_is_usable_from_a_task_and_default() {
    let rt = rt(2);
    let n = rt.block_on(rt.spawn(async {
        let mut set: JoinSet<usize> = JoinSet::default();
        for i in 0..200 {
            set.spawn(async move {
                numa_rt_executor::task::yield_now().await;
                i
            });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            r.unwrap();
            n += 1;
        }
        n
    }));
    assert_eq!(n.unwrap(), 200);
}

// ------------------------------------------------ tokio's task_join_set cases
//
// The cases of tokio's tests/task_join_set.rs that map onto numa_rt,
// written anew: spawning on a handle, ids, detaching, collecting.

/// tokio's `alternating`: a set kept at two tasks by spawning one for each
/// one joined.
#[test]
fn alternating_join_and_spawn_keeps_the_length() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        assert_eq!(set.len(), 0);
        set.spawn(async {});
        assert_eq!(set.len(), 1);
        set.spawn(async {});
        assert_eq!(set.len(), 2);
        for _ in 0..16 {
            set.join_next().await.unwrap().unwrap();
            assert_eq!(set.len(), 1);
            set.spawn(async {});
            assert_eq!(set.len(), 2);
        }
    });
}

/// tokio's `abort_tasks`: abort every other task through its AbortHandle.
#[test]
fn aborting_half_the_tasks_through_their_handles() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let mut aborted = 0;
        for i in 0..16u32 {
            let h = set.spawn(async move {
                if i % 2 == 0 {
                    std::future::pending::<()>().await;
                }
                i
            });
            if i % 2 == 0 {
                h.abort();
                aborted += 1;
            }
        }
        let (mut cancelled, mut finished) = (0, 0);
        while let Some(r) = set.join_next().await {
            match r {
                Ok(i) => {
                    assert_eq!(i % 2, 1);
                    finished += 1;
                }
                Err(e) => {
                    assert!(e.is_cancelled());
                    cancelled += 1;
                }
            }
        }
        assert_eq!((cancelled, finished), (aborted, 16 - aborted));
    });
}

/// tokio's `runtime_gone`: a set whose runtime is dropped reports its tasks
/// cancelled.
#[test]
fn a_set_outliving_its_runtime_reports_cancelled() {
    let mut set = JoinSet::new();
    {
        let rt = rt(1);
        rt.block_on(async {
            set.spawn(std::future::pending::<()>());
        });
    }
    let rt2 = rt(1);
    let r = rt2.block_on(async { set.join_next().await });
    assert!(r.unwrap().unwrap_err().is_cancelled());
}

/// tokio's `spawn_on`/`try_join_next_with_id`: a task spawned on a handle
/// from outside any runtime, and ids returned with outputs and errors.
#[test]
fn spawn_on_a_handle_and_ids_with_results() {
    let rt = rt(2);
    let mut set = JoinSet::new();
    let ok = set.spawn_on(async { 7u32 }, rt.handle()).id();
    let bad = set
        .spawn_on(
            async {
                std::future::pending::<()>().await;
                0
            },
            rt.handle(),
        )
        .id();
    let blocking = set.spawn_blocking_on(|| 9, rt.handle()).id();
    set.abort_all();
    // spawned outside a runtime, joined inside one
    let mut seen = HashSet::new();
    rt.block_on(async {
        while let Some(r) = set.join_next_with_id().await {
            match r {
                Ok((id, v)) => {
                    assert!(id == ok || id == blocking, "{id:?}");
                    // the aborted pending task never yields an output;
                    // the others may be cancelled or finish first
                    assert!(v == 7 || v == 9);
                    seen.insert(id);
                }
                Err(e) => {
                    assert!(e.is_cancelled());
                    seen.insert(e.id());
                }
            }
        }
    });
    assert_eq!(seen, [ok, bad, blocking].into_iter().collect());
}

#[test]
fn try_join_next_with_id_returns_the_finished_tasks_id() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        assert!(set.try_join_next_with_id().is_none());
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let id = set.spawn(async move { rx.await.is_ok() }).id();
        assert!(set.try_join_next_with_id().is_none(), "not finished yet");
        tx.send(()).unwrap();
        let mut got = None;
        for _ in 0..1_000_000 {
            if let Some(r) = set.try_join_next_with_id() {
                got = Some(r.unwrap());
                break;
            }
            numa_rt_executor::task::yield_now().await;
        }
        assert_eq!(got, Some((id, true)));
        assert!(set.is_empty());
    });
}

/// tokio's `detach_all`-style case: detached tasks run on to completion.
#[test]
fn detach_all_empties_the_set_and_tasks_run_on() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let (gate_tx, gate_rx) = futures::channel::oneshot::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        set.spawn(async move {
            gate_rx.await.unwrap();
            done_tx.send(42).unwrap();
        });
        set.spawn(async {});
        set.detach_all();
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        gate_tx.send(()).unwrap();
        let v = numa_rt_executor::spawn_blocking(move || done_rx.recv_timeout(HANG))
            .await
            .unwrap();
        assert_eq!(v, Ok(42), "a detached task was not aborted");
        // The set is reusable afterwards.
        set.spawn(async {});
        assert!(set.join_next().await.unwrap().is_ok());
    });
}

#[test]
fn futures_collect_into_a_set_and_extend_it() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set: JoinSet<u64> = (0..10u64).map(|i| async move { i }).collect();
        assert_eq!(set.len(), 10);
        set.extend((10..20u64).map(|i| async move { i }));
        assert_eq!(set.len(), 20);
        let mut sum = 0;
        while let Some(r) = set.join_next().await {
            sum += r.unwrap();
        }
        assert_eq!(sum, (0..20).sum::<u64>());
        let outputs = (0..5u64)
            .map(|i| async move { i * 2 })
            .collect::<JoinSet<_>>()
            .join_all()
            .await;
        assert_eq!(outputs.iter().sum::<u64>(), 20);
    });
}
