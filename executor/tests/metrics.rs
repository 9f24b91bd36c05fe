//! Metrics move with the work.

mod common;
use common::rt;
use numa_rt_executor::spawn;

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
    assert_eq!(m.num_nodes(), 1);
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
    let node = m.node(0);
    assert_eq!(node.procs, vec![0, 1]);
    assert_eq!(node.tasks_polled, polled);
    let line = m.to_string();
    assert!(line.starts_with("numa_rt: procs=2 nodes=1"), "{line}");
}
