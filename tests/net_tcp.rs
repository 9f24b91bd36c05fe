//! TCP through the real runtime (`numa_rt::net`): many concurrent echo
//! connections, half-close, reset, and waiters that lose their socket or
//! their runtime.
//!
//! No test sleeps to synchronise or asserts a duration: ordering comes from
//! the data itself, from a "first `Pending`" signal, or from flags; every
//! test body runs under a generous `timeout` so a lost wake-up fails instead
//! of hanging.

mod support;
use support::{notify_pending, GUARD};

use std::io::{ErrorKind, Read};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt::time::timeout;

/// Sets SO_LINGER to 0 so that closing the socket sends a RST.
fn set_linger_zero(fd: std::os::fd::RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a valid linger struct of the given size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "setsockopt(SO_LINGER): {}",
        std::io::Error::last_os_error()
    );
}

/// 200 connections × 10 round trips of varying sizes, with one server task
/// per connection (spawned by the accept loop) and one client task per
/// connection, on two P's.
#[numa_rt::test(max_procs = 2)]
async fn echo_with_many_concurrent_connections() {
    const CONNS: usize = 200;
    const ROUNDS: usize = 10;
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = numa_rt::spawn(async move {
            let mut handlers = Vec::with_capacity(CONNS);
            for _ in 0..CONNS {
                let (mut s, peer) = listener.accept().await.unwrap();
                assert_eq!(s.peer_addr().unwrap(), peer);
                handlers.push(numa_rt::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut total = 0usize;
                    loop {
                        let n = s.read(&mut buf).await.unwrap();
                        if n == 0 {
                            break;
                        }
                        s.write_all(&buf[..n]).await.unwrap();
                        total += n;
                    }
                    s.close().await.unwrap();
                    total
                }));
            }
            let mut total = 0;
            for h in handlers {
                total += h.await.unwrap();
            }
            total
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                numa_rt::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    assert_eq!(s.peer_addr().unwrap(), addr);
                    let mut sent = 0;
                    for round in 0..ROUNDS {
                        let len = 1 + (i * 31 + round * 977) % 4096;
                        let msg: Vec<u8> = (0..len).map(|j| (i + round + j) as u8).collect();
                        s.write_all(&msg).await.unwrap();
                        let mut back = vec![0u8; len];
                        s.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg, "connection {i} round {round}");
                        sent += len;
                    }
                    s.close().await.unwrap();
                    let mut rest = Vec::new();
                    s.read_to_end(&mut rest).await.unwrap();
                    assert!(rest.is_empty());
                    sent
                })
            })
            .collect();
        let mut sent = 0;
        for c in clients {
            sent += c.await.unwrap();
        }
        assert_eq!(server.await.unwrap(), sent, "the server echoed every byte");
    })
    .await
    .expect("echo test stalled");
}

/// `shutdown(Write)`: the peer reads end-of-file, and can still write back,
/// which the half-closed side still reads.
#[numa_rt::test(max_procs = 2)]
async fn half_close() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = numa_rt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap(); // ends at the client's FIN
            assert_eq!(got, b"request");
            let mut buf = [0u8; 8];
            assert_eq!(s.read(&mut buf).await.unwrap(), 0, "EOF is sticky");
            s.write_all(b"reply after your FIN").await.unwrap();
            s.shutdown_std(Shutdown::Write).unwrap();
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"request").await.unwrap();
        c.shutdown_std(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"reply after your FIN");
        server.await.unwrap();

        // The same through futures-io's `close` and an owned write half.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = numa_rt::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let (mut r, mut w) = s.into_split();
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            w.write_all(&got).await.unwrap();
            drop(w); // dropping the owned write half sends our FIN
            let mut buf = [0u8; 1];
            assert_eq!(r.read(&mut buf).await.unwrap(), 0);
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"echo me").await.unwrap();
        c.close().await.unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"echo me");
        server.await.unwrap();
    })
    .await
    .expect("half-close test stalled");
}

/// A peer that closes with SO_LINGER 0 sends RST: a reader that was already
/// waiting is woken with `ConnectionReset`, and so is a later read.
#[numa_rt::test(max_procs = 2)]
async fn reset_surfaces_as_connection_reset() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();

        // 1. The reader is already waiting when the RST arrives.
        let std_client = std::net::TcpStream::connect(addr).unwrap();
        set_linger_zero(std::os::fd::AsRawFd::as_raw_fd(&std_client));
        let client = TcpStream::from_std(std_client).unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (waiting_tx, waiting_rx) = futures::channel::oneshot::channel::<()>();
        let reader = numa_rt::spawn(notify_pending(
            async move {
                let mut buf = [0u8; 16];
                let r = server.read(&mut buf).await;
                (r.map_err(|e| e.kind()), server)
            },
            move || {
                let _ = waiting_tx.send(());
            },
        ));
        waiting_rx.await.unwrap();
        drop(client); // RST
        let (r, mut server) = reader.await.unwrap();
        assert_eq!(r, Err(ErrorKind::ConnectionReset));
        // Writing to a reset connection fails too (EPIPE or ECONNRESET).
        let mut failed = false;
        for _ in 0..16 {
            if server.write_all(&[0u8; 1024]).await.is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "writes to a reset connection fail");

        // 2. The RST arrives before the first read.
        let std_client = std::net::TcpStream::connect(addr).unwrap();
        set_linger_zero(std::os::fd::AsRawFd::as_raw_fd(&std_client));
        let (mut server, _) = listener.accept().await.unwrap();
        drop(TcpStream::from_std(std_client).unwrap());
        let mut buf = [0u8; 16];
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    })
    .await
    .expect("reset test stalled");
}

