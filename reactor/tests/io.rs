//! Sockets on the reactor, driven by the single-threaded harness.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{block_on, count_waker, setup};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::stream::{FuturesUnordered, StreamExt};
use futures_io::{AsyncRead, AsyncWrite};
use numa_rt_reactor::net::{
    TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream,
};
use numa_rt_reactor::{context, time};

fn temp_path(name: &str) -> std::path::PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "numa_rt_{}_{}_{}.sock",
        std::process::id(),
        name,
        n
    ))
}

async fn echo<S>(s: S)
where
    S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin,
{
    let (mut r, mut w) = s.split();
    futures::io::copy(&mut r, &mut w).await.expect("echo copy");
    w.close().await.expect("close");
}

#[test]
fn tcp_echo_many_connections() {
    const N: usize = 200;
    let (reactor, mut d, _g) = setup(2);
    block_on(&mut d[0], async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = async {
            let mut handlers = FuturesUnordered::new();
            for _ in 0..N {
                let (s, peer) = listener.accept().await.unwrap();
                assert!(context::take_accepted(), "accept sets the root-task flag");
                assert_eq!(s.peer_addr().unwrap(), peer);
                handlers.push(echo(s));
            }
            while handlers.next().await.is_some() {}
        };
        let clients = futures::future::join_all((0..N).map(|i| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            assert!(s.nodelay().unwrap());
            let msg: Vec<u8> = (0..4096).map(|j| (i + j) as u8).collect();
            s.write_all(&msg).await.unwrap();
            s.close().await.unwrap(); // half-close: the server sees EOF
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, msg);
        }));
        futures::join!(server, clients);
    });
    assert_eq!(
        reactor.registered_sources(),
        0,
        "every socket deregistered on drop"
    );
}

#[test]
fn tcp_split_halves_and_vectored_write() {
    let (_r, mut d, _g) = setup(1);
    block_on(&mut d[0], async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (mut r, mut w) = server.into_split();
        let (mut cr, mut cw) = client.into_split();
        let bufs = [
            std::io::IoSlice::new(b"hello "),
            std::io::IoSlice::new(b"world"),
        ];
        let n =
            futures::future::poll_fn(|cx| Pin::new(&mut cw).poll_write_vectored(cx, &bufs)).await;
        assert_eq!(n.unwrap(), 11);
        let mut got = [0u8; 11];
        r.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello world");
        w.write_all(b"pong").await.unwrap();
        let mut pong = [0u8; 4];
        cr.read_exact(&mut pong).await.unwrap();
        assert_eq!(&pong, b"pong");
        drop(cw); // dropping an owned write half shuts writing down
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        let server = r.reunite(w).expect("same stream");
        assert!(server.into_std().is_ok());
        assert!(cr
            .reunite(TcpStream::connect(addr).await.unwrap().into_split().1)
            .is_err());
    });
}

#[test]
fn tcp_connect_refused_is_an_error() {
    let (_r, mut d, _g) = setup(1);
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }; // closed again: nothing listens there now
    let err = block_on(&mut d[0], TcpStream::connect(addr)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn tcp_reset_surfaces_as_connection_reset() {
    let (_r, mut d, _g) = setup(1);
    block_on(&mut d[0], async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket fd and a valid linger struct of the given size.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&client),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(client); // SO_LINGER 0: close sends RST
        let mut buf = [0u8; 16];
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    });
}

#[test]
fn peer_close_wakes_a_waiting_reader_with_eof() {
    let (_r, mut d, _g) = setup(1);
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    let poll = Pin::new(&mut a).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(poll.is_pending());
    drop(b);
    for _ in 0..100 {
        if count.0.load(Ordering::SeqCst) > 0 {
            break;
        }
        d[0].park(Some(Duration::from_secs(1)));
    }
    assert!(
        count.0.load(Ordering::SeqCst) > 0,
        "the waiting reader was woken"
    );
    let poll = Pin::new(&mut a).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(matches!(poll, Poll::Ready(Ok(0))), "{poll:?}");
}

