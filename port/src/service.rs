// mini_kv: a small key/value server speaking a subset of the Redis protocol
// (RESP), written against tokio. This file is shared: port/on-tokio includes it
// as it is, port/on-numa-rt includes it after the rename `tokio` -> `numa_rt`
// (see port/README.md). Keep it free of inner attributes (`//!`, `#![..]`):
// it is `include!`d.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::io::{self, Cursor};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{broadcast, mpsc, oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{self, Duration, Instant, MissedTickBehavior};

/// Errors of the server and the clients.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// The largest frame a connection buffers before it gives up on the peer.
pub const MAX_FRAME: usize = 1 << 20;

/// One RESP value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// `+OK\r\n`
    Simple(String),
    /// `-ERR message\r\n`
    Error(String),
    /// `:42\r\n`
    Integer(i64),
    /// `$5\r\nhello\r\n`
    Bulk(Bytes),
    /// `$-1\r\n`
    Null,
    /// `*2\r\n...` (one level deep when written)
    Array(Vec<Frame>),
}

/// Why [`Frame::parse`] could not return a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not enough data yet: read more and try again.
    Incomplete,
    /// The data is not RESP.
    Invalid(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Incomplete => f.write_str("stream ended early"),
            FrameError::Invalid(msg) => write!(f, "protocol error; {msg}"),
        }
    }
}

impl std::error::Error for FrameError {}

fn invalid(msg: impl Into<String>) -> FrameError {
    FrameError::Invalid(msg.into())
}

impl Frame {
    /// Parses one frame from the start of `src`, leaving the cursor after
    /// it. [`FrameError::Incomplete`] if `src` holds only part of a frame.
    ///
    /// ```
    /// # use port_on_tokio::{Frame, FrameError};
    /// use std::io::Cursor;
    /// let mut src = Cursor::new(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n+extra"[..]);
    /// let frame = Frame::parse(&mut src).unwrap();
    /// assert_eq!(frame, Frame::Array(vec![Frame::Bulk("GET".into()), Frame::Bulk("k".into())]));
    /// assert_eq!(src.position(), 20);
    /// assert_eq!(Frame::parse(&mut Cursor::new(&b"$3\r\nGE"[..])), Err(FrameError::Incomplete));
    /// ```
    pub fn parse(src: &mut Cursor<&[u8]>) -> std::result::Result<Frame, FrameError> {
        match get_u8(src)? {
            b'+' => Ok(Frame::Simple(get_string(src)?)),
            b'-' => Ok(Frame::Error(get_string(src)?)),
            b':' => Ok(Frame::Integer(get_int(src)?)),
            b'$' => {
                let len = get_int(src)?;
                if len == -1 {
                    return Ok(Frame::Null);
                }
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&len| len <= MAX_FRAME)
                    .ok_or_else(|| invalid(format!("bad bulk length {len}")))?;
                let buf = *src.get_ref();
                let start = src.position() as usize;
                if buf.len() < start + len + 2 {
                    return Err(FrameError::Incomplete);
                }
                if &buf[start + len..start + len + 2] != b"\r\n" {
                    return Err(invalid("bulk string not followed by CRLF"));
                }
                src.set_position((start + len + 2) as u64);
                Ok(Frame::Bulk(Bytes::copy_from_slice(
                    &buf[start..start + len],
                )))
            }
            b'*' => {
                let len = get_int(src)?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&len| len <= 1024)
                    .ok_or_else(|| invalid(format!("bad array length {len}")))?;
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(Frame::parse(src)?);
                }
                Ok(Frame::Array(items))
            }
            other => Err(invalid(format!(
                "invalid frame type byte `{}`",
                other.escape_ascii()
            ))),
        }
    }
}

fn get_u8(src: &mut Cursor<&[u8]>) -> std::result::Result<u8, FrameError> {
    let pos = src.position() as usize;
    let byte = *src.get_ref().get(pos).ok_or(FrameError::Incomplete)?;
    src.set_position(pos as u64 + 1);
    Ok(byte)
}

fn get_line<'a>(src: &mut Cursor<&'a [u8]>) -> std::result::Result<&'a [u8], FrameError> {
    let buf: &'a [u8] = src.get_ref();
    let start = src.position() as usize;
    match buf[start..].windows(2).position(|w| w == b"\r\n") {
        Some(n) => {
            src.set_position((start + n + 2) as u64);
            Ok(&buf[start..start + n])
        }
        None => Err(FrameError::Incomplete),
    }
}

