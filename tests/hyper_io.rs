//! The hyper adapter's `Io` (needs `--features hyper`).
#![cfg(feature = "hyper")]

use futures_io::AsyncRead;
use hyper::rt::Read as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A reader that claims to have read more bytes than it was given.
struct Liar;

impl AsyncRead for Liar {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len() + 100))
    }
}

/// A reader that fills what it is given with `x`.
struct Honest;

impl AsyncRead for Honest {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        buf.fill(b'x');
        Poll::Ready(Ok(buf.len()))
    }
}

#[test]
fn a_reader_reporting_more_than_the_buffer_is_an_error_not_undefined_behaviour() {
    let mut storage = [0u8; 16];
    let mut buf = hyper::rt::ReadBuf::new(&mut storage);
    let mut io = numa_rt::hyper::Io::new(Liar);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()) {
        Poll::Ready(Err(e)) => {
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.to_string().contains("116 bytes"), "{e}");
        }
        other => panic!("expected an InvalidData error, got {other:?}"),
    }
    assert!(buf.filled().is_empty(), "nothing was marked filled");
}

#[test]
fn an_honest_reader_fills_the_buffer() {
    let mut storage = [0u8; 16];
    let mut buf = hyper::rt::ReadBuf::new(&mut storage);
    let mut io = numa_rt::hyper::Io::new(Honest);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(matches!(
        Pin::new(&mut io).poll_read(&mut cx, buf.unfilled()),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(buf.filled(), &[b'x'; 16]);
}

/// A reader that records how much it was offered and fills `fill` of it
/// (all of it when `None`).
struct Recorder {
    offered: Vec<usize>,
    fill: Option<usize>,
}

impl AsyncRead for Recorder {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.offered.push(buf.len());
        let n = self.fill.unwrap_or(buf.len()).min(buf.len());
        buf[..n].fill(b'y');
        Poll::Ready(Ok(n))
    }
}

/// `Io` zeroes what it offers a futures-io reader, so it offers a window
/// of hyper's buffer, not all of it: the window doubles while reads fill it
/// (a big body comes in growing reads) and shrinks back after small reads
/// (a keep-alive connection's next request head).
#[test]
fn the_read_window_grows_with_full_reads_and_shrinks_with_small_ones() {
    let mut storage = vec![0u8; 64 * 1024];
    let mut io = numa_rt::hyper::Io::new(Recorder {
        offered: Vec::new(),
        fill: None,
    });
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut read = |io: &mut numa_rt::hyper::Io<Recorder>| {
        let mut buf = hyper::rt::ReadBuf::new(&mut storage);
        assert!(matches!(
            Pin::new(io).poll_read(&mut cx, buf.unfilled()),
            Poll::Ready(Ok(()))
        ));
        buf.filled().len()
    };
    let mut got = Vec::new();
    for _ in 0..8 {
        got.push(read(&mut io));
    }
    assert_eq!(
        got,
        [1024, 2048, 4096, 8192, 16384, 32768, 65536, 65536],
        "capped by what hyper offers"
    );
    io.inner_mut().fill = Some(10);
    for _ in 0..8 {
        assert_eq!(read(&mut io), 10);
    }
    let offered = &io.inner().offered[8..];
    assert_eq!(
        offered,
        [65536, 65536, 32768, 16384, 8192, 4096, 2048, 1024],
        "halved after each small read, down to the minimum"
    );
}
