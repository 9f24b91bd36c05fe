//! Redis through redis-rs's multiplexed connection on numa_rt (feature
//! `redis`).
//!
//! redis-rs's `Client` opens its connections with tokio's (or smol's)
//! sockets and spawns their drivers there, and its multiplexed connection
//! times its responses with `tokio::time::timeout`. The protocol itself,
//! `MultiplexedConnection::new_with_config`, runs over any tokio-I/O
//! stream. [`connect`] opens a numa_rt socket (TCP with the URL's TCP
//! settings, or a Unix socket) within a connection timeout, hands it to
//! `new_with_config` with redis-rs's own timeouts switched off, spawns the
//! driver on numa_rt, and returns a [`MultiplexedConnection`] that times
//! each response on numa_rt's timer.
//!
//! ```no_run
//! use redis::AsyncCommands;
//!
//! #[numa_rt::main]
//! async fn main() -> redis::RedisResult<()> {
//!     let mut con = numa_rt_util::redis::connect("redis://127.0.0.1:6379/").await?;
//!     con.set::<_, _, ()>("key", 42).await?;
//!     let value: i64 = con.get("key").await?;
//!     assert_eq!(value, 42);
//!     Ok(())
//! }
//! ```
//!
//! # What redis-rs needs
//!
//! redis-rs's `aio` feature does not compile alone in any release from
//! 0.23 to 1.2 (`compile_error!("tokio-comp or smol-comp features
//! required for aio feature")`; `async-std-comp` before 1.0), so this
//! crate builds it with `tokio-comp`, which compiles tokio's `rt`, `net`
//! and `time` in. No tokio runtime is started and none is called: redis-rs
//! calls tokio's timer only for a response timeout set in its
//! `AsyncConnectionConfig` (always `None` here) and tokio's spawner only
//! for a credentials provider (not supported here) or through `Client`'s
//! own connection methods (not used). TLS (`rediss://`) is not supported.

use numa_rt::net::{TcpSocket, TcpStream, UnixStream};
use redis::aio::ConnectionLike;
use redis::io::tcp::TcpSettings;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    Pipeline, RedisError, RedisFuture, RedisResult, Value,
};
use socket2::SockRef;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::either::Either;

/// redis-rs's default connection timeout (`AsyncConnectionConfig`'s).
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(1);
/// redis-rs's default response timeout (`AsyncConnectionConfig`'s).
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// How [`connect_with_config`] connects: the two timeouts, on numa_rt's
/// timer, and redis-rs's other settings.
#[derive(Debug, Clone)]
pub struct Config {
    connection_timeout: Option<Duration>,
    response_timeout: Option<Duration>,
    redis: AsyncConnectionConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            connection_timeout: Some(DEFAULT_CONNECTION_TIMEOUT),
            response_timeout: Some(DEFAULT_RESPONSE_TIMEOUT),
            redis: AsyncConnectionConfig::new(),
        }
    }
}

impl Config {
    /// redis-rs's defaults: 1 s to connect (and handshake), 500 ms per
    /// response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds connecting, resolving and the handshake (`HELLO`, `AUTH`,
    /// `SELECT`); `None`: unbounded.
    pub fn set_connection_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Bounds each command's (or pipeline's) response; `None`: unbounded.
    /// A command that runs out fails with an I/O error of kind `TimedOut`,
    /// as redis-rs's does; the connection stays usable.
    pub fn set_response_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// redis-rs's other settings (push sender, pipeline buffer size,
    /// concurrency limit). Its two timeouts are switched off whatever they
    /// say: they would call tokio's timer. Set them on this `Config`.
    pub fn set_redis_config(mut self, config: AsyncConnectionConfig) -> Self {
        self.redis = config;
        self
    }
}

/// Connects with redis-rs's default timeouts (see [`Config::new`]).
///
/// `info` is anything redis-rs turns into a `ConnectionInfo`: a
/// `redis://` or `redis+unix://` URL, `(host, port)`, a `ConnectionInfo`.
pub async fn connect(info: impl IntoConnectionInfo) -> RedisResult<MultiplexedConnection> {
    connect_with_config(info, Config::new()).await
}

/// Connects to the server `info` names, the driver spawned on numa_rt.
///
/// Call it inside a numa_rt runtime (it spawns). The driver task ends when
/// the server closes the connection or every clone of the returned
/// connection is dropped.
pub async fn connect_with_config(
    info: impl IntoConnectionInfo,
    config: Config,
) -> RedisResult<MultiplexedConnection> {
    let info = info.into_connection_info()?;
    let redis_config = config
        .redis
        .set_connection_timeout(None)
        .set_response_timeout(None);
    let attempt = async {
        let stream = open(&info).await?;
        redis::aio::MultiplexedConnection::new_with_config(
            info.redis_settings(),
            stream,
            redis_config,
        )
        .await
    };
    let (inner, driver) = match config.connection_timeout {
        Some(limit) => numa_rt::time::timeout(limit, attempt)
            .await
            .map_err(|_| timed_out(&format!("connecting to {}", info.addr())))??,
        None => attempt.await?,
    };
    // Detached: the driver's end shows as errors on the connection.
    drop(numa_rt::spawn(driver));
    Ok(MultiplexedConnection {
        inner,
        response_timeout: config.response_timeout,
    })
}

