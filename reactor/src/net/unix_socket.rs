//! [`UnixSocket`]: a Unix-domain socket set up before it becomes a
//! listener, a stream or a datagram socket (tokio's `UnixSocket`), like
//! [`TcpSocket`](super::TcpSocket) for TCP.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;

use socket2::{Domain, SockAddr, Socket, Type};

use super::{UnixDatagram, UnixListener, UnixStream};

/// An unconnected Unix-domain socket, stream or datagram: bind it to a
/// path, then turn it into a [`UnixListener`] ([`listen`](Self::listen)),
/// a [`UnixStream`] ([`connect`](Self::connect)) or a [`UnixDatagram`]
/// ([`datagram`](Self::datagram)). Paths may name Linux abstract sockets
/// (a leading NUL byte), as everywhere in this module.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use numa_rt_reactor::net::UnixSocket;
/// let path = std::env::temp_dir().join(format!("numa_rt_doc_unix_socket_{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let socket = UnixSocket::new_stream()?;
/// socket.bind(&path)?;
/// let listener = socket.listen(128)?;
/// assert_eq!(listener.local_addr()?.as_pathname(), Some(path.as_path()));
/// # drop(listener);
/// # std::fs::remove_file(&path)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct UnixSocket {
    inner: Socket,
}

impl UnixSocket {
    /// A new `AF_UNIX` datagram socket (`SOCK_DGRAM`).
    pub fn new_datagram() -> io::Result<UnixSocket> {
        UnixSocket::new(Type::DGRAM)
    }

    /// A new `AF_UNIX` stream socket (`SOCK_STREAM`).
    pub fn new_stream() -> io::Result<UnixSocket> {
        UnixSocket::new(Type::STREAM)
    }

    fn new(ty: Type) -> io::Result<UnixSocket> {
        // socket2 opens it close-on-exec.
        let inner = Socket::new(Domain::UNIX, ty, None)?;
        inner.set_nonblocking(true)?;
        Ok(UnixSocket { inner })
    }

    fn is_datagram(&self) -> io::Result<bool> {
        Ok(self.inner.r#type()? == Type::DGRAM)
    }

    /// Binds to `path` (a filesystem path, which must not exist yet, or on
    /// Linux a leading NUL byte and an abstract name).
    pub fn bind(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.inner.bind(&SockAddr::unix(path)?)
    }

    /// Listens with a queue of `backlog` connections (a stream socket only).
    pub fn listen(self, backlog: u32) -> io::Result<UnixListener> {
        if self.is_datagram()? {
            return Err(io::Error::other(
                "listen cannot be called on a datagram socket",
            ));
        }
        self.inner
            .listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        UnixListener::from_std(OwnedFd::from(self.inner).into())
    }

    /// Connects to the socket at `path` (a stream socket only); waits, as
    /// [`UnixStream::connect`] does, until the connection is set up.
    pub async fn connect(self, path: impl AsRef<Path>) -> io::Result<UnixStream> {
        if self.is_datagram()? {
            return Err(io::Error::other(
                "connect cannot be called on a datagram socket",
            ));
        }
        let addr = SockAddr::unix(path)?;
        match self.inner.connect(&addr) {
            Err(e) if e.raw_os_error() != Some(libc::EINPROGRESS) => return Err(e),
            _ => {}
        }
        let std: std::os::unix::net::UnixStream = OwnedFd::from(self.inner).into();
        UnixStream::connecting(mio::net::UnixStream::from_std(std)).await
    }

    /// The datagram socket (a datagram socket only).
    pub fn datagram(self) -> io::Result<UnixDatagram> {
        if !self.is_datagram()? {
            return Err(io::Error::other(
                "datagram cannot be called on a stream socket",
            ));
        }
        UnixDatagram::from_std(OwnedFd::from(self.inner).into())
    }
}

impl AsRawFd for UnixSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for UnixSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl FromRawFd for UnixSocket {
    /// Wraps an `AF_UNIX` socket descriptor (switched to nonblocking mode
    /// when it is turned into a listener, stream or datagram socket).
    ///
    /// # Safety
    ///
    /// `fd` must be an open socket descriptor that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> UnixSocket {
        // SAFETY: the caller hands over an open socket it owned.
        let inner = unsafe { Socket::from_raw_fd(fd) };
        UnixSocket { inner }
    }
}

impl IntoRawFd for UnixSocket {
    fn into_raw_fd(self) -> RawFd {
        self.inner.into_raw_fd()
    }
}
