//! A panicking task yields a JoinError; the worker lives on.

mod common;
use common::rt;
use numa_rt_executor::spawn;

#[test]
fn panic_becomes_join_error_and_worker_survives() {
    // Retake off: a poll that prints a panic's backtrace on a loaded machine
    // (or whose thread the OS sets aside) can outlast its threshold while
    // the next task waits, and a second M would then take the P over.
    let rt = numa_rt_executor::Builder::new()
        .max_procs(1)
        .retake_threshold(None)
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..100 {
            let err = spawn(async move {
                if i >= 0 {
                    panic!("boom {i}");
                }
            })
            .await
            .unwrap_err();
            assert!(err.is_panic());
            let msg = err.to_string();
            assert!(msg.contains(&format!("boom {i}")), "{msg}");
        }
        // The single worker is still alive and runs tasks.
        assert_eq!(spawn(async { 1 }).await.unwrap(), 1);
    });
    assert_eq!(rt.metrics().num_machines(), 1);
}

#[test]
fn into_panic_returns_the_payload() {
    let rt = rt(2);
    let err = rt
        .block_on(rt.spawn(async { std::panic::panic_any(17u32) }))
        .unwrap_err();
    assert_eq!(*err.into_panic().downcast::<u32>().unwrap(), 17);
}

#[test]
fn panic_in_local_and_blocking_tasks() {
    let rt = rt(2);
    rt.block_on(async {
        let e = numa_rt_executor::spawn_local(async { panic!("local") })
            .await
            .unwrap_err();
        assert!(e.is_panic());
        let e = numa_rt_executor::spawn_blocking(|| panic!("blocking"))
            .await
            .unwrap_err();
        assert!(e.is_panic());
    });
}
