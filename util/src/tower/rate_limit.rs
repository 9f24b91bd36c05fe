//! At most `num` requests per period, on numa_rt's timer.

use numa_rt::time::{Instant, Sleep};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// A number of requests per period (tower's `limit::rate::Rate`).
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    num: u64,
    per: Duration,
}

impl Rate {
    /// `num` requests per `per`.
    ///
    /// tower panics when `num` or `per` is zero; here a zero `num` counts as
    /// one and a zero `per` as one nanosecond, so that a rate built from
    /// configuration cannot bring a worker down.
    pub fn new(num: u64, per: Duration) -> Self {
        Rate {
            num: num.max(1),
            per: per.max(Duration::from_nanos(1)),
        }
    }

    /// Requests per period.
    pub fn num(&self) -> u64 {
        self.num
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }
}

#[derive(Debug)]
enum State {
    /// Requests may go until `until`; `rem` of this period's are left.
    Ready { until: Instant, rem: u64 },
    /// This period's requests are spent; ready again when the sleep fires.
    Limited,
}

/// Lets at most [`Rate::num`] requests through per [`Rate::per`] (tower's
/// `RateLimit`, timed on numa_rt).
///
/// As tower's: a period starts at the first request after the previous
/// one ended, and `poll_ready` is `Pending` while the period's requests are
/// spent. A `call` made without a successful `poll_ready` (a breach of
/// tower's contract, on which tower panics) goes through here and leaves
/// the limiter limited.
#[derive(Debug)]
pub struct RateLimit<S> {
    inner: S,
    rate: Rate,
    state: State,
    sleep: Pin<Box<Sleep>>,
}

impl<S> RateLimit<S> {
    /// Wraps `inner`, limited to `rate`.
    pub fn new(inner: S, rate: Rate) -> Self {
        let until = Instant::now();
        RateLimit {
            inner,
            rate,
            state: State::Ready {
                until,
                rem: rate.num,
            },
            // Boxed so that the service stays `Unpin`; reset, never
            // replaced, so the timer entry is reused.
            sleep: Box::pin(numa_rt::time::sleep_until(until)),
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Request> Service<Request> for RateLimit<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let State::Limited = self.state {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.state = State::Ready {
                until: Instant::now() + self.rate.per,
                rem: self.rate.num,
            };
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if let State::Ready { mut until, mut rem } = self.state {
            let now = Instant::now();
            if now >= until {
                // The last period is over: this request opens a new one.
                until = now + self.rate.per;
                rem = self.rate.num;
            }
            if rem > 1 {
                self.state = State::Ready {
                    until,
                    rem: rem - 1,
                };
            } else {
                self.sleep.as_mut().reset(until);
                self.state = State::Limited;
            }
        }
        self.inner.call(request)
    }
}

/// Applies [`RateLimit`] to a service (tower's `RateLimitLayer`).
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    rate: Rate,
}

impl RateLimitLayer {
    /// A layer letting `num` requests through per `per`.
    pub fn new(num: u64, per: Duration) -> Self {
        RateLimitLayer {
            rate: Rate::new(num, per),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::new(inner, self.rate)
    }
}