fn get_string(src: &mut Cursor<&[u8]>) -> std::result::Result<String, FrameError> {
    let line = get_line(src)?;
    String::from_utf8(line.to_vec()).map_err(|_| invalid("line is not UTF-8"))
}

fn get_int(src: &mut Cursor<&[u8]>) -> std::result::Result<i64, FrameError> {
    let line = get_string(src)?;
    line.parse()
        .map_err(|_| invalid(format!("`{line}` is not an integer")))
}

/// Frames over a byte stream: reads with `read_buf` into a `BytesMut`,
/// writes through a `BufWriter`.
pub struct Connection<S = TcpStream> {
    stream: BufWriter<S>,
    buffer: BytesMut,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// A connection over `stream`.
    pub fn new(stream: S) -> Connection<S> {
        Connection {
            stream: BufWriter::new(stream),
            buffer: BytesMut::with_capacity(4 * 1024),
        }
    }

    /// The next frame, or `None` if the peer closed the stream between
    /// frames. Cancel-safe: bytes read stay in the buffer.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            let mut src = Cursor::new(&self.buffer[..]);
            match Frame::parse(&mut src) {
                Ok(frame) => {
                    let len = src.position() as usize;
                    self.buffer.advance(len);
                    return Ok(Some(frame));
                }
                Err(FrameError::Incomplete) if self.buffer.len() < MAX_FRAME => {}
                Err(FrameError::Incomplete) => return Err("frame too large".into()),
                Err(e) => return Err(e.into()),
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err("connection reset by peer".into())
                };
            }
        }
    }

    /// Writes `frame` and flushes it.
    pub async fn write_frame(&mut self, frame: &Frame) -> io::Result<()> {
        match frame {
            Frame::Array(items) => {
                self.stream.write_u8(b'*').await?;
                self.write_decimal(items.len() as i64).await?;
                for item in items {
                    self.write_value(item).await?;
                }
            }
            _ => self.write_value(frame).await?,
        }
        self.stream.flush().await
    }

    async fn write_value(&mut self, frame: &Frame) -> io::Result<()> {
        match frame {
            Frame::Simple(s) => {
                self.stream.write_u8(b'+').await?;
                self.stream.write_all(s.as_bytes()).await?;
                self.stream.write_all(b"\r\n").await?;
            }
            Frame::Error(s) => {
                self.stream.write_u8(b'-').await?;
                self.stream.write_all(s.as_bytes()).await?;
                self.stream.write_all(b"\r\n").await?;
            }
            Frame::Integer(n) => {
                self.stream.write_u8(b':').await?;
                self.write_decimal(*n).await?;
            }
            Frame::Bulk(data) => {
                self.stream.write_u8(b'$').await?;
                self.write_decimal(data.len() as i64).await?;
                self.stream.write_all(data).await?;
                self.stream.write_all(b"\r\n").await?;
            }
            Frame::Null => self.stream.write_all(b"$-1\r\n").await?,
            Frame::Array(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "nested arrays are not written",
                ))
            }
        }
        Ok(())
    }

    async fn write_decimal(&mut self, n: i64) -> io::Result<()> {
        self.stream.write_all(n.to_string().as_bytes()).await?;
        self.stream.write_all(b"\r\n").await
    }

    /// Flushes and shuts the write side down: the peer reads end-of-file.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }
}

/// A command the server understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `PING [message]`
    Ping(Option<Bytes>),
    /// `GET key`
    Get(String),
    /// `SET key value [EX seconds | PX milliseconds]`
    Set {
        /// The key.
        key: String,
        /// The value.
        value: Bytes,
        /// How long the key lives, if not for ever.
        expire: Option<Duration>,
    },
    /// `DEL key [key ...]`
    Del(Vec<String>),
    /// `PTTL key`: milliseconds left, -1 without expiry, -2 if missing.
    Pttl(String),
}

fn bulk_string(frame: Frame) -> Result<String> {
    match frame {
        Frame::Simple(s) => Ok(s),
        Frame::Bulk(b) => Ok(String::from_utf8(b.to_vec())?),
        other => Err(format!("ERR expected a string, got {other:?}").into()),
    }
}

