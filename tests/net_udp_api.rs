//! `UdpSocket`'s tokio API: the `poll_*` forms over `ReadBuf` (the sender's
//! address out), peeking at the sender, the `BufMut` receives, readiness
//! polls, `async_io`, and the socket options. Every test body runs under a
//! generous `timeout` so a lost wake-up fails instead of hanging; nothing
//! sleeps to synchronise.

use std::future::{poll_fn, Future};
use std::io::ErrorKind;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::task::Poll;
use std::time::Duration;

use numa_rt::io::{Interest, ReadBuf};
use numa_rt::net::UdpSocket;
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

async fn pair() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    (a, b)
}

/// `poll_recv_from` fills the unfilled part of a `ReadBuf` (one over
/// uninitialised memory here) and gives the sender; `poll_peek_from` and
/// `poll_peek` leave the datagram queued; `poll_recv` takes it.
#[numa_rt::test(max_procs = 2)]
async fn poll_forms_fill_a_read_buf_and_give_the_sender() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let a_addr = a.local_addr().unwrap();
        b.connect(a_addr).await.unwrap();
        a.send_to(b"hello", b.local_addr().unwrap()).await.unwrap();

        let mut mem = [MaybeUninit::<u8>::uninit(); 64];
        let mut buf = ReadBuf::uninit(&mut mem);
        let from = poll_fn(|cx| b.poll_peek_from(cx, &mut buf)).await.unwrap();
        assert_eq!((from, buf.filled()), (a_addr, &b"hello"[..]));

        let mut mem = [0u8; 64];
        let mut buf = ReadBuf::new(&mut mem);
        buf.put_slice(b">");
        poll_fn(|cx| b.poll_peek(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b">hello", "appended after what was filled");

        let mut buf = ReadBuf::new(&mut mem);
        poll_fn(|cx| b.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"hello");
        assert_eq!(
            b.try_recv(&mut [0; 8]).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "the datagram was taken"
        );

        a.send_to(b"again", b.local_addr().unwrap()).await.unwrap();
        let mut mem = [MaybeUninit::<u8>::uninit(); 64];
        let mut buf = ReadBuf::uninit(&mut mem);
        let from = poll_fn(|cx| b.poll_recv_from(cx, &mut buf)).await.unwrap();
        assert_eq!((from, buf.filled()), (a_addr, &b"again"[..]));
    })
    .await
    .unwrap();
}

/// A datagram longer than the room left in the `ReadBuf` is cut to it; the
/// `ReadBuf` never grows past its capacity.
#[numa_rt::test(max_procs = 2)]
async fn a_long_datagram_is_cut_to_the_read_buf() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        a.send_to(&[7u8; 100], b.local_addr().unwrap())
            .await
            .unwrap();
        let mut mem = [MaybeUninit::<u8>::uninit(); 10];
        let mut buf = ReadBuf::uninit(&mut mem);
        buf.put_slice(&[1, 2]);
        let from = poll_fn(|cx| b.poll_recv_from(cx, &mut buf)).await.unwrap();
        assert_eq!(from, a.local_addr().unwrap());
        assert_eq!(buf.filled(), &[1, 2, 7, 7, 7, 7, 7, 7, 7, 7]);
        assert_eq!(buf.remaining(), 0);
    })
    .await
    .unwrap();
}

/// `peek_sender`, `poll_peek_sender` and `try_peek_sender` name the sender
/// of the next datagram without taking it; `try_peek_sender` on an empty
/// queue is `WouldBlock`.
#[numa_rt::test(max_procs = 2)]
async fn peek_sender_leaves_the_datagram() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let a_addr = a.local_addr().unwrap();
        // Nothing queued: the readiness `try_` checks is cleared by the
        // `WouldBlock` (after at most one syscall).
        for _ in 0..2 {
            match b.try_peek_sender() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => panic!("expected WouldBlock, got {r:?}"),
            }
        }
        a.send_to(b"x", b.local_addr().unwrap()).await.unwrap();
        assert_eq!(b.peek_sender().await.unwrap(), a_addr);
        assert_eq!(poll_fn(|cx| b.poll_peek_sender(cx)).await.unwrap(), a_addr);
        assert_eq!(b.try_peek_sender().unwrap(), a_addr);
        let mut buf = [0; 4];
        assert_eq!(b.recv_from(&mut buf).await.unwrap(), (1, a_addr));
    })
    .await
    .unwrap();
}

/// The `BufMut` receives append to a `Vec`'s spare capacity and advance it.
#[numa_rt::test(max_procs = 2)]
async fn recv_buf_family_appends_to_a_vec() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let a_addr = a.local_addr().unwrap();
        let b_addr = b.local_addr().unwrap();
        b.connect(a_addr).await.unwrap();

        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(b"<");
        a.send_to(b"one", b_addr).await.unwrap();
        assert_eq!(b.recv_buf(&mut v).await.unwrap(), 3);
        assert_eq!(v, b"<one");

        a.send_to(b"two", b_addr).await.unwrap();
        assert_eq!(b.recv_buf_from(&mut v).await.unwrap(), (3, a_addr));
        assert_eq!(v, b"<onetwo");

        a.send_to(b"three", b_addr).await.unwrap();
        b.readable().await.unwrap();
        let n = loop {
            match b.try_recv_buf(&mut v) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => b.readable().await.unwrap(),
                r => break r.unwrap(),
            }
        };
        assert_eq!((n, &v[..]), (5, &b"<onetwothree"[..]));

        a.send_to(b"four", b_addr).await.unwrap();
        let (n, from) = loop {
            match b.try_recv_buf_from(&mut v) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => b.readable().await.unwrap(),
                r => break r.unwrap(),
            }
        };
        assert_eq!((n, from), (4, a_addr));
        assert_eq!(v, b"<onetwothreefour");

        // An empty Vec gets room of its own (`BufMut` grows it).
        let mut empty = Vec::new();
        a.send_to(b"five", b_addr).await.unwrap();
        assert_eq!(b.recv_buf(&mut empty).await.unwrap(), 4);
        assert_eq!(empty, b"five");
    })
    .await
    .unwrap();
}

