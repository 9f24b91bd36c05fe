//! Metrics move with the work.

mod common;
use common::rt;
use numa_rt_executor::{spawn, NodeMetrics, RuntimeMetrics};

/// Every node's metrics: the runtime has as many nodes as the kernel (or
/// `NUMA_RT_TOPOLOGY`) reports, each holding its share of the P's.
fn nodes(m: &RuntimeMetrics) -> Vec<NodeMetrics> {
    (0..m.num_nodes()).map(|n| m.node(n)).collect()
}

/// The node that holds P `p`.
fn node_of(m: &RuntimeMetrics, p: usize) -> NodeMetrics {
    nodes(m)
        .into_iter()
        .find(|n| n.procs.contains(&p))
        .expect("every P is on a node")
}

/// The poll-time histogram summed over every node.
fn histogram_of_all_nodes(m: &RuntimeMetrics) -> Vec<u64> {
    let mut sum = vec![0; m.poll_time_histogram_buckets()];
    for n in nodes(m) {
        for (s, c) in sum.iter_mut().zip(&n.poll_time_histogram) {
            *s += c;
        }
    }
    sum
}

#[test]
fn counters_move() {
    let rt = rt(2);
    rt.block_on(async {
        let hs: Vec<_> = (0..1000).map(|_| spawn(async {})).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let m = rt.metrics();
    assert_eq!(m.num_procs(), 2);
    // As many nodes as the topology has (one on most machines, two on a
    // 2-node kernel, where each holds one of the two P's).
    let topology = numa_rt_numa::Topology::from_env_or_discover().unwrap();
    assert_eq!(m.num_nodes(), topology.num_nodes());
    let procs = m.procs();
    let polled: u64 = procs.iter().map(|p| p.tasks_polled).sum();
    assert!(polled >= 1000, "{procs:?}");
    assert!(
        procs
            .iter()
            .map(|p| p.runnext_polls + p.global_queue_polls)
            .sum::<u64>()
            > 0
    );
    // The nodes partition the P's, each a contiguous range, and sum them.
    let all = nodes(&m);
    let procs_by_node: Vec<usize> = all.iter().flat_map(|n| n.procs.clone()).collect();
    assert_eq!(procs_by_node, vec![0, 1], "{all:?}");
    assert_eq!(all.iter().map(|n| n.tasks_polled).sum::<u64>(), polled);
    let line = m.to_string();
    let head = format!("numa_rt: procs=2 nodes={}", m.num_nodes());
    assert!(line.starts_with(&head), "{line}");
}

/// Waits (bounded) until `cond` holds on the runtime's metrics: busy time
/// is flushed when a P parks or every `event_interval` ticks, so a test waits
/// for the flush instead of guessing when it happened.
fn wait_for(
    rt: &numa_rt_executor::Runtime,
    what: &str,
    cond: impl Fn(&numa_rt_executor::RuntimeMetrics) -> bool,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let m = rt.metrics();
    while !cond(&m) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not seen within 20 s: {:?}",
            m.procs()
        );
        std::thread::yield_now();
    }
}

#[test]
fn busy_time_counts_a_task_that_keeps_its_processor() {
    use std::time::{Duration, Instant};
    let rt = rt(1);
    let spun = rt.block_on(async {
        spawn(async {
            // Keep the P for at least 30 ms of wall time (no yield).
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            t0.elapsed()
        })
        .await
        .unwrap()
    });
    wait_for(&rt, "busy_duration >= the task's run", |m| {
        m.proc(0).busy_duration >= spun
    });
    let m = rt.metrics();
    let p = m.proc(0);
    // Busy time is time the P was held: it cannot exceed the runtime's age.
    assert!(
        p.busy_duration <= m.uptime(),
        "{p:?} uptime {:?}",
        m.uptime()
    );
    assert!(p.mean_poll_time > Duration::ZERO, "{p:?}");
    // Its node sums its P's; with more nodes than P's the other nodes hold none.
    assert_eq!(node_of(&m, 0).busy_duration, p.busy_duration);
}

