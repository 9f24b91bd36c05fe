//! PostgreSQL through tokio-postgres on numa_rt (feature `tokio-postgres`).
//!
//! tokio-postgres's own `connect` needs its `runtime` feature: tokio's
//! sockets and timer. Built without it, tokio-postgres still speaks the
//! protocol over any stream (`Config::connect_raw`), and [`connect`] does
//! the rest as tokio-postgres's `connect` does, on numa_rt: it resolves
//! each host, connects within the configuration's `connect_timeout`, sets
//! TCP keepalive (`keepalives`, `keepalives_idle`, `keepalives_interval`,
//! `keepalives_retries`), `tcp_user_timeout` and `TCP_NODELAY`, tries each
//! host and port in turn, and spawns the connection on numa_rt.
//!
//! ```no_run
//! use numa_rt_util::postgres::{connect, NoTls};
//!
//! #[numa_rt::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let config: tokio_postgres::Config = "host=localhost user=postgres".parse()?;
//!     let (client, _connection) = connect(&config, NoTls).await?;
//!     let row = client.query_one("SELECT $1::TEXT", &[&"hello"]).await?;
//!     assert_eq!(row.get::<_, &str>(0), "hello");
//!     Ok(())
//! }
//! ```
//!
//! Not done here (tokio-postgres's `connect` does them): checking
//! `target_session_attrs` and `load_balance_hosts = random` (hosts are
//! tried in order). `Client::cancel_query` needs tokio-postgres's runtime:
//! [`cancel_query`] is its counterpart here.

use numa_rt::net::{TcpSocket, TcpStream, UnixStream};
use numa_rt::task::JoinHandle;
use socket2::{SockRef, TcpKeepalive};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio_postgres::config::Host;
use tokio_postgres::tls::TlsConnect;
use tokio_postgres::{Client, Config};
use tokio_util::either::Either;

pub use tokio_postgres::NoTls;

/// PostgreSQL's port when the configuration names none.
const DEFAULT_PORT: u16 = 5432;

/// The connection task [`connect`] spawned: it ends with the connection,
/// with the connection's error if it failed.
pub type ConnectionHandle = JoinHandle<Result<(), tokio_postgres::Error>>;

/// Connects to the first host of `config` that answers, as tokio-postgres's
/// `Config::connect` does, on numa_rt's sockets and timer.
///
/// Returns the client and the task that drives its connection (spawned on
/// numa_rt; dropping the handle leaves the task running, and the task ends
/// when the client and its statements are dropped). Call it inside a
/// numa_rt runtime.
///
/// `tls` is [`NoTls`], or a TLS connector for [`Socket`] (tokio-postgres's
/// `MakeTlsConnect`, which would make one per host name, needs its
/// `runtime` feature: build the connector for the server's name yourself;
/// it is cloned for each host tried).
///
/// Errors name the host that failed; when every host fails, the error is
/// the last host's.
pub async fn connect<T>(config: &Config, tls: T) -> Result<(Client, ConnectionHandle), Error>
where
    T: TlsConnect<Socket> + Clone,
    T::Stream: Send + 'static,
{
    let targets = targets(config)?;
    let mut last = None;
    for target in &targets {
        match connect_one(config, tls.clone(), target).await {
            Ok(pair) => return Ok(pair),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| Error::config("no host to connect to")))
}

/// Asks the server to cancel the query running on the connection `token`
/// came from (`Client::cancel_token`), over a fresh connection: what
/// tokio-postgres's `CancelToken::cancel_query` does with its runtime.
///
/// The request goes to the first host of `config` that accepts a
/// connection (within `connect_timeout`), so `config` must lead to the
/// server the client is connected to: the same single-host configuration,
/// or one naming that host. As in PostgreSQL, success means the request
/// was delivered; whether a query was running to cancel shows on the
/// client (a `query_canceled` error, SQLSTATE 57014).
pub async fn cancel_query<T>(
    token: &tokio_postgres::CancelToken,
    config: &Config,
    tls: T,
) -> Result<(), Error>
where
    T: TlsConnect<Socket> + Clone,
{
    let mut last = None;
    for target in &targets(config)? {
        let host = target.describe();
        let attempt = async {
            let socket = open(config, target)
                .await
                .map_err(|e| Error::io(&host, e))?;
            token
                .cancel_query_raw(socket, tls.clone())
                .await
                .map_err(|e| Error::new(&host, Kind::Postgres(e)))
        };
        let result = match config.get_connect_timeout().copied() {
            Some(limit) => numa_rt::time::timeout(limit, attempt)
                .await
                .unwrap_or_else(|_| Err(Error::new(&host, Kind::Timeout(limit)))),
            None => attempt.await,
        };
        match result {
            Ok(()) => return Ok(()),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| Error::config("no host to connect to")))
}