/// `poll_send_ready` is ready on a fresh socket; `poll_recv_ready` waits
/// for a datagram; then the `try_` forms go through.
#[numa_rt::test(max_procs = 2)]
async fn send_and_recv_readiness_polls() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let b_addr = b.local_addr().unwrap();
        poll_fn(|cx| a.poll_send_ready(cx)).await.unwrap();
        let sent = loop {
            match a.try_send_to(b"ready", b_addr) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    poll_fn(|cx| a.poll_send_ready(cx)).await.unwrap()
                }
                r => break r.unwrap(),
            }
        };
        assert_eq!(sent, 5);
        let mut buf = [0; 16];
        let (n, from) = loop {
            poll_fn(|cx| b.poll_recv_ready(cx)).await.unwrap();
            match b.try_recv_from(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                r => break r.unwrap(),
            }
        };
        assert_eq!((&buf[..n], from), (&b"ready"[..], a.local_addr().unwrap()));
    })
    .await
    .unwrap();
}

/// `async_io` runs the caller's own syscall when the socket is ready and
/// waits again after a `WouldBlock`, until a datagram comes.
#[numa_rt::test(max_procs = 2)]
async fn async_io_retries_after_would_block() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let b_addr = b.local_addr().unwrap();
        let fd = b.as_raw_fd();
        let calls = std::cell::Cell::new(0);
        let recv = b.async_io(Interest::READABLE, || {
            calls.set(calls.get() + 1);
            let mut buf = [0u8; 16];
            // SAFETY: `buf` is valid for writes of its length for the call.
            let n =
                unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(buf[..n as usize].to_vec())
        });
        let mut recv = std::pin::pin!(recv);
        // Polled before anything is sent: the syscall finds nothing.
        assert!(poll_fn(|cx| Poll::Ready(recv.as_mut().poll(cx).is_pending())).await);
        a.send_to(b"io", b_addr).await.unwrap();
        assert_eq!(recv.await.unwrap(), b"io");
        assert!(calls.get() >= 1);
    })
    .await
    .unwrap();
}

/// The socket options read back what was set.
#[numa_rt::test(max_procs = 2)]
async fn socket_options_round_trip() {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.set_broadcast(true).unwrap();
    assert!(s.broadcast().unwrap());
    s.set_broadcast(false).unwrap();
    assert!(!s.broadcast().unwrap());

    s.set_multicast_loop_v4(false).unwrap();
    assert!(!s.multicast_loop_v4().unwrap());
    s.set_multicast_ttl_v4(7).unwrap();
    assert_eq!(s.multicast_ttl_v4().unwrap(), 7);

    s.set_ttl(33).unwrap();
    assert_eq!(s.ttl().unwrap(), 33);

    // IPTOS_LOWDELAY: settable without privileges.
    s.set_tos_v4(0x10).unwrap();
    assert_eq!(s.tos_v4().unwrap(), 0x10);

    assert!(s.take_error().unwrap().is_none());

    // The IPv6 ones, where the machine has IPv6 loopback.
    if let Ok(s6) = UdpSocket::bind("[::1]:0").await {
        s6.set_multicast_loop_v6(false).unwrap();
        assert!(!s6.multicast_loop_v6().unwrap());
        s6.set_tclass_v6(0x10).unwrap();
        assert_eq!(s6.tclass_v6().unwrap(), 0x10);
    }
}

/// Joining and leaving an IPv4 multicast group go through to the kernel:
/// a group that is not multicast is refused with the OS's error, not a
/// panic, and leaving a group never joined fails the same way.
#[numa_rt::test(max_procs = 2)]
async fn multicast_membership_errors_are_the_kernels() {
    let s = UdpSocket::bind("0.0.0.0:0").await.unwrap();
    let not_multicast = Ipv4Addr::new(10, 1, 2, 3);
    assert!(s
        .join_multicast_v4(not_multicast, Ipv4Addr::UNSPECIFIED)
        .is_err());
    let group = Ipv4Addr::new(239, 255, 42, 99);
    // Whether a join succeeds depends on the machine's multicast routes;
    // when it does, leaving works once and then fails.
    if s.join_multicast_v4(group, Ipv4Addr::LOCALHOST).is_ok() {
        s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST).unwrap();
        assert!(s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST).is_err());
    }
}

/// `send_to` resolves a host name; the datagram comes from the socket's
/// own address.
#[numa_rt::test(max_procs = 2)]
async fn send_to_a_name_and_receive_from() {
    timeout(GUARD, async {
        let (a, b) = pair().await;
        let port = b.local_addr().unwrap().port();
        a.send_to(b"name", ("localhost", port)).await.unwrap();
        let mut buf = [0; 8];
        let (n, from): (usize, SocketAddr) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"name"[..], a.local_addr().unwrap()));
    })
    .await
    .unwrap();
}
