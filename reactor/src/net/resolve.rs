//! Name resolution that never blocks a worker: [`lookup_host`], the
//! [`ToSocketAddrs`] trait every name-taking constructor accepts, and the
//! blocking hook the resolver runs on.
//!
//! # Where getaddrinfo runs
//!
//! Resolving a host name means calling the C library's `getaddrinfo`, which
//! blocks for a DNS round trip (milliseconds, seconds when a server does not
//! answer). Run on a worker, it would stall every task of that processor, so
//! it runs on another thread, and the task waits for the answer like it waits
//! for a socket.
//!
//! Addresses that are already IP addresses (`"127.0.0.1:80"`, `"[::1]:80"`,
//! `(Ipv4Addr::LOCALHOST, 80)`, a `SocketAddr`) are parsed in place: no
//! thread hop, no allocation beyond the returned list.
//!
//! The reactor sits below the executor in the crate graph, so it cannot call
//! the executor's blocking pool itself. Instead it runs resolver jobs through
//! a *blocking hook* ([`set_blocking_hook`]): a function that takes a job and
//! runs it on a thread that is not a worker, or hands it back. The `numa_rt`
//! facade installs a hook that gives the job to the current runtime's
//! blocking pool (`spawn_blocking`), so lookups share the pool's threads,
//! limits and metrics. Without a hook (the reactor used alone), or when the
//! hook hands the job back (no runtime on this thread), the job runs on a new
//! thread named `numa_rt-resolve`, which exits when the lookup is done.
//!
//! The alternative, name-taking constructors written in the facade, was
//! rejected: the socket types are the reactor's and the facade re-exports
//! them unchanged, so every constructor would need a facade twin that
//! shadows it, and code written against the reactor crate (its own tests, a
//! library that depends on it alone) would still get a blocking resolver.
//! A hook keeps one implementation of every socket type and one resolver,
//! and lets a test (or a program with its own DNS thread) swap the thread the
//! job runs on.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Waker};

/// A unit of blocking work handed to the [blocking hook](set_blocking_hook).
pub type BlockingJob = Box<dyn FnOnce() + Send + 'static>;

/// Runs a job on a thread that is not a worker, or returns it (`Err`) when
/// it cannot, in which case the resolver starts a thread for it.
pub type BlockingHook = fn(BlockingJob) -> Result<(), BlockingJob>;

/// The installed hook; read once per name lookup (never for IP addresses).
static HOOK: RwLock<Option<BlockingHook>> = RwLock::new(None);

/// Installs `hook` as the way resolver jobs reach a blocking thread,
/// replacing any earlier one.
///
/// The reactor sits below the executor and cannot call its blocking pool;
/// the `numa_rt` facade installs a hook that hands each job to the current
/// runtime's pool (`spawn_blocking`). Without a hook, or when the hook
/// hands the job back, the job runs on a new thread named
/// `numa_rt-resolve`. A test, or a program with a DNS thread of its own,
/// can install another.
///
/// A job that the hook drops without running fails its lookup with an error
/// (it never hangs); a job that panics fails it the same way.
pub fn set_blocking_hook(hook: BlockingHook) {
    *HOOK.write().unwrap_or_else(|e| e.into_inner()) = Some(hook);
}

/// Installs `hook` unless one is installed already; returns whether it did.
/// The facade uses this so a hook a program (or a test) set stays in place.
pub fn set_blocking_hook_if_unset(hook: BlockingHook) -> bool {
    let mut slot = HOOK.write().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return false;
    }
    *slot = Some(hook);
    true
}

/// Runs `job` through the hook, or on a thread of its own.
fn run_blocking(job: BlockingJob) -> io::Result<()> {
    let hook = *HOOK.read().unwrap_or_else(|e| e.into_inner());
    let job = match hook {
        Some(hook) => match hook(job) {
            Ok(()) => return Ok(()),
            Err(job) => job,
        },
        None => job,
    };
    std::thread::Builder::new()
        .name("numa_rt-resolve".into())
        .spawn(job)
        .map(drop)
}

