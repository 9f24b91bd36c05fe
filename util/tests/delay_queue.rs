//! DelayQueue on numa_rt's timers and paused clock.

use futures::StreamExt;
use numa_rt::time::{sleep, Duration, Instant};
use numa_rt_util::time::delay_queue::{DelayQueue, MAX_DELAY};
use std::future::poll_fn;
use std::task::Poll;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls once: `Some(item)` if an item (or the end) is ready.
async fn poll_now<T>(queue: &mut DelayQueue<T>) -> Option<Option<T>> {
    poll_fn(|cx| {
        Poll::Ready(match queue.poll_expired(cx) {
            Poll::Ready(item) => Some(item.map(|e| e.into_inner())),
            Poll::Pending => None,
        })
    })
    .await
}

#[numa_rt::test(start_paused = true)]
async fn values_expire_in_deadline_order() {
    let start = Instant::now();
    let mut queue = DelayQueue::new();
    for d in [30u64, 10, 20, 10, 0] {
        queue.insert(d, ms(d));
    }
    let mut got = Vec::new();
    while let Some(e) = queue.next().await {
        assert!(Instant::now() >= e.deadline());
        assert_eq!(e.deadline(), start + ms(*e.get_ref()));
        got.push(e.into_inner());
    }
    assert_eq!(got, [0, 10, 10, 20, 30]);
    assert_eq!(start.elapsed(), ms(30));
}

#[numa_rt::test(start_paused = true)]
async fn nothing_comes_out_early() {
    let mut queue = DelayQueue::new();
    queue.insert("x", ms(50));
    assert_eq!(poll_now(&mut queue).await, None);
    sleep(ms(49)).await;
    assert_eq!(poll_now(&mut queue).await, None);
    sleep(ms(1)).await;
    assert_eq!(poll_now(&mut queue).await, Some(Some("x")));
    assert_eq!(poll_now(&mut queue).await, Some(None), "empty: the end");
}

#[numa_rt::test(start_paused = true)]
async fn reset_and_remove() {
    let start = Instant::now();
    let mut queue = DelayQueue::new();
    let a = queue.insert("a", ms(10));
    let b = queue.insert("b", ms(20));
    let c = queue.insert("c", ms(30));
    queue.reset(&a, ms(40));
    queue.reset_at(&c, start + ms(5));
    assert_eq!(queue.deadline(&a), start + ms(40));
    assert_eq!(queue.peek(), Some(c));
    assert_eq!(queue.remove(&b).into_inner(), "b");
    assert!(queue.try_remove(&b).is_none());
    let order: Vec<_> = queue.map(|e| e.into_inner()).collect().await;
    assert_eq!(order, ["c", "a"]);
    assert_eq!(start.elapsed(), ms(40));
}

#[numa_rt::test(start_paused = true)]
async fn a_waiting_task_is_woken_by_an_earlier_insert() {
    let (tx, mut rx) = numa_rt::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let consumer = numa_rt::spawn(async move {
        let mut queue = DelayQueue::new();
        queue.insert("late", ms(1000));
        let mut got = Vec::new();
        loop {
            numa_rt::select! {
                Some(e) = queue.next() => {
                    got.push((e.into_inner(), Instant::now()));
                    if got.len() == 2 { return got; }
                }
                Some(v) = rx.recv() => { queue.insert(v, ms(10)); }
            }
        }
    });
    sleep(ms(100)).await;
    tx.send("early").unwrap();
    let got = consumer.await.unwrap();
    assert_eq!(got[0].0, "early");
    assert_eq!(got[0].1 - start, ms(110));
    assert_eq!(got[1], ("late", start + ms(1000)));
}

#[numa_rt::test(start_paused = true)]
async fn clear_and_remove_last_wake_the_poller() {
    let mut queue = DelayQueue::new();
    queue.insert(1, ms(1000));
    assert_eq!(poll_now(&mut queue).await, None);
    queue.clear();
    assert!(queue.is_empty());
    assert_eq!(poll_now(&mut queue).await, Some(None));
}

#[numa_rt::test(start_paused = true)]
async fn compact_keeps_keys_valid() {
    let mut queue = DelayQueue::with_capacity(8);
    let keys: Vec<_> = (0..8u64).map(|i| queue.insert(i, ms(10 + i))).collect();
    for k in &keys[..6] {
        queue.remove(k);
    }
    queue.compact();
    assert_eq!(queue.capacity(), 2);
    assert_eq!(*queue.remove(&keys[7]).get_ref(), 7);
    queue.reset(&keys[6], ms(1));
    let e = queue.next().await.unwrap();
    assert_eq!((e.key(), e.into_inner()), (keys[6], 6));
    assert!(queue.next().await.is_none());
}

#[numa_rt::test(start_paused = true)]
async fn a_past_deadline_expires_at_once() {
    sleep(ms(100)).await;
    let mut queue = DelayQueue::new();
    queue.insert_at("past", Instant::now() - ms(50));
    assert_eq!(poll_now(&mut queue).await, Some(Some("past")));
}

#[numa_rt::test]
#[should_panic(expected = "invalid deadline")]
async fn a_deadline_past_the_limit_panics() {
    let mut queue = DelayQueue::new();
    queue.insert((), MAX_DELAY + ms(1));
}

#[numa_rt::test]
#[should_panic(expected = "invalid key")]
async fn a_stale_key_panics() {
    let mut queue = DelayQueue::new();
    let k = queue.insert((), ms(1));
    queue.remove(&k);
    queue.remove(&k);
}

#[test]
fn built_and_filled_outside_a_runtime() {
    let mut queue = DelayQueue::new();
    queue.insert(1, ms(1));
    let rt = numa_rt::Runtime::new().unwrap();
    let got = rt.block_on(async move { queue.next().await.map(|e| e.into_inner()) });
    assert_eq!(got, Some(1));
}