fn bulk_bytes(frame: Frame) -> Result<Bytes> {
    match frame {
        Frame::Simple(s) => Ok(Bytes::from(s)),
        Frame::Bulk(b) => Ok(b),
        other => Err(format!("ERR expected bytes, got {other:?}").into()),
    }
}

impl Command {
    /// The command a client's frame (an array of strings) names.
    pub fn from_frame(frame: Frame) -> Result<Command> {
        let Frame::Array(items) = frame else {
            return Err("ERR a command is an array of strings".into());
        };
        let mut args = items.into_iter();
        let name = bulk_string(args.next().ok_or("ERR empty command")?)?.to_ascii_lowercase();
        let missing = || format!("ERR wrong number of arguments for '{name}'");
        let command = match name.as_str() {
            "ping" => Command::Ping(args.next().map(bulk_bytes).transpose()?),
            "get" => Command::Get(bulk_string(args.next().ok_or_else(missing)?)?),
            "set" => {
                let key = bulk_string(args.next().ok_or_else(missing)?)?;
                let value = bulk_bytes(args.next().ok_or_else(missing)?)?;
                let expire = match args.next() {
                    None => None,
                    Some(unit) => {
                        let unit = bulk_string(unit)?.to_ascii_uppercase();
                        let n: u64 = bulk_string(args.next().ok_or_else(missing)?)?
                            .parse()
                            .map_err(|_| "ERR value is not an integer or out of range")?;
                        match unit.as_str() {
                            "EX" => Some(Duration::from_secs(n)),
                            "PX" => Some(Duration::from_millis(n)),
                            _ => return Err("ERR syntax error".into()),
                        }
                    }
                };
                Command::Set { key, value, expire }
            }
            "del" => {
                let keys = args.by_ref().map(bulk_string).collect::<Result<Vec<_>>>()?;
                if keys.is_empty() {
                    return Err(missing().into());
                }
                Command::Del(keys)
            }
            "pttl" => Command::Pttl(bulk_string(args.next().ok_or_else(missing)?)?),
            _ => return Err(format!("ERR unknown command '{name}'").into()),
        };
        if args.next().is_some() {
            return Err(missing().into());
        }
        Ok(command)
    }

    /// The frame a client sends for this command.
    pub fn into_frame(self) -> Frame {
        let bulk = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let mut items = Vec::new();
        match self {
            Command::Ping(msg) => {
                items.push(bulk("PING"));
                items.extend(msg.map(Frame::Bulk));
            }
            Command::Get(key) => items.extend([bulk("GET"), bulk(&key)]),
            Command::Set { key, value, expire } => {
                items.extend([bulk("SET"), bulk(&key), Frame::Bulk(value)]);
                if let Some(expire) = expire {
                    items.extend([bulk("PX"), bulk(&expire.as_millis().to_string())]);
                }
            }
            Command::Del(keys) => {
                items.push(bulk("DEL"));
                items.extend(keys.iter().map(|k| bulk(k)));
            }
            Command::Pttl(key) => items.extend([bulk("PTTL"), bulk(&key)]),
        }
        Frame::Array(items)
    }

    /// Runs the command on `db`; the reply.
    pub fn apply(self, db: &Db) -> Frame {
        match self {
            Command::Ping(None) => Frame::Simple("PONG".into()),
            Command::Ping(Some(msg)) => Frame::Bulk(msg),
            Command::Get(key) => db.get(&key).map_or(Frame::Null, Frame::Bulk),
            Command::Set { key, value, expire } => {
                db.set(key, value, expire);
                Frame::Simple("OK".into())
            }
            Command::Del(keys) => Frame::Integer(keys.iter().filter(|k| db.del(k)).count() as i64),
            Command::Pttl(key) => Frame::Integer(db.pttl(&key)),
        }
    }
}

