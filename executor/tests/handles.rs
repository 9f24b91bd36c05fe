//! Handles work from foreign threads; entering; Handle::current outside.

mod common;
use common::rt;
use numa_rt_executor::{spawn, Handle};

#[test]
fn handle_from_foreign_threads() {
    let rt = rt(2);
    let h = rt.handle().clone();
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            let h = h.clone();
            std::thread::spawn(move || {
                let a = h.spawn(async move { i * 10 });
                let b = h.block_on(async move { spawn(async move { i + 1 }).await.unwrap() });
                h.block_on(a).unwrap() + b
            })
        })
        .collect();
    let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(sum, (0..4u64).map(|i| i * 10 + i + 1).sum());
}

#[test]
fn enter_makes_spawn_work_on_a_plain_thread() {
    let rt = rt(1);
    let h = rt.handle().clone();
    let out = std::thread::spawn(move || {
        let _g = h.enter();
        let j = spawn(async { 3 });
        h.block_on(j).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(out, 3);
}

#[test]
fn current_outside_a_runtime() {
    assert!(Handle::try_current().is_err());
    let err = std::panic::catch_unwind(Handle::current).unwrap_err();
    let msg = common::panic_message(&*err);
    assert!(msg.contains("not inside a numa_rt runtime"), "{msg}");
}

#[test]
fn block_on_inside_a_task_panics_instead_of_hanging() {
    let rt = rt(1);
    let h = rt.handle().clone();
    let err = rt
        .block_on(rt.spawn(async move { h.block_on(async {}) }))
        .unwrap_err();
    assert!(err.is_panic());
    assert!(
        err.to_string()
            .contains("Cannot block_on from inside a numa_rt worker thread"),
        "{err}"
    );
    // The worker survived.
    assert_eq!(rt.block_on(rt.spawn(async { 2 })).unwrap(), 2);
}

#[test]
fn runtime_and_handle_are_unwind_safe_as_tokio_s() {
    fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    unwind_safe::<numa_rt_executor::Runtime>();
    unwind_safe::<numa_rt_executor::Handle>();
    // So a caught panic around block_on compiles without AssertUnwindSafe,
    // and the runtime goes on.
    let rt = numa_rt_executor::Builder::new()
        .max_procs(1)
        .build()
        .unwrap();
    let caught = std::panic::catch_unwind(|| rt.block_on(async { panic!("in block_on") }));
    assert!(caught.is_err());
    assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
}

#[test]
fn block_on_inside_block_on_panics_with_tokio_s_words() {
    let rt = numa_rt_executor::Builder::new()
        .max_procs(1)
        .build()
        .unwrap();
    let h = rt.handle().clone();
    let err = std::panic::catch_unwind(|| rt.block_on(async { h.block_on(async {}) })).unwrap_err();
    let msg = common::panic_message(&*err);
    assert!(
        msg.starts_with("Cannot start a runtime from within a runtime."),
        "{msg}"
    );
    assert!(msg.contains("another block_on"), "{msg}");
}
