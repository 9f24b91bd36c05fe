//! tower's `Buffer` with its worker on numa_rt.

use super::BoxError;
use std::fmt;
use std::marker::PhantomData;
use tower_layer::Layer;
use tower_service::Service;

/// The constructor of tower's [`Buffer`](::tower::buffer::Buffer) that
/// spawns its worker on numa_rt: `Buffer::new(service, bound)` as in tower.
///
/// tower's `Buffer::new` calls `tokio::spawn`, and Rust lets no crate but
/// tower add a constructor to tower's type, so this name holds the
/// constructor only; the value it returns is tower's own `Buffer` (a port
/// that names the type in a struct field keeps
/// `tower::buffer::Buffer<Req, F>` there). It has no values.
///
/// ```
/// use numa_rt_util::tower::Buffer; // was: tower::buffer::Buffer
/// use tower::{service_fn, ServiceExt};
///
/// #[numa_rt::main(max_procs = 1)]
/// async fn main() {
///     let svc = service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x * 2) });
///     let buffered: tower::buffer::Buffer<u32, _> = Buffer::new(svc, 8);
///     assert_eq!(buffered.clone().oneshot(21).await.unwrap(), 42);
/// }
/// ```
#[derive(Debug)]
pub enum Buffer {}

impl Buffer {
    /// tower's `Buffer::new(service, bound)`: up to `bound` requests wait
    /// for `service`, which a worker task on numa_rt drives. The worker
    /// ends when the last handle is dropped.
    ///
    /// A `bound` of 0 counts as 1 (tower's panics: its channel needs room
    /// for one request). Call it inside a numa_rt runtime (it spawns).
    #[allow(clippy::new_ret_no_self)]
    pub fn new<S, Req>(service: S, bound: usize) -> ::tower::buffer::Buffer<Req, S::Future>
    where
        S: Service<Req> + Send + 'static,
        S::Future: Send,
        S::Error: Into<BoxError> + Send + Sync,
        Req: Send + 'static,
    {
        let (buffer, worker) = ::tower::buffer::Buffer::pair(service, bound.max(1));
        // Detached: the worker's end is seen through the handles (tower's
        // `ServiceError`), not through a JoinHandle.
        drop(numa_rt::spawn(worker));
        buffer
    }
}

/// Wraps services in tower's [`Buffer`](::tower::buffer::Buffer), each
/// worker spawned on numa_rt (tower's `BufferLayer`).
pub struct BufferLayer<Request> {
    bound: usize,
    _request: PhantomData<fn(Request)>,
}

impl<Request> BufferLayer<Request> {
    /// A layer buffering up to `bound` requests per service.
    pub const fn new(bound: usize) -> Self {
        BufferLayer {
            bound,
            _request: PhantomData,
        }
    }
}

impl<S, Request> Layer<S> for BufferLayer<Request>
where
    S: Service<Request> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
    Request: Send + 'static,
{
    type Service = ::tower::buffer::Buffer<Request, S::Future>;

    fn layer(&self, service: S) -> Self::Service {
        Buffer::new(service, self.bound)
    }
}

impl<Request> fmt::Debug for BufferLayer<Request> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferLayer")
            .field("bound", &self.bound)
            .finish()
    }
}

impl<Request> Clone for BufferLayer<Request> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Request> Copy for BufferLayer<Request> {}
