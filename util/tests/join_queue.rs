//! JoinQueue: results in spawn order, whatever the completion order.

use numa_rt::time::{sleep, Duration};
use numa_rt_util::task::JoinQueue;

#[numa_rt::test(start_paused = true)]
async fn results_come_in_spawn_order() {
    let mut queue = JoinQueue::new();
    for i in 0..10u64 {
        queue.spawn(async move {
            sleep(Duration::from_millis(100 - 10 * i)).await;
            i
        });
    }
    let mut ids = Vec::new();
    for i in 0..10u64 {
        let (id, v) = queue.join_next_with_id().await.unwrap().unwrap();
        assert_eq!(v, i);
        ids.push(id);
    }
    assert!(queue.join_next().await.is_none());
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10);
}

#[numa_rt::test]
async fn try_join_next_waits_for_the_front() {
    let (tx, rx) = numa_rt::sync::oneshot::channel::<u32>();
    let mut queue = JoinQueue::new();
    queue.spawn(async move { rx.await.unwrap() });
    queue.spawn(async { 2 });
    // Let the second finish: the front still holds the queue.
    for _ in 0..10 {
        numa_rt::task::yield_now().await;
    }
    assert!(queue.try_join_next().is_none());
    tx.send(1).unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        match queue.try_join_next() {
            Some(res) => got.push(res.unwrap()),
            None => numa_rt::task::yield_now().await,
        }
    }
    assert_eq!(got, [1, 2]);
}

#[numa_rt::test]
async fn abort_all_then_join_gives_cancelled() {
    let mut queue: JoinQueue<()> = (0..3).map(|_| std::future::pending()).collect();
    assert_eq!(queue.len(), 3);
    queue.abort_all();
    for _ in 0..3 {
        assert!(queue.join_next().await.unwrap().unwrap_err().is_cancelled());
    }
    assert!(queue.is_empty());
}

#[numa_rt::test]
async fn join_all_resumes_a_panic() {
    let mut queue = JoinQueue::new();
    queue.spawn(async { 1 });
    queue.spawn(async { panic!("boom") });
    let all = numa_rt::spawn(queue.join_all());
    let err = all.await.unwrap_err();
    assert!(err.is_panic());
    assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "boom");
}

#[numa_rt::test]
async fn blocking_local_and_handle_tasks() {
    let mut queue = JoinQueue::new();
    let handle = numa_rt::runtime::Handle::current();
    queue.spawn_blocking(|| 1);
    let rc = std::rc::Rc::new(2);
    queue.spawn_local(async move { *rc });
    queue.spawn_on(async { 3 }, &handle);
    queue.spawn_blocking_on(|| 4, &handle);
    assert_eq!(queue.join_all().await, [1, 2, 3, 4]);
}

#[numa_rt::test]
async fn drop_aborts_and_detach_does_not() {
    let (tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    let mut queue = JoinQueue::new();
    queue.spawn(async move {
        let _tx = tx;
        std::future::pending::<()>().await
    });
    drop(queue);
    assert!(rx.await.is_err());

    let (tx, rx) = numa_rt::sync::oneshot::channel();
    let mut queue = JoinQueue::new();
    queue.spawn(async move { tx.send(9).unwrap() });
    queue.detach_all();
    drop(queue);
    assert_eq!(rx.await.unwrap(), 9);
}
