//! A million spawns across nested tasks.

mod common;
use common::rt;
use numa_rt_executor::spawn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn one_million_nested_spawns() {
    let rt = rt(2);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    rt.block_on(async move {
        let outer: Vec<_> = (0..1_000)
            .map(|_| {
                let c = c.clone();
                spawn(async move {
                    let inner: Vec<_> = (0..999)
                        .map(|_| {
                            let c = c.clone();
                            spawn(async move {
                                c.fetch_add(1, Ordering::Relaxed);
                            })
                        })
                        .collect();
                    c.fetch_add(1, Ordering::Relaxed);
                    for h in inner {
                        h.await.unwrap();
                    }
                })
            })
            .collect();
        for h in outer {
            h.await.unwrap();
        }
    });
    assert_eq!(count.load(Ordering::Relaxed), 1_000_000);
    let m = rt.metrics();
    let polled: u64 = m.procs().iter().map(|p| p.tasks_polled).sum();
    assert!(polled >= 1_000_000, "{m}");
}

#[test]
fn outside_spawn_bursts_against_parking_workers() {
    // Bursts of spawns from a non-worker thread while the workers drain the
    // node queue and park between bursts: every round exercises park/unpark.
    // (This shape found a lost unpark in the driver: a hang, caught here by
    // the recv_timeout guard instead of hanging the suite.)
    use std::sync::mpsc;
    let rt = rt(2);
    let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
    let left = Arc::new(AtomicUsize::new(0));
    for round in 0..300 {
        left.store(1_000, Ordering::Relaxed);
        let ok = rt.block_on(async {
            for _ in 0..1_000 {
                let (done_tx, left) = (done_tx.clone(), left.clone());
                drop(spawn(async move {
                    if left.fetch_sub(1, Ordering::Relaxed) == 1 {
                        done_tx.send(()).unwrap();
                    }
                }));
            }
            done_rx.recv_timeout(common::HANG).is_ok()
        });
        assert!(
            ok,
            "round {round}: tasks left in the queues with every worker asleep: {}",
            rt.metrics()
        );
    }
}
