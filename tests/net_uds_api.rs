//! tokio's API on Unix-domain sockets (and the stream methods TCP shares):
//! `UnixDatagram`'s `try_`/`poll_*`/`recv_buf` forms, abstract socket names,
//! `bind_addr`/`connect_addr`, `peer_cred`, `try_read_buf`, and `peek` on
//! TCP read halves. Every test body runs under a generous `timeout` so a
//! lost wake-up fails instead of hanging; nothing sleeps to synchronise.

use std::future::poll_fn;
use std::io::ErrorKind;
use std::mem::MaybeUninit;
use std::os::unix::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use numa_rt::io::{AsyncReadExt, AsyncWriteExt, Interest, ReadBuf};
use numa_rt::net::{TcpListener, TcpStream, UnixDatagram, UnixListener, UnixStream};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

/// A fresh socket path, removed when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> TempPath {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "numa_rt_uds_api_{}_{name}_{n}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        TempPath(p)
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(target_os = "linux")]
/// An abstract name unique to this process and call (a leading NUL).
fn abstract_name(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("\0numa_rt_uds_api_{}_{name}_{n}", std::process::id())
}

/// Retries a `try_` operation after `WouldBlock`, waiting with `wait`.
macro_rules! until_ready {
    ($op:expr, $wait:expr) => {
        loop {
            match $op {
                Err(e) if e.kind() == ErrorKind::WouldBlock => $wait.await.unwrap(),
                r => break r.unwrap(),
            }
        }
    };
}

/// `try_send_to` and `try_recv_from` between bound sockets: the sender's
/// path comes back; an unbound sender is unnamed.
#[numa_rt::test(max_procs = 2)]
async fn datagram_try_send_to_and_try_recv_from() {
    timeout(GUARD, async {
        let (pa, pb) = (TempPath::new("a"), TempPath::new("b"));
        let a = UnixDatagram::bind(&pa.0).unwrap();
        let b = UnixDatagram::bind(&pb.0).unwrap();
        assert_eq!(until_ready!(a.try_send_to(b"hi", &pb.0), a.writable()), 2);
        let mut buf = [0; 8];
        let (n, from) = until_ready!(b.try_recv_from(&mut buf), b.readable());
        assert_eq!(&buf[..n], b"hi");
        assert_eq!(from.as_pathname(), Some(pa.0.as_path()));

        let unbound = UnixDatagram::unbound().unwrap();
        unbound.send_to(b"anon", &pb.0).await.unwrap();
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"anon");
        assert!(from.is_unnamed(), "{from:?}");
    })
    .await
    .unwrap();
}