#[test]
fn an_idle_runtime_is_not_busy() {
    let rt = rt(2);
    rt.block_on(async { spawn(async {}).await.unwrap() });
    // Both P's park once idle; from then on busy time stops growing.
    wait_for(&rt, "both P's parked", |m| {
        m.procs().iter().all(|p| p.parks > 0) && m.idle_procs() == 2
    });
    let snap = |m: &numa_rt_executor::RuntimeMetrics| {
        m.procs()
            .iter()
            .map(|p| (p.parks, p.busy_duration))
            .collect::<Vec<_>>()
    };
    let m = rt.metrics();
    let before = snap(&m);
    std::thread::yield_now();
    let after = snap(&m);
    // A parked P's busy time was closed at its park: unless it woke in
    // between (its park count moved), nothing accrued.
    for (b, a) in before.iter().zip(&after) {
        if b.0 == a.0 && m.idle_procs() == 2 {
            assert_eq!(b.1, a.1, "busy time grew while parked");
        }
    }
    assert!(m.procs().iter().all(|p| p.busy_duration <= m.uptime()));
}

#[test]
fn budget_forced_yields_are_counted() {
    use numa_rt_reactor::coop::poll_proceed;
    let rt = rt(1);
    rt.block_on(async {
        spawn(async {
            // 300 always-ready operations: the budget (128) runs out twice.
            for _ in 0..300 {
                std::future::poll_fn(poll_proceed).await;
            }
        })
        .await
        .unwrap()
    });
    // Counted just after the poll returns: wait (bounded) for it.
    wait_for(&rt, "two forced yields", |m| m.budget_forced_yields() >= 2);
    let m = rt.metrics();
    assert_eq!(m.proc(0).budget_forced_yields, m.budget_forced_yields());
}

#[test]
fn the_poll_time_histogram_counts_every_poll_in_its_bucket() {
    use numa_rt_executor::{Builder, HistogramConfig};
    use std::time::Duration;
    let rt = Builder::new()
        .max_procs(2)
        .poll_time_histogram(HistogramConfig::log(Duration::from_micros(1), 20))
        .build()
        .unwrap();
    rt.block_on(async {
        let hs: Vec<_> = (0..100).map(|_| spawn(async {})).collect();
        for h in hs {
            h.await.unwrap();
        }
        // One poll that holds its thread for at least 2 ms.
        spawn(async { std::thread::sleep(Duration::from_millis(2)) })
            .await
            .unwrap();
    });
    let m = rt.metrics();
    assert_eq!(m.poll_time_histogram_buckets(), 20);
    let slow_buckets: Vec<usize> = (0..20)
        .filter(|&i| m.poll_time_histogram_bucket_range(i).start >= Duration::from_millis(1))
        .collect();
    // A poll is counted just after it returns (after its awaiter may have
    // seen the result): wait (bounded) for the counts to land.
    // Summed over the nodes: on a 2-node kernel each of the 2 P's is on
    // its own node, and the slow poll may run on either.
    wait_for(&rt, "101 polls, one of them slow", |m| {
        let all = histogram_of_all_nodes(m);
        all.iter().sum::<u64>() >= 101 && slow_buckets.iter().map(|&i| all[i]).sum::<u64>() >= 1
    });
    let procs = m.procs();
    for p in &procs {
        assert_eq!(p.poll_time_histogram.len(), 20);
        // Every poll is counted once (the counters are read after the
        // polls finished: block_on saw their results).
        assert!(p.poll_time_histogram.iter().sum::<u64>() <= p.tasks_polled);
    }
    let all = histogram_of_all_nodes(&m);
    let total: u64 = all.iter().sum();
    assert!(total >= 101, "{all:?}");
    let slow: u64 = slow_buckets.iter().map(|&i| all[i]).sum();
    assert!(
        slow >= 1,
        "the 2 ms poll is not in a bucket ≥ 1 ms: {all:?}"
    );
}

#[test]
fn histogram_off_by_default_and_bad_shapes_rejected() {
    use numa_rt_executor::{Builder, HistogramConfig};
    use std::time::Duration;
    let rt = rt(1);
    assert_eq!(rt.metrics().poll_time_histogram_buckets(), 0);
    assert!(rt.metrics().proc(0).poll_time_histogram.is_empty());
    let err = Builder::new()
        .max_procs(1)
        .poll_time_histogram(HistogramConfig::linear(Duration::from_micros(10), 0))
        .build()
        .expect_err("0 buckets must be rejected");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("poll_time_histogram"), "{err}");
}

