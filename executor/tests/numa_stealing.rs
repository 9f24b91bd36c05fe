//! NUMA behaviour: stealing across nodes.
//!
//! Issue 4: "Stealing goes node queue → P's of the same node → remote node
//! queues → remote P's, and remote stealing only starts when the local node
//! has nothing (so a busy node keeps its work, and an idle remote node still
//! helps)." Proof: "with one node saturated and the other idle, work is
//! stolen across nodes (remote-steal counters move), and with both nodes busy
//! no task crosses nodes (counters stay at zero)."
//!
//! Both halves are written to be deterministic on any machine with two CPUs,
//! under load too; the reasoning is next to each test. (c): with fewer P's
//! than nodes, work from outside the runtime must not be queued on a node
//! without P's (where it would wait while the P's are busy).

mod common;

use common::{block_on_guarded, two_node_topology, Gate, HANG};
use numa_rt_executor::numa::{current_node, spawn_on};
use numa_rt_executor::task::yield_now;
use numa_rt_executor::{spawn, Builder, NodeMetrics, Runtime};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------- helpers

/// A little CPU work, so a poll takes long enough for an idle P to look.
fn work(iters: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..iters {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

// ------------------------------------- (a) a saturated node and an idle one

/// Tasks in the burst.
const BURST: usize = 2_000;
/// Spin iterations per poll (a few tens of µs).
const WORK: u64 = 20_000;

/// A burst of `BURST` CPU-bound tasks is spawned on node `busy`; the other
/// node has nothing, so its P's must steal from `busy` (its node queue or
/// its P's).
///
/// Determinism: a task that has not yet seen any poll on the idle node does
/// not finish; it yields and polls again. So the saturated node has runnable
/// work until the idle node has taken some, and every yield calls `wakep`
/// (`Shared::wake_idle_p`), which keeps waking an idle P to spin while one
/// exists. The idle node therefore steals eventually, however the OS
/// schedules the threads; `HANG` only guards against a broken runtime.
/// Tasks reach the idle node only by stealing: they are spawned with
/// `spawn_on` from outside, they only wake themselves (yield, which requeues
/// on the P that ran them), and nothing else wakes them.
fn idle_node_steals(max_procs: usize, busy: usize, test: &str) {
    let Some(topology) = two_node_topology(test) else {
        return;
    };
    let idle = 1 - busy;
    let rt = Builder::new()
        .max_procs(max_procs)
        .topology(topology)
        .build()
        .unwrap();
    let idle_ran = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..BURST)
        .map(|_| {
            let idle_ran = idle_ran.clone();
            rt.handle().spawn_on(busy, async move {
                let mut polls = [0u64; 2];
                loop {
                    black_box(work(WORK));
                    let here = current_node()
                        .expect("current_node() inside a task")
                        .index();
                    polls[here] += 1;
                    if here == idle {
                        idle_ran.store(true, SeqCst);
                    }
                    if idle_ran.load(SeqCst) {
                        return polls;
                    }
                    yield_now().await;
                }
            })
        })
        .collect();
    let polls = block_on_guarded(rt.handle(), "the burst", async move {
        let mut sum = [0u64; 2];
        for h in hs {
            let p = h.await.unwrap();
            sum[0] += p[0];
            sum[1] += p[1];
        }
        sum
    });
    let m = rt.metrics();
    let idle_m = m.node(idle);
    let stolen: u64 = idle_m.procs.iter().map(|&p| m.proc(p).tasks_stolen).sum();
    let report = format!(
        "task polls per node {polls:?}; busy {:?}; idle {idle_m:?}",
        m.node(busy)
    );
    assert!(
        polls[idle] > 0,
        "no task ran on the idle node{idle}: {report}"
    );
    assert!(idle_m.tasks_polled > 0, "{report}");
    assert!(
        idle_m.remote_steals > 0,
        "the idle node{idle}'s remote-steal counter did not move: {report}"
    );
    assert!(
        stolen > 0,
        "tasks_stolen of node{idle}'s P's did not move: {report}"
    );
}

/// "0;1", one P per node; node 0 saturated, node 1 idle.
#[test]
fn idle_node_steals_from_saturated_node() {
    idle_node_steals(2, 0, "idle_node_steals_from_saturated_node");
}

/// The same the other way round (node 1 saturated, node 0 idle), so neither
/// node's position in the steal order matters.
#[test]
fn idle_node0_steals_from_saturated_node1() {
    idle_node_steals(2, 1, "idle_node0_steals_from_saturated_node1");
}

/// Two P's per node: both of the idle node's P's have nothing.
#[test]
fn idle_node_steals_from_saturated_node_two_procs_per_node() {
    idle_node_steals(
        4,
        0,
        "idle_node_steals_from_saturated_node_two_procs_per_node",
    );
}

// ------------------------------------------- (b) both nodes busy: no crossing

/// Polls each node must have run before the workload is stopped.
const TARGET_POLLS: u64 = 20_000;
/// Polls per generation of a chain before it re-spawns itself.
const GENERATION_POLLS: u32 = 8;
/// Chains per P.
const CHAINS_PER_PROC: usize = 4;

struct Shared {
    stop: AtomicBool,
    /// Polls run on each node (by where they ran).
    polls: [AtomicU64; 2],
    reached: AtomicBool,
    reached_tx: Mutex<mpsc::Sender<()>>,
}

/// A closed loop of work that belongs to one node: it polls, yields, and
/// every `GENERATION_POLLS` polls re-spawns itself as a new task and ends.
struct Chain {
    home: usize,
    shared: Arc<Shared>,
    done: mpsc::Sender<ChainReport>,
    /// Re-spawn alternately with `spawn_on(home)` and `spawn` (else always `spawn`).
    respawn_on_home: bool,
    report: ChainReport,
}

#[derive(Debug, Default)]
struct ChainReport {
    home: usize,
    polls: u64,
    generations: u64,
    /// Polls (before the stop) that ran on another node; the first few.
    crossings: Vec<String>,
    ncrossings: u64,
}

fn generation(mut c: Chain) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        c.report.generations += 1;
        for i in 0..GENERATION_POLLS {
            if i > 0 {
                yield_now().await;
            }
            // Read `stop` before the node: only after the stop may a node run
            // dry and (legally) steal; such polls see `stop` set.
            if c.shared.stop.load(SeqCst) {
                let _ = c.done.send(c.report);
                return;
            }
            let here = current_node()
                .expect("current_node() inside a task")
                .index();
            if here != c.home {
                c.report.ncrossings += 1;
                if c.report.crossings.len() < 5 {
                    c.report.crossings.push(format!(
                        "a chain of node{} polled on node{here} (generation {}, poll {i})",
                        c.home, c.report.generations
                    ));
                }
            }
            c.report.polls += 1;
            c.shared.polls[here].fetch_add(1, SeqCst);
            let reached = c
                .shared
                .polls
                .iter()
                .all(|p| p.load(SeqCst) >= TARGET_POLLS);
            if reached && !c.shared.reached.swap(true, SeqCst) {
                let _ = c.shared.reached_tx.lock().unwrap().send(());
            }
        }
        let home = c.home;
        if c.respawn_on_home && c.report.generations % 2 == 0 {
            drop(spawn_on(home, generation(c)));
        } else {
            drop(spawn(generation(c)));
        }
    })
}

