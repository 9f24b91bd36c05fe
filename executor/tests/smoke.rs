use numa_rt_executor::{spawn, Builder};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn smoke_spawn_many() {
    let rt = Builder::new().max_procs(2).build().unwrap();
    let n = rt.block_on(async {
        let c = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..10_000)
            .map(|_| {
                let c = c.clone();
                spawn(async move {
                    c.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        c.load(Ordering::Relaxed)
    });
    assert_eq!(n, 10_000);
    println!("{}", rt.metrics());
}