/// What an address argument turned into: addresses, or a name to look up.
#[doc(hidden)]
#[derive(Debug)]
pub enum Target {
    /// Already IP addresses.
    Addrs(Vec<SocketAddr>),
    /// A host name and a port, to resolve off the worker.
    Name(String, u16),
}

mod sealed {
    /// Keeps [`super::ToSocketAddrs`] closed to the types listed here.
    pub trait Sealed {
        /// Parses the argument without blocking.
        fn to_target(&self) -> std::io::Result<super::Target>;
    }
}

/// Anything that names socket addresses: a `SocketAddr`, an `(IpAddr, u16)`
/// pair, a `"host:port"` string or a `(&str, u16)` pair, or a slice of
/// addresses; the async counterpart of [`std::net::ToSocketAddrs`].
///
/// IP addresses are parsed on the spot; host names are resolved with
/// [`lookup_host`], off the worker. The trait is sealed: its one method is
/// an implementation detail.
pub trait ToSocketAddrs: sealed::Sealed {}

impl<T: sealed::Sealed + ?Sized> ToSocketAddrs for T {}

macro_rules! ready_addrs {
    ($($ty:ty => |$v:ident| $e:expr;)*) => {$(
        impl sealed::Sealed for $ty {
            fn to_target(&self) -> io::Result<Target> {
                let $v = self;
                Ok(Target::Addrs(vec![$e]))
            }
        }
    )*};
}

ready_addrs! {
    SocketAddr => |a| *a;
    SocketAddrV4 => |a| SocketAddr::V4(*a);
    SocketAddrV6 => |a| SocketAddr::V6(*a);
    (IpAddr, u16) => |a| SocketAddr::new(a.0, a.1);
    (Ipv4Addr, u16) => |a| SocketAddr::new(IpAddr::V4(a.0), a.1);
    (Ipv6Addr, u16) => |a| SocketAddr::new(IpAddr::V6(a.0), a.1);
}

impl sealed::Sealed for [SocketAddr] {
    fn to_target(&self) -> io::Result<Target> {
        Ok(Target::Addrs(self.to_vec()))
    }
}

impl sealed::Sealed for Vec<SocketAddr> {
    fn to_target(&self) -> io::Result<Target> {
        Ok(Target::Addrs(self.clone()))
    }
}

impl sealed::Sealed for str {
    fn to_target(&self) -> io::Result<Target> {
        if let Ok(a) = self.parse::<SocketAddr>() {
            return Ok(Target::Addrs(vec![a]));
        }
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid socket address {self:?}: {why}"),
            )
        };
        let (host, port) = self
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
        host_port(host, port)
    }
}

impl sealed::Sealed for String {
    fn to_target(&self) -> io::Result<Target> {
        self.as_str().to_target()
    }
}

impl sealed::Sealed for (&str, u16) {
    fn to_target(&self) -> io::Result<Target> {
        host_port(self.0, self.1)
    }
}

impl sealed::Sealed for (String, u16) {
    fn to_target(&self) -> io::Result<Target> {
        host_port(&self.0, self.1)
    }
}

impl<T: sealed::Sealed + ?Sized> sealed::Sealed for &T {
    fn to_target(&self) -> io::Result<Target> {
        (**self).to_target()
    }
}

/// A host (an IP address, a bracketed IPv6 address, or a name) and a port.
fn host_port(host: &str, port: u16) -> io::Result<Target> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Target::Addrs(vec![SocketAddr::new(ip, port)]));
    }
    if host.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid socket address \":{port}\": the host is empty"),
        ));
    }
    Ok(Target::Name(host.to_owned(), port))
}

/// Resolves `host` to its socket addresses, in the order the system
/// resolver returns them.
///
/// IP addresses come back at once; a name is looked up with `getaddrinfo`
/// on a blocking thread (see [`set_blocking_hook`]), never on the worker,
/// so other tasks of this processor run meanwhile. A name that does not
/// resolve fails with an error that names it.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// for addr in numa_rt_reactor::net::lookup_host("localhost:8080").await? {
///     println!("{addr}");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn lookup_host(
    host: impl ToSocketAddrs,
) -> io::Result<impl Iterator<Item = SocketAddr> + Send + 'static> {
    resolve(host).await.map(Vec::into_iter)
}

