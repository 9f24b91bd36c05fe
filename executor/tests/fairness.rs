//! yield_now goes to the back; runnext ping-pong cannot starve the queue;
//! the global queue is not starved by local work.

mod common;
use common::rt;
use numa_rt_executor::{spawn, task::yield_now, Builder};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn yield_lets_queued_tasks_run() {
    let rt = rt(1);
    rt.block_on(rt.spawn(async {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        drop(spawn(async move { f.store(true, Ordering::SeqCst) }));
        // The spawned task sits in runnext; one yield must let it run,
        // because a yielded task goes to the back, never to runnext.
        yield_now().await;
        assert!(
            flag.load(Ordering::SeqCst),
            "yield_now did not let the queued task run"
        );
    }))
    .unwrap();
}

#[test]
fn ping_pong_through_runnext_does_not_starve_the_queue() {
    // Two tasks waking each other forever would always sit in runnext; a
    // third task in the ring must still get to run.
    let rt = rt(1);
    let done = rt.block_on(rt.spawn(async {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let (mut a_tx, mut a_rx) = futures::channel::mpsc::channel::<()>(1);
        let (mut b_tx, mut b_rx) = futures::channel::mpsc::channel::<()>(1);
        use futures::{SinkExt, StreamExt};
        let (s1, r1) = (stop.clone(), rounds.clone());
        let a = spawn(async move {
            while !s1.load(Ordering::SeqCst) && r1.fetch_add(1, Ordering::SeqCst) < 1_000_000 {
                b_tx.send(()).await.unwrap();
                a_rx.next().await.unwrap();
            }
        });
        let s2 = stop.clone();
        let b = spawn(async move {
            while let Some(()) = b_rx.next().await {
                if a_tx.send(()).await.is_err() {
                    break;
                }
                if s2.load(Ordering::SeqCst) {
                    break;
                }
            }
        });
        // This one goes to the ring behind the pair.
        let s3 = stop.clone();
        let c = spawn(async move { s3.store(true, Ordering::SeqCst) });
        c.await.unwrap();
        a.await.unwrap();
        drop(b);
        rounds.load(Ordering::SeqCst)
    }));
    assert!(
        done.unwrap() < 1_000_000,
        "the third task only ran after the ping-pong gave up"
    );
}

#[test]
fn global_queue_is_polled_while_local_work_remains() {
    // One P kept busy by 100 local tasks that keep yielding (they never leave
    // the local ring, which never empties). A task injected from outside
    // (node queue) must still run: the 1-in-61 fairness check takes it. Each
    // yielder gives up after a large cap, so a failure is an assert, not a hang.
    const CAP: usize = 200_000;
    let rt = Builder::new()
        .max_procs(1)
        .global_queue_interval(61)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let (s, st) = (stop.clone(), started.clone());
    let yielders = rt.spawn(async move {
        let hs: Vec<_> = (0..100)
            .map(|_| {
                let (s, st) = (s.clone(), st.clone());
                spawn(async move {
                    st.fetch_add(1, Ordering::SeqCst);
                    let mut n = 0;
                    while !s.load(Ordering::SeqCst) && n < CAP {
                        yield_now().await;
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut max = 0;
        for h in hs {
            max = max.max(h.await.unwrap());
        }
        max
    });
    // Inject only once the yielders are all running on the P.
    let deadline = std::time::Instant::now() + common::HANG;
    while started.load(Ordering::SeqCst) < 100 {
        assert!(
            std::time::Instant::now() < deadline,
            "yielders did not start"
        );
        std::thread::yield_now();
    }
    let s = stop.clone();
    drop(rt.spawn(async move { s.store(true, Ordering::SeqCst) }));
    let max = rt.block_on(yielders).unwrap();
    assert!(
        max < CAP,
        "the outside task waited until the local work gave up"
    );
}

/// A pair waking each other lives in `runnext` with the ring empty: past
/// the `runnext` cap the loop takes `runnext` again, and those polls used
/// to advance no scheduling tick, so the 1-in-61 look at the node queue
/// never came and a task injected from outside waited until the pair gave
/// up (seen in the 4-node guest: a retake had sent the third task of
/// `ping_pong_through_runnext_does_not_starve_the_queue` to the node
/// queue). The pair gives up after a large cap, so a failure is an
/// assert, not a hang.
#[test]
fn the_node_queue_is_polled_while_a_runnext_pair_ping_pongs() {
    const CAP: usize = 1_000_000;
    let rt = Builder::new()
        .max_procs(1)
        .global_queue_interval(61)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let (s, r) = (stop.clone(), rounds.clone());
    let pair = rt.spawn(async move {
        let (mut a_tx, mut a_rx) = futures::channel::mpsc::channel::<()>(1);
        let (mut b_tx, mut b_rx) = futures::channel::mpsc::channel::<()>(1);
        use futures::{SinkExt, StreamExt};
        let (s1, r1) = (s.clone(), r.clone());
        let a = spawn(async move {
            while !s1.load(Ordering::SeqCst) && r1.fetch_add(1, Ordering::SeqCst) < CAP {
                b_tx.send(()).await.unwrap();
                a_rx.next().await.unwrap();
            }
        });
        let b = spawn(async move {
            while let Some(()) = b_rx.next().await {
                if a_tx.send(()).await.is_err() {
                    break;
                }
            }
        });
        a.await.unwrap();
        drop(b);
    });
    // Inject once the pair is running.
    let deadline = std::time::Instant::now() + common::HANG;
    while rounds.load(Ordering::SeqCst) < 1000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pair did not start"
        );
        std::thread::yield_now();
    }
    let s = stop.clone();
    drop(rt.spawn(async move { s.store(true, Ordering::SeqCst) }));
    rt.block_on(pair).unwrap();
    let n = rounds.load(Ordering::SeqCst);
    assert!(
        n < CAP,
        "the outside task waited until the pair gave up ({n} rounds)"
    );
}