/// The `poll_*` forms: `poll_send_to`/`poll_recv_from` over a `ReadBuf` of
/// uninitialised memory (the sender's address out), `poll_send`/`poll_recv`
/// on a connected pair, and the readiness polls.
#[numa_rt::test(max_procs = 2)]
async fn datagram_poll_forms() {
    timeout(GUARD, async {
        let (pa, pb) = (TempPath::new("pa"), TempPath::new("pb"));
        let a = UnixDatagram::bind(&pa.0).unwrap();
        let b = UnixDatagram::bind(&pb.0).unwrap();
        let n = poll_fn(|cx| a.poll_send_to(cx, b"poll", &pb.0))
            .await
            .unwrap();
        assert_eq!(n, 4);
        let mut mem = [MaybeUninit::<u8>::uninit(); 16];
        let mut buf = ReadBuf::uninit(&mut mem);
        let from = poll_fn(|cx| b.poll_recv_from(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"poll");
        assert_eq!(from.as_pathname(), Some(pa.0.as_path()));

        let (x, y) = UnixDatagram::pair().unwrap();
        poll_fn(|cx| x.poll_send_ready(cx)).await.unwrap();
        assert_eq!(poll_fn(|cx| x.poll_send(cx, b"pair")).await.unwrap(), 4);
        poll_fn(|cx| y.poll_recv_ready(cx)).await.unwrap();
        let mut mem = [0u8; 16];
        let mut buf = ReadBuf::new(&mut mem);
        poll_fn(|cx| y.poll_recv(cx, &mut buf)).await.unwrap();
        assert_eq!(buf.filled(), b"pair");
    })
    .await
    .unwrap();
}

/// The `BufMut` receives append to a `Vec`.
#[numa_rt::test(max_procs = 2)]
async fn datagram_recv_buf_family() {
    timeout(GUARD, async {
        let pb = TempPath::new("rb");
        let b = UnixDatagram::bind(&pb.0).unwrap();
        let (pa, a) = {
            let p = TempPath::new("ra");
            let a = UnixDatagram::bind(&p.0).unwrap();
            (p, a)
        };
        let mut v = Vec::with_capacity(32);
        a.send_to(b"one", &pb.0).await.unwrap();
        let (n, from) = b.recv_buf_from(&mut v).await.unwrap();
        assert_eq!((n, from.as_pathname()), (3, Some(pa.0.as_path())));
        a.send_to(b"two", &pb.0).await.unwrap();
        let (n, _) = until_ready!(b.try_recv_buf_from(&mut v), b.readable());
        assert_eq!(n, 3);
        assert_eq!(v, b"onetwo");

        let (x, y) = UnixDatagram::pair().unwrap();
        x.send(b"three").await.unwrap();
        assert_eq!(y.recv_buf(&mut v).await.unwrap(), 5);
        x.send(b"four").await.unwrap();
        assert_eq!(until_ready!(y.try_recv_buf(&mut v), y.readable()), 4);
        assert_eq!(v, b"onetwothreefour");
    })
    .await
    .unwrap();
}

/// A stream listener and a datagram socket on abstract names (a leading
/// NUL byte): `bind`, `connect` and `send_to` take them; the addresses read
/// back as abstract, and nothing appears in the filesystem.
#[cfg(target_os = "linux")]
#[numa_rt::test(max_procs = 2)]
async fn abstract_names() {
    use std::os::linux::net::SocketAddrExt;
    timeout(GUARD, async {
        let name = abstract_name("listener");
        let listener = UnixListener::bind(&name).unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(addr.as_abstract_name(), Some(&name.as_bytes()[1..]));
        let (accepted, client) = tokio_join(listener.accept(), UnixStream::connect(&name)).await;
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();
        assert_eq!(
            client.peer_addr().unwrap().as_abstract_name(),
            Some(&name.as_bytes()[1..])
        );
        client.write_all(b"abstract").await.unwrap();
        let mut buf = [0; 8];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"abstract");

        let dname = abstract_name("dgram");
        let d = UnixDatagram::bind(&dname).unwrap();
        let sender_name = abstract_name("sender");
        let sender = UnixDatagram::bind(&sender_name).unwrap();
        sender.send_to(b"to abstract", &dname).await.unwrap();
        let mut buf = [0; 16];
        let (n, from) = d.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"to abstract");
        assert_eq!(from.as_abstract_name(), Some(&sender_name.as_bytes()[1..]));
        sender.connect(&dname).unwrap();
        sender.send(b"connected").await.unwrap();
        let n = d.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"connected");
    })
    .await
    .unwrap();
}

/// Awaits both futures concurrently (accept and connect).
async fn tokio_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    numa_rt::join!(a, b)
}

/// `bind_addr` and `connect_addr` take std's `SocketAddr`, a pathname one
/// and an abstract one.
#[cfg(target_os = "linux")]
#[numa_rt::test(max_procs = 2)]
async fn bind_addr_and_connect_addr() {
    use std::os::linux::net::SocketAddrExt;
    timeout(GUARD, async {
        let p = TempPath::new("addr");
        for addr in [
            SocketAddr::from_pathname(&p.0).unwrap(),
            SocketAddr::from_abstract_name(&abstract_name("addr").as_bytes()[1..]).unwrap(),
        ] {
            let listener = UnixListener::bind_addr(&addr).unwrap();
            let (accepted, client) =
                tokio_join(listener.accept(), UnixStream::connect_addr(&addr)).await;
            let (mut server, _) = accepted.unwrap();
            let mut client = client.unwrap();
            server.write_all(b"ok").await.unwrap();
            let mut buf = [0; 2];
            client.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ok");
        }
        let d = UnixDatagram::bind_addr(&SocketAddr::from_pathname(&TempPath::new("d").0).unwrap());
        assert!(d.is_ok());
    })
    .await
    .unwrap();
}

/// A path with a NUL byte inside (not leading) is refused with an error.
#[numa_rt::test(max_procs = 2)]
async fn an_interior_nul_is_an_error() {
    assert!(UnixListener::bind("/tmp/a\0b").is_err());
    assert!(UnixStream::connect("/tmp/a\0b").await.is_err());
    assert!(UnixDatagram::bind("/tmp/a\0b").is_err());
}

