//! How the per-P reactor and the scheduler work together, through the real
//! runtime: an accept loop's connection tasks spread over the P's (root-task
//! distribution, seen in the metrics), and readiness on a socket whose owning
//! P is stuck in a long synchronous loop is still handled by the other P.
//!
//! Nothing sleeps to synchronise and no duration is asserted: ordering comes
//! from flags set by the tasks themselves, and every wait is bounded.

mod support;
use support::{NotifyPending, GUARD};

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_reactor::context::current_p;

/// An accept loop that spawns one task per connection on a 2-P runtime: the
/// connection tasks are root tasks, handed round-robin to the P's other than
/// the accepting one (`ProcMetrics::root_tasks_received`): the P's that were
/// not accepting receive them.
///
/// sysmon's retake is off: a retake in the middle of the accepting poll
/// (a loaded machine can keep the M off its CPU past the threshold) leaves
/// the rest of that poll without a P, and its root tasks are then dealt over
/// all P's, the accepting one included (see the next test), which the exact
/// pairing below does not allow for.
#[test]
fn accept_loop_spreads_connection_tasks_over_the_ps() {
    const CONNS: usize = 64;
    // Root distribution is a placement rule: on whatever NUMA_RT_PLACEMENT says.
    let rt = numa_rt::Builder::new()
        .max_procs(2)
        .retake_threshold(None)
        .placement(numa_rt::Placement::numa())
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let before: Vec<u64> = handle
        .metrics()
        .procs()
        .iter()
        .map(|p| p.root_tasks_received)
        .collect();
    assert_eq!(before.len(), 2);
    rt.block_on(numa_rt::time::timeout(GUARD, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ran_on: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let accept_ps = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let (ran, acc) = (ran_on.clone(), accept_ps.clone());
        let server = numa_rt::spawn(async move {
            let mut handlers = Vec::new();
            for _ in 0..CONNS {
                let (mut s, _) = listener.accept().await.unwrap();
                acc[current_p().expect("accept loop runs on a P")].fetch_add(1, Ordering::Relaxed);
                let ran = ran.clone();
                handlers.push(numa_rt::spawn(async move {
                    ran[current_p().expect("handler runs on a P")].fetch_add(1, Ordering::Relaxed);
                    let mut buf = [0u8; 5];
                    s.read_exact(&mut buf).await.unwrap();
                    s.write_all(&buf).await.unwrap();
                }));
            }
            for h in handlers {
                h.await.unwrap();
            }
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|_| {
                numa_rt::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    s.write_all(b"hello").await.unwrap();
                    let mut buf = [0u8; 5];
                    s.read_exact(&mut buf).await.unwrap();
                    assert_eq!(&buf, b"hello");
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        server.await.unwrap();
        let m = handle.metrics();
        let received: Vec<u64> = m
            .procs()
            .iter()
            .zip(&before)
            .map(|(p, b)| p.root_tasks_received - b)
            .collect();
        let ran: Vec<usize> = ran_on.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        let accepted: Vec<usize> = accept_ps.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        let retakes: u64 = m.procs().iter().map(|p| p.retakes).sum();
        println!("root tasks received per P: {received:?}; handlers first polled per P: {ran:?}; accepts per P: {accepted:?}; retakes: {retakes}");
        assert_eq!(
            received.iter().sum::<u64>(),
            CONNS as u64,
            "every connection task is a root task: {received:?}"
        );
        // A root task goes to the next P round-robin, never to the P that
        // accepted: with two P's, each P receives exactly the connections
        // the other one accepted.
        assert_eq!(received[0], accepted[1] as u64, "P 0 got P 1's connections");
        assert_eq!(received[1], accepted[0] as u64, "P 1 got P 0's connections");
        assert!(
            received.iter().any(|&r| r > 0),
            "root tasks left the accepting P: {received:?}"
        );
    }))
    .expect("accept distribution test stalled");
}

/// The root tasks of a poll that sysmon retakes halfway: the accepting task
/// spins on its P (with another task queued there) until sysmon has taken
/// the P from its M, then accepts a second, already queued connection and
/// spawns its handler in the same poll. The M holds no P by then, and the
/// handler must still be dealt as a root task (it used to go to the node
/// queue, uncounted: a CI run of the test above once had 27 of 64
/// connections so).
#[test]
fn a_root_task_spawned_after_a_retake_is_still_dealt_out() {
    let rt = numa_rt::Builder::new()
        .max_procs(1)
        .retake_threshold(Some(Duration::from_millis(1)))
        .placement(numa_rt::Placement::numa())
        .build()
        .unwrap();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    // Both connections complete in the kernel's backlog before any accept.
    let _c1 = std::net::TcpStream::connect(addr).unwrap();
    let _c2 = std::net::TcpStream::connect(addr).unwrap();
    let (retakes_seen, received) = rt.block_on(async move {
        numa_rt::time::timeout(GUARD, async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let task = numa_rt::spawn(async move {
                // Registers the listener; its readiness stays set after a
                // successful accept, so the second accept below needs no
                // new event.
                let (s1, _) = listener.accept().await.unwrap();
                let h = numa_rt::Handle::current();
                let retakes = || h.metrics().procs().iter().map(|p| p.retakes).sum::<u64>();
                let roots = || {
                    h.metrics()
                        .procs()
                        .iter()
                        .map(|p| p.root_tasks_received)
                        .sum::<u64>()
                };
                let retakes_before = retakes();
                // Other work on this P: what a retake needs.
                let other = numa_rt::spawn(async {});
                let start = Instant::now();
                while retakes() == retakes_before && start.elapsed() < Duration::from_secs(30) {
                    std::hint::spin_loop();
                }
                let retakes_seen = retakes() - retakes_before;
                let roots_before = roots();
                let (s2, _) = futures::FutureExt::now_or_never(listener.accept())
                    .expect("the second connection is queued and the listener still ready")
                    .unwrap();
                let handler = numa_rt::spawn(async move { drop(s2) });
                let received = roots() - roots_before;
                (retakes_seen, received, other, handler, s1)
            });
            let (retakes_seen, received, other, handler, _s1) = task.await.unwrap();
            other.await.unwrap();
            handler.await.unwrap();
            (retakes_seen, received)
        })
        .await
        .expect("retake test stalled")
    });
    assert!(
        retakes_seen > 0,
        "sysmon never retook the P in 30 s (is membarrier available? {:?})",
        rt.metrics().retake_unavailable()
    );
    assert_eq!(
        received, 1,
        "the handler spawned right after the accept was not dealt as a root task"
    );
}

/// An accept loop in `block_on` (a thread that holds no P): its connection
/// tasks are root tasks too, dealt over the P's.
#[test]
fn root_tasks_spawned_by_block_on_are_dealt_over_the_ps() {
    const CONNS: usize = 8;
    let rt = numa_rt::Builder::new()
        .max_procs(2)
        .placement(numa_rt::Placement::numa())
        .build()
        .unwrap();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let clients: Vec<_> = (0..CONNS)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let before: u64 = rt
        .metrics()
        .procs()
        .iter()
        .map(|p| p.root_tasks_received)
        .sum();
    rt.block_on(async move {
        numa_rt::time::timeout(GUARD, async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let mut handlers = Vec::new();
            for _ in 0..CONNS {
                let (s, _) = listener.accept().await.unwrap();
                handlers.push(numa_rt::spawn(async move { drop(s) }));
            }
            for h in handlers {
                h.await.unwrap();
            }
        })
        .await
        .expect("block_on accept test stalled")
    });
    drop(clients);
    let received: Vec<u64> = rt
        .metrics()
        .procs()
        .iter()
        .map(|p| p.root_tasks_received)
        .collect();
    println!("root tasks received per P: {received:?}");
    assert_eq!(received.iter().sum::<u64>() - before, CONNS as u64);
}