#[test]
fn dropping_a_socket_wakes_its_waiters() {
    let (_r, _d, _g) = setup(1);
    let (a, _b) = UnixStream::pair().unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    let poll = Pin::new(&mut &a).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(poll.is_pending());
    drop(a);
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the waiter learns the socket is gone"
    );
}

#[test]
fn shutdown_fails_pending_io_and_later_polls() {
    let (reactor, _d, _g) = setup(1);
    let (mut a, _b) = UnixStream::pair().unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    let mut sleep = Box::pin(time::sleep(Duration::from_secs(3600)));
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(reactor.pending_timers(), 1);
    reactor.shutdown();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        2,
        "pending I/O and the pending timer woken by shutdown"
    );
    assert_eq!(reactor.pending_timers(), 0, "timers removed");
    match Pin::new(&mut a).poll_read(&mut Context::from_waker(&waker), &mut buf) {
        Poll::Ready(Err(e)) => assert!(e.to_string().contains("shut down"), "{e}"),
        other => panic!("expected a shutdown error, got {other:?}"),
    }
    // On one of the runtime's own M's (a P held), the task polling it is
    // about to be dropped: Pending, quietly.
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    // Anywhere else (a foreign thread, a block_on), a timer that can never
    // fire panics rather than leave its waiter hanging.
    let mut sleep = Box::pin(time::sleep(Duration::from_secs(3600)));
    context::set_current_p(None);
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = sleep.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    let msg = polled.expect_err("polling a timer after shutdown panics");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(msg, time::SHUTDOWN_MESSAGE);
    let mut fresh_sleep = Box::pin(time::sleep(Duration::from_secs(1)));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fresh_sleep.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    assert!(
        polled.is_err(),
        "a timer first polled after shutdown panics"
    );
    let (fresh, _) = UnixStream::pair().unwrap();
    let r = Pin::new(&mut &fresh).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(
        matches!(r, Poll::Ready(Err(_))),
        "new registrations fail after shutdown"
    );
}

use std::future::Future;

#[test]
fn udp_round_trip() {
    let (_r, mut d, _g) = setup(1);
    block_on(&mut d[0], async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        for i in 0..100u32 {
            a.send_to(&i.to_le_bytes(), ba).await.unwrap();
            let mut buf = [0u8; 8];
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!((n, from), (4, aa));
            assert_eq!(u32::from_le_bytes(buf[..4].try_into().unwrap()), i);
            b.send_to(&buf[..n], from).await.unwrap();
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!((n, from), (4, ba));
        }
        a.connect(ba).await.unwrap();
        b.connect(aa).await.unwrap();
        assert_eq!(a.peer_addr().unwrap(), ba);
        a.send(b"ping").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(b.recv(&mut buf).await.unwrap(), 4);
        assert_eq!(&buf[..4], b"ping");
    });
}

#[test]
fn unix_stream_listener_and_pair() {
    let (_r, mut d, _g) = setup(1);
    let path = temp_path("listener");
    block_on(&mut d[0], async {
        let listener = UnixListener::bind(&path).unwrap();
        let server = async {
            let (s, _) = listener.accept().await.unwrap();
            echo(s).await;
        };
        let client = async {
            let mut s = UnixStream::connect(&path).await.unwrap();
            s.write_all(b"over unix").await.unwrap();
            s.shutdown_std(Shutdown::Write).unwrap();
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, b"over unix");
        };
        futures::join!(server, client);

        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (mut ar, mut aw) = UnixStream::split(&mut a);
        aw.write_all(b"x").await.unwrap();
        let mut one = [0u8; 1];
        b.read_exact(&mut one).await.unwrap();
        b.write_all(b"y").await.unwrap();
        ar.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"y");
    });
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn unix_datagrams() {
    let (_r, mut d, _g) = setup(1);
    let path = temp_path("dgram");
    block_on(&mut d[0], async {
        let server = UnixDatagram::bind(&path).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        client.send_to(b"hello", &path).await.unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"hello");
        let (a, b) = UnixDatagram::pair().unwrap();
        a.send(b"pair").await.unwrap();
        let n = b.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"pair");
    });
    std::fs::remove_file(&path).unwrap();
}

