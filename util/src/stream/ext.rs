//! `StreamExt`: tokio-stream's methods, the timed ones on numa_rt's timer.

use std::future::Future;
use std::time::Duration;

use numa_rt::time::Interval;
use tokio_stream::adapters::{
    Chain, Filter, FilterMap, Fuse, Map, MapWhile, Merge, Peekable, Skip, SkipWhile, Take,
    TakeWhile, Then,
};
use tokio_stream::{FromStream, Stream};

use super::timed::{ChunksTimeout, Throttle, Timeout, TimeoutRepeating};

/// tokio-stream's `StreamExt`, every method, with `timeout`,
/// `timeout_repeating`, `throttle` and `chunks_timeout` timed on numa_rt
/// (tokio-stream's sleep on tokio's timer, which panics where no tokio
/// runtime runs). Implemented for every [`Stream`].
///
/// The methods that are not timed are tokio-stream's own (the same
/// adapters, [`super::adapters`]); the futures of `next`, `try_next`,
/// `all`, `any`, `fold` and `collect` are returned as `impl Future`, since
/// tokio-stream does not export their types. One trait, so that a port
/// changes only the path (`tokio_stream::StreamExt` →
/// `numa_rt_util::stream::StreamExt`) whatever features of tokio-stream
/// other crates switch on.
pub trait StreamExt: Stream {
    /// The next item, `None` when the stream has ended.
    fn next(&mut self) -> impl Future<Output = Option<Self::Item>>
    where
        Self: Unpin,
    {
        tokio_stream::StreamExt::next(self)
    }

    /// The next item of a stream of results, with the error taken out.
    fn try_next<T, E>(&mut self) -> impl Future<Output = Result<Option<T>, E>>
    where
        Self: Stream<Item = Result<T, E>> + Unpin,
    {
        tokio_stream::StreamExt::try_next(self)
    }

    /// Each item through `f`.
    fn map<T, F>(self, f: F) -> Map<Self, F>
    where
        F: FnMut(Self::Item) -> T,
        Self: Sized,
    {
        tokio_stream::StreamExt::map(self, f)
    }

    /// Each item through `f`, ending at its first `None`.
    fn map_while<T, F>(self, f: F) -> MapWhile<Self, F>
    where
        F: FnMut(Self::Item) -> Option<T>,
        Self: Sized,
    {
        tokio_stream::StreamExt::map_while(self, f)
    }

    /// Each item through the async `f`, one at a time.
    fn then<F, Fut>(self, f: F) -> Then<Self, Fut, F>
    where
        F: FnMut(Self::Item) -> Fut,
        Fut: Future,
        Self: Sized,
    {
        tokio_stream::StreamExt::then(self, f)
    }

    /// Items of both streams as they come, ending when both have.
    fn merge<U>(self, other: U) -> Merge<Self, U>
    where
        U: Stream<Item = Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::merge(self, other)
    }

    /// The items `f` accepts.
    fn filter<F>(self, f: F) -> Filter<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::filter(self, f)
    }

    /// The `Some`s of `f` over the items.
    fn filter_map<T, F>(self, f: F) -> FilterMap<Self, F>
    where
        F: FnMut(Self::Item) -> Option<T>,
        Self: Sized,
    {
        tokio_stream::StreamExt::filter_map(self, f)
    }

    /// A stream that stays ended after its first `None`.
    fn fuse(self) -> Fuse<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::fuse(self)
    }

    /// The first `n` items.
    fn take(self, n: usize) -> Take<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::take(self, n)
    }

    /// Items while `f` accepts them.
    fn take_while<F>(self, f: F) -> TakeWhile<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::take_while(self, f)
    }

    /// All but the first `n` items.
    fn skip(self, n: usize) -> Skip<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::skip(self, n)
    }

    /// The items from the first one `f` rejects on.
    fn skip_while<F>(self, f: F) -> SkipWhile<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::skip_while(self, f)
    }

    /// Whether `f` accepts every item (stops at the first it rejects).
    fn all<F>(&mut self, f: F) -> impl Future<Output = bool>
    where
        Self: Unpin,
        F: FnMut(Self::Item) -> bool,
    {
        tokio_stream::StreamExt::all(self, f)
    }

    /// Whether `f` accepts any item (stops at the first it accepts).
    fn any<F>(&mut self, f: F) -> impl Future<Output = bool>
    where
        Self: Unpin,
        F: FnMut(Self::Item) -> bool,
    {
        tokio_stream::StreamExt::any(self, f)
    }

    /// This stream's items, then `other`'s.
    fn chain<U>(self, other: U) -> Chain<Self, U>
    where
        U: Stream<Item = Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::chain(self, other)
    }

    /// Every item folded into `init` by `f`.
    fn fold<B, F>(self, init: B, f: F) -> impl Future<Output = B>
    where
        Self: Sized,
        F: FnMut(B, Self::Item) -> B,
    {
        tokio_stream::StreamExt::fold(self, init, f)
    }

    /// Every item collected into a `T` (a `Vec`, a `String`, a
    /// `Result<Vec<_>, E>` that stops at the first error, …).
    fn collect<T>(self) -> impl Future<Output = T>
    where
        T: FromStream<Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::collect(self)
    }

    /// Each item must come within `duration` of the previous one (or of
    /// the call, for the first): otherwise the stream yields
    /// `Err(Elapsed)` once and goes on waiting for the item, with no
    /// deadline until the next item comes. As tokio-stream's.
    fn timeout(self, duration: Duration) -> Timeout<Self>
    where
        Self: Sized,
    {
        Timeout::new(self, duration)
    }

    /// Yields `Err(Elapsed)` at every tick of `interval` that comes while
    /// no item does; each item restarts the interval. As tokio-stream's.
    fn timeout_repeating(self, interval: Interval) -> TimeoutRepeating<Self>
    where
        Self: Sized,
    {
        TimeoutRepeating::new(self, interval)
    }

    /// Items no closer together than `duration`: after each item, the next
    /// waits until `duration` has passed. As tokio-stream's.
    fn throttle(self, duration: Duration) -> Throttle<Self>
    where
        Self: Sized,
    {
        Throttle::new(self, duration)
    }

    /// Batches items into vectors of up to `max_size`, each yielded when
    /// full or `duration` after its first item came, whichever is first;
    /// the last, partial batch when the stream ends. As tokio-stream's,
    /// except that a `max_size` of 0 counts as 1 (tokio-stream panics).
    fn chunks_timeout(self, max_size: usize, duration: Duration) -> ChunksTimeout<Self>
    where
        Self: Sized,
    {
        ChunksTimeout::new(self, max_size, duration)
    }

    /// A stream whose next item can be looked at without taking it.
    fn peekable(self) -> Peekable<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::peekable(self)
    }
}

impl<S: Stream + ?Sized> StreamExt for S {}