/// The scenario through the scheduler. Task B, running on P_i,
/// registers a TCP stream with P_i's poller (its first poll), spawns the
/// reader task R with it, and then keeps P_i's M in a synchronous loop that
/// ends only when R has read the reply (or after a 30 s guard). R is stolen
/// by the other P, waits for the reply there, and a peer thread writes the
/// reply once R waits. The reply's readiness lands on P_i's poller while P_i
/// is busy: the idle P must handle it, so R completes while B still spins.
///
/// Both P's are on one node: the node's watcher (the idle P's M) is what
/// serves the busy P's poller. On a multi-node kernel the default runtime
/// would put each P on its own node, where the busy node lends its pollers
/// to the other node's watcher instead (issue 45, item 3): that case is
/// `net_cross_node::readiness_on_a_busy_node_is_served_while_it_stays_busy`.
/// So the runtime here is the largest real node alone (its CPUs, as a
/// one-node topology).
#[test]
fn readiness_is_handled_while_the_owning_p_is_busy() {
    let real = numa_rt_numa::Topology::discover().unwrap();
    let largest = real
        .nodes()
        .iter()
        .max_by_key(|n| n.cpus().len())
        .expect("a topology has a node");
    let one_node = numa_rt_numa::Topology::from_spec(&largest.cpus().to_string()).unwrap();
    // Retake off: sysmon handing the stuck P_i to another M (after 10 ms,
    // which a slow guest reaches: once in the 2x2 guest) would read the
    // reply on P_i itself, by that M; the watcher is what is tested here.
    let rt = numa_rt::Builder::new()
        .max_procs(2)
        .topology(one_node)
        .retake_threshold(None)
        .build()
        .unwrap();
    assert_eq!(rt.metrics().num_nodes(), 1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::net::TcpStream::connect(addr).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let peer_thread = std::thread::spawn(move || {
        let mut req = [0u8; 4];
        peer.read_exact(&mut req).unwrap();
        assert_eq!(&req, b"ping");
        go_rx.recv().expect("the reader waits for the reply");
        peer.write_all(b"pong").unwrap();
        peer
    });

    let busy = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (busy2, done2) = (busy.clone(), done.clone());
    let b_task = rt.spawn(async move {
        let p_i = current_p().expect("B runs on a P");
        let mut s = TcpStream::from_std(client).unwrap();
        // First poll: registers the stream with P_i's poller.
        s.write_all(b"ping").await.unwrap();
        assert_eq!(current_p(), Some(p_i), "a ready write does not leave the P");
        let (busy3, done3) = (busy2.clone(), done2.clone());
        busy2.store(true, Ordering::SeqCst);
        let reader = numa_rt::spawn(NotifyPending {
            fut: Box::pin(async move {
                let p_r = current_p().expect("R runs on a P");
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                assert_eq!(&buf, b"pong");
                let still_busy = busy3.load(Ordering::SeqCst);
                done3.store(true, Ordering::SeqCst);
                (p_r, current_p(), still_busy)
            }),
            on_pending: Some(move || {
                let _ = go_tx.send(());
            }),
        });
        // P_i's M is now stuck here: no await, no driver poll.
        let start = Instant::now();
        let mut spins = 0u64;
        while !done2.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
            std::hint::spin_loop();
            spins += 1;
        }
        let finished_by_reader = done2.load(Ordering::SeqCst);
        busy2.store(false, Ordering::SeqCst);
        (p_i, finished_by_reader, spins, reader)
    });
    let (p_i, finished_by_reader, spins, (p_r, p_done, still_busy)) = rt.block_on(async move {
        numa_rt::time::timeout(GUARD, async move {
            let (p_i, finished_by_reader, spins, reader) = b_task.await.unwrap();
            (p_i, finished_by_reader, spins, reader.await.unwrap())
        })
        .await
        .expect("busy-owner test stalled")
    });
    println!(
        "busy P {p_i} spun {spins} times; reader started on P {p_r:?}, finished on P {p_done:?}"
    );
    assert!(
        finished_by_reader,
        "the reader never completed while P {p_i} was busy (its readiness waited for the busy P)"
    );
    assert!(
        still_busy,
        "the reader completed while P {p_i} was still busy"
    );
    assert_ne!(p_done, Some(p_i), "the reply was read on the other P");
    drop(peer_thread.join().unwrap());
}