/// `peer_cred` names this process at both ends of a pair and of a
/// listener's connection.
#[cfg(target_os = "linux")]
#[numa_rt::test(max_procs = 2)]
async fn peer_cred_is_this_process() {
    timeout(GUARD, async {
        // SAFETY: these calls only read the process's own ids.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let pid = std::process::id() as libc::pid_t;
        let (a, b) = UnixStream::pair().unwrap();
        let p = TempPath::new("cred");
        let listener = UnixListener::bind(&p.0).unwrap();
        assert!(listener.take_error().unwrap().is_none());
        let (accepted, client) = tokio_join(listener.accept(), UnixStream::connect(&p.0)).await;
        let (server, _) = accepted.unwrap();
        assert!(server.take_error().unwrap().is_none());
        for s in [a, b, server, client.unwrap()] {
            let c: numa_rt::net::unix::UCred = s.peer_cred().unwrap();
            assert_eq!((c.uid(), c.gid(), c.pid()), (uid, gid, Some(pid)));
        }
        // tokio's names for the address and id types.
        let addr: numa_rt::net::unix::SocketAddr = listener.local_addr().unwrap();
        assert_eq!(addr.as_pathname(), Some(p.0.as_path()));
        let _: (
            numa_rt::net::unix::uid_t,
            numa_rt::net::unix::gid_t,
            numa_rt::net::unix::pid_t,
        ) = (uid, gid, pid);
    })
    .await
    .unwrap();
}

/// `try_read_buf` appends what is there to a `Vec` on TCP and Unix
/// streams: `WouldBlock` when nothing is, 0 at end of file.
#[numa_rt::test(max_procs = 2)]
async fn try_read_buf_on_streams() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (accepted, client) = tokio_join(listener.accept(), TcpStream::connect(addr)).await;
        let (mut tcp_server, _) = accepted.unwrap();
        let tcp_client = client.unwrap();
        let (mut unix_a, unix_b) = UnixStream::pair().unwrap();

        tcp_server.write_all(b"tcp bytes").await.unwrap();
        unix_a.write_all(b"unix bytes").await.unwrap();
        let mut v = Vec::with_capacity(4);
        while v.len() < 9 {
            until_ready!(tcp_client.try_read_buf(&mut v), tcp_client.readable());
        }
        assert_eq!(v, b"tcp bytes");
        let mut v = Vec::new();
        while v.len() < 10 {
            until_ready!(unix_b.try_read_buf(&mut v), unix_b.readable());
        }
        assert_eq!(v, b"unix bytes");

        drop(tcp_server);
        unix_a.shutdown().await.unwrap();
        assert_eq!(
            until_ready!(tcp_client.try_read_buf(&mut v), tcp_client.readable()),
            0
        );
        assert_eq!(
            until_ready!(unix_b.try_read_buf(&mut v), unix_b.readable()),
            0
        );
    })
    .await
    .unwrap();
}

/// `peek` on a TCP `ReadHalf` and `OwnedReadHalf` leaves the bytes for the
/// next read; `poll_peek` fills a `ReadBuf` and gives the count.
#[numa_rt::test(max_procs = 2)]
async fn peek_on_tcp_read_halves() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (accepted, client) = tokio_join(listener.accept(), TcpStream::connect(addr)).await;
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();

        server.write_all(b"peek").await.unwrap();
        {
            let (mut r, _w) = client.split();
            let mut buf = [0; 4];
            assert_eq!(r.peek(&mut buf).await.unwrap(), 4);
            assert_eq!(&buf, b"peek");
            let mut mem = [MaybeUninit::<u8>::uninit(); 8];
            let mut rb = ReadBuf::uninit(&mut mem);
            let n = poll_fn(|cx| r.poll_peek(cx, &mut rb)).await.unwrap();
            assert_eq!((n, rb.filled()), (4, &b"peek"[..]));
            let mut buf = [0; 4];
            r.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"peek");
        }

        let (mut r, mut w) = client.into_split();
        server.write_all(b"owned").await.unwrap();
        let mut buf = [0; 5];
        assert_eq!(r.peek(&mut buf).await.unwrap(), 5);
        assert_eq!(&buf, b"owned");
        assert_eq!(r.peer_addr().unwrap(), addr);
        assert_eq!(w.local_addr().unwrap(), r.local_addr().unwrap());
        let mut buf = [0; 5];
        r.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"owned");

        // The halves' readiness and `try_` methods.
        w.writable().await.unwrap();
        assert_eq!(until_ready!(w.try_write(b"back"), w.writable()), 4);
        w.flush().await.unwrap();
        let mut buf = [0; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"back");
        server.write_all(b"r").await.unwrap();
        let ready = r.ready(Interest::READABLE).await.unwrap();
        assert!(ready.is_readable());
        let mut v = Vec::new();
        until_ready!(r.try_read_buf(&mut v), r.readable());
        assert_eq!(v, b"r");
    })
    .await
    .unwrap();
}