/// The nested-epoll path: a socket registered on P 0, whose driver never
/// runs, is noticed and dispatched by P 1's park.
#[test]
fn idle_driver_handles_a_busy_drivers_readiness() {
    let (reactor, mut d, _g) = setup(2);
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    assert_eq!(reactor.registered_sources(), 1);
    b.write_all(b"hi").unwrap();
    let helper = d.pop().unwrap();
    assert_eq!(helper.index(), 1);
    let mut helper = helper;
    for _ in 0..100 {
        if count.0.load(Ordering::SeqCst) > 0 {
            break;
        }
        helper.park(Some(Duration::from_secs(1)));
    }
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "driver 1 fired driver 0's event"
    );
    let r = Pin::new(&mut a).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(matches!(r, Poll::Ready(Ok(2))), "{r:?}");
    let mut rest = [0u8; 2];
    b.set_nonblocking(true).unwrap();
    assert_eq!(b.read(&mut rest).unwrap_err().kind(), ErrorKind::WouldBlock);
}

/// The same for a due timer: P 0's timer fires from P 1's park.
#[test]
fn idle_driver_fires_a_busy_drivers_timer() {
    let (reactor, mut d, _g) = setup(2);
    context::set_current_p(Some(0));
    let (count, waker) = count_waker();
    // 200 ms, not less: a sleep first polled after its deadline is ready
    // without a timer, and a TCG guest can hold a thread off its CPU for
    // several milliseconds between two lines.
    let mut sleep = Box::pin(time::sleep(Duration::from_millis(200)));
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(d[0].next_timer(), Some(sleep.deadline().into_std()));
    let mut helper = d.pop().unwrap();
    for _ in 0..100 {
        if count.0.load(Ordering::SeqCst) > 0 {
            break;
        }
        helper.park(Some(Duration::from_secs(1)));
    }
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "driver 1 fired driver 0's timer"
    );
    assert_eq!(reactor.pending_timers(), 0);
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready());
}

#[test]
fn unpark_makes_the_next_park_return() {
    let (_r, mut d, _g) = setup(1);
    let u = d[0].unparker();
    u.unpark();
    u.unpark();
    d[0].park(None); // returns at once: the unpark was remembered
    let t = std::thread::spawn(move || u.unpark());
    d[0].park(None); // returns once the other thread unparks
    t.join().unwrap();
}

/// An always-ready read loop inside one task poll gets `Pending` (and a
/// wake-up) after the 128-operation budget.
#[test]
fn budget_makes_an_always_ready_loop_yield() {
    let (_r, _d, _g) = setup(1);
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    b.write_all(&[7u8; 1000]).unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut cx = Context::from_waker(&waker);
    let mut byte = [0u8; 1];
    let reads = numa_rt_reactor::coop::budget(|| {
        let mut n = 0;
        while let Poll::Ready(r) = Pin::new(&mut a).poll_read(&mut cx, &mut byte) {
            assert_eq!(r.unwrap(), 1);
            n += 1;
            assert!(n <= 1000, "the budget never ran out");
        }
        n
    });
    assert_eq!(reads, numa_rt_reactor::coop::BUDGET as usize);
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "the task was rescheduled"
    );
    // A past-deadline sleep counts too.
    let past = time::Instant::now() - Duration::from_secs(1);
    let ready = numa_rt_reactor::coop::budget(|| {
        (0..200)
            .filter(|_| {
                Pin::new(&mut time::sleep_until(past))
                    .poll(&mut cx)
                    .is_ready()
            })
            .count()
    });
    assert_eq!(ready, numa_rt_reactor::coop::BUDGET as usize);
}

