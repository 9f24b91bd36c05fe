//! FutureExt: timeouts on numa_rt's clock, and cancellation by token.

use numa_rt::time::{sleep, Duration, Instant};
use numa_rt_util::future::FutureExt;
use numa_rt_util::sync::CancellationToken;

#[numa_rt::test(start_paused = true)]
async fn timeout_fires_on_the_paused_clock() {
    let start = Instant::now();
    let (_tx, rx) = numa_rt::sync::oneshot::channel::<()>();
    assert!(rx.timeout(Duration::from_secs(30)).await.is_err());
    assert_eq!(start.elapsed(), Duration::from_secs(30));

    let done = async { 1 }.timeout(Duration::from_secs(1)).await;
    assert_eq!(done.unwrap(), 1);

    let deadline = Instant::now() + Duration::from_secs(5);
    let slow = sleep(Duration::from_secs(10)).timeout_at(deadline).await;
    assert!(slow.is_err());
    assert_eq!(Instant::now(), deadline);
}

#[test]
#[should_panic(expected = "FutureExt::timeout must be called from a numa_rt runtime")]
fn timeout_outside_a_runtime_panics() {
    drop(std::future::pending::<()>().timeout(Duration::from_secs(1)));
}

#[test]
fn timeout_made_inside_a_handle_enter() {
    let rt = numa_rt::Runtime::new().unwrap();
    let fut = {
        let _entered = rt.enter();
        std::future::ready(3).timeout(Duration::from_secs(1))
    };
    assert_eq!(rt.block_on(fut).unwrap(), 3);
}

#[numa_rt::test]
async fn with_cancellation_token() {
    let token = CancellationToken::new();
    assert_eq!(async { 1 }.with_cancellation_token(&token).await, Some(1));

    let canceller = token.clone();
    numa_rt::spawn(async move { canceller.cancel() });
    let out = std::future::pending::<()>()
        .with_cancellation_token(&token)
        .await;
    assert_eq!(out, None);

    // Already cancelled: the future is not polled at all.
    let polled = std::sync::atomic::AtomicBool::new(false);
    let out = async { polled.store(true, std::sync::atomic::Ordering::Relaxed) }
        .with_cancellation_token(&token)
        .await;
    assert_eq!(out, None);
    assert!(!polled.load(std::sync::atomic::Ordering::Relaxed));
}

#[numa_rt::test]
async fn with_cancellation_token_owned_in_a_task() {
    let token = CancellationToken::new();
    let task =
        numa_rt::spawn(std::future::pending::<()>().with_cancellation_token_owned(token.clone()));
    token.cancel();
    assert_eq!(task.await.unwrap(), None);
}