/// One host (and port) to try.
#[derive(Debug)]
enum Target {
    /// A TCP host: its name (for TLS and errors), and the address given
    /// with `hostaddr`, if any, instead of resolving the name.
    Tcp {
        name: String,
        addr: Option<IpAddr>,
        port: u16,
    },
    /// A Unix-socket directory.
    Unix { dir: std::path::PathBuf, port: u16 },
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Tcp {
                name,
                addr: Some(addr),
                port,
            } if name != &addr.to_string() => format!("{name} ({addr}) port {port}"),
            Target::Tcp { name, port, .. } => format!("{name} port {port}"),
            Target::Unix { dir, port } => {
                format!("{}", dir.join(format!(".s.PGSQL.{port}")).display())
            }
        }
    }
}

/// The hosts of `config` paired with their ports, as libpq pairs them: one
/// port for all, or one per host.
fn targets(config: &Config) -> Result<Vec<Target>, Error> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let count = hosts.len().max(addrs.len());
    if count == 0 {
        return Err(Error::config("no host given (host or hostaddr)"));
    }
    if !hosts.is_empty() && !addrs.is_empty() && hosts.len() != addrs.len() {
        return Err(Error::config(
            "host and hostaddr list different numbers of hosts",
        ));
    }
    let ports = config.get_ports();
    if ports.len() > 1 && ports.len() != count {
        return Err(Error::config(
            "port lists neither one port nor one per host",
        ));
    }
    let mut targets = Vec::with_capacity(count);
    for i in 0..count {
        let port = ports
            .get(i)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(DEFAULT_PORT);
        let addr = addrs.get(i).copied();
        targets.push(match (hosts.get(i), addr) {
            (Some(Host::Tcp(name)), addr) => Target::Tcp {
                name: name.clone(),
                addr,
                port,
            },
            (Some(Host::Unix(dir)), _) => Target::Unix {
                dir: dir.clone(),
                port,
            },
            (None, Some(addr)) => Target::Tcp {
                name: addr.to_string(),
                addr: Some(addr),
                port,
            },
            (None, None) => return Err(Error::config("no host given (host or hostaddr)")),
        });
    }
    Ok(targets)
}

async fn connect_one<T>(
    config: &Config,
    tls: T,
    target: &Target,
) -> Result<(Client, ConnectionHandle), Error>
where
    T: TlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let host = target.describe();
    let timeout = config.get_connect_timeout().copied();
    // libpq's connect_timeout bounds the whole attempt on a host: every
    // address it resolves to, and the startup handshake.
    let attempt = async {
        let socket = open(config, target)
            .await
            .map_err(|e| Error::io(&host, e))?;
        config
            .connect_raw(socket, tls)
            .await
            .map_err(|e| Error::new(&host, Kind::Postgres(e)))
    };
    let (client, connection) = match timeout {
        Some(limit) => numa_rt::time::timeout(limit, attempt)
            .await
            .map_err(|_| Error::new(&host, Kind::Timeout(limit)))??,
        None => attempt.await?,
    };
    Ok((client, numa_rt::spawn(connection)))
}

