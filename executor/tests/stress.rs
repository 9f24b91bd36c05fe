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