fn timed_out(what: &str) -> RedisError {
    io::Error::new(io::ErrorKind::TimedOut, format!("timed out {what}")).into()
}

/// Opens the socket `info` names, with its TCP settings.
async fn open(info: &ConnectionInfo) -> RedisResult<Stream> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let mut last: Option<io::Error> = None;
            let addrs = numa_rt::net::lookup_host((host.as_str(), *port))
                .await
                .map_err(|e| with_context(e, &format!("resolving {host}")))?;
            for addr in addrs {
                match connect_tcp(addr, info.tcp_settings()).await {
                    Ok(stream) => return Ok(Either::Left(stream)),
                    Err(e) => last = Some(e),
                }
            }
            let error = last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address")
            });
            Err(with_context(error, &format!("connecting to {host}:{port}")).into())
        }
        ConnectionAddr::Unix(path) => UnixStream::connect(path)
            .await
            .map(Either::Right)
            .map_err(|e| with_context(e, &format!("connecting to {}", path.display())).into()),
        _ => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "numa_rt_util::redis supports redis:// and redis+unix:// only (no TLS)",
        ))),
    }
}

/// The same kind of error, its message naming what was being done.
fn with_context(error: io::Error, what: &str) -> io::Error {
    io::Error::new(error.kind(), format!("{what}: {error}"))
}

async fn connect_tcp(addr: SocketAddr, settings: &TcpSettings) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Set before connecting, as redis-rs sets them right after.
    socket.set_nodelay(settings.nodelay())?;
    let sock = SockRef::from(&socket);
    if let Some(keepalive) = settings.keepalive() {
        sock.set_tcp_keepalive(keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    sock.set_tcp_user_timeout(settings.user_timeout())?;
    socket.connect(addr).await
}

/// redis-rs's multiplexed connection with each response timed on numa_rt.
///
/// Cheap to clone; clones share the one connection and pipeline their
/// commands on it. It is redis-rs's [`ConnectionLike`], so `query_async`,
/// `AsyncCommands` and pipelines work on it as on redis-rs's own.
#[derive(Clone)]
pub struct MultiplexedConnection {
    inner: redis::aio::MultiplexedConnection,
    response_timeout: Option<Duration>,
}

impl std::fmt::Debug for MultiplexedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiplexedConnection")
            .field("db", &self.inner.get_db())
            .field("response_timeout", &self.response_timeout)
            .finish_non_exhaustive()
    }
}

impl MultiplexedConnection {
    /// Changes the response timeout of this handle (clones made after
    /// keep it; earlier clones keep theirs). `None`: unbounded.
    pub fn set_response_timeout(&mut self, timeout: Option<Duration>) {
        self.response_timeout = timeout;
    }

    /// This handle's response timeout.
    pub fn response_timeout(&self) -> Option<Duration> {
        self.response_timeout
    }

    /// redis-rs's connection underneath, with no response timeout (its own
    /// would call tokio's timer: do not call `set_response_timeout` on it).
    pub fn get_ref(&self) -> &redis::aio::MultiplexedConnection {
        &self.inner
    }

    /// Unwraps redis-rs's connection (with no response timeout).
    pub fn into_inner(self) -> redis::aio::MultiplexedConnection {
        self.inner
    }

    async fn timed<T>(
        limit: Option<Duration>,
        request: impl Future<Output = RedisResult<T>>,
    ) -> RedisResult<T> {
        match limit {
            // Dropping the request on timeout is what redis-rs's own timeout
            // does: the pipeline discards the late response.
            Some(limit) => numa_rt::time::timeout(limit, request)
                .await
                .unwrap_or_else(|_| Err(io::Error::from(io::ErrorKind::TimedOut).into())),
            None => request.await,
        }
    }
}

impl ConnectionLike for MultiplexedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let limit = self.response_timeout;
        Box::pin(Self::timed(limit, self.inner.req_packed_command(cmd)))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let limit = self.response_timeout;
        Box::pin(Self::timed(
            limit,
            self.inner.req_packed_commands(cmd, offset, count),
        ))
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// A numa_rt TCP (`Left`) or Unix (`Right`) stream, for redis-rs
/// (tokio-util's `Either` forwards tokio's I/O traits).
type Stream = Either<TcpStream, UnixStream>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL's TCP settings reach the socket.
    #[numa_rt::test]
    async fn socket_options_follow_the_tcp_settings() {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let keepalive = socket2::TcpKeepalive::new().with_time(Duration::from_secs(42));
        let settings = TcpSettings::default()
            .set_nodelay(true)
            .set_keepalive(keepalive)
            .set_user_timeout(Duration::from_secs(5));
        let stream = connect_tcp(addr, &settings)
            .await
            .unwrap()
            .into_std()
            .unwrap();
        let sock = SockRef::from(&stream);
        assert!(sock.tcp_nodelay().unwrap());
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(42));
        #[cfg(target_os = "linux")]
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(5))
        );

        let stream = connect_tcp(addr, &TcpSettings::default())
            .await
            .unwrap()
            .into_std()
            .unwrap();
        assert!(!SockRef::from(&stream).tcp_nodelay().unwrap());
    }
}
