//! Unix-domain streams: [`UnixListener`], [`UnixStream`] and the stream's
//! halves; the peer's credentials ([`UCred`]).
//!
//! A path that starts with a NUL byte names a Linux abstract socket, as in
//! tokio: `UnixListener::bind("\0name")` and `UnixStream::connect("\0name")`
//! (std's path functions refuse the NUL). [`UnixListener::bind_addr`] and
//! [`UnixStream::connect_addr`] take std's `SocketAddr`, either kind.
//!
//! `connect` waits, as tokio's does, until the poller reports the new socket
//! writable, then checks `SO_ERROR`: a connection the listener drops before
//! accepting fails there instead of looking connected.

pub mod pipe;

/// A Unix socket address: std's type (tokio has a wrapper of its own with
/// the same `is_unnamed`/`as_pathname`; for `as_abstract_name`, import
/// `std::os::linux::net::SocketAddrExt`). tokio's `From` between the two
/// is the identity here, so `std_addr.into()` still compiles.
pub use std::os::unix::net::SocketAddr;

/// A user id, as in [`UCred::uid`] (tokio's `unix::uid_t`).
#[allow(non_camel_case_types)]
pub type uid_t = libc::uid_t;
/// A group id, as in [`UCred::gid`] (tokio's `unix::gid_t`).
#[allow(non_camel_case_types)]
pub type gid_t = libc::gid_t;
/// A process id, as in [`UCred::pid`] (tokio's `unix::pid_t`).
#[allow(non_camel_case_types)]
pub type pid_t = libc::pid_t;

use crate::driver::waiters::wait_fn;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use mio::Interest;

use super::split::split_owned;
use super::{readiness_impls, stream_impls, stream_try_impls, AcceptBackoff};
use crate::driver::io::{Direction, Kind};
use crate::driver::registration::PollEvented;

/// The socket address `path` names, as tokio reads it: on Linux and Android
/// a leading NUL byte makes the rest an abstract name; otherwise a
/// filesystem path.
pub(super) fn std_addr(path: &Path) -> io::Result<SocketAddr> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        #[cfg(target_os = "android")]
        use std::os::android::net::SocketAddrExt;
        #[cfg(target_os = "linux")]
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::ffi::OsStrExt;
        if let Some(name) = path.as_os_str().as_bytes().strip_prefix(b"\0") {
            return SocketAddr::from_abstract_name(name);
        }
    }
    SocketAddr::from_pathname(path)
}

/// std's form of a Unix address socket2 read (a datagram's sender).
pub(super) fn from_sock_addr(a: &socket2::SockAddr) -> io::Result<SocketAddr> {
    if a.is_unnamed() {
        // An empty path is std's unnamed address.
        return SocketAddr::from_pathname("");
    }
    if let Some(p) = a.as_pathname() {
        return SocketAddr::from_pathname(p);
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(name) = a.as_abstract_namespace() {
        #[cfg(target_os = "android")]
        use std::os::android::net::SocketAddrExt;
        #[cfg(target_os = "linux")]
        use std::os::linux::net::SocketAddrExt;
        return SocketAddr::from_abstract_name(name);
    }
    Err(io::Error::other(
        "the datagram's sender address is not a Unix-domain address",
    ))
}

/// A Unix-domain listening socket.
#[derive(Debug)]
pub struct UnixListener {
    io: PollEvented<mio::net::UnixListener>,
    backoff: AcceptBackoff,
}

impl UnixListener {
    /// Binds to the filesystem `path` (which must not exist yet), or on
    /// Linux to an abstract name: a leading NUL byte, then the name.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        crate::context::check_not_shut_down()?;
        UnixListener::bind_addr(&std_addr(path.as_ref())?)
    }

    /// Binds to `addr` (a pathname or abstract address).
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        Ok(UnixListener::new(mio::net::UnixListener::bind_addr(addr)?))
    }

    fn new(l: mio::net::UnixListener) -> UnixListener {
        UnixListener {
            io: PollEvented::new(l, Interest::READABLE, Kind::Listener),
            backoff: AcceptBackoff::default(),
        }
    }

    /// Waits for a connection.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        wait_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (s, addr) = ready!(self.backoff.poll_accept(&self.io, cx, |l| l.accept()))?;
        Poll::Ready(Ok((UnixStream::new(s), addr)))
    }

    /// Wraps a std listener (switched to nonblocking mode).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener::new(mio::net::UnixListener::from_std(
            listener,
        )))
    }

    /// Deregisters and returns the std listener (still nonblocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        Ok(self.io.into_inner().into())
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

impl TryFrom<std::os::unix::net::UnixListener> for UnixListener {
    type Error = io::Error;

