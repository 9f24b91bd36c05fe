//! The reactor: numa_rt against tokio, both with 2 worker threads, one
//! criterion group per workload:
//!
//! - `tcp_echo_latency`: one connection, 64-byte ping-pong with an echo task
//!   (time per round trip).
//! - `tcp_echo_throughput`: 8 connections, each writing 64 KiB and reading
//!   it back per iteration, concurrently (bytes echoed per second).
//! - `timer_churn/register_cancel_1000`: one task creates 1,000 one-second
//!   sleeps, polls each once (registering it) and drops it.
//! - `timer_churn/sleep_1ms_x1000`: 1,000 tasks each sleep 1 ms; time until
//!   all are done.
//! - `busy_owner_latency`: the issue's scenario. A task registers a
//!   connection on its worker, spawns the reader task and then keeps its
//!   worker busy for 100 ms in a synchronous loop, while the other worker is
//!   idle; a peer thread writes the reply as soon as the busy loop starts.
//!   Measured: from the peer's write to the reply having been read (the
//!   reported time is that latency, not the 100 ms). `*_reader_waiting`:
//!   the reader was already waiting on the socket (spawned from outside)
//!   before a separate task made a worker busy.
//!
//! numa_rt's sockets are futures-io, tokio's use tokio's own io traits.
//! Each runtime is built for its bench function and dropped after it, so the
//! two never compete for the cores.
//!
//! ```text
//! cargo bench --bench reactor -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench reactor -- busy_owner
//! ```

use std::future::Future;
use std::io::Write as _;
use std::pin::{pin, Pin};
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

const WORKERS: usize = 2;
const PING: usize = 64;
const CONNS: usize = 8;
const CHUNK: usize = 64 * 1024;
const TIMERS: usize = 1000;
const BUSY: Duration = Duration::from_millis(100);

fn numa_rt_rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(WORKERS).build().unwrap()
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .unwrap()
}

/// Calls `on_pending` the first time the wrapped future returns `Pending`.
struct NotifyPending<F, N: FnOnce()> {
    fut: Pin<Box<F>>,
    on_pending: Option<N>,
}

impl<F: Future, N: FnOnce() + Unpin> Future for NotifyPending<F, N> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let r = self.fut.as_mut().poll(cx);
        if r.is_pending() {
            if let Some(n) = self.on_pending.take() {
                n();
            }
        }
        r
    }
}

fn notify_pending<F: Future, N: FnOnce() + Unpin>(fut: F, on_pending: N) -> NotifyPending<F, N> {
    NotifyPending {
        fut: Box::pin(fut),
        on_pending: Some(on_pending),
    }
}

/// A connected loopback pair of std streams: (ours, the peer's).
fn std_pair(listener: &std::net::TcpListener) -> (std::net::TcpStream, std::net::TcpStream) {
    let ours = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (peer, _) = listener.accept().unwrap();
    ours.set_nodelay(true).unwrap();
    peer.set_nodelay(true).unwrap();
    (ours, peer)
}

