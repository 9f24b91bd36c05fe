//! Running hyper 1.x on numa_rt (feature `hyper`).
//!
//! - [`Io`] adapts any futures-io stream (such as [`crate::net::TcpStream`])
//!   to `hyper::rt::{Read, Write}`.
//! - [`Executor`] implements `hyper::rt::Executor` with [`crate::spawn`], so
//!   the connection tasks hyper spawns (HTTP/2 streams, client connections)
//!   run on the numa_rt runtime.
//! - [`Timer`] implements `hyper::rt::Timer` with [`crate::time::Sleep`], for
//!   hyper's header-read and keep-alive timeouts.
//! - [`Connector`] is a tower `Service<Uri>` that opens numa_rt TCP
//!   connections (names resolved off the workers, see
//!   [`crate::net::lookup_host`]), so hyper-util's pooled client runs on
//!   numa_rt:
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use http_body_util::{BodyExt, Empty};
//! use hyper::body::Bytes;
//! use hyper_util::client::legacy::Client;
//!
//! let client: Client<_, Empty<Bytes>> = Client::builder(numa_rt::hyper::Executor)
//!     .pool_timer(numa_rt::hyper::Timer)
//!     .build(numa_rt::hyper::Connector::new());
//! let res = client.get("http://localhost:3000/".parse()?).await?;
//! let body = res.into_body().collect().await?.to_bytes();
//! # drop(body); Ok(())
//! # }
//! ```
//!
//! ```ignore
//! let listener = numa_rt::net::TcpListener::bind("127.0.0.1:3000").await?;
//! loop {
//!     let (stream, _) = listener.accept().await?;
//!     numa_rt::spawn(async move {
//!         let _ = hyper::server::conn::http1::Builder::new()
//!             .timer(numa_rt::hyper::Timer)
//!             .serve_connection(numa_rt::hyper::Io::new(stream), service)
//!             .await;
//!     });
//! }
//! ```

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_io::{AsyncRead, AsyncWrite};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};

use crate::net::TcpStream;

/// A futures-io stream seen as a hyper stream.
#[derive(Debug)]
pub struct Io<T> {
    inner: T,
    /// How many bytes of hyper's buffer the next read offers (and so zeroes
    /// first, see `poll_read`): adapts to the reads, between
    /// [`MIN_READ_WINDOW`] and whatever hyper offers.
    window: usize,
}

/// The smallest read window. hyper polls a read about three times per
/// request (one read, two that find nothing and return `Pending`, each
/// zeroing the window first), so this is what an idle keep-alive connection
/// pays per request; a bigger head fills it and the window doubles.
const MIN_READ_WINDOW: usize = 1024;

impl<T> Io<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Io<T> {
        Io {
            inner,
            window: MIN_READ_WINDOW,
        }
    }

    /// The wrapped stream.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the stream.
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// `inner` pinned and `window` (not structurally pinned: a plain
    /// `usize`).
    fn project_window(self: Pin<&mut Self>) -> (Pin<&mut T>, &mut usize) {
        // SAFETY: nothing is moved out of `this`: `inner` is structurally
        // pinned (see `project`) and re-pinned at once; `window` is not
        // pinned, and a `&mut usize` to it cannot move `inner`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `inner` never moves while `Io` is pinned.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        (inner, &mut this.window)
    }

    fn project(self: Pin<&mut Self>) -> Pin<&mut T> {
        // SAFETY: `inner` is structurally pinned: `Io` never moves it out of
        // a pinned `Io` (`into_inner` and `inner_mut` need an unpinned `Io`,
        // which a pinned `!Unpin` value cannot give back), and `Io` has no
        // Drop impl.
        unsafe { self.map_unchecked_mut(|io| &mut io.inner) }
    }
}

