//! The task dump: each live task with its spawn location and state.

mod common;
use futures::channel::oneshot;
use numa_rt_executor::task::TaskState;
use numa_rt_executor::{spawn_local, Builder};
use std::sync::mpsc;

#[test]
fn running_scheduled_idle_and_pinned_tasks_are_told_apart() {
    let rt = Builder::new().max_procs(1).build().unwrap();

    // An idle task: polled once, now waiting on a channel.
    let (polled_tx, polled_rx) = oneshot::channel::<()>();
    let (_keep, wait_rx) = oneshot::channel::<()>();
    let idle = rt.spawn(async move {
        polled_tx.send(()).unwrap();
        let _ = wait_rx.await;
    });
    let idle_line = line!() - 4;
    rt.block_on(polled_rx).unwrap();

    // A running task: it holds the only worker until released.
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let running = rt.spawn(async move {
        // Past its first poll: listed (see `TaskDump`).
        numa_rt_executor::task::yield_now().await;
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv().unwrap();

    // A scheduled task: queued behind the running one, never polled.
    let queued = rt.spawn(async {});

    let dump = rt.dump();
    let find = |id| dump.tasks().iter().find(|t| t.id == id).unwrap();
    let t = find(idle.id());
    assert_eq!(t.state, TaskState::Idle, "{dump}");
    assert_eq!((t.location.file(), t.location.line()), (file!(), idle_line));
    assert!(t.since_last_poll.is_some(), "{dump}");
    assert!(!t.pinned);
    assert_eq!(
        find(running.id()).state,
        TaskState::Running { proc: 0 },
        "{dump}"
    );
    // Never polled: counted, not listed (no list entry until its first
    // poll returns `Pending`).
    assert!(dump.tasks().iter().all(|t| t.id != queued.id()), "{dump}");
    assert_eq!(dump.not_yet_polled(), 1, "{dump}");
    assert_eq!(dump.tasks().len(), 2, "{dump}");
    assert_eq!(dump.len(), 3, "{dump}");
    let text = dump.to_string();
    assert!(text.starts_with("3 live task(s)"), "{text}");
    assert!(text.contains("running on P0"), "{text}");
    assert!(text.contains("and 1 not listed"), "{text}");

    release_tx.send(()).unwrap();
    rt.block_on(async {
        running.await.unwrap();
        queued.await.unwrap();
    });
    // Finished tasks leave the dump.
    let after = rt.dump();
    assert_eq!(after.len(), 1, "{after}");
    assert_eq!(after.tasks()[0].id, idle.id());

    // Pinned tasks of a block_on are listed as pinned.
    rt.block_on(async {
        let (_keep, rx) = oneshot::channel::<()>();
        let local = spawn_local(async move {
            let _ = rx.await;
        });
        numa_rt_executor::task::yield_now().await;
        let dump = numa_rt_executor::Handle::current().dump();
        let t = dump.tasks().iter().find(|t| t.id == local.id()).unwrap();
        assert!(t.pinned, "{dump}");
        local.abort();
    });
}