/// The peer of one busy-owner round: waits for "go", writes the reply and
/// returns when it wrote it.
fn peer_thread(
    mut peer: std::net::TcpStream,
    go: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<Instant> {
    std::thread::spawn(move || {
        go.recv().unwrap();
        let t = Instant::now();
        peer.write_all(b"pong").unwrap();
        // Keep the connection open until the reader has read.
        let mut buf = [0u8; 1];
        let _ = std::io::Read::read(&mut peer, &mut buf);
        t
    })
}

fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

mod numa {
    use super::*;
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    use numa_rt::net::{TcpListener, TcpStream};

    async fn echo_server(listener: TcpListener) {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            s.set_nodelay(true).unwrap();
            numa_rt::spawn(async move {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    }

    /// An echo server on `rt` and `n` connected clients.
    pub fn setup(rt: &numa_rt::Runtime, n: usize) -> Vec<TcpStream> {
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            numa_rt::spawn(echo_server(listener));
            let mut v = Vec::new();
            for _ in 0..n {
                let s = TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                v.push(s);
            }
            v
        })
    }

    pub fn latency(rt: &numa_rt::Runtime, conn: &mut Option<TcpStream>, iters: u64) -> Duration {
        let mut s = conn.take().unwrap();
        let (s, d) = rt
            .block_on(rt.spawn(async move {
                let msg = [7u8; PING];
                let mut back = [0u8; PING];
                let start = Instant::now();
                for _ in 0..iters {
                    s.write_all(&msg).await.unwrap();
                    s.read_exact(&mut back).await.unwrap();
                }
                (s, start.elapsed())
            }))
            .unwrap();
        *conn = Some(s);
        d
    }

    pub fn throughput(rt: &numa_rt::Runtime, conns: &mut Vec<TcpStream>, iters: u64) -> Duration {
        let taken = std::mem::take(conns);
        let (back, d) = rt
            .block_on(rt.spawn(async move {
                let start = Instant::now();
                let tasks: Vec<_> = taken
                    .into_iter()
                    .map(|mut s| {
                        numa_rt::spawn(async move {
                            let data = vec![1u8; CHUNK];
                            let mut back = vec![0u8; CHUNK];
                            for _ in 0..iters {
                                let (mut r, mut w) = TcpStream::split(&mut s);
                                let (a, b) =
                                    futures::join!(w.write_all(&data), r.read_exact(&mut back));
                                a.unwrap();
                                b.unwrap();
                            }
                            s
                        })
                    })
                    .collect();
                let mut back = Vec::new();
                for t in tasks {
                    back.push(t.await.unwrap());
                }
                (back, start.elapsed())
            }))
            .unwrap();
        *conns = back;
        d
    }

    /// Each sleep is polled with a fresh cooperative budget: in one task
    /// poll the budget runs out after 128 polls, and every later sleep
    /// would return `Pending` without registering.
    pub fn register_cancel(rt: &numa_rt::Runtime, iters: u64) -> Duration {
        rt.block_on(rt.spawn(std::future::poll_fn(move |cx| {
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..TIMERS {
                    let mut s = numa_rt::time::sleep(Duration::from_secs(1));
                    let r = numa_rt_reactor::coop::budget(|| Pin::new(&mut s).poll(cx));
                    assert!(r.is_pending());
                }
            }
            Poll::Ready(start.elapsed())
        })))
        .unwrap()
    }

    pub fn sleep_many(rt: &numa_rt::Runtime, iters: u64) -> Duration {
        rt.block_on(rt.spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                let tasks: Vec<_> = (0..TIMERS)
                    .map(|_| numa_rt::spawn(numa_rt::time::sleep(Duration::from_millis(1))))
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            }
            start.elapsed()
        }))
        .unwrap()
    }

    /// One busy-owner round: the latency from the peer's write to the reply
    /// having been read.
    // The owner task returns the reader's handle on purpose: the caller awaits
    // it once the owner's busy loop is over.
    #[allow(clippy::async_yields_async)]
    pub fn busy_owner(rt: &numa_rt::Runtime, listener: &std::net::TcpListener) -> Duration {
        let (ours, peer) = std_pair(listener);
        let (go, go_rx) = mpsc::channel();
        let peer = peer_thread(peer, go_rx);
        let owner = rt.spawn(async move {
            let mut s = TcpStream::from_std(ours).unwrap();
            let mut buf = [0u8; 4];
            // First poll: the stream registers with this worker's P.
            assert!(futures::poll!(s.read(&mut buf)).is_pending());
            let reader = numa_rt::spawn(async move {
                s.read_exact(&mut buf).await.unwrap();
                let t = Instant::now();
                drop(s);
                t
            });
            go.send(()).unwrap();
            spin_for(BUSY);
            reader
        });
        let read_at = rt.block_on(async { owner.await.unwrap().await.unwrap() });
        let wrote_at = peer.join().unwrap();
        read_at.saturating_duration_since(wrote_at)
    }

    /// The reader waits first; then a separate task makes a worker busy.
    pub fn reader_waiting(rt: &numa_rt::Runtime, listener: &std::net::TcpListener) -> Duration {
        let (ours, peer) = std_pair(listener);
        let (go, go_rx) = mpsc::channel();
        let peer = peer_thread(peer, go_rx);
        let (waiting_tx, waiting_rx) = mpsc::channel();
        let reader = rt.spawn(notify_pending(
            async move {
                let mut s = TcpStream::from_std(ours).unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                let t = Instant::now();
                drop(s);
                t
            },
            move || waiting_tx.send(()).unwrap(),
        ));
        waiting_rx.recv().unwrap();
        let busy = rt.spawn(async move {
            go.send(()).unwrap();
            spin_for(BUSY);
        });
        let read_at = rt.block_on(async {
            let t = reader.await.unwrap();
            busy.await.unwrap();
            t
        });
        let wrote_at = peer.join().unwrap();
        read_at.saturating_duration_since(wrote_at)
    }
}