/// Two threads, each holding one P and parking its driver: the server's
/// sockets live on P 0, the clients' on P 1, and either M may dispatch the
/// other's events. A lost wake-up shows up as a hang (the harness's guard).
#[test]
fn two_threads_two_drivers_echo() {
    const N: usize = 50;
    const ROUNDS: usize = 20;
    let (reactor, d, _g) = setup(2);
    let mut d = d.into_iter();
    let (mut d0, mut d1) = (d.next().unwrap(), d.next().unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let r0 = reactor.clone();
    let server = std::thread::spawn(move || {
        let _g = context::enter(&r0);
        context::set_current_p(Some(0));
        let listener = TcpListener::from_std(listener).unwrap();
        block_on(&mut d0, async {
            let mut handlers = FuturesUnordered::new();
            for _ in 0..N {
                let (s, _) = listener.accept().await.unwrap();
                handlers.push(echo(s));
            }
            while handlers.next().await.is_some() {}
        });
    });
    let r1 = reactor.clone();
    let client = std::thread::spawn(move || {
        let _g = context::enter(&r1);
        context::set_current_p(Some(1));
        block_on(&mut d1, async {
            futures::future::join_all((0..N).map(|i| async move {
                let mut s = TcpStream::connect(addr).await.unwrap();
                for round in 0..ROUNDS {
                    let msg = [(i + round) as u8; 64];
                    s.write_all(&msg).await.unwrap();
                    let mut back = [0u8; 64];
                    s.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, msg);
                }
            }))
            .await;
        });
    });
    client.join().unwrap();
    server.join().unwrap();
    assert_eq!(reactor.registered_sources(), 0);
}

/// P's of different nodes do not help each other while each node has a
/// parked watcher: with P 0's M parked (node 0 watches itself, nothing of
/// it is lent), driver 1 (node 1) never drains driver 0's poller; P 0's own
/// M handles its event. (With no M of node 0 parked, node 0 is lent:
/// `a_busy_node_is_watched_by_the_nearest_parked_watcher`.)
#[test]
fn helping_stays_within_a_node() {
    let reactor = numa_rt_reactor::Reactor::with_nodes(&[0, 1]).unwrap();
    let mut d1 = reactor.driver(1);
    let mut d0 = reactor.driver(0);
    let _g = context::enter(&reactor);
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    let count0 = count.clone();
    let p0 = std::thread::spawn(move || {
        for _ in 0..100 {
            if count0.0.load(Ordering::SeqCst) > 0 {
                break;
            }
            d0.park(Some(Duration::from_secs(1)));
        }
        d0
    });
    // Until P 0's M parks and takes its node back (it starts lent: no M
    // was parked when the reactor was built).
    let start = std::time::Instant::now();
    while reactor.lent_to(0).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "P 0 never parked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // P 1's M parks too, as node 1's watcher, and P 0's source gets ready.
    b.write_all(b"hi").unwrap();
    d1.park(Some(Duration::from_millis(20)));
    drop(p0.join().unwrap());
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "the owner handles it");
    assert_eq!(
        reactor.driver_stats(1).remote_helps,
        0,
        "another node's M does not help"
    );
}

/// The scenario: P 0's M is busy (inside a long poll, never parking)
/// while its connection becomes readable; P 1's idle M dispatches the event.
/// Prints the latency; asserts only who handled it.
#[test]
fn readiness_on_a_busy_p_is_handled_by_the_idle_p() {
    use std::sync::{Arc, Barrier, Mutex};
    let (reactor, d, _g) = setup(2);
    let mut d = d.into_iter();
    let (_d0, mut d1) = (d.next().unwrap(), d.next().unwrap());
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let handled_on = Arc::new(Mutex::new(None));
    struct Record(Arc<Mutex<Option<(std::thread::ThreadId, std::time::Instant)>>>);
    impl std::task::Wake for Record {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() =
                Some((std::thread::current().id(), std::time::Instant::now()));
        }
    }
    let registered = Arc::new(Barrier::new(2));
    let r0 = reactor.clone();
    let (h, reg) = (handled_on.clone(), registered.clone());
    let busy = std::thread::spawn(move || {
        let _g = context::enter(&r0);
        context::set_current_p(Some(0));
        let mut a = UnixStream::from_std(a).unwrap();
        let waker = std::task::Waker::from(Arc::new(Record(h)));
        let mut buf = [0u8; 8];
        assert!(Pin::new(&mut a)
            .poll_read(&mut Context::from_waker(&waker), &mut buf)
            .is_pending());
        reg.wait();
        // "Busy": this M neither parks nor polls its driver for 100 ms.
        std::thread::sleep(Duration::from_millis(100));
        a
    });
    registered.wait();
    let sent = std::time::Instant::now();
    b.write_all(b"ping").unwrap();
    for _ in 0..100 {
        if handled_on.lock().unwrap().is_some() {
            break;
        }
        d1.park(Some(Duration::from_secs(1)));
    }
    let (thread, at) = handled_on
        .lock()
        .unwrap()
        .expect("the event was dispatched");
    assert_eq!(
        thread,
        std::thread::current().id(),
        "dispatched by the idle P's M"
    );
    println!("busy-owner readiness latency: {:?}", at - sent);
    drop(busy.join().unwrap());
}