/// Both nodes busy for the whole measurement: no task crosses nodes and the
/// remote-steal counters stay at zero.
///
/// Why this is deterministic (and what the workload must look like for it to
/// be). A P steals only after its own run queue, its inbox and its node's
/// queue are empty, and goes remote only after the P's of its own node had
/// nothing either. So:
///
/// * Every node runs `CHAINS_PER_PROC` chains per P, and a chain is always
///   runnable: it yields (requeued at the tail of the P that ran it) or
///   re-spawns itself before ending — with `spawn` onto the same P's
///   `runnext`, or with `spawn_on(home)` onto its node's queue. A chain is
///   thus always in its node's queue or on one of its node's P's.
/// * Start-up: the workers are held in `on_thread_start` until every chain is
///   in its node's queue. Each P's first look is its own node's queue, so no
///   P can start by stealing the other node's chains.
/// * One P per node: a P that finds its own queue empty and its node's queue
///   empty has no chain at all, which cannot happen while its chains run.
/// * Two P's per node: a P with nothing means the other P of its node holds
///   all of the node's `2 * CHAINS_PER_PROC` chains, at most one running and
///   one in `runnext`, so its ring is never empty while the thief looks: the
///   thief steals locally and never reaches the remote step. Here chains
///   re-spawn with `spawn` only: a `spawn_on(home)` re-spawn parks a chain
///   in the node queue, and a thief that checked the (then empty) node queue
///   could find the other P's ring empty a moment later (every chain moved
///   to the node queue meanwhile) and go remote — legal by the steal rule,
///   so not something a test may forbid.
/// * The end: the main thread sets `stop` only after reading the steal
///   counters; after it chains end, a node may run dry and steal the other's
///   last chains, which is legal. Those polls read `stop` first and are not
///   counted (the thief's worker saw its own node's chains end, i.e. saw
///   `stop`, before it could steal).
///
/// OS scheduling cannot break any of this: it only changes when things
/// happen, never which queue a P looks at first. No sleeps, no timing.
fn check_busy_nodes_keep_their_tasks(max_procs: usize, test: &str) {
    let Some(topology) = two_node_topology(test) else {
        return;
    };
    let gate = Gate::default();
    let g = gate.clone();
    let rt: Runtime = Builder::new()
        .max_procs(max_procs)
        .topology(topology)
        .on_thread_start(move || g.wait())
        .build()
        .unwrap();
    // Whatever happens below, release the workers and the chains.
    struct Release(Gate, Arc<Shared>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.open();
            self.1.stop.store(true, SeqCst);
        }
    }
    let (reached_tx, reached_rx) = mpsc::channel();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        polls: [AtomicU64::new(0), AtomicU64::new(0)],
        reached: AtomicBool::new(false),
        reached_tx: Mutex::new(reached_tx),
    });
    let _release = Release(gate.clone(), shared.clone());

    let m = rt.metrics();
    let procs_per_node: Vec<usize> = (0..2).map(|n| m.node(n).procs.len()).collect();
    let one_proc_per_node = procs_per_node.iter().all(|&n| n == 1);
    let (done_tx, done_rx) = mpsc::channel();
    let mut chains = 0;
    for (home, &procs) in procs_per_node.iter().enumerate() {
        for _ in 0..CHAINS_PER_PROC * procs {
            let c = Chain {
                home,
                shared: shared.clone(),
                done: done_tx.clone(),
                respawn_on_home: one_proc_per_node,
                report: ChainReport {
                    home,
                    ..Default::default()
                },
            };
            drop(rt.handle().spawn_on(home, generation(c)));
            chains += 1;
        }
    }
    drop(done_tx);
    gate.open();

    reached_rx
        .recv_timeout(HANG)
        .expect("both nodes reach TARGET_POLLS");
    // Both nodes are still busy: read the counters, then stop.
    let during: Vec<NodeMetrics> = (0..2).map(|n| m.node(n)).collect();
    shared.stop.store(true, SeqCst);

    let mut reports = Vec::new();
    for _ in 0..chains {
        reports.push(
            done_rx
                .recv_timeout(HANG)
                .expect("every chain sees the stop and reports"),
        );
    }
    let crossings: u64 = reports.iter().map(|r| r.ncrossings).sum();
    let examples: Vec<&String> = reports.iter().flat_map(|r| &r.crossings).take(10).collect();
    let polls: Vec<u64> = (0..2)
        .map(|n| {
            reports
                .iter()
                .filter(|r| r.home == n)
                .map(|r| r.polls)
                .sum()
        })
        .collect();
    let generations: u64 = reports.iter().map(|r| r.generations).sum();
    let summary = format!("max_procs {max_procs}; chain polls per home node {polls:?}; {generations} generations; during: {during:?}");
    for (n, node) in during.iter().enumerate() {
        assert_eq!(
            node.remote_steals, 0,
            "node{n} stole from the other node while both were busy: {summary}"
        );
        assert!(node.tasks_polled >= TARGET_POLLS, "{summary}");
    }
    assert_eq!(
        crossings, 0,
        "{crossings} polls crossed nodes while both were busy, e.g. {examples:?}; {summary}"
    );
    assert!(
        generations > chains as u64,
        "chains re-spawned themselves: {summary}"
    );
}

