//! [`UdpFramed`]: a `Stream` and `Sink` of datagrams over a numa_rt
//! [`UdpSocket`], through a codec (tokio-util's `udp` module).
//!
//! ```
//! use futures::{SinkExt, StreamExt};
//! use numa_rt::net::UdpSocket;
//! use numa_rt_util::codec::LinesCodec;
//! use numa_rt_util::udp::UdpFramed;
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let a = UdpSocket::bind("127.0.0.1:0").await?;
//! let b = UdpSocket::bind("127.0.0.1:0").await?;
//! let b_addr = b.local_addr()?;
//! let mut a = UdpFramed::new(a, LinesCodec::new());
//! let mut b = UdpFramed::new(b, LinesCodec::new());
//!
//! a.send(("ping".to_string(), b_addr)).await?;
//! let (line, from) = b.next().await.unwrap()?;
//! assert_eq!(line, "ping");
//! assert_eq!(from, a.get_ref().local_addr()?);
//! # Ok(())
//! # }
//! ```

use crate::codec::{Decoder, Encoder};
use bytes::BytesMut;
use futures_core::Stream;
use futures_sink::Sink;
use numa_rt::io::ReadBuf;
use numa_rt::net::UdpSocket;
use std::borrow::Borrow;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Datagrams decoded from and encoded to a [`UdpSocket`] with a codec:
/// a `Stream` of `(frame, sender)` and a `Sink` of `(frame, destination)`.
///
/// Each datagram received is decoded with `decode_eof` until the codec
/// gives `None` (a datagram holds whole frames; what is left is dropped).
/// Each item sent is one datagram.
///
/// `T` is the socket or anything that borrows one (`Arc<UdpSocket>`,
/// `&UdpSocket`), so two `UdpFramed`s (one receiving, one sending) can
/// share a socket.
#[must_use = "sinks do nothing unless polled"]
#[derive(Debug)]
pub struct UdpFramed<C, T = UdpSocket> {
    socket: T,
    codec: C,
    rd: BytesMut,
    wr: BytesMut,
    out_addr: SocketAddr,
    flushed: bool,
    /// `rd` holds a datagram not fully decoded, from `current_addr`.
    is_readable: bool,
    current_addr: Option<SocketAddr>,
}

/// The largest UDP payload (over IPv4): a datagram never needs more.
const INITIAL_RD_CAPACITY: usize = 64 * 1024;
const INITIAL_WR_CAPACITY: usize = 8 * 1024;

// Nothing is pinned: the socket and codec are only reached through `&mut`.
impl<C, T> Unpin for UdpFramed<C, T> {}

impl<C, T> Stream for UdpFramed<C, T>
where
    T: Borrow<UdpSocket>,
    C: Decoder,
{
    type Item = Result<(C::Item, SocketAddr), C::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.is_readable {
                if let Some(frame) = this.codec.decode_eof(&mut this.rd)? {
                    let from = this.current_addr.expect("set with the datagram");
                    return Poll::Ready(Some(Ok((frame, from))));
                }
                this.is_readable = false;
                this.rd.clear();
            }
            this.rd.reserve(INITIAL_RD_CAPACITY);
            let (from, n) = {
                let mut buf = ReadBuf::uninit(this.rd.spare_capacity_mut());
                let start = buf.filled().as_ptr();
                let from = ready!(this.socket.borrow().poll_recv_from(cx, &mut buf))?;
                // The socket filled our buffer (it cannot swap in another:
                // `ReadBuf`'s API allows no such thing, but the length below
                // must be of this buffer's bytes, so check it).
                assert_eq!(start, buf.filled().as_ptr());
                (from, buf.filled().len())
            };
            // SAFETY: `rd` was empty (cleared above, or new), and the first
            // `n` bytes of its spare capacity are the `ReadBuf`'s filled
            // part, which `ReadBuf` guarantees initialized; `n` is at most
            // the spare capacity.
            unsafe { this.rd.set_len(this.rd.len() + n) };
            this.current_addr = Some(from);
            this.is_readable = true;
        }
    }
}

impl<I, C, T> Sink<(I, SocketAddr)> for UdpFramed<C, T>
where
    T: Borrow<UdpSocket>,
    C: Encoder<I>,
{
    type Error = C::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        if self.flushed {
            return Poll::Ready(Ok(()));
        }
        self.poll_flush(cx)
    }

    fn start_send(self: Pin<&mut Self>, (frame, to): (I, SocketAddr)) -> Result<(), C::Error> {
        let this = self.get_mut();
        this.codec.encode(frame, &mut this.wr)?;
        this.out_addr = to;
        this.flushed = false;
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        let this = self.get_mut();
        if this.flushed {
            return Poll::Ready(Ok(()));
        }
        let sent = ready!(this
            .socket
            .borrow()
            .poll_send_to(cx, &this.wr, this.out_addr))?;
        let whole = sent == this.wr.len();
        this.wr.clear();
        this.flushed = true;
        if whole {
            Poll::Ready(Ok(()))
        } else {
            let e = io::Error::other("failed to write entire datagram to socket");
            Poll::Ready(Err(e.into()))
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.poll_flush(cx)
    }
}

impl<C, T> UdpFramed<C, T>
where
    T: Borrow<UdpSocket>,
{
    /// Frames `socket` with `codec`.
    pub fn new(socket: T, codec: C) -> UdpFramed<C, T> {
        UdpFramed {
            socket,
            codec,
            rd: BytesMut::with_capacity(INITIAL_RD_CAPACITY),
            wr: BytesMut::with_capacity(INITIAL_WR_CAPACITY),
            out_addr: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            flushed: true,
            is_readable: false,
            current_addr: None,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &T {
        &self.socket
    }

    /// The socket, mutably (reading or writing it directly interleaves
    /// with the frames).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.socket
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }

    /// The codec, mutably.
    pub fn codec_mut(&mut self) -> &mut C {
        &mut self.codec
    }

    /// The read buffer: the undecoded rest of the current datagram.
    pub fn read_buffer(&self) -> &BytesMut {
        &self.rd
    }

    /// The read buffer, mutably.
    pub fn read_buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.rd
    }

    /// The socket back (buffered data is dropped).
    pub fn into_inner(self) -> T {
        self.socket
    }
}
