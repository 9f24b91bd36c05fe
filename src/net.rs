//! TCP, UDP and Unix sockets, registered with the poller of the processor
//! that first polls them; name resolution off the workers; [`TcpSocket`].
//!
//! Everything here is the reactor's (`numa_rt_reactor::net`), re-exported,
//! except [`lookup_host`], which first makes sure host names are resolved on
//! the runtime's blocking pool.
//!
//! # Where names are resolved
//!
//! `getaddrinfo` blocks, so a host name given to [`lookup_host`],
//! [`TcpStream::connect`], [`TcpListener::bind`], [`UdpSocket::bind`],
//! [`UdpSocket::connect`] or [`UdpSocket::send_to`] is resolved on another
//! thread while the task waits; IP addresses are parsed in place. The reactor
//! sits below the executor, so it reaches a blocking thread through a hook
//! ([`set_blocking_hook`]); this crate's hook hands the job to the current
//! runtime's blocking pool ([`crate::spawn_blocking`]). It is installed when the first runtime is
//! built (and by [`lookup_host`]); outside a runtime, the reactor runs each
//! lookup on a short-lived thread of its own (named `numa_rt-resolve`).
//! Either way, no worker ever blocks on DNS.
//!
//! # An echo server and its client
//!
//! The streams implement tokio's `AsyncRead`/`AsyncWrite` (with the
//! extension traits in [`crate::io`]) and futures-io's.
//!
//! ```
//! use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
//! use numa_rt::net::{TcpListener, TcpStream};
//!
//! #[numa_rt::main(max_procs = 2)]
//! async fn main() -> std::io::Result<()> {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     numa_rt::spawn(async move {
//!         // One task per connection, spread over the processors.
//!         while let Ok((mut conn, _peer)) = listener.accept().await {
//!             numa_rt::spawn(async move {
//!                 let mut buf = [0u8; 1024];
//!                 while let Ok(n) = conn.read(&mut buf).await {
//!                     if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
//!                         break;
//!                     }
//!                 }
//!             });
//!         }
//!     });
//!
//!     let mut stream = TcpStream::connect(addr).await?;
//!     stream.write_all(b"hello").await?;
//!     let mut reply = [0u8; 5];
//!     stream.read_exact(&mut reply).await?;
//!     assert_eq!(&reply, b"hello");
//!     Ok(())
//! }
//! ```

use std::io;
use std::net::SocketAddr;

pub use numa_rt_reactor::net::*;

/// Resolves `host` (`"name:port"`, `("name", port)`, or addresses) to
/// socket addresses on the runtime's blocking pool; IP addresses come back
/// without a thread hop. A name that does not resolve gives an error that
/// names it.
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// let addrs: Vec<_> = numa_rt::net::lookup_host("localhost:80").await?.collect();
/// assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
/// # Ok(())
/// # }
/// ```
pub async fn lookup_host(
    host: impl ToSocketAddrs,
) -> io::Result<impl Iterator<Item = SocketAddr> + Send + 'static> {
    use_blocking_pool();
    numa_rt_reactor::net::lookup_host(host).await
}

/// Makes the runtime's blocking pool the reactor's resolver thread, unless
/// a program installed its own hook first (every `Builder::build` does the
/// same; this covers a lookup made before any runtime was built).
pub(crate) fn use_blocking_pool() {
    numa_rt_executor::resolve_names_on_blocking_pool();
}
