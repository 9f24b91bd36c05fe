//! tower's time-based and spawning layers on numa_rt's timer and spawner
//! (feature `tower`; the request-timeout tests need `tower-http`).
#![cfg(feature = "tower")]

use numa_rt::time::{sleep, Duration, Instant};
use numa_rt_util::tower::{
    Buffer, BufferLayer, ExponentialBackoffMaker, RateLimitLayer, TimeoutLayer,
};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tower::retry::backoff::{Backoff, MakeBackoff};
use tower::util::rng::HasherRng;
use tower::{service_fn, Layer, Service, ServiceBuilder, ServiceExt};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Inside numa_rt there is no tokio runtime: tokio's timer or spawner,
/// called by mistake, would panic rather than work.
fn assert_no_tokio() {
    assert!(tokio::runtime::Handle::try_current().is_err());
}

#[numa_rt::test(start_paused = true)]
async fn timeout_fails_with_towers_own_elapsed() {
    assert_no_tokio();
    let start = Instant::now();
    let svc = ServiceBuilder::new()
        .layer(TimeoutLayer::new(ms(100)))
        .service(service_fn(|()| async {
            assert_no_tokio();
            sleep(Duration::from_secs(10)).await;
            Ok::<_, Infallible>("late")
        }));
    let err = svc.oneshot(()).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>(), "{err:?}");
    assert_eq!(start.elapsed(), ms(100));
}

#[numa_rt::test(start_paused = true)]
async fn timeout_passes_responses_and_boxes_inner_errors() {
    assert_no_tokio();
    let mut svc = ServiceBuilder::new()
        .layer(TimeoutLayer::new(ms(100)))
        .service(service_fn(|fail: bool| async move {
            sleep(ms(50)).await;
            if fail {
                Err(std::io::Error::other("inner"))
            } else {
                Ok(7)
            }
        }));
    assert_eq!(svc.ready().await.unwrap().call(false).await.unwrap(), 7);
    let err = svc.ready().await.unwrap().call(true).await.unwrap_err();
    assert!(err.is::<std::io::Error>());
    assert!(!err.is::<tower::timeout::error::Elapsed>());
}

#[numa_rt::test(start_paused = true)]
async fn rate_limit_lets_num_through_per_period() {
    assert_no_tokio();
    let start = Instant::now();
    let mut svc = ServiceBuilder::new()
        .layer(RateLimitLayer::new(2, Duration::from_secs(1)))
        .service(service_fn(|()| async {
            Ok::<_, Infallible>(Instant::now())
        }));
    let mut at = Vec::new();
    for _ in 0..5 {
        at.push(svc.ready().await.unwrap().call(()).await.unwrap() - start);
    }
    // Two at once, then two a period later, then one more a period after.
    assert_eq!(at[0], Duration::ZERO);
    assert_eq!(at[1], Duration::ZERO);
    assert!(at[2] >= Duration::from_secs(1) && at[3] == at[2], "{at:?}");
    assert!(at[4] >= at[2] + Duration::from_secs(1), "{at:?}");
}

#[numa_rt::test(start_paused = true)]
async fn rate_limit_starts_a_fresh_period_after_a_quiet_one() {
    assert_no_tokio();
    let mut svc = ServiceBuilder::new()
        .layer(RateLimitLayer::new(1, ms(100)))
        .service(service_fn(|()| async { Ok::<_, Infallible>(()) }));
    svc.ready().await.unwrap().call(()).await.unwrap();
    sleep(Duration::from_secs(5)).await;
    // Long after the period: ready at once.
    let before = Instant::now();
    svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(before.elapsed(), Duration::ZERO);
}

/// tower panics on a `call` without a successful `poll_ready`; here the
/// request goes through and the limiter stays limited (no panic reaches
/// the worker).
#[numa_rt::test(start_paused = true)]
async fn rate_limit_call_without_ready_does_not_panic() {
    assert_no_tokio();
    let mut svc = RateLimitLayer::new(1, ms(100))
        .layer(service_fn(|x: u8| async move { Ok::<_, Infallible>(x) }));
    assert_eq!(svc.ready().await.unwrap().call(1).await.unwrap(), 1);
    assert_eq!(svc.call(2).await.unwrap(), 2);
    let before = Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(3).await.unwrap(), 3);
    assert_eq!(before.elapsed(), ms(100));
}