/// The watcher hole the monitor closes: the M that watches the node's
/// pollers is woken by I/O and its task then runs a long synchronous loop.
/// A reply on another connection, whose reader is parked, must still be read
/// while that loop runs — by another M, once the role has moved (a parked M
/// taking it, or the monitor after a tick). The loop ends as soon as the
/// reader reports, or after `GUARD`; the test fails if it had to wait that
/// long.
#[test]
fn io_is_watched_while_the_watcher_runs_a_long_poll() {
    long_poll_while_a_reader_waits(0);
}

/// The same after the looper's connection carried a run of single-byte
/// messages, each sent once the looper waits: the watcher's wake-ups come
/// from its own P's poller, so it may host the node's watch in that poller
/// (docs/architecture.md, "Hosting"); the reply must still be read while it
/// loops (the role and the watch move back out, or the monitor polls).
#[test]
fn io_is_watched_while_a_hosting_watcher_runs_a_long_poll() {
    long_poll_while_a_reader_waits(32);
}

fn long_poll_while_a_reader_waits(warm: usize) {
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    // Two connections, each with a plain-thread peer.
    let (l1, l2) = (
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let (a1, a2) = (l1.local_addr().unwrap(), l2.local_addr().unwrap());
    let reader_done = Arc::new(AtomicBool::new(false));
    let (looping_tx, looping_rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    // The reader: waits on connection 2.
    let done = reader_done.clone();
    let ready2 = ready_tx.clone();
    let reader = rt.spawn(async move {
        let mut s = TcpStream::connect(a2).await.unwrap();
        let mut buf = [0u8; 1];
        NotifyPending {
            fut: Box::pin(s.read_exact(&mut buf)),
            on_pending: Some(move || ready2.send(()).unwrap()),
        }
        .await
        .unwrap();
        done.store(true, Ordering::SeqCst);
    });
    // The long poll: woken by I/O on connection 1 (after `warm` single
    // bytes, each awaited the same way), then loops.
    let done = reader_done.clone();
    let (warm_tx, warm_rx) = std::sync::mpsc::channel::<()>();
    let looper = rt.spawn(async move {
        let mut s = TcpStream::connect(a1).await.unwrap();
        let mut buf = [0u8; 1];
        for _ in 0..warm {
            let tx = warm_tx.clone();
            NotifyPending {
                fut: Box::pin(s.read_exact(&mut buf)),
                on_pending: Some(move || tx.send(()).unwrap()),
            }
            .await
            .unwrap();
        }
        NotifyPending {
            fut: Box::pin(s.read_exact(&mut buf)),
            on_pending: Some(move || ready_tx.send(()).unwrap()),
        }
        .await
        .unwrap();
        looping_tx.send(()).unwrap();
        let start = Instant::now();
        while !done.load(Ordering::SeqCst) && start.elapsed() < GUARD {
            std::hint::spin_loop();
        }
        done.load(Ordering::SeqCst)
    });
    let (mut p1, _) = l1.accept().unwrap();
    let (mut p2, _) = l2.accept().unwrap();
    for _ in 0..warm {
        warm_rx.recv_timeout(GUARD).unwrap();
        p1.write_all(b"w").unwrap();
    }
    ready_rx.recv_timeout(GUARD).unwrap();
    ready_rx.recv_timeout(GUARD).unwrap();
    // Wake the looper by I/O, wait until it loops, then answer the reader.
    p1.write_all(b"x").unwrap();
    looping_rx.recv_timeout(GUARD).unwrap();
    p2.write_all(b"y").unwrap();
    let served = rt.block_on(looper).unwrap();
    rt.block_on(reader).unwrap();
    assert!(
        served,
        "the reply on connection 2 was not read while the other task looped"
    );
    let procs = rt.metrics().procs();
    let sum = |f: fn(&numa_rt::metrics::ProcMetrics) -> u64| procs.iter().map(f).sum::<u64>();
    println!(
        "watch hostings: {}, give-backs: {} (the monitor's: {})",
        sum(|p| p.watch_hostings),
        sum(|p| p.watch_unhostings),
        sum(|p| p.watch_releases)
    );
    drop((p1, p2));
}
