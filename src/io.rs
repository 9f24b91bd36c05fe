//! Asynchronous I/O, with tokio's names: the traits numa_rt's sockets
//! implement, the utilities built on them, and readiness for any file
//! descriptor.
//!
//! # Two families of traits
//!
//! [`net::TcpStream`](crate::net::TcpStream), `UnixStream` and their split
//! halves implement both tokio's [`AsyncRead`]/[`AsyncWrite`] (re-exported
//! here) and futures-io's `AsyncRead`/`AsyncWrite`. So code written for
//! tokio — `AsyncReadExt::read_buf` into a `BytesMut`, tokio-util's codecs,
//! tokio-rustls, hyper-util's `TokioIo` — takes numa_rt's streams as they
//! are, and so does code written against `futures` (`futures::io::copy`,
//! async-tungstenite, `futures::AsyncReadExt`). Bring one family's extension
//! traits into scope, not both: with both, `stream.read(..)` is ambiguous.
//!
//! tokio's traits come from the tokio crate built with `io-util` (plus
//! `sync` and `macros` for [`crate::sync`] and [`crate::select!`]) and no
//! runtime feature: no tokio reactor, timer or scheduler is compiled in.
//! The extension traits ([`AsyncReadExt`], [`AsyncWriteExt`],
//! [`AsyncBufReadExt`]), the buffers ([`BufReader`], [`BufWriter`],
//! [`BufStream`]), [`copy`], [`copy_bidirectional`], [`split`], [`duplex`]
//! and the rest are tokio's own code, re-exported rather than rewritten:
//! they are plain futures over the two traits, well tested, and a library
//! that names `tokio::io::BufWriter<S>` in its API gets the same type. The
//! exceptions are [`empty`], [`repeat`] and [`sink`], always ready, which
//! are numa_rt's so that they take numa_rt's cooperative budget (tokio's
//! take tokio's, unlimited here, so a loop over them never yielded).
//!
//! Reads go straight into the caller's `ReadBuf` (`read(2)` on the socket
//! into its unfilled part, no zeroing and no copy), so `read_buf` into a
//! `BytesMut` costs what it costs on tokio.
//!
//! The process's standard streams are [`stdin`], [`stdout`] and
//! [`stderr`], as tokio's: each read or write runs on numa_rt's blocking
//! pool, one at a time (descriptors 0, 1 and 2 are shared with other
//! processes and cannot be made nonblocking), and a write returns once its
//! bytes are buffered, so flush before exiting. A read of stdin cannot be
//! cancelled (see [`Stdin`]).
//!
//! ```
//! use numa_rt::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
//! use numa_rt::net::{TcpListener, TcpStream};
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> std::io::Result<()> {
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! numa_rt::spawn(async move {
//!     let (socket, _) = listener.accept().await?;
//!     let (rd, mut wr) = socket.into_split();
//!     let mut lines = BufReader::new(rd).lines();
//!     while let Some(line) = lines.next_line().await? {
//!         wr.write_all(line.to_uppercase().as_bytes()).await?;
//!         wr.write_u8(b'\n').await?;
//!     }
//!     wr.shutdown().await // the peer reads end-of-file
//! });
//!
//! let mut client = TcpStream::connect(addr).await?;
//! client.write_all(b"hello\nworld\n").await?;
//! client.shutdown().await?;
//! let mut reply = String::new();
//! client.read_to_string(&mut reply).await?;
//! assert_eq!(reply, "HELLO\nWORLD\n");
//! # Ok(())
//! # }
//! ```

pub use numa_rt_reactor::net::{
    AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, Interest, Ready, TryIoError,
};
pub use tokio::io::{
    copy, copy_bidirectional, copy_bidirectional_with_sizes, copy_buf, duplex, join, simplex,
    split, AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncSeek, AsyncSeekExt,
    AsyncWrite, AsyncWriteExt, BufReader, BufStream, BufWriter, Chain, DuplexStream, Error,
    ErrorKind, Join, Lines, ReadBuf, ReadHalf, Result, SeekFrom, SimplexStream, Split, Take,
    WriteHalf,
};

mod budgeted;
pub use budgeted::{empty, repeat, sink, Empty, Repeat, Sink};

pub(crate) mod stdio;
pub use stdio::{stderr, stdin, stdout, Stderr, Stdin, Stdout};

/// tokio's path for [`AsyncFd`] and its guards (`tokio::io::unix`).
pub mod unix {
    pub use numa_rt_reactor::net::{
        AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, AsyncFdRegisterError, AsyncFdTryNewError,
        TryIoError,
    };
}
