//! [`TcpSocket`]: a TCP socket configured before it becomes a stream or a
//! listener (`SO_REUSEPORT`, buffer sizes, bind-before-connect).
//!
//! The socket is created nonblocking and close-on-exec; its options are set
//! with plain `setsockopt` calls (through `socket2`), and it is registered
//! with a poller only once [`connect`](TcpSocket::connect) or
//! [`listen`](TcpSocket::listen) turns it into a [`TcpStream`] or a
//! [`TcpListener`], which then behave like any other.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, TcpKeepalive, Type};

use super::{TcpListener, TcpStream};

/// An unconnected TCP socket.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// use numa_rt_reactor::net::TcpSocket;
/// // Several listeners on one port, the kernel spreading connections.
/// let socket = TcpSocket::new_v4()?;
/// socket.set_reuseaddr(true)?;
/// socket.set_reuseport(true)?;
/// socket.bind("127.0.0.1:8080".parse().unwrap())?;
/// let listener = socket.listen(1024)?;
///
/// // A client bound to a chosen local address.
/// let socket = TcpSocket::new_v4()?;
/// socket.bind("127.0.0.1:0".parse().unwrap())?;
/// let stream = socket.connect("127.0.0.1:8080".parse().unwrap()).await?;
/// # drop((listener, stream)); Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TcpSocket {
    inner: Socket,
}

impl TcpSocket {
    /// A new IPv4 TCP socket.
    pub fn new_v4() -> io::Result<TcpSocket> {
        TcpSocket::new(Domain::IPV4)
    }

    /// A new IPv6 TCP socket.
    pub fn new_v6() -> io::Result<TcpSocket> {
        TcpSocket::new(Domain::IPV6)
    }

    fn new(domain: Domain) -> io::Result<TcpSocket> {
        // socket2 creates it close-on-exec; the type flag makes it
        // nonblocking in the same syscall.
        let ty = Type::STREAM.nonblocking();
        let inner = Socket::new(domain, ty, Some(Protocol::TCP))?;
        Ok(TcpSocket { inner })
    }

    /// Sets `SO_REUSEADDR` (rebind a port with connections in `TIME_WAIT`).
    pub fn set_reuseaddr(&self, on: bool) -> io::Result<()> {
        self.inner.set_reuse_address(on)
    }

    /// Gets `SO_REUSEADDR`.
    pub fn reuseaddr(&self) -> io::Result<bool> {
        self.inner.reuse_address()
    }

    /// Sets `SO_REUSEPORT` (several sockets bound to one port; the kernel
    /// spreads incoming connections over their listeners).
    pub fn set_reuseport(&self, on: bool) -> io::Result<()> {
        self.inner.set_reuse_port(on)
    }

    /// Gets `SO_REUSEPORT`.
    pub fn reuseport(&self) -> io::Result<bool> {
        self.inner.reuse_port()
    }