impl<T: AsyncRead> hyper::rt::Read for Io<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // futures-io reads into initialized memory, so the part offered is
        // zeroed first. hyper hands a fresh uninitialized cursor over all its
        // spare capacity (8 KiB and up) to every read; zeroing all of it cost
        // a hello-world request more than the request itself. So the read is
        // offered a window that adapts: it doubles after a read that fills
        // it (a big body streams in growing reads), and shrinks back towards
        // `MIN_READ_WINDOW` after reads that use a quarter of it or less.
        // A short read is always allowed; hyper reads again for the rest.
        let (inner, window) = self.project_window();
        // SAFETY: `as_mut`'s contract is that we never de-initialize bytes
        // that were initialized; we only write zeros into them (and the
        // reader then writes bytes), never `MaybeUninit::uninit()`. `advance`
        // below covers only bytes the reader reported read, inside the window
        // zeroed here.
        let spare = unsafe { buf.as_mut() };
        let len = spare.len().min(*window);
        let unfilled: &mut [u8] = {
            let part = &mut spare[..len];
            for b in part.iter_mut() {
                b.write(0);
            }
            // SAFETY: every byte of `part` was just initialized.
            unsafe { &mut *(part as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) }
        };
        let n = match inner.poll_read(cx, unfilled) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        // `AsyncRead` is a safe trait: a buggy reader may claim more bytes
        // than it was given, and hyper's cursor does not check (its
        // `advance` only adds to the filled count).
        if n > len {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("AsyncRead::poll_read reported {n} bytes read into a {len}-byte buffer"),
            )));
        }
        if n == len && len == *window {
            *window = window.saturating_mul(2);
        } else if n <= *window / 4 {
            *window = (*window / 2).max(MIN_READ_WINDOW);
        }
        // SAFETY: `advance(n)` requires the first `n` unfilled bytes to be
        // initialized. The first `len` were zeroed above, and `n <= len` was
        // checked just above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite> hyper::rt::Write for Io<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_close(cx)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write_vectored(cx, bufs)
    }
}

/// Spawns hyper's background futures with [`crate::spawn`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Dropping the JoinHandle detaches the task; hyper does not join it.
        drop(crate::spawn(fut));
    }
}

/// hyper's timers on numa_rt's per-P timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

