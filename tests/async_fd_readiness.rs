//! `AsyncFd` readiness as tokio defines it: a new registration is ready for
//! what the poller reports (a socket is writable, not readable), a cleared
//! readiness waits for the next edge, `try_io` on the `AsyncFd` never waits,
//! `clear_ready_matching` clears part of a guard, every waiting task gets a
//! guard even when another cleared the readiness first, priority and error
//! readiness, registration errors that hand the object back, and waits that
//! fail once the runtime is gone.
//!
//! "Not ready" is seen by polling a wait once and getting `Pending`, never
//! by sleeping; every body runs under a generous `timeout`.

use std::fs::File;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use numa_rt::io::unix::AsyncFd;
use numa_rt::io::{Interest, Ready};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

fn run<F: Future<Output = ()>>(f: F) {
    rt().block_on(async { timeout(GUARD, f).await.expect("the test body timed out") });
}

/// A nonblocking connected pair of Unix stream sockets.
fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

fn register<T: AsRawFd>(inner: T) -> AsyncFd<T> {
    // SAFETY: every object registered here owns its descriptor and keeps
    // it, open and the same, for as long as the AsyncFd lives.
    unsafe { AsyncFd::register(inner) }.unwrap()
}

/// Whether `f` is still pending after one poll (its waker is then stored).
async fn pending<F: Future>(f: F) -> bool {
    futures::poll!(pin!(f)).is_pending()
}

#[test]
fn a_new_socket_is_writable_and_not_readable() {
    run(async {
        let (a, _b) = pair();
        let fd = register(a);
        let mut guard = fd.writable().await.unwrap();
        assert_eq!(guard.ready(), Ready::WRITABLE, "writable, as epoll reports");
        guard.clear_ready();
        assert!(pending(fd.readable()).await, "nothing was written");
        assert!(
            pending(fd.writable()).await,
            "the writable edge was cleared"
        );
    });
}

#[test]
fn a_cleared_readiness_waits_for_the_next_edge() {
    run(async {
        let (a, mut b) = pair();
        let fd = register(a);
        b.write_all(b"1").unwrap();
        let mut guard = fd.readable().await.unwrap();
        assert!(guard.ready().is_readable());
        fd.get_ref().read_exact(&mut [0]).unwrap();
        // Kept until cleared: the reactor has not seen `WouldBlock`.
        fd.readable().await.unwrap().retain_ready();
        guard.clear_ready();
        assert_eq!(guard.ready(), Ready::EMPTY);
        let mut wait = pin!(fd.readable());
        assert!(futures::poll!(wait.as_mut()).is_pending(), "cleared");
        b.write_all(b"2").unwrap();
        let guard = wait.await.unwrap();
        assert!(guard.ready().is_readable(), "the next edge");
    });
}

#[test]
fn try_io_on_the_async_fd_never_waits() {
    run(async {
        let (a, mut b) = pair();
        let mut fd = register(a);
        let mut called = false;
        let r = fd.try_io(Interest::READABLE, |_| {
            called = true;
            Ok(())
        });
        assert!(!called, "not readable: the closure is not called");
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WouldBlock);

        b.write_all(b"x").unwrap();
        drop(fd.readable().await.unwrap()); // dropping the guard keeps it
        let n = fd
            .try_io_mut(Interest::READABLE, |s| s.read(&mut [0; 8]))
            .unwrap();
        assert_eq!(n, 1);
        // The closure's `WouldBlock` clears the readiness it ran on.
        let r = fd.try_io(Interest::READABLE, |mut s| s.read(&mut [0; 8]));
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let mut called = false;
        let _ = fd.try_io(Interest::READABLE, |_| {
            called = true;
            Ok(())
        });
        assert!(!called, "cleared by the WouldBlock");
    });
}

#[test]
fn async_io_runs_until_the_operation_does_not_block() {
    run(async {
        let (a, mut b) = pair();
        let mut fd = register(a);
        let reader = async {
            let mut buf = [0; 8];
            let n = fd
                .async_io_mut(Interest::READABLE, |s| s.read(&mut buf))
                .await
                .unwrap();
            buf[..n].to_vec()
        };
        {
            let mut reader = pin!(reader);
            assert!(futures::poll!(reader.as_mut()).is_pending());
            b.write_all(b"hi").unwrap();
            assert_eq!(reader.await, b"hi");
        }
        let n = fd
            .async_io(Interest::WRITABLE, |mut s| s.write(b"back"))
            .await
            .unwrap();
        assert_eq!(n, 4);
    });
}