#[numa_rt::test(start_paused = true)]
async fn exponential_backoff_doubles_up_to_the_maximum() {
    assert_no_tokio();
    let mut maker =
        ExponentialBackoffMaker::new(ms(100), ms(1000), 0.0, HasherRng::default()).unwrap();
    let mut backoff = maker.make_backoff();
    let mut slept = Vec::new();
    for _ in 0..6 {
        let before = Instant::now();
        backoff.next_backoff().await;
        slept.push(before.elapsed());
    }
    assert_eq!(
        slept,
        [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
    );
    // A fresh session starts over.
    let before = Instant::now();
    maker.make_backoff().next_backoff().await;
    assert_eq!(before.elapsed(), ms(100));
}

#[numa_rt::test(start_paused = true)]
async fn exponential_backoff_jitter_stays_within_bounds() {
    assert_no_tokio();
    let mut maker =
        ExponentialBackoffMaker::new(ms(100), ms(150), 1.0, HasherRng::default()).unwrap();
    let mut backoff = maker.make_backoff();
    for _ in 0..20 {
        let before = Instant::now();
        backoff.next_backoff().await;
        let took = before.elapsed();
        assert!(took >= ms(100) && took <= ms(150), "{took:?}");
    }
}

#[test]
fn exponential_backoff_rejects_what_tower_rejects() {
    assert_no_tokio();
    let rng = HasherRng::default;
    assert!(ExponentialBackoffMaker::new(ms(2), ms(1), 0.5, rng()).is_err());
    assert!(ExponentialBackoffMaker::new(ms(0), ms(0), 0.5, rng()).is_err());
    assert!(ExponentialBackoffMaker::new(ms(1), ms(2), -1.0, rng()).is_err());
    assert!(ExponentialBackoffMaker::new(ms(1), ms(2), 101.0, rng()).is_err());
    let err = ExponentialBackoffMaker::new(ms(1), ms(2), f64::NAN, rng()).unwrap_err();
    assert!(err.to_string().contains("NaN"));
}

/// tower's own `Retry`, backing off on numa_rt between attempts.
#[numa_rt::test(start_paused = true)]
async fn retry_backs_off_on_numa_rt_between_attempts() {
    assert_no_tokio();
    #[derive(Clone)]
    struct Policy<B> {
        backoff: B,
        left: usize,
    }
    impl<B: Backoff + Clone> tower::retry::Policy<u32, u32, &'static str> for Policy<B> {
        type Future = B::Future;
        fn retry(
            &mut self,
            _req: &mut u32,
            result: &mut Result<u32, &'static str>,
        ) -> Option<Self::Future> {
            if result.is_ok() || self.left == 0 {
                return None;
            }
            self.left -= 1;
            Some(self.backoff.next_backoff())
        }
        fn clone_request(&mut self, req: &u32) -> Option<u32> {
            Some(*req)
        }
    }

    let attempts = Arc::new(AtomicUsize::new(0));
    let inner = {
        let attempts = attempts.clone();
        service_fn(move |x: u32| {
            let n = attempts.fetch_add(1, Ordering::Relaxed);
            async move {
                if n < 2 {
                    Err("not yet")
                } else {
                    Ok(x + 1)
                }
            }
        })
    };
    let backoff = ExponentialBackoffMaker::new(ms(100), ms(1000), 0.0, HasherRng::default())
        .unwrap()
        .make_backoff();
    let svc = tower::retry::Retry::new(Policy { backoff, left: 5 }, inner);
    let start = Instant::now();
    assert_eq!(svc.oneshot(41).await.unwrap(), 42);
    assert_eq!(attempts.load(Ordering::Relaxed), 3);
    assert_eq!(start.elapsed(), ms(300));
}

#[numa_rt::test(max_procs = 2)]
async fn buffer_worker_runs_on_numa_rt() {
    assert_no_tokio();
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = {
        let calls = calls.clone();
        service_fn(move |x: u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            async move {
                // The worker polls this on numa_rt: no tokio here either.
                assert_no_tokio();
                numa_rt::task::yield_now().await;
                Ok::<_, Infallible>(x * 2)
            }
        })
    };
    let buffer: tower::buffer::Buffer<u64, _> = Buffer::new(inner, 4);
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let svc = buffer.clone();
        tasks.push(numa_rt::spawn(async move { svc.oneshot(i).await.unwrap() }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), i as u64 * 2);
    }
    assert_eq!(calls.load(Ordering::Relaxed), 64);
}

#[numa_rt::test]
async fn buffer_layer_builds_towers_buffer() {
    assert_no_tokio();
    let svc = ServiceBuilder::new()
        .layer(BufferLayer::new(2))
        .service(service_fn(|s: &'static str| async move {
            Ok::<_, Infallible>(s.len())
        }));
    let svc: tower::buffer::Buffer<&'static str, _> = svc;
    assert_eq!(svc.clone().oneshot("four").await.unwrap(), 4);
}