/// After a source moved from P 0 to P 1: its pending event is reported by
/// P 1's poller and no longer by P 0's (the waker counted by `count` fires
/// once, from P 1's poll).
fn reported_by_p1_only(d: &mut [numa_rt_reactor::Driver], count: &common::CountWaker) {
    d[0].poll_now();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        0,
        "P 0's poller still has it"
    );
    d[1].poll_now();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "P 1's poller did not report it"
    );
}

/// Two P's with no monitor thread: each on its own node, so no node has two
/// candidates for the watcher role and nothing starts the monitor, whose
/// network poll drains a poller nobody has drained for 10 ms and would hand
/// out what the source-moving tests below need to stay in P 0's poller
/// (in the 2x2 guest, a thread preempted for 10 ms between the write and
/// the move: "nobody drained a poller yet", 1 of 8 runs).
fn setup_unmonitored() -> (
    numa_rt_reactor::Reactor,
    Vec<numa_rt_reactor::Driver>,
    context::EnterGuard,
) {
    let reactor = numa_rt_reactor::Reactor::with_nodes(&[0, 1]).expect("reactor");
    let drivers = (0..2).map(|i| reactor.driver(i)).collect();
    let guard = context::enter(&reactor);
    context::set_current_p(Some(0));
    (reactor, drivers, guard)
}

/// A source follows its task: registered on P 0, then polled from P 1
/// three times in a row, it moves to P 1's poller (after two it has not),
/// and its next event arrives there and no longer on P 0. A single poll
/// from elsewhere in between does not move it back.
#[test]
fn a_source_moves_to_the_p_that_keeps_polling_it() {
    let (reactor, mut d, _g) = setup_unmonitored();
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    let mut poll = |a: &mut UnixStream| {
        let r = Pin::new(a).poll_read(&mut Context::from_waker(&waker), &mut buf);
        assert!(r.is_pending(), "{r:?}");
    };
    poll(&mut a);
    let moved = |p| reactor.driver_stats(p).sources_moved_in;
    context::set_current_p(Some(1));
    poll(&mut a);
    poll(&mut a);
    assert_eq!(
        (moved(0), moved(1)),
        (0, 0),
        "two polls from P 1 move nothing"
    );
    // Back on P 0 once: the streak starts over.
    context::set_current_p(Some(0));
    poll(&mut a);
    context::set_current_p(Some(1));
    poll(&mut a);
    poll(&mut a);
    assert_eq!(moved(1), 0, "the streak restarted after the poll from P 0");
    poll(&mut a);
    assert_eq!(
        (moved(0), moved(1)),
        (0, 1),
        "the third poll in a row moved it"
    );
    assert_eq!(reactor.registered_sources(), 1, "moved, not copied");
    b.write_all(b"hi").unwrap();
    reported_by_p1_only(&mut d, &count);
    let mut got = [0u8; 8];
    let r = Pin::new(&mut a).poll_read(&mut Context::from_waker(&waker), &mut got);
    assert!(matches!(r, Poll::Ready(Ok(2))), "{r:?}");
    // Moving back takes twice the streak: a task that keeps changing P's
    // stops dragging its socket along.
    context::set_current_p(Some(0));
    for _ in 0..5 {
        poll(&mut a);
    }
    assert_eq!(
        moved(0),
        0,
        "five polls in a row do not move it a second time"
    );
    poll(&mut a);
    assert_eq!(moved(0), 1, "the sixth does");
    // Dropping it deregisters it from where it lives now.
    drop(a);
    assert_eq!(reactor.registered_sources(), 0);
}