/// The key/value store, shared by every connection: a `std::sync::Mutex`
/// (never held across an `.await`) and a background task that removes
/// expired keys, woken by a `Notify` when a key expires sooner than those it
/// waits for.
///
/// ```
/// use port_on_tokio::DbDropGuard;
/// use tokio::time::Duration;
///
/// let rt = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(2)
///     .enable_all()
///     .build()
///     .unwrap();
/// rt.block_on(async {
///     let guard = DbDropGuard::new(); // spawns the purge task
///     let db = guard.db();
///     db.set("k".into(), "v".into(), Some(Duration::from_secs(60)));
///     assert_eq!(db.get("k").as_deref(), Some(&b"v"[..]));
///     assert!((59_000..=60_000).contains(&db.pttl("k")));
///     assert!(db.del("k"));
///     assert_eq!(db.pttl("k"), -2);
/// });
/// ```
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the purge task: a nearer expiry, or shutdown.
    background_task: Notify,
    /// How many keys the purge task has removed so far.
    purged: watch::Sender<u64>,
}

struct State {
    entries: HashMap<String, Entry>,
    /// Expiries in deadline order (the key breaks ties).
    expirations: BTreeSet<(Instant, String)>,
    shutdown: bool,
}

struct Entry {
    data: Bytes,
    expires_at: Option<Instant>,
}

impl Db {
    /// An empty store and its purge task (`tokio::spawn`: call it inside a
    /// runtime). The task ends when [`DbDropGuard`] is dropped.
    pub fn new() -> Db {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                entries: HashMap::new(),
                expirations: BTreeSet::new(),
                shutdown: false,
            }),
            background_task: Notify::new(),
            purged: watch::channel(0).0,
        });
        tokio::spawn(purge_expired_tasks(shared.clone()));
        Db { shared }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap()
    }

    /// The value of `key`, unless it is missing or expired. An expired key
    /// is not returned even before the purge task removes it: the check
    /// reads `Instant::now()`, the runtime's clock (paused in tests).
    pub fn get(&self, key: &str) -> Option<Bytes> {
        let state = self.state();
        let entry = state.entries.get(key)?;
        match entry.expires_at {
            Some(when) if when <= Instant::now() => None,
            _ => Some(entry.data.clone()),
        }
    }

    /// Sets `key`, replacing its value and expiry.
    pub fn set(&self, key: String, value: Bytes, expire: Option<Duration>) {
        let mut state = self.state();
        let expires_at = expire.map(|d| Instant::now() + d);
        // Wake the purge task if this key expires before all the others.
        let notify = expires_at.is_some_and(|when| {
            state
                .expirations
                .first()
                .is_none_or(|(next, _)| when < *next)
        });
        let entry = Entry {
            data: value,
            expires_at,
        };
        if let Some(prev) = state.entries.insert(key.clone(), entry) {
            if let Some(when) = prev.expires_at {
                state.expirations.remove(&(when, key.clone()));
            }
        }
        if let Some(when) = expires_at {
            state.expirations.insert((when, key));
        }
        drop(state);
        if notify {
            self.shared.background_task.notify_one();
        }
    }

    /// Removes `key`; whether it was there (and not expired).
    pub fn del(&self, key: &str) -> bool {
        let mut state = self.state();
        let Some(entry) = state.entries.remove(key) else {
            return false;
        };
        if let Some(when) = entry.expires_at {
            state.expirations.remove(&(when, key.to_owned()));
            return when > Instant::now();
        }
        true
    }

    /// Milliseconds until `key` expires (rounded up), -1 if it never does,
    /// -2 if it is missing or expired.
    pub fn pttl(&self, key: &str) -> i64 {
        let state = self.state();
        match state.entries.get(key) {
            None => -2,
            Some(Entry {
                expires_at: None, ..
            }) => -1,
            Some(Entry {
                expires_at: Some(when),
                ..
            }) => {
                let left = when.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    -2
                } else {
                    left.as_nanos().div_ceil(1_000_000) as i64
                }
            }
        }
    }

    /// How many keys are stored, counting expired ones the purge task has
    /// not removed yet.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of keys the purge task has removed, as it changes.
    pub fn purged(&self) -> watch::Receiver<u64> {
        self.shared.purged.subscribe()
    }

    fn shutdown_purge_task(&self) {
        self.state().shutdown = true;
        self.shared.background_task.notify_one();
    }
}

impl Default for Db {
    fn default() -> Db {
        Db::new()
    }
}

impl Shared {
    /// Removes the keys whose time has come; the next deadline, if any.
    fn purge_expired_keys(&self) -> Option<Instant> {
        let mut state = self.state.lock().unwrap();
        if state.shutdown {
            return None;
        }
        let state = &mut *state;
        let now = Instant::now();
        let mut removed = 0;
        let mut next = None;
        while let Some((when, key)) = state.expirations.first().cloned() {
            if when > now {
                next = Some(when);
                break;
            }
            state.entries.remove(&key);
            state.expirations.remove(&(when, key));
            removed += 1;
        }
        if removed > 0 {
            self.purged.send_modify(|n| *n += removed);
        }
        next
    }

