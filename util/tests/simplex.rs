//! io::simplex: a bounded one-way pipe on numa_rt's cooperative budget.

use futures::task::noop_waker_ref;
use numa_rt::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use numa_rt_util::io::simplex;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_arrive_in_order_through_a_small_buffer() {
    let (mut tx, mut rx) = simplex::new(3);
    let data: Vec<u8> = (0..=255).cycle().take(10_000).collect();
    let expect = data.clone();
    let writer = numa_rt::spawn(async move {
        tx.write_all(&data).await.unwrap();
        tx.shutdown().await.unwrap();
    });
    let mut got = Vec::new();
    rx.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, expect);
    writer.await.unwrap();
}

#[numa_rt::test]
async fn closed_ends() {
    let (mut tx, rx) = simplex::new(8);
    drop(rx);
    let err = tx.write_all(b"x").await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(tx.flush().await.is_err());

    let (mut tx, mut rx) = simplex::new(8);
    tx.write_all(b"abc").await.unwrap();
    drop(tx);
    let mut rest = Vec::new();
    rx.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"abc", "buffered bytes survive the sender");
}

#[numa_rt::test]
async fn vectored_writes_fill_what_fits() {
    let (mut tx, mut rx) = simplex::new(4);
    assert!(tx.is_write_vectored());
    let bufs = [IoSlice::new(b"ab"), IoSlice::new(b""), IoSlice::new(b"cde")];
    let n = tx.write_vectored(&bufs).await.unwrap();
    assert_eq!(n, 4);
    let mut got = [0u8; 4];
    rx.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"abcd");
    assert_eq!(tx.write_vectored(&[IoSlice::new(b"")]).await.unwrap(), 0);
}

#[numa_rt::test]
async fn a_busy_loop_is_made_to_yield() {
    let (mut tx, mut rx) = simplex::new(1024);
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut yielded = false;
    for _ in 0..1000 {
        match Pin::new(&mut tx).poll_write(&mut cx, b"x") {
            Poll::Ready(r) => assert_eq!(r.unwrap(), 1),
            Poll::Pending => {
                yielded = true;
                break;
            }
        }
    }
    assert!(yielded, "128 operations per poll, then Pending");
    numa_rt::task::yield_now().await; // a fresh budget
    let mut buf = [0u8; 16];
    let mut read_buf = ReadBuf::new(&mut buf);
    assert!(Pin::new(&mut rx)
        .poll_read(&mut cx, &mut read_buf)
        .is_ready());
}

#[test]
#[should_panic(expected = "capacity must be greater than zero")]
fn zero_capacity() {
    let _ = simplex::new(0);
}