/// Readiness that arrives before a source moves and that its old poller
/// never handed out is not lost: the old poller's copy goes with the
/// removal, and the new poller reports it (epoll reports what is ready when
/// an fd is added).
#[test]
fn a_source_moved_while_ready_reports_on_its_new_p() {
    let (reactor, mut d, _g) = setup_unmonitored();
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    let mut poll =
        |a: &mut UnixStream| Pin::new(a).poll_read(&mut Context::from_waker(&waker), &mut buf);
    assert!(poll(&mut a).is_pending());
    // Ready now, but P 0's poller is never drained.
    b.write_all(b"x").unwrap();
    context::set_current_p(Some(1));
    for _ in 0..3 {
        assert!(poll(&mut a).is_pending(), "nobody drained a poller yet");
    }
    assert_eq!(reactor.driver_stats(1).sources_moved_in, 1);
    reported_by_p1_only(&mut d, &count);
    assert!(matches!(poll(&mut a), Poll::Ready(Ok(1))));
}

/// Parks `d` (at most ten times, a second each) until `count` has passed
/// `above`; returns the count then.
fn park_until_fired(
    d: &mut numa_rt_reactor::Driver,
    count: &common::CountWaker,
    above: usize,
) -> usize {
    for _ in 0..10 {
        if count.0.load(Ordering::SeqCst) > above {
            break;
        }
        d.park(Some(Duration::from_secs(1)));
    }
    count.0.load(Ordering::SeqCst)
}

/// One round trip of "an event on P 0's own poller wakes P 0's parked M":
/// writes a byte to `b`, parks P 0 until `a`'s waker has fired, reads the
/// byte back and leaves `a` waiting again.
fn own_event_round(
    d0: &mut numa_rt_reactor::Driver,
    a: &mut UnixStream,
    b: &mut std::os::unix::net::UnixStream,
    count: &common::CountWaker,
    waker: &std::task::Waker,
) {
    let before = count.0.load(Ordering::SeqCst);
    b.write_all(b"x").unwrap();
    assert!(
        park_until_fired(d0, count, before) > before,
        "P 0's park did not fire its own source"
    );
    let mut buf = [0u8; 8];
    let mut cx = Context::from_waker(waker);
    assert!(matches!(
        Pin::new(&mut *a).poll_read(&mut cx, &mut buf),
        Poll::Ready(Ok(1))
    ));
    assert!(Pin::new(&mut *a).poll_read(&mut cx, &mut buf).is_pending());
}

/// P 0's own due timer and an unpark from another thread both end P 0's
/// park (the calling thread holds P 0).
fn own_timer_and_unpark_reach(d0: &mut numa_rt_reactor::Driver) {
    let (tcount, twaker) = count_waker();
    // A sleep first polled after its deadline is ready at once (no timer):
    // a thread that lost its CPU for 5 ms between the two lines (the
    // 4-node guest, twice in one run) takes a fresh one.
    let registered = (0..100).find_map(|_| {
        let mut sleep = Box::pin(time::sleep(Duration::from_millis(5)));
        let pending = sleep
            .as_mut()
            .poll(&mut Context::from_waker(&twaker))
            .is_pending();
        pending.then_some(sleep)
    });
    let _sleep = registered.expect("100 sleeps of 5 ms were all due at their first poll");
    assert_eq!(
        park_until_fired(d0, &tcount, 0),
        1,
        "the timer did not fire"
    );
    let u = d0.unparker();
    let t = std::thread::spawn(move || u.unpark());
    d0.park(None); // returns once the other thread unparks
    t.join().unwrap();
}

