//! tokio-stream's timed combinators on numa_rt's timer.

use numa_rt::time::{Instant, Interval, Sleep};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio_stream::adapters::Fuse;
use tokio_stream::Stream;

/// The error of [`StreamExt::timeout`](super::StreamExt::timeout) and
/// [`StreamExt::timeout_repeating`](super::StreamExt::timeout_repeating): no item came in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::ErrorKind::TimedOut.into()
    }
}

pin_project! {
    /// The stream of [`StreamExt::timeout`](super::StreamExt::timeout).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Timeout<S> {
        #[pin]
        stream: Fuse<S>,
        #[pin]
        deadline: Sleep,
        duration: Duration,
        // Whether a deadline is running: set by each item, cleared when it
        // has fired, so that one gap yields one `Elapsed`.
        poll_deadline: bool,
    }
}

impl<S: Stream> Stream for Timeout<S> {
    type Item = Result<S::Item, Elapsed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut me = self.project();
        if let Poll::Ready(item) = me.stream.poll_next(cx) {
            if item.is_some() {
                me.deadline.as_mut().reset(Instant::now() + *me.duration);
                *me.poll_deadline = true;
            }
            return Poll::Ready(item.map(Ok));
        }
        if *me.poll_deadline {
            ready!(me.deadline.poll(cx));
            *me.poll_deadline = false;
            return Poll::Ready(Some(Err(Elapsed(()))));
        }
        Poll::Pending
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Between items there may be one `Elapsed` each, and one more
        // before the first.
        let (lower, upper) = self.stream.size_hint();
        (lower, upper.and_then(|n| n.checked_mul(2)?.checked_add(1)))
    }
}

pin_project! {
    /// The stream of [`StreamExt::timeout_repeating`](super::StreamExt::timeout_repeating).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct TimeoutRepeating<S> {
        #[pin]
        stream: Fuse<S>,
        interval: Interval,
    }
}

impl<S: Stream> Stream for TimeoutRepeating<S> {
    type Item = Result<S::Item, Elapsed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = self.project();
        if let Poll::Ready(item) = me.stream.poll_next(cx) {
            if item.is_some() {
                me.interval.reset();
            }
            return Poll::Ready(item.map(Ok));
        }
        ready!(me.interval.poll_tick(cx));
        Poll::Ready(Some(Err(Elapsed(()))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Any number of `Elapsed` may come between items.
        (self.stream.size_hint().0, None)
    }
}

pin_project! {
    /// The stream of [`StreamExt::throttle`](super::StreamExt::throttle).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Throttle<S> {
        #[pin]
        delay: Sleep,
        duration: Duration,
        // Whether the wait since the last item is over (true before the
        // first item: it goes at once).
        has_delayed: bool,
        #[pin]
        stream: S,
    }
}

impl<S> Throttle<S> {
    /// The throttled stream.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The throttled stream, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Unwraps the throttled stream.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

impl<S: Stream> Stream for Throttle<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut me = self.project();
        let period = *me.duration;
        if !*me.has_delayed && !period.is_zero() {
            ready!(me.delay.as_mut().poll(cx));
            *me.has_delayed = true;
        }
        let item = ready!(me.stream.poll_next(cx));
        if item.is_some() {
            if !period.is_zero() {
                me.delay.reset(Instant::now() + period);
            }
            *me.has_delayed = false;
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.stream.size_hint()
    }
}

pin_project! {
    /// The stream of [`StreamExt::chunks_timeout`](super::StreamExt::chunks_timeout).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct ChunksTimeout<S: Stream> {
        #[pin]
        stream: Fuse<S>,
        // Runs from the first item of the batch being filled.
        #[pin]
        deadline: Option<Sleep>,
        duration: Duration,
        items: Vec<S::Item>,
        cap: usize,
    }
}

impl<S: Stream> ChunksTimeout<S> {
    /// Takes the items of the batch being filled, leaving it empty.
    pub fn into_remainder(self: Pin<&mut Self>) -> Vec<S::Item> {
        std::mem::take(self.project().items)
    }
}

impl<S: Stream> Stream for ChunksTimeout<S> {
    type Item = Vec<S::Item>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut me = self.project();
        loop {
            match me.stream.as_mut().poll_next(cx) {
                Poll::Pending => break,
                Poll::Ready(Some(item)) => {
                    if me.items.is_empty() {
                        me.deadline.set(Some(numa_rt::time::sleep(*me.duration)));
                        me.items.reserve_exact(*me.cap);
                    }
                    me.items.push(item);
                    if me.items.len() >= *me.cap {
                        return Poll::Ready(Some(std::mem::take(me.items)));
                    }
                }
                Poll::Ready(None) => {
                    if me.items.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(std::mem::take(me.items)));
                }
            }
        }
        if me.items.is_empty() {
            return Poll::Pending;
        }
        if let Some(deadline) = me.deadline.as_pin_mut() {
            ready!(deadline.poll(cx));
        }
        Poll::Ready(Some(std::mem::take(me.items)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let pending = usize::from(!self.items.is_empty());
        let (lower, upper) = self.stream.size_hint();
        (
            (lower / self.cap).saturating_add(pending),
            upper.and_then(|n| n.checked_add(pending)),
        )
    }
}

impl<S: Stream> Timeout<S> {
    pub(super) fn new(stream: S, duration: Duration) -> Timeout<S> {
        Timeout {
            stream: tokio_stream::StreamExt::fuse(stream),
            deadline: numa_rt::time::sleep(duration),
            duration,
            poll_deadline: true,
        }
    }
}

impl<S: Stream> TimeoutRepeating<S> {
    pub(super) fn new(stream: S, interval: Interval) -> TimeoutRepeating<S> {
        TimeoutRepeating {
            stream: tokio_stream::StreamExt::fuse(stream),
            interval,
        }
    }
}

impl<S: Stream> Throttle<S> {
    pub(super) fn new(stream: S, duration: Duration) -> Throttle<S> {
        Throttle {
            delay: numa_rt::time::sleep(duration),
            duration,
            has_delayed: true,
            stream,
        }
    }
}

impl<S: Stream> ChunksTimeout<S> {
    /// A `max_size` of 0 counts as 1 (tokio-stream panics).
    pub(super) fn new(stream: S, max_size: usize, duration: Duration) -> ChunksTimeout<S> {
        let cap = max_size.max(1);
        ChunksTimeout {
            stream: tokio_stream::StreamExt::fuse(stream),
            deadline: None,
            duration,
            items: Vec::with_capacity(cap),
            cap,
        }
    }
}