#[numa_rt::test]
async fn buffer_reports_the_inner_services_failure() {
    assert_no_tokio();
    let svc = Buffer::new(
        service_fn(|()| async { Err::<(), _>(std::io::Error::other("down")) }),
        1,
    );
    let err = svc.oneshot(()).await.unwrap_err();
    assert!(err.to_string().contains("down"), "{err}");
}

#[cfg(feature = "tower-http")]
mod request_timeout {
    use super::*;
    use http::{Request, Response, StatusCode};
    use numa_rt_util::tower::RequestTimeoutLayer;
    use numa_rt_util::tower_http::TimeoutLayer;

    fn slow(
        delay: Duration,
    ) -> impl Service<Request<()>, Response = Response<String>, Error = Infallible> + Clone {
        service_fn(move |_req: Request<()>| async move {
            assert_no_tokio();
            sleep(delay).await;
            Ok(Response::new(String::from("body")))
        })
    }

    #[numa_rt::test(start_paused = true)]
    async fn a_slow_response_becomes_an_empty_408() {
        assert_no_tokio();
        let start = Instant::now();
        let svc = ServiceBuilder::new()
            .layer(TimeoutLayer::new(ms(100)))
            .service(slow(Duration::from_secs(30)));
        let response = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert!(response.body().is_empty());
        assert_eq!(start.elapsed(), ms(100));
    }

    #[numa_rt::test(start_paused = true)]
    async fn a_fast_response_passes_untouched() {
        assert_no_tokio();
        let svc = ServiceBuilder::new()
            .layer(RequestTimeoutLayer::new(ms(100)))
            .service(slow(ms(10)));
        let response = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "body");
    }

    #[numa_rt::test(start_paused = true)]
    async fn the_status_code_can_be_chosen() {
        assert_no_tokio();
        let svc = ServiceBuilder::new()
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                ms(5),
            ))
            .service(slow(ms(10)));
        let response = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[numa_rt::test(start_paused = true)]
    async fn works_with_http_body_util_bodies() {
        assert_no_tokio();
        use bytes::Bytes;
        use http_body_util::Full;
        let svc = ServiceBuilder::new()
            .layer(TimeoutLayer::new(ms(5)))
            .service(service_fn(|_req: Request<Full<Bytes>>| async {
                sleep(ms(10)).await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"x"))))
            }));
        let response = svc
            .oneshot(Request::new(Full::new(Bytes::new())))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    }

    /// A client that sends one frame and then stalls (slowloris-style):
    /// the body read fails once no frame has come for the timeout.
    #[numa_rt::test(start_paused = true)]
    async fn a_trickling_request_body_times_out() {
        assert_no_tokio();
        use bytes::Bytes;
        use futures::channel::mpsc;
        use http_body::Frame;
        use http_body_util::{BodyExt, StreamBody};
        use numa_rt_util::tower_http::{RequestBodyTimeoutLayer, TimeoutBody, TimeoutError};

        type Trickle = StreamBody<mpsc::Receiver<Result<Frame<Bytes>, Infallible>>>;
        let svc = ServiceBuilder::new()
            .layer(RequestBodyTimeoutLayer::new(ms(100)))
            .service(service_fn(
                |req: Request<TimeoutBody<Trickle>>| async move {
                    let read = req.into_body().collect().await.map(|b| b.to_bytes());
                    Ok::<_, Infallible>(read)
                },
            ));
        let (mut tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
        tx.try_send(Ok(Frame::data(Bytes::from_static(b"GET"))))
            .unwrap();
        let start = Instant::now();
        let read = svc
            .oneshot(Request::new(StreamBody::new(rx)))
            .await
            .unwrap();
        let err = read.unwrap_err();
        assert!(err.is::<TimeoutError>(), "{err:?}");
        assert_eq!(start.elapsed(), ms(100));
        drop(tx);
    }

    #[numa_rt::test(start_paused = true)]
    async fn a_stalled_response_body_times_out_and_a_full_one_passes() {
        assert_no_tokio();
        use bytes::Bytes;
        use http_body::Frame;
        use http_body_util::{BodyExt, Full, StreamBody};
        use numa_rt_util::tower_http::{ResponseBodyTimeoutLayer, TimeoutError};

        let full = ServiceBuilder::new()
            .layer(ResponseBodyTimeoutLayer::new(ms(100)))
            .service(service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            }));
        let response = full.oneshot(Request::new(())).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");

        let stalled = ServiceBuilder::new()
            .layer(ResponseBodyTimeoutLayer::new(ms(100)))
            .service(service_fn(|_req: Request<()>| async {
                let never = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
                Ok::<_, Infallible>(Response::new(StreamBody::new(never)))
            }));
        let response = stalled.oneshot(Request::new(())).await.unwrap();
        let err = response.into_body().collect().await.unwrap_err();
        assert!(err.is::<TimeoutError>(), "{err:?}");
    }
}