/// "0;1", one P per node: chains yield, `spawn` and `spawn_on(home)`.
#[test]
fn busy_nodes_keep_their_tasks() {
    check_busy_nodes_keep_their_tasks(2, "busy_nodes_keep_their_tasks");
}

/// "0;1", two P's per node: local steals may happen, remote ones may not.
#[test]
fn busy_nodes_keep_their_tasks_two_procs_per_node() {
    check_busy_nodes_keep_their_tasks(4, "busy_nodes_keep_their_tasks_two_procs_per_node");
}

// ------------------------------- (c) a node without P's (max_procs < nodes)

/// Polls the busy task may run before the test gives up waiting for the
/// queued work (the queued work should run within a few 61-tick fairness
/// windows, far fewer).
const BUSY_BUDGET: u32 = 100_000;
/// Tasks spawned from outside, and tasks woken from outside.
const OUTSIDE: usize = 4;

/// Pending until `wake_from_outside` is called; reports when its waker is
/// registered, so the wake-up really comes from the outside thread.
struct Parked {
    slot: Arc<Mutex<(bool, Option<std::task::Waker>)>>,
    registered: Option<mpsc::Sender<()>>,
}

impl Future for Parked {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let mut slot = self.slot.lock().unwrap();
        if slot.0 {
            return std::task::Poll::Ready(());
        }
        slot.1 = Some(cx.waker().clone());
        drop(slot);
        if let Some(tx) = self.registered.take() {
            let _ = tx.send(());
        }
        std::task::Poll::Pending
    }
}