/// Connects a socket to `target`: a TCP host's addresses in turn, or the
/// Unix socket in its directory.
async fn open(config: &Config, target: &Target) -> io::Result<Socket> {
    match target {
        Target::Unix { dir, port } => {
            let path = dir.join(format!(".s.PGSQL.{port}"));
            Ok(Either::Right(UnixStream::connect(path).await?))
        }
        Target::Tcp { name, addr, port } => {
            let addrs: Vec<SocketAddr> = match addr {
                Some(ip) => vec![SocketAddr::new(*ip, *port)],
                None => numa_rt::net::lookup_host((name.as_str(), *port))
                    .await?
                    .collect(),
            };
            let mut last =
                io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address");
            for addr in addrs {
                match connect_tcp(config, addr).await {
                    Ok(stream) => return Ok(Either::Left(stream)),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// Connects to one address with the configuration's socket options.
async fn connect_tcp(config: &Config, addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Options set before connecting hold for the connection, and a failure
    // here is the caller's to see before any packet leaves.
    socket.set_nodelay(true)?;
    let sock = SockRef::from(&socket);
    if config.get_keepalives() {
        let mut keepalive = TcpKeepalive::new().with_time(config.get_keepalives_idle());
        if let Some(interval) = config.get_keepalives_interval() {
            keepalive = keepalive.with_interval(interval);
        }
        if let Some(retries) = config.get_keepalives_retries() {
            keepalive = keepalive.with_retries(retries);
        }
        sock.set_tcp_keepalive(&keepalive)?;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(limit) = config.get_tcp_user_timeout() {
        sock.set_tcp_user_timeout(Some(*limit))?;
    }
    socket.connect(addr).await
}

/// The stream [`connect`] speaks PostgreSQL over: TCP (`Either::Left`)
/// or a Unix socket (`Either::Right`), both numa_rt's (what tokio-postgres
/// calls `Socket`); tokio-util's `Either` forwards tokio's I/O traits to
/// the side it holds. TLS connectors (`TlsConnect<Socket>`) wrap it.
pub type Socket = Either<TcpStream, UnixStream>;

/// Why [`connect`] failed, naming the host where one was tried.
#[derive(Debug)]
pub struct Error {
    host: Option<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Config(&'static str),
    Io(io::Error),
    Timeout(Duration),
    Postgres(tokio_postgres::Error),
}

impl Error {
    fn new(host: &str, kind: Kind) -> Error {
        Error {
            host: Some(host.to_owned()),
            kind,
        }
    }

    fn io(host: &str, error: io::Error) -> Error {
        Error::new(host, Kind::Io(error))
    }

    fn config(why: &'static str) -> Error {
        Error {
            host: None,
            kind: Kind::Config(why),
        }
    }

    /// The host (and port, or socket path) this error came from; `None`
    /// for a configuration error found before any host was tried.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// Whether the configuration's `connect_timeout` ran out.
    pub fn is_timeout(&self) -> bool {
        match &self.kind {
            Kind::Timeout(_) => true,
            Kind::Io(e) => e.kind() == io::ErrorKind::TimedOut,
            _ => false,
        }
    }

    /// The server's or the protocol's error, when it came from
    /// tokio-postgres (authentication, a missing database, …).
    pub fn as_postgres(&self) -> Option<&tokio_postgres::Error> {
        match &self.kind {
            Kind::Postgres(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = self.host.as_deref().unwrap_or("");
        match &self.kind {
            Kind::Config(why) => write!(f, "invalid PostgreSQL configuration: {why}"),
            Kind::Io(e) => write!(f, "error connecting to PostgreSQL at {host}: {e}"),
            Kind::Timeout(limit) => write!(
                f,
                "timed out connecting to PostgreSQL at {host} (connect_timeout {limit:?})"
            ),
            Kind::Postgres(e) => write!(f, "PostgreSQL at {host}: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Config(_) | Kind::Timeout(_) => None,
            Kind::Io(e) => Some(e),
            Kind::Postgres(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration's keepalive, user-timeout and nodelay settings
    /// reach the socket.
    #[numa_rt::test]
    async fn socket_options_follow_the_config() {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let config: Config = "keepalives_idle=42 keepalives_interval=7 keepalives_retries=3 \
                              tcp_user_timeout=5"
            .parse()
            .unwrap();
        let stream = connect_tcp(&config, addr)
            .await
            .unwrap()
            .into_std()
            .unwrap();
        let sock = SockRef::from(&stream);
        assert!(sock.tcp_nodelay().unwrap());
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(42));
        assert_eq!(
            sock.tcp_keepalive_interval().unwrap(),
            Duration::from_secs(7)
        );
        assert_eq!(sock.tcp_keepalive_retries().unwrap(), 3);
        #[cfg(target_os = "linux")]
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(5))
        );

        let config: Config = "keepalives=0".parse().unwrap();
        let stream = connect_tcp(&config, addr)
            .await
            .unwrap()
            .into_std()
            .unwrap();
        assert!(!SockRef::from(&stream).keepalive().unwrap());
    }
}