/// Hosting: a watcher whose wake-ups keep coming from its own P's poller
/// takes the node's watch epoll into that poller (and then blocks on it:
/// one `epoll_wait` per event). While hosting it still sees, through the
/// watch, another P's socket, its own timer and its own unpark; and an M
/// that parks while the host runs takes the role and the watch back, so
/// the host's poller is watched again.
///
/// The reactor's monitor runs beside the test: whenever the test thread,
/// holding P 0 and the role, stays out of its park for a whole monitor tick
/// (likely under ThreadSanitizer, possible on a busy machine), the monitor
/// takes the watch back and P 0's next park hosts it again. So the test
/// counts give-backs that were not the monitor's: P 0's own score must
/// never give the watch back while its wake-ups keep coming from its own
/// poller.
#[test]
fn a_holder_hosts_the_watch_and_still_sees_the_whole_node() {
    let (reactor, mut d, _g) = setup(2);
    let mut d1 = d.pop().unwrap();
    let mut d0 = d.pop().unwrap();
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    let hostings = |p| reactor.driver_stats(p).watch_hostings;
    // Give-backs by the driver itself (score or role move), not the monitor.
    let own_unhostings = |p| {
        let st = reactor.driver_stats(p);
        st.watch_unhostings - st.watch_releases
    };
    for _ in 0..3 {
        own_event_round(&mut d0, &mut a, &mut b, &count, &waker);
    }
    assert_eq!(hostings(0), 0, "three own events are not yet a pattern");
    for _ in 0..3 {
        own_event_round(&mut d0, &mut a, &mut b, &count, &waker);
    }
    assert!(hostings(0) >= 1, "P 0's poller hosts the watch");
    assert_eq!(own_unhostings(0), 0, "only the monitor took the watch back");
    assert_eq!(reactor.watcher(0), Some(0));

    // Another P's socket, seen through the hosted watch.
    context::set_current_p(Some(1));
    let (c, mut e) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut c = UnixStream::from_std(c).unwrap();
    let (count1, waker1) = count_waker();
    assert!(Pin::new(&mut c)
        .poll_read(&mut Context::from_waker(&waker1), &mut buf)
        .is_pending());
    context::set_current_p(Some(0));
    // The monitor's network poll may drain P 1's poller itself if the event
    // lands while P 0 is out of its park (nobody drained P 1's poller for
    // 10 ms): then P 0 helped nobody, and the round is tried again. A
    // hosted watch that missed P 1's poller would lose every round.
    let helped = (1..=5).any(|round| {
        let helps = reactor.driver_stats(0).helps;
        e.write_all(b"y").unwrap();
        assert_eq!(
            park_until_fired(&mut d0, &count1, round - 1),
            round,
            "P 1's event was missed"
        );
        // Read on P 1, where the socket's task runs (a read from P 0 could
        // move the source to P 0's poller).
        context::set_current_p(Some(1));
        let mut cx = Context::from_waker(&waker1);
        assert!(matches!(
            Pin::new(&mut c).poll_read(&mut cx, &mut buf),
            Poll::Ready(Ok(1))
        ));
        assert!(Pin::new(&mut c).poll_read(&mut cx, &mut buf).is_pending());
        context::set_current_p(Some(0));
        reactor.driver_stats(0).helps == helps + 1
    });
    assert!(helped, "P 0 never drained P 1's poller through the watch");

    // Its own timer and its own unpark (both go through the hosted
    // poller: the timerfd directly, the eventfd through the watch). The
    // foreign event above cost two points of the score: earn them back.
    for _ in 0..3 {
        own_event_round(&mut d0, &mut a, &mut b, &count, &waker);
    }
    own_timer_and_unpark_reach(&mut d0);
    assert_eq!(
        own_unhostings(0),
        0,
        "P 0 kept hosting throughout (a foreign event must not end it)"
    );

    // P 0 "runs" (not parked); P 1 parks and takes the role: P 0's poller
    // rejoins the watch, and P 1 sees P 0's socket.
    let before = count.0.load(Ordering::SeqCst);
    d1.park(Some(Duration::from_millis(1)));
    assert_eq!(reactor.watcher(0), Some(1), "P 1 took the role");
    b.write_all(b"z").unwrap();
    assert_eq!(
        park_until_fired(&mut d1, &count, before),
        before + 1,
        "P 1 missed P 0's event after taking the role"
    );
}

/// A reactor of one P: its M hosts the watch after a few events, and keeps
/// serving its sockets, timers and unparks.
#[test]
fn a_single_p_hosts_the_watch() {
    let (reactor, mut d, _g) = setup(1);
    let mut d0 = d.pop().unwrap();
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    for _ in 0..8 {
        own_event_round(&mut d0, &mut a, &mut b, &count, &waker);
    }
    assert_eq!(reactor.driver_stats(0).watch_hostings, 1);
    own_timer_and_unpark_reach(&mut d0);
}

