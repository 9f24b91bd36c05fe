//! tokio's readiness API on numa_rt's sockets: `ready`, `readable`,
//! `writable`, `try_read`/`try_write` (and vectored), `peek`, and the
//! datagram `try_send`/`try_recv` family.
//!
//! "Not ready" is observed by polling a wait once and seeing `Pending`;
//! every body runs under a generous `timeout`.

use std::future::Future;
use std::io::{ErrorKind, IoSlice, IoSliceMut, Read, Write};
use std::pin::Pin;
use std::time::Duration;

use numa_rt::io::Interest;
use numa_rt::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixStream};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

/// A numa_rt stream and the std stream at its other end.
async fn tcp_pair() -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::net::TcpStream::connect(addr).unwrap();
    let (s, _) = listener.accept().await.unwrap();
    (s, peer)
}

/// Clears readiness with `drain` (a `try_` operation that must say
/// `WouldBlock`: nothing was sent) until a fresh `wait` is really pending,
/// then returns that pending wait. A wait can be ready once more right
/// after a clear: an event that arrived meanwhile (such as the first
/// writable edge after registration) moves the readiness tick on, so the
/// clear keeps the bits, as designed; the next `WouldBlock` clears them.
async fn settle<W: Future<Output = std::io::Result<()>>>(
    mut drain: impl FnMut() -> std::io::Result<()>,
    mut wait: impl FnMut() -> W,
) -> Pin<Box<W>> {
    for _ in 0..1000 {
        match drain() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            r => panic!("nothing was sent, yet the try_ operation gave {r:?}"),
        }
        let mut w = Box::pin(wait());
        if futures::poll!(w.as_mut()).is_pending() {
            return w;
        }
    }
    panic!("the wait never became pending");
}

/// Reads with `try_read` until it gives `WouldBlock`, waiting with
/// `readable()` in between; returns what was read.
async fn read_available(s: &TcpStream, want: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    for _ in 0..10_000 {
        if out.len() >= want {
            return out;
        }
        s.readable().await.unwrap();
        match s.try_read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    panic!("read loop did not finish");
}

#[test]
fn try_read_would_block_until_readable_then_reads() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (s, mut peer) = tcp_pair().await;
            // Nothing sent: WouldBlock clears the readiness every new
            // socket starts with, and the wait then waits.
            let mut buf = [0; 16];
            let wait = settle(|| s.try_read(&mut buf).map(drop), || s.readable()).await;
            peer.write_all(b"hello").unwrap();
            wait.await.unwrap();
            assert_eq!(read_available(&s, 5).await, b"hello");

            // Vectored, both ways.
            peer.write_all(b"abcdef").unwrap();
            s.readable().await.unwrap();
            let (mut x, mut y) = ([0; 2], [0; 4]);
            let mut n = 0;
            for _ in 0..1000 {
                let mut bufs = [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)];
                match s.try_read_vectored(&mut bufs) {
                    Ok(k) => {
                        n = k;
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => s.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert!(n >= 2, "read {n}");
            assert_eq!(&x, b"ab");
            s.writable().await.unwrap();
            let n = s
                .try_write_vectored(&[IoSlice::new(b"12"), IoSlice::new(b"345")])
                .unwrap();
            assert_eq!(n, 5);
            let mut got = [0; 5];
            peer.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"12345");
        })
        .await
        .unwrap();
    });
}

#[test]
fn a_full_send_buffer_makes_writable_wait_until_the_peer_reads() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (s, mut peer) = tcp_pair().await;
            let chunk = vec![7u8; 64 * 1024];
            let mut sent = 0usize;
            let mut writes = 0;
            // Write until WouldBlock, as often as it takes for the wait to
            // really be pending (see `settle`).
            let wait = settle(
                || loop {
                    writes += 1;
                    assert!(writes < 100_000, "the send buffer never filled");
                    match s.try_write(&chunk) {
                        Ok(n) => sent += n,
                        Err(e) => return Err(e),
                    }
                },
                || s.writable(),
            )
            .await;
            // The peer drains everything on a plain thread.
            let reader = std::thread::spawn(move || {
                let mut buf = vec![0; 1 << 16];
                let mut got = 0;
                while got < sent {
                    got += peer.read(&mut buf).unwrap();
                }
                got
            });
            wait.await.unwrap();
            let ready = s.ready(Interest::WRITABLE).await.unwrap();
            assert!(ready.is_writable());
            assert_eq!(reader.join().unwrap(), sent);
        })
        .await
        .unwrap();
    });
}