    fn is_shutdown(&self) -> bool {
        self.state.lock().unwrap().shutdown
    }
}

async fn purge_expired_tasks(shared: Arc<Shared>) {
    while !shared.is_shutdown() {
        if let Some(when) = shared.purge_expired_keys() {
            tokio::select! {
                _ = time::sleep_until(when) => {}
                _ = shared.background_task.notified() => {}
            }
        } else {
            shared.background_task.notified().await;
        }
    }
}

/// Owns a [`Db`] and ends its purge task when dropped.
pub struct DbDropGuard {
    db: Db,
}

impl DbDropGuard {
    /// A new store (see [`Db::new`]).
    pub fn new() -> DbDropGuard {
        DbDropGuard { db: Db::new() }
    }

    /// A handle on the store.
    pub fn db(&self) -> Db {
        self.db.clone()
    }
}

impl Default for DbDropGuard {
    fn default() -> DbDropGuard {
        DbDropGuard::new()
    }
}

impl Drop for DbDropGuard {
    fn drop(&mut self) {
        self.db.shutdown_purge_task();
    }
}

/// Server settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// How often [`Server::reports`] publishes a [`Report`].
    pub report_every: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_connections: 250,
            idle_timeout: Duration::from_secs(300),
            report_every: Duration::from_secs(10),
        }
    }
}

/// What the server has done, published every [`Config::report_every`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Reports published so far, this one included.
    pub ticks: u64,
    /// Connections accepted so far.
    pub accepted: u64,
    /// Connections open now.
    pub open: u64,
    /// Commands run so far.
    pub commands: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    commands: AtomicU64,
}

/// The server: an accept loop, one task per connection, a report task.
///
/// ```
/// use port_on_tokio::{Client, Config, Server};
/// use tokio::sync::oneshot;
///
/// #[tokio::main]
/// async fn main() -> port_on_tokio::Result<()> {
///     let server = Server::bind("127.0.0.1:0", Config::default()).await?;
///     let addr = server.local_addr()?;
///     let (stop, stopped) = oneshot::channel::<()>();
///     let serving = tokio::spawn(server.run(async {
///         let _ = stopped.await;
///     }));
///
///     let mut client = Client::connect(addr).await?;
///     client.set("hello", "world".into()).await?;
///     assert_eq!(client.get("hello").await?.as_deref(), Some(&b"world"[..]));
///
///     stop.send(()).unwrap();
///     serving.await??;
///     Ok(())
/// }
/// ```
pub struct Server {
    listener: TcpListener,
    config: Config,
    db: DbDropGuard,
    counters: Arc<Counters>,
    reports: watch::Sender<Report>,
}

impl Server {
    /// Binds `addr` (`"127.0.0.1:0"` picks a free port).
    pub async fn bind(addr: impl ToSocketAddrs, config: Config) -> io::Result<Server> {
        Ok(Server::new(TcpListener::bind(addr).await?, config))
    }

