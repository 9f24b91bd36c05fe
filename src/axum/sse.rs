//! Server-sent events with keep-alive on numa_rt's timer: axum's
//! `response::sse::{Sse, KeepAlive}` API (axum's `Sse::keep_alive` sleeps
//! on tokio's timer, which does not run inside numa_rt).
//!
//! A port changes one import, `axum::response::sse::{Sse, KeepAlive}` →
//! `numa_rt::axum::sse::{Sse, KeepAlive}`; [`Event`] is axum's own.
//!
//! ```no_run
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use axum::{response::IntoResponse, routing::get, Router};
//! use futures_util::stream;
//! use numa_rt::axum::sse::{Event, KeepAlive, Sse};
//!
//! async fn ticks() -> impl IntoResponse {
//!     let events = stream::iter((0..3).map(|i| Ok::<_, Infallible>(Event::default().data(i.to_string()))));
//!     Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
//! }
//! let app: Router = Router::new().route("/ticks", get(ticks));
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use futures_util::Stream;

pub use axum::response::sse::Event;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An SSE response (axum's `Sse`, with the keep-alive on numa_rt's timer).
#[derive(Debug)]
#[must_use]
pub struct Sse<S> {
    stream: S,
    keep_alive: Option<KeepAlive>,
}

impl<S> Sse<S> {
    /// A response that sends each event of `stream` as it comes.
    pub fn new(stream: S) -> Sse<S> {
        Sse {
            stream,
            keep_alive: None,
        }
    }

    /// Sends `keep_alive`'s event whenever the stream has been quiet for its
    /// interval, so that proxies do not close an idle connection.
    pub fn keep_alive(mut self, keep_alive: KeepAlive) -> Sse<S> {
        self.keep_alive = Some(keep_alive);
        self
    }
}

impl<S, E> IntoResponse for Sse<S>
where
    S: Stream<Item = Result<Event, E>> + Send + 'static,
    E: Into<BoxError>,
{
    fn into_response(self) -> Response {
        match self.keep_alive {
            None => axum::response::sse::Sse::new(self.stream).into_response(),
            Some(keep_alive) => {
                let sleep = crate::time::sleep(keep_alive.interval);
                axum::response::sse::Sse::new(KeepAliveStream {
                    stream: Box::pin(self.stream),
                    keep_alive,
                    sleep,
                })
                .into_response()
            }
        }
    }
}

/// What an idle SSE stream sends, and how often (axum's type of the same
/// name): by default an empty comment every 15 seconds.
#[derive(Debug, Clone)]
#[must_use]
pub struct KeepAlive {
    event: Event,
    interval: Duration,
}

impl Default for KeepAlive {
    fn default() -> KeepAlive {
        KeepAlive::new()
    }
}

impl KeepAlive {
    /// An empty comment every 15 seconds.
    pub fn new() -> KeepAlive {
        KeepAlive {
            event: Event::default().comment(""),
            interval: Duration::from_secs(15),
        }
    }

    /// How long the stream may be quiet before the keep-alive is sent.
    pub fn interval(mut self, interval: Duration) -> KeepAlive {
        self.interval = interval;
        self
    }

    /// Sends a comment with this text.
    ///
    /// # Panics
    ///
    /// If `text` holds a newline or carriage return, as axum's does.
    pub fn text(mut self, text: &str) -> KeepAlive {
        self.event = Event::default().comment(text);
        self
    }

    /// Sends this event.
    pub fn event(mut self, event: Event) -> KeepAlive {
        self.event = event;
        self
    }
}

/// The stream with keep-alives put in its quiet spells.
struct KeepAliveStream<S> {
    stream: Pin<Box<S>>,
    keep_alive: KeepAlive,
    sleep: crate::time::Sleep,
}

impl<S, E> Stream for KeepAliveStream<S>
where
    S: Stream<Item = Result<Event, E>>,
{
    type Item = Result<Event, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.stream.as_mut().poll_next(cx) {
            Poll::Ready(item) => {
                let next = crate::time::Instant::now() + this.keep_alive.interval;
                Pin::new(&mut this.sleep).reset(next);
                Poll::Ready(item)
            }
            Poll::Pending => match Pin::new(&mut this.sleep).poll(cx) {
                Poll::Ready(()) => {
                    let next = crate::time::Instant::now() + this.keep_alive.interval;
                    Pin::new(&mut this.sleep).reset(next);
                    Poll::Ready(Some(Ok(this.keep_alive.event.clone())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