/// `async_io` on a stream: the caller's own `recv(2)` runs once the
/// stream is readable.
#[numa_rt::test(max_procs = 2)]
async fn stream_async_io() {
    use std::os::fd::AsRawFd;
    timeout(GUARD, async {
        let (mut a, b) = UnixStream::pair().unwrap();
        let fd = b.as_raw_fd();
        a.write_all(b"io").await.unwrap();
        let got = b
            .async_io(Interest::READABLE, || {
                let mut buf = [0u8; 8];
                // SAFETY: `buf` is valid for writes of its length.
                let n = unsafe {
                    libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT)
                };
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(buf[..n as usize].to_vec())
            })
            .await
            .unwrap();
        assert_eq!(got, b"io");
    })
    .await
    .unwrap();
}

/// `ready`/`writable` take none of the task's coop budget (as tokio's):
/// a task that awaits `writable()` far more often than the budget (128)
/// in one poll still finds the socket ready every time.
#[numa_rt::test(max_procs = 2)]
async fn readiness_waits_take_no_coop_budget() {
    use std::future::Future;
    use std::task::Poll;
    timeout(GUARD, async {
        let (a, _b) = UnixStream::pair().unwrap();
        a.writable().await.unwrap();
        poll_fn(|cx| {
            for i in 0..1000 {
                let mut w = std::pin::pin!(a.writable());
                assert!(w.as_mut().poll(cx).is_ready(), "pending at wait {i}");
                let mut r = std::pin::pin!(a.ready(Interest::WRITABLE));
                assert!(r.as_mut().poll(cx).is_ready(), "pending at ready {i}");
            }
            Poll::Ready(())
        })
        .await;
    })
    .await
    .unwrap();
}

/// `UnixSocket`: a bound stream socket becomes a listener, another bound
/// one connects to it (the server sees its path), a datagram one becomes a
/// `UnixDatagram`; the wrong conversion for the socket's type is an error.
#[numa_rt::test(max_procs = 2)]
async fn unix_socket_listen_connect_and_datagram() {
    use numa_rt::net::UnixSocket;
    timeout(GUARD, async {
        let (lp, cp) = (TempPath::new("us_listen"), TempPath::new("us_client"));
        let listener = {
            let s = UnixSocket::new_stream().unwrap();
            s.bind(&lp.0).unwrap();
            s.listen(16).unwrap()
        };
        let connect = {
            let s = UnixSocket::new_stream().unwrap();
            s.bind(&cp.0).unwrap();
            s.connect(&lp.0)
        };
        let (accepted, client) = tokio_join(listener.accept(), connect).await;
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();
        assert_eq!(
            server.peer_addr().unwrap().as_pathname(),
            Some(cp.0.as_path())
        );
        client.write_all(b"via UnixSocket").await.unwrap();
        drop(client);
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"via UnixSocket");

        let (dp, ep) = (TempPath::new("us_d"), TempPath::new("us_e"));
        let d = {
            let s = UnixSocket::new_datagram().unwrap();
            s.bind(&dp.0).unwrap();
            s.datagram().unwrap()
        };
        let e = {
            let s = UnixSocket::new_datagram().unwrap();
            s.bind(&ep.0).unwrap();
            s.datagram().unwrap()
        };
        e.connect(&dp.0).unwrap();
        e.send(b"dgram").await.unwrap();
        let mut buf = [0; 8];
        let (n, from) = d.recv_from(&mut buf).await.unwrap();
        assert_eq!(
            (&buf[..n], from.as_pathname()),
            (&b"dgram"[..], Some(ep.0.as_path()))
        );

        let err = UnixSocket::new_datagram().unwrap().listen(1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "listen cannot be called on a datagram socket"
        );
        let err = UnixSocket::new_datagram()
            .unwrap()
            .connect(&lp.0)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "connect cannot be called on a datagram socket"
        );
        let err = UnixSocket::new_stream().unwrap().datagram().unwrap_err();
        assert_eq!(
            err.to_string(),
            "datagram cannot be called on a stream socket"
        );
        // Connecting to nothing fails with the OS's error.
        let gone = TempPath::new("us_gone");
        assert!(UnixSocket::new_stream()
            .unwrap()
            .connect(&gone.0)
            .await
            .is_err());
    })
    .await
    .unwrap();
}
