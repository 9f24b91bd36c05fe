//! NUMA behaviour: `spawn_on(node, fut)` starts the task on `node`.
//!
//! Issue 4: "`spawn_on(node, fut)` — a task that starts on the given node; a
//! P of another node takes it only by the normal steal order, i.e. when the
//! thief's own node has nothing to run."
//!
//! So the only way a `spawn_on` task may legitimately start elsewhere is a
//! remote steal by a node that is out of work. To make "starts on the named
//! node" a deterministic check rather than a likely one, every node is kept
//! busy by "anchor" tasks that yield in a loop for the whole test: a P whose
//! tasks only yield always finds one in its own queue, so it never steals,
//! and a task pushed to node N's queue can only be taken by N's P's.
//!
//! The anchors must themselves be placed deterministically. The workers are
//! held in `on_thread_start` (a gate) until every anchor is in its node's
//! queue; each P then looks at its own node's queue before any stealing, and
//! a node whose anchors are all at home never runs out of work. The anchors
//! check their own node at every poll, and the remote-steal counters are
//! read (and must be zero) before the anchors are stopped.

mod common;

use common::{block_on_guarded, panic_message, two_node_topology, Gate};
use numa_rt_executor::numa::{current_node, spawn_on};
use numa_rt_executor::task::yield_now;
use numa_rt_executor::{spawn, Builder, Handle, JoinHandle, Runtime};
use numa_rt_numa::{NodeId, Topology};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

/// Probes per (target node, way of spawning).
const PROBES: usize = 100;

// ---------------------------------------------------------------- helpers

async fn join_all<T: Send + 'static>(hs: Vec<JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(hs.len());
    for h in hs {
        out.push(h.await.expect("task completes"));
    }
    out
}

/// A two-node runtime whose every node is kept busy by anchors.
struct Busy {
    stop: Arc<AtomicBool>,
    anchors: Vec<JoinHandle<Vec<String>>>,
    gate: Gate,
    rt: Option<Runtime>,
}

impl Busy {
    /// `max_procs` P's over two nodes, `4 * procs_on_node` anchors per node.
    fn new(max_procs: usize, test: &str) -> Option<Busy> {
        let topology = two_node_topology(test)?;
        let gate = Gate::default();
        let g = gate.clone();
        let rt = Builder::new()
            .max_procs(max_procs)
            .topology(topology)
            .on_thread_start(move || g.wait())
            .build()
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let m = rt.metrics();
        let mut anchors = Vec::new();
        for home in 0..m.num_nodes() {
            for _ in 0..4 * m.node(home).procs.len() {
                let stop = stop.clone();
                anchors.push(rt.handle().spawn_on(home, async move {
                    let mut wrong = Vec::new();
                    loop {
                        // `stop` first: after it, nodes drain and stealing is legal.
                        if stop.load(SeqCst) {
                            return wrong;
                        }
                        let here = current_node();
                        if here != Some(NodeId::from(home)) && wrong.len() < 10 {
                            wrong.push(format!("anchor of node{home} polled on {here:?}"));
                        }
                        yield_now().await;
                    }
                }));
            }
        }
        gate.open();
        Some(Busy {
            stop,
            anchors,
            gate,
            rt: Some(rt),
        })
    }

    fn handle(&self) -> &Handle {
        self.rt.as_ref().unwrap().handle()
    }

    /// Checks that no node stole from another while all were busy, then
    /// stops the anchors and checks they never left their node.
    fn finish(mut self) {
        let rt = self.rt.take().unwrap();
        let m = rt.metrics();
        for n in 0..m.num_nodes() {
            let node = m.node(n);
            assert_eq!(
                node.remote_steals, 0,
                "node{n} stole from another node while every node was busy: {node:?}"
            );
            assert!(node.tasks_polled > 0, "node{n} ran nothing: {node:?}");
        }
        self.stop.store(true, SeqCst);
        let anchors = std::mem::take(&mut self.anchors);
        let wrong: Vec<String> =
            block_on_guarded(rt.handle(), "stopping the anchors", join_all(anchors))
                .into_iter()
                .flatten()
                .collect();
        assert!(
            wrong.is_empty(),
            "anchors crossed nodes while every node was busy: {wrong:?}"
        );
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // On a failed assertion: release the workers and the anchors so the
        // runtime can shut down.
        self.gate.open();
        self.stop.store(true, SeqCst);
    }
}

/// `PROBES` tasks spawned on `target` by `spawn` (a way of calling
/// `spawn_on`); returns the node each one saw at its first poll.
fn probe(
    handle: &Handle,
    target: usize,
    spawn: impl Fn(usize) -> JoinHandle<Option<NodeId>>,
) -> Vec<Option<NodeId>> {
    let hs: Vec<_> = (0..PROBES).map(|_| spawn(target)).collect();
    block_on_guarded(handle, "probes", join_all(hs))
}

fn assert_all_on(target: usize, seen: &[Option<NodeId>], how: &str) {
    let elsewhere: Vec<_> = seen
        .iter()
        .filter(|n| **n != Some(NodeId::from(target)))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "{how}: {} of {} tasks spawned on node{target} started elsewhere, e.g. {:?}",
        elsewhere.len(),
        seen.len(),
        &elsewhere[..elsewhere.len().min(5)]
    );
}

// ---------------------------------------------------------------- tests