    /// tokio's conversion: [`UnixListener::from_std`].
    fn try_from(std: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        UnixListener::from_std(std)
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// A Unix-domain stream.
#[derive(Debug)]
pub struct UnixStream {
    pub(crate) io: PollEvented<mio::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path` (a filesystem path, or on Linux a
    /// leading NUL byte and an abstract name).
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        crate::context::check_not_shut_down()?;
        let addr = std_addr(path.as_ref())?;
        UnixStream::connect_addr(&addr).await
    }

    /// Connects to the socket at `addr` (a pathname or abstract address).
    pub async fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        UnixStream::connecting(mio::net::UnixStream::connect_addr(addr)?).await
    }

    /// Waits for the connect in progress on `s` to finish. The stream
    /// starts ready in no direction (tokio's): `connect` stays pending until
    /// the poller reports the socket writable, then checks `SO_ERROR`.
    pub(crate) async fn connecting(s: mio::net::UnixStream) -> io::Result<UnixStream> {
        let s = UnixStream {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream)
                .reported(),
        };
        wait_fn(|cx| s.poll_connected(cx)).await?;
        Ok(s)
    }

    fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let ev = ready!(self.io.poll_ready(cx, Direction::Write))?;
            let sock = self.io.get_ref();
            if let Some(e) = sock.take_error()? {
                return Poll::Ready(Err(e));
            }
            match sock.peer_addr() {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => self.io.clear_readiness(ev),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// A connected pair of streams.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::new(a), UnixStream::new(b)))
    }

    fn new(s: mio::net::UnixStream) -> UnixStream {
        UnixStream {
            io: PollEvented::new(s, Interest::READABLE | Interest::WRITABLE, Kind::Stream),
        }
    }

    /// Wraps a std stream (switched to nonblocking mode).
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        Ok(UnixStream::new(mio::net::UnixStream::from_std(stream)))
    }

    /// Deregisters and returns the std stream (still nonblocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        Ok(self.io.into_inner().into())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Shuts down the read, write or both directions at once (std's
    /// `shutdown`). Named apart so that tokio code's
    /// `stream.shutdown().await` (`AsyncWriteExt::shutdown`, the write
    /// direction) finds the trait method: an inherent `shutdown` would
    /// shadow it.
    pub fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// The credentials of the process at the other end (`SO_PEERCRED`: as
    /// of `connect`, or of `socketpair`).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn peer_cred(&self) -> io::Result<UCred> {
        UCred::of(self.io.get_ref().as_raw_fd())
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Borrowed read and write halves.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (super::split::ReadHalf(self), super::split::WriteHalf(self))
    }

    /// Owned halves; dropping the write half shuts writing down.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split_owned(Arc::new(self))
    }
}

/// The credentials of a Unix socket's peer (tokio's `UCred`): its user and
/// group ids, and its process id.
#[derive(Copy, Clone, Debug, Eq, Hash, PartialEq)]
pub struct UCred {
    pid: Option<libc::pid_t>,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl UCred {
    /// The peer's effective user id.
    pub fn uid(&self) -> libc::uid_t {
        self.uid
    }

    /// The peer's effective group id.
    pub fn gid(&self) -> libc::gid_t {
        self.gid
    }

    /// The peer's process id (`None` where the kernel does not tell).
    pub fn pid(&self) -> Option<libc::pid_t> {
        self.pid
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn of(fd: RawFd) -> io::Result<UCred> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are valid for writes for the call, and
        // `len` is `cred`'s size: the kernel writes at most that much.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        if len as usize != std::mem::size_of::<libc::ucred>() {
            return Err(io::Error::other("SO_PEERCRED returned a short ucred"));
        }
        Ok(UCred {
            pid: Some(cred.pid),
            uid: cred.uid,
            gid: cred.gid,
        })
    }
}

stream_impls!(UnixStream);
readiness_impls!(UnixStream);
stream_try_impls!(UnixStream);

/// The owned read half of a [`UnixStream`] (from [`UnixStream::into_split`]).
pub type OwnedReadHalf = super::OwnedReadHalf<UnixStream>;
/// The owned write half of a [`UnixStream`]; dropping it shuts writing down.
pub type OwnedWriteHalf = super::OwnedWriteHalf<UnixStream>;
/// The borrowed read half of a [`UnixStream`] (from [`UnixStream::split`]).
pub type ReadHalf<'a> = super::ReadHalf<'a, UnixStream>;
/// The borrowed write half of a [`UnixStream`].
pub type WriteHalf<'a> = super::WriteHalf<'a, UnixStream>;
/// Returned by `reunite` when the halves belong to different streams.
pub type ReuniteError = super::ReuniteError<UnixStream>;

impl TryFrom<std::os::unix::net::UnixStream> for UnixStream {
    type Error = io::Error;

    /// tokio's conversion: [`UnixStream::from_std`].
    fn try_from(std: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        UnixStream::from_std(std)
    }
}