/// One task waits on a read; another task drops the peer, which still had
/// unread data, so the kernel resets the connection: the waiting task gets
/// an error instead of hanging.
#[numa_rt::test(max_procs = 2)]
async fn dropping_the_peer_wakes_a_waiting_reader_with_an_error() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut a = TcpStream::connect(addr).await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        a.write_all(b"never read").await.unwrap(); // sits unread in b's buffer
        let (waiting_tx, waiting_rx) = futures::channel::oneshot::channel::<()>();
        let reader = numa_rt::spawn(notify_pending(
            async move {
                let mut buf = [0u8; 16];
                a.read(&mut buf).await.map_err(|e| e.kind())
            },
            move || {
                let _ = waiting_tx.send(());
            },
        ));
        let dropper = numa_rt::spawn(async move {
            waiting_rx.await.unwrap();
            drop(b); // close with unread data → RST
        });
        dropper.await.unwrap();
        assert_eq!(reader.await.unwrap(), Err(ErrorKind::ConnectionReset));
    })
    .await
    .expect("drop-while-waiting test stalled");
}

/// A task waits on the read half; another task drops the peer's write half:
/// the reader sees end-of-file (no error, no hang) and the peer's read half
/// still works.
#[numa_rt::test(max_procs = 2)]
async fn dropping_the_peers_write_half_ends_a_waiting_read() {
    timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        let (mut a_read, mut a_write) = a.into_split();
        let (mut b_read, b_write) = b.into_split();
        let (waiting_tx, waiting_rx) = futures::channel::oneshot::channel::<()>();
        let reader = numa_rt::spawn(notify_pending(
            async move {
                let mut got = Vec::new();
                a_read.read_to_end(&mut got).await.map(|_| got)
            },
            move || {
                let _ = waiting_tx.send(());
            },
        ));
        numa_rt::spawn(async move {
            waiting_rx.await.unwrap();
            drop(b_write);
        })
        .await
        .unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), b"", "EOF, not an error");
        a_write.write_all(b"still open this way").await.unwrap();
        drop(a_write);
        let mut got = Vec::new();
        b_read.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"still open this way");
    })
    .await
    .expect("write-half test stalled");
}

/// A socket registered with a runtime, waited on from a thread outside it
/// (driven by `futures::executor::block_on`): dropping the runtime wakes
/// that waiter with an error.
#[test]
fn dropping_the_runtime_fails_a_waiter_outside_it() {
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    let (a, b) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut a = TcpStream::connect(addr).await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        // Register `a` for reading with this runtime's reactor.
        let mut buf = [0u8; 1];
        assert!(futures::poll!(a.read(&mut buf)).is_pending());
        (a, b)
    });
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut a = a;
        let mut buf = [0u8; 16];
        futures::executor::block_on(notify_pending(a.read(&mut buf), move || {
            waiting_tx.send(()).unwrap()
        }))
        .map_err(|e| e.to_string())
    });
    waiting_rx.recv().unwrap();
    drop(rt);
    let r = waiter.join().unwrap();
    let err = r.expect_err("the waiter gets an error once the runtime is gone");
    assert!(err.contains("shut down"), "{err}");
    drop(b);
}

/// Dropping the runtime drops a task that is waiting on a read (its future,
/// and so its socket, is dropped; nothing hangs).
#[test]
fn dropping_the_runtime_drops_a_task_waiting_on_a_read() {
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let guard = SetOnDrop(dropped.clone());
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    let _task = rt.spawn(notify_pending(
        async move {
            let _guard = guard;
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut buf = [0u8; 16];
            let _ = s.read(&mut buf).await; // nobody writes to this socket
            std::future::pending::<()>().await;
        },
        move || waiting_tx.send(()).unwrap(),
    ));
    let (mut peer, _) = std_listener.accept().unwrap();
    waiting_rx.recv().unwrap();
    drop(rt);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the waiting task's future was dropped"
    );
    // Its socket was closed with it: the peer reads end-of-file.
    peer.set_read_timeout(Some(GUARD)).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(peer.read(&mut buf).unwrap(), 0);
}