/// `migrated_polls` counts exactly the polls whose task ran on another P
/// the poll before: each task here records the P of every one of its polls
/// (`current_p`, read inside the poll) and the changes it saw must add up to
/// the metric. Tasks that yield and wake each other across 2 P's move
/// between them by steals and cross-P wakes; block_on's own future is not a
/// task and is not counted.
#[test]
fn migrated_polls_count_every_change_of_processor() {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    struct Track<F> {
        inner: Pin<Box<F>>,
        last: Option<usize>,
        moves: Arc<AtomicU64>,
    }
    impl<F: Future> Future for Track<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let here = numa_rt_reactor::context::current_p().expect("polled on a P");
            if self.last.is_some_and(|p| p != here) {
                self.moves.fetch_add(1, Relaxed);
            }
            self.last = Some(here);
            self.inner.as_mut().poll(cx)
        }
    }

    let rt = rt(2);
    let moves = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut hs = Vec::new();
        for _ in 0..50 {
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            let m = moves.clone();
            hs.push(spawn(Track {
                inner: Box::pin(async move {
                    for _ in 0..20 {
                        numa_rt_executor::task::yield_now().await;
                    }
                    let _ = rx.await;
                }),
                last: None,
                moves: m,
            }));
            let m = moves.clone();
            hs.push(spawn(Track {
                inner: Box::pin(async move {
                    for _ in 0..20 {
                        numa_rt_executor::task::yield_now().await;
                    }
                    let _ = tx.send(());
                }),
                last: None,
                moves: m,
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    let m = rt.metrics();
    let migrated: u64 = m.procs().iter().map(|p| p.migrated_polls).sum();
    assert_eq!(migrated, moves.load(Relaxed), "{:?}", m.procs());
    let by_node: u64 = nodes(&m).iter().map(|n| n.migrated_polls).sum();
    assert_eq!(by_node, migrated, "the nodes sum their P's");
}

#[test]
fn tokio_worker_metrics_are_the_processors_counters() {
    let rt = rt(2);
    rt.block_on(async {
        let hs: Vec<_> = (0..100).map(|_| spawn(async {})).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let m = rt.metrics();
    assert_eq!(m.num_workers(), 2);
    for i in 0..m.num_workers() {
        // Read the tokio view between two snapshots: each counter only grows.
        let before = m.proc(i);
        let parks = m.worker_park_count(i);
        let busy = m.worker_total_busy_duration(i);
        let after = m.proc(i);
        assert!((before.parks..=after.parks).contains(&parks), "{after:?}");
        assert!(
            (before.busy_duration..=after.busy_duration).contains(&busy),
            "{after:?}"
        );
        let a = m.worker_park_unpark_count(i);
        let b = m.worker_park_unpark_count(i);
        assert!(a <= b);
    }
}

#[test]
#[should_panic]
fn a_worker_index_past_the_last_panics_as_in_tokio() {
    let rt = rt(1);
    rt.metrics().worker_park_count(1);
}

/// `worker_park_unpark_count` is odd while the worker's M is parked and
/// counts its return: it needs `Worker::park` to count the wake
/// (`park_wakes`), which executor/src/scheduler/worker.rs does not yet.
#[test]
fn park_unpark_count_is_odd_while_parked_and_even_once_back() {
    let rt = rt(1);
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let task = rt.spawn(rx);
    // The only task waits on `rx`: the P's M parks.
    wait_for(&rt, "the worker parked", |m| {
        m.worker_park_unpark_count(0) % 2 == 1
    });
    let m = rt.metrics();
    assert_eq!(
        m.worker_park_unpark_count(0),
        2 * m.worker_park_count(0) - 1
    );
    tx.send(()).unwrap();
    rt.block_on(task).unwrap().unwrap();
    let n = m.worker_park_unpark_count(0);
    // Back from that park: the count rose past the odd reading.
    assert!(n >= 2, "{n}");
}
