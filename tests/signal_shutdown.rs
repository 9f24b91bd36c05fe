//! Dropping a runtime whose task waits in `Signal::recv` neither hangs nor
//! leaves the listener's descriptor open. One test alone in its binary:
//! it counts the process's open descriptors.

use numa_rt::signal::unix::{signal, SignalKind};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

#[test]
fn dropping_the_runtime_with_a_pending_recv_closes_the_listener() {
    // The process-wide pipe is made by the first listener and kept.
    rt().block_on(async { drop(signal(SignalKind::user_defined1()).unwrap()) });
    let before = open_fds();
    for _ in 0..3 {
        let rt = rt();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let mut s = signal(SignalKind::user_defined1()).unwrap();
            let mut t = signal(SignalKind::user_defined1()).unwrap();
            tx.send(()).unwrap();
            s.recv().await;
            t.recv().await;
        });
        rx.recv().unwrap(); // the listeners exist; the task waits
        drop(rt);
    }
    assert_eq!(
        open_fds(),
        before,
        "a listener's descriptor outlived its runtime"
    );
}