/// A numa_rt [`crate::time::Sleep`] as a `hyper::rt::Sleep`.
#[derive(Debug)]
struct HyperSleep(crate::time::Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep(duration)))
    }

    // hyper speaks std's `Instant`; numa_rt's wraps it (same epoch), so the
    // conversions are free. `now` is the runtime's clock, so hyper's own
    // deadlines follow a paused test clock too.
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep_until(
            crate::time::Instant::from_std(deadline),
        )))
    }

    fn now(&self) -> Instant {
        crate::time::Instant::now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(mut s) => Pin::new(&mut s.0).reset(crate::time::Instant::from_std(new_deadline)),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// Opens plain-TCP connections for hyper-util's pooled client
/// (`hyper_util::client::legacy::Client`): a tower `Service<Uri>` whose
/// connections are [`Io`]`<`[`TcpStream`]`>`.
///
/// The host of the URI is resolved with [`crate::net::lookup_host`] (on the
/// blocking pool; IP addresses need no lookup), and each address is tried in
/// turn until one connects. Only `http` URIs are accepted unless
/// [`enforce_http(false)`](Connector::enforce_http) is set, which is what a
/// TLS connector wrapping this one needs (it then sees `https` URIs too,
/// with port 443 by default).
#[derive(Debug, Clone)]
pub struct Connector {
    enforce_http: bool,
    nodelay: bool,
    connect_timeout: Option<Duration>,
}

impl Default for Connector {
    fn default() -> Connector {
        Connector::new()
    }
}

impl Connector {
    /// A connector for `http` URIs, with `TCP_NODELAY` on (request and
    /// response heads are small writes that Nagle's algorithm would delay)
    /// and no connect timeout.
    pub fn new() -> Connector {
        crate::net::use_blocking_pool();
        Connector {
            enforce_http: true,
            nodelay: true,
            connect_timeout: None,
        }
    }

    /// Whether URIs other than `http` are refused (default: true).
    pub fn enforce_http(&mut self, on: bool) -> &mut Connector {
        self.enforce_http = on;
        self
    }

    /// Sets `TCP_NODELAY` on new connections (default: true).
    pub fn set_nodelay(&mut self, on: bool) -> &mut Connector {
        self.nodelay = on;
        self
    }

    /// Gives up on an address after `timeout` and tries the next one
    /// (`None`, the default, waits as long as the kernel does).
    pub fn set_connect_timeout(&mut self, timeout: Option<Duration>) -> &mut Connector {
        self.connect_timeout = timeout;
        self
    }

    async fn connect(self, uri: Uri) -> io::Result<Io<TcpStream>> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let default_port = match uri.scheme_str() {
            Some("http") => 80,
            Some("https") if !self.enforce_http => 443,
            Some("https") => {
                return Err(bad(format!(
                    "numa_rt::hyper::Connector: {uri} is https; this connector speaks plain \
                     TCP: wrap it in a TLS connector (with enforce_http(false))"
                )))
            }
            Some(other) if self.enforce_http => {
                return Err(bad(format!(
                    "numa_rt::hyper::Connector: {uri}: scheme {other:?} is not http"
                )))
            }
            Some(_) => 80,
            None => {
                return Err(bad(format!(
                    "numa_rt::hyper::Connector: {uri} has no scheme"
                )))
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| bad(format!("numa_rt::hyper::Connector: {uri} has no host")))?;
        // IPv6 hosts come bracketed in URIs.
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = uri.port_u16().unwrap_or(default_port);
        let mut last = None;
        for addr in crate::net::lookup_host((host, port)).await? {
            let attempt = TcpStream::connect(addr);
            let result = match self.connect_timeout {
                None => attempt.await,
                Some(d) => match crate::time::timeout(d, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connect to {addr} timed out after {d:?}"),
                    )),
                },
            };
            match result {
                Ok(stream) => {
                    stream.set_nodelay(self.nodelay)?;
                    return Ok(Io::new(stream));
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::other("no address to try"));
        Err(io::Error::new(
            e.kind(),
            format!("connecting to {host}:{port}: {e}"),
        ))
    }
}

/// The future [`Connector`] returns.
pub struct Connecting(Pin<Box<dyn Future<Output = io::Result<Io<TcpStream>>> + Send>>);

impl Future for Connecting {
    type Output = io::Result<Io<TcpStream>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Connecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connecting")
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = Io<TcpStream>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Connecting {
        Connecting(Box::pin(self.clone().connect(uri)))
    }
}

impl Connection for Io<TcpStream> {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// HTTPS through rustls (feature `hyper-rustls`): [`Connector`] wrapped in
/// hyper-rustls's connector, which speaks TLS over numa_rt's sockets (tokio's
/// I/O traits only: no tokio runtime) and negotiates HTTP/2 or HTTP/1.1 by
/// ALPN. rustls's crypto is *ring*; the roots are Mozilla's (webpki-roots)
/// unless a `rustls::ClientConfig` of your own is given.
///
/// This is what replaces reqwest on numa_rt: reqwest builds hyper-util's
/// client with tokio's executor, timer and `tokio::net` connector inside,
/// and offers no way to swap them, so it cannot run without a tokio
/// runtime. hyper-util's pooled client, which reqwest is built on, takes
/// all three from outside:
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use http_body_util::{BodyExt, Empty};
/// use hyper::body::Bytes;
///
/// let client = numa_rt::hyper::client::<Empty<Bytes>>();
/// let res = client.get("https://example.com/".parse()?).await?;
/// let body = res.into_body().collect().await?.to_bytes();
/// # drop(body); Ok(())
/// # }
/// ```
#[cfg(feature = "hyper-rustls")]
pub type HttpsConnector = hyper_rustls::HttpsConnector<Connector>;

#[cfg(feature = "hyper-rustls")]
impl Connector {
    /// This connector under TLS with Mozilla's roots; `http` URIs stay
    /// plain.
    pub fn https(self) -> HttpsConnector {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            // ring's provider supports rustls's default versions.
            .expect("ring supports TLS 1.2 and 1.3")
            .with_root_certificates(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
            .with_no_client_auth();
        self.https_with_tls_config(config)
    }

    /// This connector under TLS with `config` (your roots, client
    /// certificates, crypto provider); `http` URIs stay plain. The ALPN list
    /// is set here (h2, http/1.1).
    pub fn https_with_tls_config(mut self, config: rustls::ClientConfig) -> HttpsConnector {
        self.enforce_http(false);
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(self)
    }
}

/// hyper-util's pooled client on numa_rt, HTTPS included (feature
/// `hyper-rustls`): numa_rt's executor, timer and [`Connector::https`].
#[cfg(feature = "hyper-rustls")]
pub fn client<B>() -> hyper_util::client::legacy::Client<HttpsConnector, B>
where
    B: hyper::body::Body + Send,
    B::Data: Send,
{
    hyper_util::client::legacy::Client::builder(Executor)
        .pool_timer(Timer)
        .timer(Timer)
        .build(Connector::new().https())
}