    /// A server on `listener`, with an empty store (inside a runtime).
    pub fn new(listener: TcpListener, config: Config) -> Server {
        Server {
            listener,
            config,
            db: DbDropGuard::new(),
            counters: Arc::default(),
            reports: watch::channel(Report::default()).0,
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Its store.
    pub fn db(&self) -> Db {
        self.db.db()
    }

    /// The reports, one every [`Config::report_every`] while it runs.
    pub fn reports(&self) -> watch::Receiver<Report> {
        self.reports.subscribe()
    }

    /// Serves until `shutdown` completes (or accepting fails for good),
    /// then tells every connection to stop and returns once they have.
    pub async fn run(self, shutdown: impl Future) -> Result<()> {
        let Server {
            listener,
            config,
            db,
            counters,
            reports,
        } = self;
        // Dropping the sender is the signal: every receiver's recv() ends.
        let (notify_shutdown, _) = broadcast::channel::<()>(1);
        let limit = Arc::new(Semaphore::new(config.max_connections));
        let mut tasks = JoinSet::new();
        tasks.spawn(report(
            config.report_every,
            counters.clone(),
            reports,
            notify_shutdown.subscribe(),
        ));
        tokio::pin!(shutdown);
        let result = loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break Ok(()),
                Some(done) = tasks.join_next() => {
                    if let Err(e) = done {
                        if e.is_panic() {
                            std::panic::resume_unwind(e.into_panic());
                        }
                    }
                }
                accepted = accept(&listener, &limit) => match accepted {
                    Ok((socket, permit)) => {
                        counters.accepted.fetch_add(1, Relaxed);
                        counters.open.fetch_add(1, Relaxed);
                        let handler = Handler {
                            db: db.db(),
                            connection: Connection::new(socket),
                            shutdown: notify_shutdown.subscribe(),
                            idle_timeout: config.idle_timeout,
                            counters: counters.clone(),
                            _permit: permit,
                        };
                        tasks.spawn(async move {
                            let counters = handler.counters.clone();
                            // A connection's error ends that connection only.
                            let _ = handler.run().await;
                            counters.open.fetch_sub(1, Relaxed);
                        });
                    }
                    Err(e) => break Err(e),
                },
            }
        };
        drop(notify_shutdown);
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        drop(db);
        result
    }
}

/// Waits for a free connection slot, then for a connection. Accept errors
/// (out of file descriptors, say) are retried with a backoff of 1, 2, 4 ...
/// 64 seconds before giving up.
async fn accept(
    listener: &TcpListener,
    limit: &Arc<Semaphore>,
) -> Result<(TcpStream, OwnedSemaphorePermit)> {
    let permit = limit.clone().acquire_owned().await?;
    let mut backoff = 1;
    loop {
        match listener.accept().await {
            Ok((socket, _)) => return Ok((socket, permit)),
            Err(err) if backoff > 64 => return Err(err.into()),
            Err(_) => {}
        }
        time::sleep(Duration::from_secs(backoff)).await;
        backoff *= 2;
    }
}

async fn report(
    every: Duration,
    counters: Arc<Counters>,
    reports: watch::Sender<Report>,
    mut shutdown: broadcast::Receiver<()>,
) {
    let mut ticker = time::interval(every);
    // A report that comes late (a busy runtime) moves the next ones later
    // instead of publishing a burst.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is at once
    let mut ticks = 0;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                ticks += 1;
                reports.send_replace(Report {
                    ticks,
                    accepted: counters.accepted.load(Relaxed),
                    open: counters.open.load(Relaxed),
                    commands: counters.commands.load(Relaxed),
                });
            }
            _ = shutdown.recv() => return,
        }
    }
}

struct Handler {
    db: Db,
    connection: Connection,
    shutdown: broadcast::Receiver<()>,
    idle_timeout: Duration,
    counters: Arc<Counters>,
    _permit: OwnedSemaphorePermit,
}

impl Handler {
    async fn run(mut self) -> Result<()> {
        loop {
            let read = tokio::select! {
                read = time::timeout(self.idle_timeout, self.connection.read_frame()) => read,
                _ = self.shutdown.recv() => return Ok(()),
            };
            let frame = match read {
                Err(_elapsed) => {
                    self.connection
                        .write_frame(&Frame::Error("ERR idle timeout".into()))
                        .await?;
                    self.connection.shutdown().await?;
                    return Ok(());
                }
                Ok(Err(e)) => {
                    // Tell the peer why, then close.
                    let reply = Frame::Error(format!("ERR {e}"));
                    let _ = self.connection.write_frame(&reply).await;
                    return Err(e);
                }
                Ok(Ok(None)) => return Ok(()),
                Ok(Ok(Some(frame))) => frame,
            };
            let reply = match Command::from_frame(frame) {
                Ok(command) => {
                    self.counters.commands.fetch_add(1, Relaxed);
                    command.apply(&self.db)
                }
                Err(e) => Frame::Error(e.to_string()),
            };
            self.connection.write_frame(&reply).await?;
        }
    }
}

