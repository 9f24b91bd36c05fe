//! A bounded stress run mixing everything the scheduler does at once:
//! channel ping-pong across nodes, random yields, 0–1 ms sleeps, `spawn_on`
//! over a simulated two-node topology, `spawn_blocking` and
//! `block_in_place`. A lost wake-up anywhere shows up as a stall.
//!
//! Bounded twice: each actor runs at most `ROUNDS` rounds and starts no new
//! round after `DEADLINE`, so a busy machine does fewer rounds rather than
//! taking longer. The test thread is the watchdog: while the actors run on
//! another thread it checks a progress counter every second, and if it has
//! not moved for `STALL` it prints the runtime's schedtrace line and every
//! node's counters, then fails.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use futures::channel::mpsc as chan;
use futures::{SinkExt, StreamExt};
use numa_rt::numa::{current_node, spawn_on, Topology};
use numa_rt::task::yield_now;
use numa_rt::time::sleep;
use numa_rt::{block_in_place, spawn, spawn_blocking, Builder};

/// Concurrent actors.
const ACTORS: u64 = 16;
/// Rounds per actor at most.
const ROUNDS: u64 = 2_000;
/// No round starts after this much time (CI stays well under a minute).
const DEADLINE: Duration = Duration::from_secs(20);
/// No progress for this long is a stall.
const STALL: Duration = Duration::from_secs(20);
/// Messages per ping-pong.
const PINGS: u64 = 16;

/// xorshift64*: a different, reproducible stream per actor.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// "a;b" from the first two CPUs this process may use: two simulated nodes
/// (one node, flat, on a one-CPU machine).
fn topology() -> Topology {
    // split(1): every CPU of the affinity mask, as one node.
    let cpus: Vec<usize> = Topology::split(1).unwrap().cpus().iter().collect();
    match cpus.as_slice() {
        [a, b, ..] => Topology::from_spec(&format!("{a};{b}")).unwrap(),
        _ => {
            eprintln!("one allowed CPU: the stress run uses a flat topology");
            Topology::split(1).unwrap()
        }
    }
}

/// One round of actor work; every completed step bumps `progress`.
async fn round(rng: &mut Rng, nodes: usize, progress: &AtomicU64) {
    let op = rng.next() % 6;
    let other = numa_rt::numa::NodeId::from((rng.next() as usize) % nodes);
    match op {
        // Ping-pong with a task on a (possibly) other node.
        0 => {
            let (mut to_pong, mut pong_rx) = chan::channel::<u64>(1);
            let (mut to_ping, mut ping_rx) = chan::channel::<u64>(1);
            let ponger = spawn_on(other, async move {
                while let Some(v) = pong_rx.next().await {
                    if to_ping.send(v + 1).await.is_err() {
                        break;
                    }
                }
            });
            for i in 0..PINGS {
                to_pong.send(i * 2).await.unwrap();
                assert_eq!(ping_rx.next().await, Some(i * 2 + 1));
                progress.fetch_add(1, Ordering::Relaxed);
            }
            drop(to_pong);
            ponger.await.unwrap();
        }
        // Random yields.
        1 => {
            for _ in 0..1 + rng.next() % 8 {
                yield_now().await;
            }
        }
        // A 0–1 ms sleep.
        2 => sleep(Duration::from_micros(rng.next() % 1001)).await,
        // A blocking closure on the pool.
        3 => {
            let x = rng.next();
            let y = spawn_blocking(move || x.rotate_left(7)).await.unwrap();
            assert_eq!(y, x.rotate_left(7));
        }
        // Blocking in place (the P moves to another M meanwhile).
        4 => {
            let x = rng.next();
            let y = block_in_place(|| {
                std::thread::yield_now();
                x ^ 0xff
            });
            assert_eq!(y, x ^ 0xff);
        }
        // A task started on a chosen node, which itself yields and sleeps.
        _ => {
            let micros = rng.next() % 500;
            let node = spawn_on(other, async move {
                yield_now().await;
                sleep(Duration::from_micros(micros)).await;
                current_node()
            })
            .await
            .unwrap();
            assert!(node.is_some(), "ran on a worker");
        }
    }
    progress.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn mixed_load_never_stalls() {
    let rt = Builder::new()
        .max_procs(4)
        .topology(topology())
        .build()
        .unwrap();
    let nodes = rt.metrics().num_nodes();
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();
    let handle = rt.handle().clone();
    let p = progress.clone();
    let s = stop.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        let rounds = handle.block_on(async move {
            let actors: Vec<_> = (0..ACTORS)
                .map(|a| {
                    let p = p.clone();
                    let s = s.clone();
                    spawn(async move {
                        let mut rng =
                            Rng(0x9e37_79b9_7f4a_7c15 ^ (a + 1).wrapping_mul(0x1234_5678_9abc));
                        let mut done = 0;
                        while done < ROUNDS
                            && start.elapsed() < DEADLINE
                            && !s.load(Ordering::Relaxed)
                        {
                            round(&mut rng, nodes, &p).await;
                            done += 1;
                        }
                        done
                    })
                })
                .collect();
            let mut total = 0;
            for a in actors {
                total += a.await.unwrap();
            }
            total
        });
        let _ = done_tx.send(rounds);
    });

    // The watchdog.
    let mut last = (progress.load(Ordering::Relaxed), Instant::now());
    let rounds = loop {
        match done_rx.recv_timeout(Duration::from_secs(1)) {
            Ok(rounds) => break rounds,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the stress driver panicked"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = progress.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= STALL {
            let m = rt.metrics();
            eprintln!("stalled: no progress for {STALL:?} after {now} steps");
            eprintln!("{m}");
            for n in 0..m.num_nodes() {
                eprintln!("node{n}: {:?}", m.node(n));
            }
            stop.store(true, Ordering::Relaxed);
            panic!("the stress run stalled (no progress for {STALL:?}); state above");
        }
    };
    eprintln!(
        "{rounds} rounds, {} steps; {}",
        progress.load(Ordering::Relaxed),
        rt.metrics()
    );
    assert!(rounds > 0);
    drop(rt);
}