#[test]
fn clear_ready_matching_clears_only_what_it_names() {
    run(async {
        let (a, mut b) = pair();
        let mut fd = register(a);
        drop(fd.writable().await.unwrap());
        b.write_all(b"x").unwrap();
        drop(fd.readable().await.unwrap());
        {
            let mut guard = fd
                .ready(Interest::READABLE | Interest::WRITABLE)
                .await
                .unwrap();
            assert_eq!(guard.ready(), Ready::READABLE | Ready::WRITABLE);
            guard.clear_ready_matching(Ready::READABLE);
            assert_eq!(guard.ready(), Ready::WRITABLE);
        }
        assert!(pending(fd.readable()).await, "read readiness cleared");
        let mut guard = fd.writable_mut().await.unwrap();
        assert_eq!(guard.ready(), Ready::WRITABLE, "write readiness kept");
        guard.clear_ready_matching(Ready::WRITABLE);
        assert_eq!(guard.ready(), Ready::EMPTY);
        drop(guard);
        assert!(pending(fd.writable()).await);
    });
}

/// Each waiter clears the readiness as soon as it has its guard; the
/// others, woken by the same event, still get theirs (as in tokio).
#[test]
fn every_waiter_gets_a_guard_even_after_another_cleared_it() {
    const N: usize = 8;
    run(async {
        let (a, mut b) = pair();
        let fd = Arc::new(register(a));
        let waiting = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..N)
            .map(|_| {
                let (fd, waiting) = (fd.clone(), waiting.clone());
                numa_rt::spawn(async move {
                    let mut wait = pin!(fd.readable());
                    if futures::poll!(wait.as_mut()).is_pending() {
                        waiting.fetch_add(1, SeqCst);
                    }
                    wait.await.unwrap().clear_ready();
                })
            })
            .collect();
        while waiting.load(SeqCst) < N {
            numa_rt::task::yield_now().await;
        }
        b.write_all(b"x").unwrap();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// `poll_read_ready` keeps one waker (the latest caller's), and write
/// readiness keeps its own.
#[test]
fn poll_functions_keep_the_last_waker_per_direction() {
    run(async {
        let (a, mut b) = pair();
        let fd = register(a);
        drop(fd.writable().await.unwrap());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(fd.poll_read_ready(&mut cx).is_pending());
        let mut read = pin!(std::future::poll_fn(|cx| fd
            .poll_read_ready(cx)
            .map_ok(|_| ())));
        assert!(futures::poll!(read.as_mut()).is_pending());
        b.write_all(b"x").unwrap();
        read.await.unwrap();
        match fd.poll_write_ready(&mut cx) {
            Poll::Ready(Ok(g)) => assert!(g.ready().is_writable()),
            other => panic!("still writable: {other:?}"),
        }
    });
}

#[test]
fn priority_readiness_on_out_of_band_data() {
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_nonblocking(true).unwrap();
        // SAFETY: the stream owns its descriptor for the AsyncFd's life.
        let client =
            unsafe { AsyncFd::register_with_interest(client, Interest::PRIORITY) }.unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut wait = pin!(client.ready(Interest::PRIORITY));
        assert!(
            futures::poll!(wait.as_mut()).is_pending(),
            "no urgent data yet"
        );
        // SAFETY: sends one byte from a live buffer on an open socket.
        let n = unsafe { libc::send(server.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
        assert_eq!(n, 1, "send(MSG_OOB): {}", io::Error::last_os_error());
        let guard = wait.await.unwrap();
        assert!(guard.ready().is_priority());
        assert!(
            !guard.ready().is_writable(),
            "only the interest waited for shows"
        );
    });
}

#[test]
fn error_readiness_on_a_refused_udp_send() {
    run(async {
        // A port that was just free: the send draws ICMP port unreachable,
        // which the connected socket reports as a pending error (EPOLLERR).
        let closed = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        socket.connect(closed).unwrap();
        let fd = register(socket);
        drop(fd.writable().await.unwrap());
        assert!(pending(fd.ready(Interest::ERROR)).await, "no error yet");
        fd.get_ref().send(b"anyone?").unwrap();
        let guard = fd.ready(Interest::ERROR).await.unwrap();
        assert_eq!(guard.ready(), Ready::ERROR);
        let e = fd.get_ref().recv(&mut [0; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    });
}

#[test]
fn a_refused_registration_hands_the_object_back() {
    run(async {
        let file = File::open("Cargo.toml").unwrap();
        let raw = file.as_raw_fd();
        // SAFETY: the file owns its descriptor (and gets it back below).
        let err = unsafe { AsyncFd::register(file) }.unwrap_err();
        assert!(err.to_string().contains("not permitted"), "EPERM: {err}");
        let (file, cause) = err.into_parts();
        assert_eq!(file.as_raw_fd(), raw, "the same object, still open");
        assert_eq!(cause.raw_os_error(), Some(libc::EPERM));

        let (file, _) = AsyncFd::try_new(file).unwrap_err().into_parts();
        let err = AsyncFd::try_with_interest(file, Interest::READABLE).unwrap_err();
        let as_io: io::Error = err.into();
        assert_eq!(as_io.raw_os_error(), Some(libc::EPERM));
    });
}

fn current_thread() -> numa_rt::Runtime {
    numa_rt::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn waits_fail_once_the_runtime_is_gone() {
    let rt = current_thread();
    let (a, _b) = pair();
    let fd = {
        let _enter = rt.enter();
        register(a)
    };
    let mut write_guard = rt.block_on(fd.writable()).unwrap();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut pending_read = Box::pin(fd.readable());
    assert!(pending_read.as_mut().poll(&mut cx).is_pending());
    drop(rt);

    let is_shutdown = |e: io::Error| {
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert!(e.to_string().contains("shut down"), "{e}");
    };
    is_shutdown(futures::executor::block_on(pending_read).unwrap_err());
    is_shutdown(futures::executor::block_on(fd.readable()).unwrap_err());
    is_shutdown(futures::executor::block_on(fd.writable()).unwrap_err());
    match fd.poll_read_ready(&mut cx) {
        Poll::Ready(Err(e)) => is_shutdown(e),
        other => panic!("expected the shutdown error: {other:?}"),
    }
    let r = fd.try_io(Interest::WRITABLE, |_| Ok(()));
    is_shutdown(r.unwrap_err());
    // A guard taken before still clears without harm.
    write_guard.clear_ready();
}

#[test]
fn interest_and_ready_vocabulary() {
    let rw = Interest::READABLE | Interest::WRITABLE;
    assert!(rw.is_readable() && rw.is_writable() && !rw.is_error() && !rw.is_priority());
    assert_eq!(rw.remove(Interest::WRITABLE), Some(Interest::READABLE));
    assert_eq!(Interest::ERROR.remove(Interest::ERROR), None);
    assert!(Interest::PRIORITY.is_priority() && Interest::ERROR.is_error());
    assert_eq!(format!("{rw:?}"), "READABLE | WRITABLE");
    assert_eq!(
        format!("{:?}", Interest::ERROR | Interest::PRIORITY),
        "PRIORITY | ERROR"
    );

    let r = Ready::READABLE | Ready::PRIORITY | Ready::ERROR;
    assert!(r.is_readable() && r.is_priority() && r.is_error() && !r.is_writable());
    assert_eq!(r - Ready::READABLE, Ready::PRIORITY | Ready::ERROR);
    assert_eq!(r & Ready::ERROR, Ready::ERROR);
    assert_eq!(Ready::ALL - Ready::ALL, Ready::EMPTY);
    assert!(
        Ready::READ_CLOSED.is_readable(),
        "a closed direction reads as ready"
    );
    assert!(format!("{:?}", Ready::ERROR).contains("is_error: true"));
}

/// numa_rt's own sockets take every interest in `ready` and `try_io` too.
#[test]
fn a_socket_waits_for_error_readiness_too() {
    run(async {
        let closed = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let socket = numa_rt::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.connect(closed).await.unwrap();
        socket.writable().await.unwrap();
        assert!(pending(socket.ready(Interest::ERROR)).await, "no error yet");
        socket.send(b"anyone?").await.unwrap();
        let ready = socket.ready(Interest::ERROR).await.unwrap();
        assert_eq!(ready, Ready::ERROR);
        let mut called = false;
        let _ = socket.try_io(Interest::ERROR, || {
            called = true;
            Ok(())
        });
        assert!(called, "error readiness lets try_io run");
        let e = socket.recv(&mut [0; 8]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    });
}