/// Resolves `addr` to at least one address.
pub(crate) async fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let target = sealed::Sealed::to_target(&addr)?;
    drop(addr);
    let addrs = match target {
        Target::Addrs(a) if a.is_empty() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty list of socket addresses",
            ))
        }
        Target::Addrs(a) => return Ok(a),
        Target::Name(host, port) => Lookup::start(host, port)?.await?,
    };
    Ok(addrs)
}

/// What a resolver job leaves for the waiting task.
#[derive(Default)]
struct Slot {
    result: Option<io::Result<Vec<SocketAddr>>>,
    waker: Option<Waker>,
}

/// The job's end of a lookup: delivers the result, or an error if the job is
/// dropped without finishing (its thread panicked, or the pool shut down).
struct Completer {
    slot: Arc<Mutex<Slot>>,
    name: String,
}

impl Completer {
    fn complete(&self, result: io::Result<Vec<SocketAddr>>) {
        let waker = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.result.is_some() {
                return;
            }
            slot.result = Some(result);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        self.complete(Err(io::Error::other(format!(
            "resolving {:?}: the resolver job was dropped before it finished \
             (it panicked, or the runtime's blocking pool shut down)",
            self.name
        ))));
    }
}

/// A lookup in flight on a blocking thread.
struct Lookup {
    slot: Arc<Mutex<Slot>>,
}

impl Lookup {
    fn start(host: String, port: u16) -> io::Result<Lookup> {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let completer = Completer {
            slot: slot.clone(),
            name: format!("{host}:{port}"),
        };
        run_blocking(Box::new(move || {
            let result = getaddrinfo(&host, port);
            completer.complete(result);
        }))?;
        Ok(Lookup { slot })
    }
}

impl Future for Lookup {
    type Output = io::Result<Vec<SocketAddr>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match slot.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                match &slot.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => slot.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lookup")
    }
}

/// The blocking call itself (through std, which wraps getaddrinfo), with an
/// error that names what was looked up.
fn getaddrinfo(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("could not resolve {host:?}: {e}"));
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(named)?
        .collect();
    if addrs.is_empty() {
        return Err(named(io::Error::new(
            io::ErrorKind::NotFound,
            "no addresses found",
        )));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(a: impl ToSocketAddrs) -> io::Result<Target> {
        a.to_target()
    }

    #[test]
    fn ip_literals_parse_in_place() {
        for (arg, want) in [("127.0.0.1:80", "127.0.0.1:80"), ("[::1]:443", "[::1]:443")] {
            match target(arg).unwrap() {
                Target::Addrs(a) => assert_eq!(a, [want.parse::<SocketAddr>().unwrap()]),
                t => panic!("{arg}: {t:?}"),
            }
        }
        match target(("[::1]", 8)).unwrap() {
            Target::Addrs(a) => assert_eq!(a, ["[::1]:8".parse::<SocketAddr>().unwrap()]),
            t => panic!("{t:?}"),
        }
        assert!(matches!(
            target((Ipv4Addr::LOCALHOST, 1)).unwrap(),
            Target::Addrs(_)
        ));
    }

    #[test]
    fn names_are_left_for_the_resolver() {
        match target("localhost:8080").unwrap() {
            Target::Name(h, p) => assert_eq!((h.as_str(), p), ("localhost", 8080)),
            t => panic!("{t:?}"),
        }
        match target(String::from("example.com:1")).unwrap() {
            Target::Name(h, p) => assert_eq!((h.as_str(), p), ("example.com", 1)),
            t => panic!("{t:?}"),
        }
    }

    #[test]
    fn malformed_addresses_name_the_bad_value() {
        for bad in ["localhost", "localhost:http", "host:70000", ":80"] {
            let e = target(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_dropped_job_fails_the_lookup_instead_of_hanging() {
        let slot = Arc::new(Mutex::new(Slot::default()));
        drop(Completer {
            slot: slot.clone(),
            name: "x:1".into(),
        });
        let r = slot.lock().unwrap().result.take().unwrap();
        assert!(r.unwrap_err().to_string().contains("x:1"));
    }
}
