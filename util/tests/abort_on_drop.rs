//! AbortOnDropHandle and AbortOnDrop abort their task when dropped.

use numa_rt_util::task::{AbortOnDrop, AbortOnDropHandle};

#[numa_rt::test]
async fn dropping_aborts() {
    let (tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    let handle = AbortOnDropHandle::new(numa_rt::spawn(async move {
        let _tx = tx;
        std::future::pending::<()>().await
    }));
    assert!(!handle.is_finished());
    drop(handle);
    assert!(rx.await.is_err());
}

#[numa_rt::test]
async fn awaiting_gives_the_output() {
    let handle = AbortOnDropHandle::new(numa_rt::spawn(async { 3 }));
    let id = handle.as_ref().id();
    assert_eq!(handle.abort_handle().id(), id);
    assert_eq!(handle.await.unwrap(), 3);
}

#[numa_rt::test]
async fn detach_gives_back_a_plain_handle() {
    let (tx, rx) = numa_rt::sync::oneshot::channel();
    let (go_tx, go_rx) = numa_rt::sync::oneshot::channel::<()>();
    let handle = AbortOnDropHandle::new(numa_rt::spawn(async move {
        go_rx.await.unwrap();
        tx.send(1).unwrap();
    }));
    drop(handle.detach());
    go_tx.send(()).unwrap();
    assert_eq!(rx.await.unwrap(), 1, "the detached task ran on");
}

#[numa_rt::test]
async fn abort_on_drop_of_an_abort_handle() {
    let task = numa_rt::spawn(std::future::pending::<()>());
    let guard = AbortOnDrop::new(task.abort_handle());
    assert!(!guard.is_finished());
    drop(guard);
    assert!(task.await.unwrap_err().is_cancelled());

    let task = numa_rt::spawn(async { 4 });
    let plain = AbortOnDrop::new(task.abort_handle()).detach();
    drop(plain);
    assert_eq!(task.await.unwrap(), 4);
}