/// With `max_procs` 1 over two nodes, one node has no P. Work that arrives
/// from outside the runtime — `Handle::spawn` from a plain thread, and
/// wake-ups fired by a plain thread — must still run while the only P is
/// busy, as Go's 1-in-61 global-queue check guarantees for a flat runtime.
///
/// Work aimed at the node without P's is queued on the node serving it
/// (`Node::served_by`); before that, it waited until the P had nothing at
/// all to do (remote steal) — forever under a steady load. The busy task
/// below counts its polls only once every outside task has been submitted
/// (before that it waits, bounded by `HANG`: a descheduled test thread must
/// not make it spend its budget early), then gives up after `BUSY_BUDGET`
/// polls, after which the P steals any stranded tasks and the test fails.
#[test]
fn outside_work_runs_while_busy_with_a_node_without_procs() {
    let Some(topology) =
        two_node_topology("outside_work_runs_while_busy_with_a_node_without_procs")
    else {
        return;
    };
    let rt = Builder::new()
        .max_procs(1)
        .topology(topology)
        .build()
        .unwrap();
    let m = rt.metrics();
    let p_node = m.proc(0).node;
    assert!(
        m.node(1 - p_node).procs.is_empty(),
        "max_procs 1 over two nodes leaves one node without P's"
    );

    let ran = Arc::new(AtomicU64::new(0));
    let expected = 2 * OUTSIDE as u64;
    let (started_tx, started_rx) = mpsc::channel();
    let r = ran.clone();
    let submitted = Arc::new(AtomicBool::new(false));
    let all_in = submitted.clone();
    // Keeps the only P busy (it yields, so it never runs dry and steals),
    // until every outside task has run or, once they are all submitted, the
    // budget is spent.
    let busy = rt.handle().spawn_on(p_node, async move {
        let _ = started_tx.send(());
        let deadline = std::time::Instant::now() + HANG;
        while !all_in.load(SeqCst) && std::time::Instant::now() < deadline {
            yield_now().await;
        }
        for i in 0..BUSY_BUDGET {
            if r.load(SeqCst) == expected {
                return Ok(i);
            }
            yield_now().await;
        }
        Err(r.load(SeqCst))
    });
    started_rx.recv_timeout(HANG).expect("the busy task starts");

    // Tasks that park, to be woken from this (outside) thread.
    let mut slots = Vec::new();
    for _ in 0..OUTSIDE {
        let slot = Arc::new(Mutex::new((false, None)));
        let (tx, rx) = mpsc::channel();
        let r = ran.clone();
        let parked = Parked {
            slot: slot.clone(),
            registered: Some(tx),
        };
        drop(rt.handle().spawn_on(p_node, async move {
            parked.await;
            r.fetch_add(1, SeqCst);
        }));
        rx.recv_timeout(HANG)
            .expect("the parked task registers its waker");
        slots.push(slot);
    }
    // Outside spawns: round-robin over the nodes, so some go to the node
    // without P's.
    for _ in 0..OUTSIDE {
        let r = ran.clone();
        drop(rt.spawn(async move {
            r.fetch_add(1, SeqCst);
        }));
    }
    // Outside wake-ups: likewise. (A wake that lands while the parked task's
    // first poll is still returning is requeued by its own worker instead;
    // the others go through the outside path.)
    for slot in &slots {
        let waker = {
            let mut s = slot.lock().unwrap();
            s.0 = true;
            s.1.take().expect("registered")
        };
        waker.wake();
    }
    submitted.store(true, SeqCst);

    let polls = block_on_guarded(rt.handle(), "the busy task", busy).unwrap();
    let m = rt.metrics();
    if let Err(ran) = polls {
        panic!(
            "the only P ran {BUSY_BUDGET} polls of other work while outside work waited on node{} (no P's): \
             {ran} of {expected} outside tasks had run by then (the rest ran once the P had nothing \
             else and stole them); {:?} / {:?}",
            1 - p_node,
            m.node(0),
            m.node(1)
        );
    }
}