    /// Sets `SO_SNDBUF` (Linux doubles the value for bookkeeping and reports
    /// the doubled size back).
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        self.inner.set_send_buffer_size(size as usize)
    }

    /// Gets `SO_SNDBUF`.
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        self.inner
            .send_buffer_size()
            .map(|n| n.min(u32::MAX as usize) as u32)
    }

    /// Sets `SO_RCVBUF` (doubled by Linux, like the send buffer).
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        self.inner.set_recv_buffer_size(size as usize)
    }

    /// Gets `SO_RCVBUF`.
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        self.inner
            .recv_buffer_size()
            .map(|n| n.min(u32::MAX as usize) as u32)
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when true).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.inner.set_tcp_nodelay(on)
    }

    /// Gets `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.tcp_nodelay()
    }

    /// Sets `SO_KEEPALIVE` (the kernel's default probe timing).
    pub fn set_keepalive(&self, on: bool) -> io::Result<()> {
        self.inner.set_keepalive(on)
    }

    /// Gets `SO_KEEPALIVE`.
    pub fn keepalive(&self) -> io::Result<bool> {
        self.inner.keepalive()
    }

    /// Turns keepalive on and sets the idle time before the first probe
    /// (`TCP_KEEPIDLE`).
    pub fn set_keepalive_idle(&self, idle: Duration) -> io::Result<()> {
        self.inner
            .set_tcp_keepalive(&TcpKeepalive::new().with_time(idle))
    }

    /// Sets `SO_LINGER`: `Some(d)` makes close wait up to `d` for unsent
    /// data (`Some(0)` resets the connection); `None` is the default.
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        self.inner.set_linger(linger)
    }

    /// Gets `SO_LINGER`.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        self.inner.linger()
    }

    /// Sets a linger time of zero (`SO_LINGER`): closing the socket then
    /// resets the connection (an RST, not a FIN) and drops unsent data,
    /// and the socket does not enter `TIME_WAIT` (tokio's
    /// `set_zero_linger`).
    pub fn set_zero_linger(&self) -> io::Result<()> {
        self.inner.set_linger(Some(Duration::ZERO))
    }

    /// Gets `IP_TOS`, the type-of-service field of the IPv4 packets this
    /// socket sends (tokio's `tos_v4`).
    pub fn tos_v4(&self) -> io::Result<u32> {
        self.inner.tos_v4()
    }

    /// Sets `IP_TOS` (tokio's `set_tos_v4`).
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        self.inner.set_tos_v4(tos)
    }

    /// tokio's older name for [`TcpSocket::tos_v4`].
    #[deprecated(note = "use `tos_v4()`")]
    pub fn tos(&self) -> io::Result<u32> {
        self.tos_v4()
    }

    /// tokio's older name for [`TcpSocket::set_tos_v4`].
    #[deprecated(note = "use `set_tos_v4()`")]
    pub fn set_tos(&self, tos: u32) -> io::Result<()> {
        self.set_tos_v4(tos)
    }

    /// Gets `IPV6_TCLASS`, the traffic class of the IPv6 packets this
    /// socket sends (tokio's `tclass_v6`).
    pub fn tclass_v6(&self) -> io::Result<u32> {
        self.inner.tclass_v6()
    }

    /// Sets `IPV6_TCLASS` (tokio's `set_tclass_v6`).
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        self.inner.set_tclass_v6(tclass)
    }

    /// Binds to `addr` (port 0 picks a free port).
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        self.inner
            .bind(&SockAddr::from(addr))
            .map_err(|e| io::Error::new(e.kind(), format!("bind to {addr}: {e}")))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket address"))
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Gets `SO_BINDTODEVICE`: the interface the socket is bound to, if any.
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
        self.inner.device()
    }

    /// Sets `SO_BINDTODEVICE`: only packets that arrive on `interface` are
    /// received (`None` or an empty name removes the binding; binding needs
    /// `CAP_NET_RAW` on most kernels).
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
        self.inner.bind_device(interface)
    }

    /// Connects to `addr`, turning the socket into a [`TcpStream`].
    pub async fn connect(self, addr: SocketAddr) -> io::Result<TcpStream> {
        crate::context::check_not_shut_down()?;
        match self.inner.connect(&SockAddr::from(addr)) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let std: std::net::TcpStream = self.inner.into();
        TcpStream::connecting(mio::net::TcpStream::from_std(std)).await
    }

    /// Listens with a queue of `backlog` pending connections, turning the
    /// socket into a [`TcpListener`].
    pub fn listen(self, backlog: u32) -> io::Result<TcpListener> {
        let backlog = backlog.min(i32::MAX as u32) as i32;
        self.inner.listen(backlog)?;
        let std: std::net::TcpListener = self.inner.into();
        Ok(TcpListener::new(mio::net::TcpListener::from_std(std)))
    }

    /// Wraps a std stream's socket (to set options on an existing
    /// connection before wrapping it again).
    pub fn from_std_stream(stream: std::net::TcpStream) -> TcpSocket {
        TcpSocket {
            inner: Socket::from(stream),
        }
    }
}

impl AsRawFd for TcpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for TcpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl IntoRawFd for TcpSocket {
    fn into_raw_fd(self) -> RawFd {
        self.inner.into_raw_fd()
    }
}

impl From<OwnedFd> for TcpSocket {
    /// Takes a TCP socket descriptor; it should be in nonblocking mode.
    fn from(fd: OwnedFd) -> TcpSocket {
        TcpSocket {
            inner: Socket::from(fd),
        }
    }
}

impl FromRawFd for TcpSocket {
    /// # Safety
    /// `fd` must be an open TCP socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> TcpSocket {
        // SAFETY: the caller guarantees `fd` is an open socket we now own.
        TcpSocket::from(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
