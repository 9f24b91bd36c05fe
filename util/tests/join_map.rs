//! JoinMap: keyed tasks, joined in completion order with their keys.

use numa_rt_util::task::JoinMap;
use std::collections::HashSet;

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_come_with_their_keys() {
    let mut map = JoinMap::new();
    for i in 0..50u32 {
        map.spawn(i, async move { i * 2 });
    }
    assert_eq!(map.len(), 50);
    let mut seen = HashSet::new();
    while let Some((key, res)) = map.join_next().await {
        assert_eq!(res.unwrap(), key * 2);
        assert!(seen.insert(key));
    }
    assert_eq!(seen.len(), 50);
    assert!(map.is_empty());
}

#[numa_rt::test]
async fn abort_by_key_and_by_predicate() {
    let mut map = JoinMap::new();
    for i in 0..6u32 {
        map.spawn(i, std::future::pending::<()>());
    }
    assert!(map.abort(&0));
    assert!(!map.abort(&99));
    map.abort_matching(|k| k % 2 == 1);
    assert!(map.contains_key(&0), "aborted tasks stay until joined");

    let mut cancelled = Vec::new();
    for _ in 0..4 {
        let (key, res) = map.join_next().await.unwrap();
        assert!(res.unwrap_err().is_cancelled());
        cancelled.push(key);
    }
    cancelled.sort();
    assert_eq!(cancelled, [0, 1, 3, 5]);
    let mut left: Vec<_> = map.keys().copied().collect();
    left.sort();
    assert_eq!(left, [2, 4]);
    map.shutdown().await;
    assert!(map.is_empty());
}

#[numa_rt::test]
async fn a_key_spawned_again_replaces_its_task() {
    let (tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    let mut map = JoinMap::new();
    map.spawn("k", async move {
        let _tx = tx; // dropped when this task is aborted
        std::future::pending::<&str>().await
    });
    assert_eq!(map.keys().len(), 1);
    map.spawn("k", async { "new" });
    assert_eq!(map.len(), 1);
    assert!(rx.await.is_err(), "the replaced task was aborted");
    // Only the new task's result comes back.
    let (key, res) = map.join_next().await.unwrap();
    assert_eq!((key, res.unwrap()), ("k", "new"));
    assert!(map.join_next().await.is_none());
}

#[numa_rt::test]
async fn contains_task_by_id() {
    let mut map = JoinMap::new();
    map.spawn(1, async { numa_rt::task::id() });
    let (_, id) = map.join_next().await.unwrap();
    let id = id.unwrap();
    assert!(!map.contains_task(&id));

    map.spawn(2, std::future::pending::<numa_rt::task::Id>());
    map.abort(&2);
    let (_, res) = map.join_next().await.unwrap();
    let err = res.unwrap_err();
    assert!(!map.contains_task(&err.id()));
}

#[numa_rt::test]
async fn try_join_next_never_waits() {
    let mut map = JoinMap::new();
    assert!(map.try_join_next().is_none());
    map.spawn("ready", async { 1 });
    let got = loop {
        if let Some(got) = map.try_join_next() {
            break got;
        }
        numa_rt::task::yield_now().await;
    };
    assert_eq!((got.0, got.1.unwrap()), ("ready", 1));
}

#[numa_rt::test]
async fn local_and_blocking_tasks() {
    let mut map = JoinMap::new();
    let rc = std::rc::Rc::new(10);
    let rc2 = rc.clone();
    map.spawn_local("local", async move { *rc2 });
    map.spawn_blocking("blocking", || 20);
    let set = numa_rt::task::LocalSet::new();
    map.spawn_local_on("set", async move { *rc + 20 }, &set);
    let mut total = 0;
    set.run_until(async {
        while let Some((_, res)) = map.join_next().await {
            total += res.unwrap();
        }
    })
    .await;
    assert_eq!(total, 60);
}

#[numa_rt::test]
async fn dropping_the_map_aborts_its_tasks() {
    let (tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    let mut map = JoinMap::new();
    map.spawn((), async move {
        let _tx = tx;
        std::future::pending::<()>().await
    });
    drop(map);
    assert!(rx.await.is_err());
}

#[numa_rt::test]
async fn detach_all_lets_tasks_run_on() {
    let (tx, rx) = numa_rt::sync::oneshot::channel();
    let mut map = JoinMap::new();
    map.spawn((), async move { tx.send(5).unwrap() });
    map.detach_all();
    assert!(map.is_empty());
    drop(map);
    assert_eq!(rx.await.unwrap(), 5);
}
