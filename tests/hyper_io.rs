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
