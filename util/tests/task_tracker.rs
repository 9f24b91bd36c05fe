//! TaskTracker: counting, closing, waiting, and the tasks it spawns.

use futures::task::noop_waker_ref;
use numa_rt_util::task::TaskTracker;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(noop_waker_ref()))
}

#[test]
fn wait_needs_closed_and_empty() {
    let tracker = TaskTracker::new();
    let token = tracker.token();
    assert_eq!(tracker.len(), 1);

    let mut wait = pin!(tracker.wait());
    assert!(poll_once(wait.as_mut()).is_pending());
    assert!(tracker.close());
    assert!(!tracker.close(), "closing twice reports it was closed");
    assert!(poll_once(wait.as_mut()).is_pending(), "closed, not empty");
    drop(token);
    assert!(poll_once(wait.as_mut()).is_ready());
    assert!(tracker.is_empty() && tracker.is_closed());
}

#[test]
fn wait_is_ready_at_once_when_closed_and_empty() {
    let tracker = TaskTracker::new();
    tracker.close();
    let wait = tracker.wait();
    // Reopened before the first poll: the wait saw the done state already.
    assert!(tracker.reopen());
    assert!(poll_once(pin!(wait)).is_ready());
}

#[test]
fn a_moment_of_done_completes_a_wait() {
    let tracker = TaskTracker::new();
    let mut wait = pin!(tracker.wait());
    assert!(poll_once(wait.as_mut()).is_pending());
    tracker.close();
    tracker.reopen();
    // It was closed and empty for a moment after `wait`: that counts.
    assert!(poll_once(wait.as_mut()).is_ready());
}

#[test]
fn clones_share_one_tracker() {
    let a = TaskTracker::new();
    let b = a.clone();
    assert!(TaskTracker::ptr_eq(&a, &b));
    assert!(!TaskTracker::ptr_eq(&a, &TaskTracker::new()));
    let t = b.token();
    let t2 = t.clone();
    assert_eq!(a.len(), 2);
    assert!(TaskTracker::ptr_eq(t2.task_tracker(), &a));
    drop((t, t2));
    assert!(a.is_empty());
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_tasks_are_counted_until_they_end() {
    let tracker = TaskTracker::new();
    let (release, released) = numa_rt::sync::watch::channel(false);
    for i in 0..20u32 {
        let mut released = released.clone();
        tracker.spawn(async move {
            released.wait_for(|go| *go).await.unwrap();
            i
        });
    }
    let blocking = tracker.spawn_blocking(|| 7);
    let local = tracker.spawn_local(async { 8 });
    assert_eq!(blocking.await.unwrap() + local.await.unwrap(), 15);
    assert_eq!(tracker.len(), 20, "the two finished tasks left the count");
    tracker.close();
    release.send(true).unwrap();
    tracker.wait().await;
    assert!(tracker.is_empty());
}

#[numa_rt::test]
async fn an_aborted_task_leaves_the_count() {
    let tracker = TaskTracker::new();
    let h = tracker.spawn(std::future::pending::<()>());
    assert_eq!(tracker.len(), 1);
    h.abort();
    assert!(h.await.unwrap_err().is_cancelled());
    assert!(tracker.is_empty());
}

#[numa_rt::test]
async fn spawn_on_a_handle_and_on_a_local_set() {
    let tracker = TaskTracker::new();
    let handle = numa_rt::runtime::Handle::current();
    assert_eq!(tracker.spawn_on(async { 1 }, &handle).await.unwrap(), 1);
    assert_eq!(tracker.spawn_blocking_on(|| 2, &handle).await.unwrap(), 2);
    let set = numa_rt::task::LocalSet::new();
    let rc = std::rc::Rc::new(3);
    let h = tracker.spawn_local_on(async move { *rc }, &set);
    assert_eq!(set.run_until(h).await.unwrap(), 3);
    tracker.close();
    tracker.wait().await;
}

#[numa_rt::test]
async fn track_future_counts_until_dropped() {
    let tracker = TaskTracker::new();
    let fut = tracker.track_future(async { 5 });
    assert_eq!(tracker.len(), 1);
    drop(fut); // never polled: dropping it is enough
    assert!(tracker.is_empty());
    assert_eq!(tracker.track_future(async { 6 }).await, 6);
    assert!(tracker.is_empty());
}