mod tok {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn echo_server(listener: TcpListener) {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    }

    pub fn setup(rt: &tokio::runtime::Runtime, n: usize) -> Vec<TcpStream> {
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(echo_server(listener));
            let mut v = Vec::new();
            for _ in 0..n {
                let s = TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                v.push(s);
            }
            v
        })
    }

    pub fn latency(
        rt: &tokio::runtime::Runtime,
        conn: &mut Option<TcpStream>,
        iters: u64,
    ) -> Duration {
        let mut s = conn.take().unwrap();
        let (s, d) = rt
            .block_on(rt.spawn(async move {
                let msg = [7u8; PING];
                let mut back = [0u8; PING];
                let start = Instant::now();
                for _ in 0..iters {
                    s.write_all(&msg).await.unwrap();
                    s.read_exact(&mut back).await.unwrap();
                }
                (s, start.elapsed())
            }))
            .unwrap();
        *conn = Some(s);
        d
    }

    pub fn throughput(
        rt: &tokio::runtime::Runtime,
        conns: &mut Vec<TcpStream>,
        iters: u64,
    ) -> Duration {
        let taken = std::mem::take(conns);
        let (back, d) = rt
            .block_on(rt.spawn(async move {
                let start = Instant::now();
                let tasks: Vec<_> = taken
                    .into_iter()
                    .map(|mut s| {
                        tokio::spawn(async move {
                            let data = vec![1u8; CHUNK];
                            let mut back = vec![0u8; CHUNK];
                            for _ in 0..iters {
                                let (mut r, mut w) = s.split();
                                let (a, b) =
                                    tokio::join!(w.write_all(&data), r.read_exact(&mut back));
                                a.unwrap();
                                b.unwrap();
                            }
                            s
                        })
                    })
                    .collect();
                let mut back = Vec::new();
                for t in tasks {
                    back.push(t.await.unwrap());
                }
                (back, start.elapsed())
            }))
            .unwrap();
        *conns = back;
        d
    }

    /// Without tokio's cooperative budget (see numa_rt's).
    pub fn register_cancel(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
        rt.block_on(rt.spawn(tokio::task::unconstrained(async move {
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..TIMERS {
                    let mut s = pin!(tokio::time::sleep(Duration::from_secs(1)));
                    assert!(futures::poll!(s.as_mut()).is_pending());
                }
            }
            start.elapsed()
        })))
        .unwrap()
    }

    pub fn sleep_many(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
        rt.block_on(rt.spawn(async move {
            let start = Instant::now();
            for _ in 0..iters {
                let tasks: Vec<_> = (0..TIMERS)
                    .map(|_| tokio::spawn(tokio::time::sleep(Duration::from_millis(1))))
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            }
            start.elapsed()
        }))
        .unwrap()
    }

    /// The same shape as numa_rt's: the busy task owns the connection and
    /// spawns the reader, then spins. (tokio puts the reader in the busy
    /// worker's LIFO slot, which other workers do not steal.)
    // The owner task returns the reader's handle on purpose: the caller awaits
    // it once the owner's busy loop is over.
    #[allow(clippy::async_yields_async)]
    pub fn busy_owner(rt: &tokio::runtime::Runtime, listener: &std::net::TcpListener) -> Duration {
        let (ours, peer) = std_pair(listener);
        ours.set_nonblocking(true).unwrap();
        let (go, go_rx) = mpsc::channel();
        let peer = peer_thread(peer, go_rx);
        let owner = rt.spawn(async move {
            let mut s = TcpStream::from_std(ours).unwrap();
            let mut buf = [0u8; 4];
            {
                // Like numa_rt's round: poll a read once before spawning.
                let read = pin!(s.read(&mut buf));
                assert!(futures::poll!(read).is_pending());
            }
            let reader = tokio::spawn(async move {
                s.read_exact(&mut buf).await.unwrap();
                let t = Instant::now();
                drop(s);
                t
            });
            go.send(()).unwrap();
            spin_for(BUSY);
            reader
        });
        let read_at = rt.block_on(async { owner.await.unwrap().await.unwrap() });
        let wrote_at = peer.join().unwrap();
        read_at.saturating_duration_since(wrote_at)
    }

    pub fn reader_waiting(
        rt: &tokio::runtime::Runtime,
        listener: &std::net::TcpListener,
    ) -> Duration {
        let (ours, peer) = std_pair(listener);
        ours.set_nonblocking(true).unwrap();
        let (go, go_rx) = mpsc::channel();
        let peer = peer_thread(peer, go_rx);
        let (waiting_tx, waiting_rx) = mpsc::channel();
        let reader = rt.spawn(notify_pending(
            async move {
                let mut s = TcpStream::from_std(ours).unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                let t = Instant::now();
                drop(s);
                t
            },
            move || waiting_tx.send(()).unwrap(),
        ));
        waiting_rx.recv().unwrap();
        let busy = rt.spawn(async move {
            go.send(()).unwrap();
            spin_for(BUSY);
        });
        let read_at = rt.block_on(async {
            let t = reader.await.unwrap();
            busy.await.unwrap();
            t
        });
        let wrote_at = peer.join().unwrap();
        read_at.saturating_duration_since(wrote_at)
    }
}

