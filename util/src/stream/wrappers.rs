//! Streams over numa_rt's and tokio's types (tokio-stream's `wrappers`).
//!
//! [`ReceiverStream`], [`UnboundedReceiverStream`], [`BroadcastStream`],
//! [`WatchStream`], [`LinesStream`] and [`SplitStream`] are tokio-stream's
//! own (tokio's channels and I/O traits are numa_rt's). The listener,
//! interval, signal, join-set and directory streams are written here over
//! numa_rt's types.

use numa_rt::fs::{DirEntry, ReadDir};
use numa_rt::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use numa_rt::signal::unix::Signal;
use numa_rt::task::{JoinError, JoinSet};
use numa_rt::time::{Instant, Interval};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio_stream::Stream;

pub use tokio_stream::wrappers::{
    errors, BroadcastStream, LinesStream, ReceiverStream, SplitStream, UnboundedReceiverStream,
    WatchStream,
};

/// Declares a stream that owns one value of numa_rt's and yields what
/// `$poll` yields, with tokio-stream's `new`/`into_inner`/`AsRef`/`AsMut`.
macro_rules! wrapper {
    ($(#[$doc:meta])* $name:ident($inner:ty) -> $item:ty, |$this:ident, $cx:ident| $poll:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            inner: $inner,
        }

        impl $name {
            #[doc = concat!("Wraps a numa_rt `", stringify!($inner), "`.")]
            pub fn new(inner: $inner) -> Self {
                $name { inner }
            }

            #[doc = concat!("Unwraps the `", stringify!($inner), "`.")]
            pub fn into_inner(self) -> $inner {
                self.inner
            }
        }

        impl Stream for $name {
            type Item = $item;

            fn poll_next(self: Pin<&mut Self>, $cx: &mut Context<'_>) -> Poll<Option<$item>> {
                let $this = &mut self.get_mut().inner;
                $poll
            }
        }

        impl AsRef<$inner> for $name {
            fn as_ref(&self) -> &$inner {
                &self.inner
            }
        }

        impl AsMut<$inner> for $name {
            fn as_mut(&mut self) -> &mut $inner {
                &mut self.inner
            }
        }
    };
}

wrapper! {
    /// The connections a [`TcpListener`] accepts, as a stream that never
    /// ends; an accept error is an item, and the next poll accepts again
    /// (tokio-stream's `TcpListenerStream`).
    TcpListenerStream(TcpListener) -> io::Result<TcpStream>,
    |listener, cx| listener.poll_accept(cx).map(|r| Some(r.map(|(stream, _)| stream)))
}

wrapper! {
    /// The connections a [`UnixListener`] accepts, as a stream that never
    /// ends (tokio-stream's `UnixListenerStream`).
    UnixListenerStream(UnixListener) -> io::Result<UnixStream>,
    |listener, cx| listener.poll_accept(cx).map(|r| Some(r.map(|(stream, _)| stream)))
}

wrapper! {
    /// The ticks of an [`Interval`], as a stream that never ends
    /// (tokio-stream's `IntervalStream`).
    IntervalStream(Interval) -> Instant,
    |interval, cx| interval.poll_tick(cx).map(Some)
}

wrapper! {
    /// One `()` per delivery of a Unix signal (tokio-stream's
    /// `SignalStream`); deliveries between polls coalesce, as on tokio.
    SignalStream(Signal) -> (),
    |signal, cx| signal.poll_recv(cx)
}

wrapper! {
    /// The entries of a directory (tokio-stream's `ReadDirStream`, over
    /// numa_rt's [`ReadDir`]); ends after the last entry.
    ReadDirStream(ReadDir) -> io::Result<DirEntry>,
    |dir, cx| dir.poll_next_entry(cx).map(Result::transpose)
}

/// The results of a [`JoinSet`]'s tasks in the order they finish
/// (tokio-stream's `JoinSetStream`, over numa_rt's `JoinSet`); ends when
/// the set is empty.
#[derive(Debug)]
pub struct JoinSetStream<T> {
    inner: JoinSet<T>,
}

impl<T> JoinSetStream<T> {
    /// Wraps a numa_rt `JoinSet`.
    pub fn new(join_set: JoinSet<T>) -> Self {
        JoinSetStream { inner: join_set }
    }

    /// Unwraps the `JoinSet`.
    pub fn into_inner(self) -> JoinSet<T> {
        self.inner
    }
}

impl<T: 'static> Stream for JoinSetStream<T> {
    type Item = Result<T, JoinError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_join_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.inner.len();
        (len, Some(len))
    }
}

impl<T> AsRef<JoinSet<T>> for JoinSetStream<T> {
    fn as_ref(&self) -> &JoinSet<T> {
        &self.inner
    }
}

impl<T> AsMut<JoinSet<T>> for JoinSetStream<T> {
    fn as_mut(&mut self) -> &mut JoinSet<T> {
        &mut self.inner
    }
}