fn starts_on_the_named_node(max_procs: usize, test: &str) {
    let Some(busy) = Busy::new(max_procs, test) else {
        return;
    };
    let h = busy.handle().clone();
    for target in 0..2 {
        // `Handle::spawn_on` from a thread outside the runtime.
        let seen = probe(&h, target, |t| h.spawn_on(t, async { current_node() }));
        assert_all_on(target, &seen, "Handle::spawn_on");

        // The free function, from a thread that entered the runtime; the node
        // given as a `NodeId`.
        let _g = h.enter();
        let seen = probe(&h, target, |t| {
            spawn_on(NodeId::from(t), async { current_node() })
        });
        assert_all_on(target, &seen, "numa::spawn_on (entered thread)");
    }
    busy.finish();
}

/// One P per node ("0;1", max_procs 2): every `spawn_on` task's first poll
/// is on the named node.
#[test]
fn spawn_on_starts_on_the_named_node() {
    starts_on_the_named_node(2, "spawn_on_starts_on_the_named_node");
}

/// Two P's per node ("0;1", max_procs 4): the same, with P's of the named
/// node competing for the task.
#[test]
fn spawn_on_starts_on_the_named_node_two_procs_per_node() {
    starts_on_the_named_node(4, "spawn_on_starts_on_the_named_node_two_procs_per_node");
}

/// `spawn_on` from inside a task: to another node and to the task's own
/// node, the new task starts on the named node, not on the spawner's P
/// (unlike `spawn`, which uses the spawner's `runnext`).
#[test]
fn spawn_on_from_a_worker() {
    let Some(busy) = Busy::new(2, "spawn_on_from_a_worker") else {
        return;
    };
    let h = busy.handle().clone();
    for from in 0..2 {
        for to in 0..2 {
            let hs: Vec<_> = (0..PROBES)
                .map(|_| {
                    h.spawn_on(from, async move {
                        let here = current_node();
                        let child = spawn_on(to, async { current_node() }).await.unwrap();
                        (here, child)
                    })
                })
                .collect();
            let out = block_on_guarded(&h, "spawners", join_all(hs));
            let parents: Vec<_> = out.iter().map(|o| o.0).collect();
            let children: Vec<_> = out.iter().map(|o| o.1).collect();
            assert_all_on(from, &parents, "spawner");
            assert_all_on(
                to,
                &children,
                &format!("spawn_on({to}) from a task on node{from}"),
            );
        }
    }
    busy.finish();
}

/// Plain `spawn` from a worker keeps the new task on the spawner's node (it
/// goes to the spawner's `runnext`; busy nodes never steal it).
#[test]
fn spawn_from_a_worker_stays_on_its_node() {
    let Some(busy) = Busy::new(2, "spawn_from_a_worker_stays_on_its_node") else {
        return;
    };
    let h = busy.handle().clone();
    for from in 0..2 {
        let hs: Vec<_> = (0..PROBES)
            .map(|_| {
                h.spawn_on(from, async {
                    spawn(async { current_node() }).await.unwrap()
                })
            })
            .collect();
        let seen = block_on_guarded(&h, "spawners", join_all(hs));
        assert_all_on(from, &seen, "spawn from a task");
    }
    busy.finish();
}

/// `spawn_on` with a node the runtime does not have panics, naming the node
/// (and how many there are); nothing is spawned and the runtime carries on.
#[test]
fn spawn_on_a_missing_node_panics() {
    let Some(topology) = two_node_topology("spawn_on_a_missing_node_panics") else {
        return;
    };
    let rt = Builder::new()
        .max_procs(2)
        .topology(topology)
        .build()
        .unwrap();

    let p = catch_unwind(AssertUnwindSafe(|| rt.handle().spawn_on(2, async {})))
        .expect_err("node 2 of 2 must panic");
    let msg = panic_message(&*p);
    assert!(
        msg.contains("spawn_on") && msg.contains("node 2") && msg.contains("2 node"),
        "{msg:?}"
    );

    let p = rt
        .block_on(async { catch_unwind(AssertUnwindSafe(|| spawn_on(usize::MAX, async {}))) })
        .expect_err("node usize::MAX must panic");
    let msg = panic_message(&*p);
    assert!(msg.contains(&format!("node {}", usize::MAX)), "{msg:?}");

    assert_eq!(
        rt.metrics().live_tasks(),
        0,
        "a refused spawn_on left a task behind"
    );
    let ok = rt.block_on(async { spawn_on(1, async { 7 }).await.unwrap() });
    assert_eq!(ok, 7, "the runtime still works");

    // A flat runtime has node 0 only.
    let flat = Builder::new()
        .max_procs(1)
        .topology(Topology::split(1).unwrap())
        .build()
        .unwrap();
    let p = catch_unwind(AssertUnwindSafe(|| flat.handle().spawn_on(1, async {})))
        .expect_err("node 1 of 1 must panic");
    let msg = panic_message(&*p);
    assert!(msg.contains("node 1") && msg.contains("1 node"), "{msg:?}");
    assert_eq!(
        flat.block_on(flat.handle().spawn_on(0, async { current_node() }))
            .unwrap(),
        Some(NodeId::from(0))
    );
}

/// The free `spawn_on` outside any runtime panics, saying so.
#[test]
fn spawn_on_outside_a_runtime_panics() {
    let p = catch_unwind(|| drop(spawn_on(0, async {}))).expect_err("no runtime, must panic");
    let msg = panic_message(&*p);
    assert!(
        msg.contains("numa_rt::numa::spawn_on") && msg.contains("runtime"),
        "{msg:?}"
    );
}