#[test]
fn ready_reports_the_directions_and_end_of_file() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (s, mut peer) = tcp_pair().await;
            let ready = s
                .ready(Interest::READABLE | Interest::WRITABLE)
                .await
                .unwrap();
            assert!(ready.is_writable(), "{ready:?}");
            peer.write_all(b"x").unwrap();
            drop(peer);
            assert_eq!(read_available(&s, usize::MAX).await, b"x");
            // End of file seen: reading stays ready (whether READ_CLOSED is
            // set yet depends on whether the poller has reported the FIN).
            let ready = s.ready(Interest::READABLE).await.unwrap();
            assert!(ready.is_readable(), "{ready:?}");
            assert_eq!(s.try_read(&mut [0; 4]).unwrap(), 0);
        })
        .await
        .unwrap();
    });
}

#[test]
fn peek_leaves_the_data_for_the_next_read() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (s, mut peer) = tcp_pair().await;
            peer.write_all(b"peekaboo").unwrap();
            let mut buf = [0; 4];
            let n = s.peek(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &b"peek"[..n]);
            assert_eq!(read_available(&s, 8).await, b"peekaboo");
        })
        .await
        .unwrap();
    });
}

#[test]
fn try_io_runs_a_foreign_syscall_and_clears_on_would_block() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (s, mut peer) = tcp_pair().await;
            use std::os::fd::AsRawFd;
            let fd = s.as_raw_fd();
            let recv = |buf: &mut [u8]| {
                // SAFETY: `fd` is the stream's open socket; `buf` is a live,
                // writable buffer of the given length.
                let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            };
            let mut buf = [0; 8];
            let wait = settle(
                || s.try_io(Interest::READABLE, || recv(&mut buf)).map(drop),
                || s.readable(),
            )
            .await;
            peer.write_all(b"ok").unwrap();
            wait.await.unwrap();
            let n = loop {
                match s.try_io(Interest::READABLE, || recv(&mut buf)) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => s.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(&buf[..n], b"ok");
        })
        .await
        .unwrap();
    });
}

#[test]
fn unix_streams_have_the_same_api() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (a, b) = UnixStream::pair().unwrap();
            b.writable().await.unwrap();
            assert_eq!(b.try_write(b"unix").unwrap(), 4);
            let mut buf = [0; 8];
            let n = loop {
                a.readable().await.unwrap();
                match a.try_read(&mut buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(&buf[..n], b"unix");
            let r = a
                .ready(Interest::READABLE | Interest::WRITABLE)
                .await
                .unwrap();
            assert!(r.is_writable());
        })
        .await
        .unwrap();
    });
}

#[test]
fn udp_try_send_and_try_recv() {
    rt().block_on(async {
        timeout(GUARD, async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let mut buf = [0; 16];
            let wait = settle(|| a.try_recv_from(&mut buf).map(drop), || a.readable()).await;
            b.writable().await.unwrap();
            assert_eq!(b.try_send_to(b"dgram", aa).unwrap(), 5);
            wait.await.unwrap();
            let (n, from) = loop {
                match a.try_peek_from(&mut buf) {
                    Ok(r) => break r,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((&buf[..n], from), (&b"dgram"[..], ba));
            let (n, from) = a.try_recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&b"dgram"[..], ba));

            // Connected: try_send / peek / try_recv.
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            assert_eq!(a.try_send(b"back").unwrap(), 4);
            let n = b.peek(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"back");
            let n = loop {
                match b.try_recv(&mut buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => b.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(&buf[..n], b"back");
        })
        .await
        .unwrap();
    });
}

#[test]
fn unix_datagrams_try_send_and_try_recv() {
    rt().block_on(async {
        timeout(GUARD, async {
            let (a, b) = UnixDatagram::pair().unwrap();
            let mut buf = [0; 8];
            let wait = settle(|| a.try_recv(&mut buf).map(drop), || a.readable()).await;
            b.writable().await.unwrap();
            assert_eq!(b.try_send(b"dg").unwrap(), 2);
            wait.await.unwrap();
            let n = loop {
                match a.try_recv(&mut buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.readable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(&buf[..n], b"dg");
        })
        .await
        .unwrap();
    });
}