fn tcp_echo_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_echo_latency");
    {
        let rt = numa_rt_rt();
        let mut conn = numa::setup(&rt, 1).pop();
        g.bench_function("numa_rt", |b| {
            b.iter_custom(|iters| numa::latency(&rt, &mut conn, iters))
        });
    }
    {
        let rt = tokio_rt();
        let mut conn = tok::setup(&rt, 1).pop();
        g.bench_function("tokio", |b| {
            b.iter_custom(|iters| tok::latency(&rt, &mut conn, iters))
        });
    }
    g.finish();
}

fn tcp_echo_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_echo_throughput");
    g.throughput(Throughput::Bytes((CONNS * CHUNK) as u64));
    {
        let rt = numa_rt_rt();
        let mut conns = numa::setup(&rt, CONNS);
        g.bench_function("numa_rt", |b| {
            b.iter_custom(|iters| numa::throughput(&rt, &mut conns, iters))
        });
    }
    {
        let rt = tokio_rt();
        let mut conns = tok::setup(&rt, CONNS);
        g.bench_function("tokio", |b| {
            b.iter_custom(|iters| tok::throughput(&rt, &mut conns, iters))
        });
    }
    g.finish();
}

fn timer_churn(c: &mut Criterion) {
    let mut g = c.benchmark_group("timer_churn");
    g.throughput(Throughput::Elements(TIMERS as u64));
    {
        let rt = numa_rt_rt();
        g.bench_function("register_cancel_1000/numa_rt", |b| {
            b.iter_custom(|iters| numa::register_cancel(&rt, iters))
        });
        g.bench_function("sleep_1ms_x1000/numa_rt", |b| {
            b.iter_custom(|iters| numa::sleep_many(&rt, iters))
        });
    }
    {
        let rt = tokio_rt();
        g.bench_function("register_cancel_1000/tokio", |b| {
            b.iter_custom(|iters| tok::register_cancel(&rt, iters))
        });
        g.bench_function("sleep_1ms_x1000/tokio", |b| {
            b.iter_custom(|iters| tok::sleep_many(&rt, iters))
        });
    }
    g.finish();
}

/// Each iteration keeps a worker busy for 100 ms, so the group samples few
/// iterations; criterion plans with wall time, and the reported value is the
/// write-to-read latency only.
fn busy_owner_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("busy_owner_latency");
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    fn sum(iters: u64, mut round: impl FnMut() -> Duration) -> Duration {
        (0..iters).map(|_| round()).sum()
    }
    {
        let rt = numa_rt_rt();
        g.bench_function("numa_rt", |b| {
            b.iter_custom(|i| sum(i, || numa::busy_owner(&rt, &listener)))
        });
        g.bench_function("numa_rt_reader_waiting", |b| {
            b.iter_custom(|i| sum(i, || numa::reader_waiting(&rt, &listener)))
        });
    }
    {
        let rt = tokio_rt();
        g.bench_function("tokio", |b| {
            b.iter_custom(|i| sum(i, || tok::busy_owner(&rt, &listener)))
        });
        g.bench_function("tokio_reader_waiting", |b| {
            b.iter_custom(|i| sum(i, || tok::reader_waiting(&rt, &listener)))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    tcp_echo_latency,
    tcp_echo_throughput,
    timer_churn,
    busy_owner_latency
);
criterion_main!(benches);