/// Serves on `addr` until ctrl-c.
pub async fn run(addr: &str) -> Result<()> {
    let server = Server::bind(addr, Config::default()).await?;
    server
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

/// A client: one connection, one request at a time.
pub struct Client {
    connection: Connection,
}

impl Client {
    /// Connects to a server.
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<Client> {
        let socket = TcpStream::connect(addr).await?;
        Ok(Client {
            connection: Connection::new(socket),
        })
    }

    /// Sends `command` and reads the reply; an error reply is an `Err`.
    pub async fn request(&mut self, command: Command) -> Result<Frame> {
        self.connection.write_frame(&command.into_frame()).await?;
        match self.connection.read_frame().await? {
            Some(Frame::Error(msg)) => Err(msg.into()),
            Some(frame) => Ok(frame),
            None => Err("the server closed the connection".into()),
        }
    }

    /// `PING [msg]`: "PONG", or `msg` back.
    pub async fn ping(&mut self, msg: Option<Bytes>) -> Result<Bytes> {
        match self.request(Command::Ping(msg)).await? {
            Frame::Simple(s) => Ok(s.into()),
            Frame::Bulk(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    /// `GET key`.
    pub async fn get(&mut self, key: &str) -> Result<Option<Bytes>> {
        get_reply(self.request(Command::Get(key.into())).await?)
    }

    /// `SET key value`.
    pub async fn set(&mut self, key: &str, value: Bytes) -> Result<()> {
        self.set_command(key, value, None).await
    }

    /// `SET key value PX ms`.
    pub async fn set_expires(&mut self, key: &str, value: Bytes, expire: Duration) -> Result<()> {
        self.set_command(key, value, Some(expire)).await
    }

    async fn set_command(
        &mut self,
        key: &str,
        value: Bytes,
        expire: Option<Duration>,
    ) -> Result<()> {
        let key = key.into();
        ok_reply(self.request(Command::Set { key, value, expire }).await?)
    }

    /// `DEL key...`: how many were removed.
    pub async fn del(&mut self, keys: &[&str]) -> Result<i64> {
        let keys = keys.iter().map(|k| k.to_string()).collect();
        int_reply(self.request(Command::Del(keys)).await?)
    }

    /// `PTTL key`.
    pub async fn pttl(&mut self, key: &str) -> Result<i64> {
        int_reply(self.request(Command::Pttl(key.into())).await?)
    }

    /// Closes the write side; the server ends the connection.
    pub async fn close(mut self) -> io::Result<()> {
        self.connection.shutdown().await
    }
}

fn unexpected(frame: Frame) -> Error {
    format!("unexpected reply {frame:?}").into()
}

fn get_reply(frame: Frame) -> Result<Option<Bytes>> {
    match frame {
        Frame::Bulk(b) => Ok(Some(b)),
        Frame::Null => Ok(None),
        other => Err(unexpected(other)),
    }
}

fn ok_reply(frame: Frame) -> Result<()> {
    match frame {
        Frame::Simple(s) if s == "OK" => Ok(()),
        other => Err(unexpected(other)),
    }
}

fn int_reply(frame: Frame) -> Result<i64> {
    match frame {
        Frame::Integer(n) => Ok(n),
        other => Err(unexpected(other)),
    }
}

type Request = (Command, oneshot::Sender<Result<Frame>>);

/// A [`Client`] shared by many tasks: requests go over an `mpsc` channel to
/// the task that owns the connection, replies come back on a `oneshot`.
#[derive(Clone)]
pub struct BufferedClient {
    requests: mpsc::Sender<Request>,
}

impl BufferedClient {
    /// Moves `client` into a task of its own (`tokio::spawn`) that serves
    /// requests in order; it ends when every `BufferedClient` is dropped.
    pub fn buffer(mut client: Client) -> BufferedClient {
        let (requests, mut rx) = mpsc::channel::<Request>(32);
        tokio::spawn(async move {
            while let Some((command, reply)) = rx.recv().await {
                let _ = reply.send(client.request(command).await);
            }
        });
        BufferedClient { requests }
    }

    async fn request(&self, command: Command) -> Result<Frame> {
        let (reply, response) = oneshot::channel();
        self.requests
            .send((command, reply))
            .await
            .map_err(|_| "the connection task has ended")?;
        response.await?
    }

    /// `GET key`.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        get_reply(self.request(Command::Get(key.into())).await?)
    }

    /// `SET key value`.
    pub async fn set(&self, key: &str, value: Bytes) -> Result<()> {
        let (key, expire) = (key.into(), None);
        ok_reply(self.request(Command::Set { key, value, expire }).await?)
    }
}