/// Readiness across nodes (docs/architecture.md, "Readiness across nodes"):
/// two nodes of one P each. P 0's M leaves its park (unparked for work)
/// with no other M of node 0 parked, so node 0 is lent to node 1; P 1's M,
/// parked as node 1's watcher, is woken by an event on P 0's poller and
/// drains that poller itself (the waker fires on P 1's thread). When P 0's
/// M parks again it takes its node back. (No monitor thread here: no node
/// has two P's, so nobody else drains P 0's poller.)
#[test]
fn a_busy_node_is_watched_by_the_nearest_parked_watcher() {
    let reactor = numa_rt_reactor::Reactor::with_nodes(&[0, 1]).unwrap();
    let mut d0 = reactor.driver(0);
    let mut d1 = reactor.driver(1);
    let _g = context::enter(&reactor);
    context::set_current_p(Some(0));
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = UnixStream::from_std(a).unwrap();
    let (count, waker) = count_waker();
    let mut buf = [0u8; 8];
    assert!(Pin::new(&mut a)
        .poll_read(&mut Context::from_waker(&waker), &mut buf)
        .is_pending());
    // P 1's M parks (node 1's watcher) and P 0's M is unparked for work.
    d1.park(Some(Duration::from_millis(1)));
    d0.unparker().unpark();
    d0.park(None);
    assert_eq!(reactor.lent_to(0), Some(1), "node 0 has no parked M");
    // (P 1's first park may have drained P 0's poller already: the node
    // starts lent, and a new source's first readiness is an event.)
    let helps_before = reactor.driver_stats(1).remote_helps;
    let fired_on = std::sync::Arc::new(std::sync::Mutex::new(None));
    let fired_on2 = fired_on.clone();
    let count2 = count.clone();
    let p1 = std::thread::spawn(move || {
        // P 1's M parks as node 1's watcher (its own node's lend, made as
        // it left the park above, is given back here).
        for _ in 0..10 {
            d1.park(Some(Duration::from_secs(1)));
            if count2.0.load(Ordering::SeqCst) > 0 {
                *fired_on2.lock().unwrap() = Some(std::thread::current().id());
                break;
            }
        }
        d1
    });
    b.write_all(b"x").unwrap();
    let d1 = p1.join().unwrap();
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "P 0's event was missed");
    assert!(fired_on.lock().unwrap().is_some());
    let st = reactor.driver_stats(1);
    assert_eq!(
        st.remote_helps,
        helps_before + 1,
        "P 1 drained P 0's poller: {st:?}"
    );
    // P 1's M left its park in turn: node 1 is lent to node 0 (whose M is
    // not parked either: the nearest, whose next watcher sees it).
    assert_eq!(reactor.lent_to(1), Some(0));
    // P 0's M parks again: node 0 watches itself while it is parked.
    let unpark0 = d0.unparker();
    let p0 = std::thread::spawn(move || {
        d0.park(Some(Duration::from_secs(10)));
        d0
    });
    let start = std::time::Instant::now();
    while reactor.lent_to(0).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "node 0's parked M did not take its node back"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    unpark0.unpark();
    drop(p0.join().unwrap());
    assert!(reactor.driver_stats(0).watch_lends >= 1);
    drop(d1);
}

/// One node: nothing is ever lent (no lend epoll exists, and a park or a
/// leave takes no lending step), however its M's park and leave.
#[test]
fn one_node_never_lends() {
    let (reactor, mut d, _g) = setup(2);
    for _ in 0..3 {
        for d in d.iter_mut() {
            d.unparker().unpark();
            d.park(None);
            d.park(Some(Duration::from_millis(1)));
        }
    }
    assert_eq!(reactor.lent_to(0), None);
    for p in 0..2 {
        assert_eq!(reactor.driver_stats(p).watch_lends, 0);
        assert_eq!(reactor.driver_stats(p).remote_helps, 0);
    }
}
