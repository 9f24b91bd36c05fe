//! What NUMA mode costs: numa_rt with a simulated two-node topology
//! (`Topology::split(2)`: the allowed CPUs cut in two, one CPU per node on
//! this 2-CPU machine) against a flat one-node topology, both with
//! `max_procs = 2`.
//!
//! - `numa_mode/<workload>`: the six scheduler workloads of
//!   `rt_multi_threaded` (see `common`), functions `flat` and `split2`. In
//!   NUMA mode each node has its own global queue and idle list, each M is
//!   bound to its node's CPUs, and a P steals from the other node only once
//!   its own node has nothing: this measures that bookkeeping and the extra
//!   hops of work that crosses nodes.
//! - `numa_mode/node_local_sum`: memory-bound tasks. Before timing, one
//!   16 MiB buffer per task (64 MiB in all: more than this machine's 32 MiB
//!   L3, so the reads go to memory) is allocated and filled inside a
//!   `spawn_on(node, ..)` task, so first touch places its pages on that
//!   node. Each timed iteration then runs one reader task per buffer that
//!   sums it 4 times: `split2_spawn_on` spawns each reader with
//!   `spawn_on(<its buffer's node>, ..)` (work goes to the data),
//!   `split2_spawn` spawns the same readers with a plain `spawn` (they run
//!   wherever there is a free P), and `flat` does the latter on the flat
//!   runtime.
//!
//! This machine has ONE memory node: the simulated nodes share it, every
//! buffer is local to every CPU, and NUMA mode should cost (close to)
//! nothing — that is what this bench checks here. The locality win of
//! `spawn_on` shows only on a real multi-node server: there `split(2)` cuts
//! the CPUs in kernel order (node by node on most two-socket machines), each
//! simulated node's memory is the real node holding its CPUs, and a reader
//! that runs on the other node than its buffer pays for remote memory
//! (typically 1.3–2x slower per access). Run it there to see the win.
//!
//! ```text
//! cargo bench --bench numa_mode -- --warm-up-time 1 --measurement-time 3
//! ```

mod common;

use common::{
    bench_with_watchdog, ChainedSpawn, NumaRt, PingPong, SpawnManyLocal, SpawnManyRemoteBusy1,
    SpawnManyRemoteIdle, Workload, YieldMany, WORKERS,
};
use criterion::{criterion_group, criterion_main, Criterion};
use numa_rt::numa::Topology;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The flat runtime: one node, on any machine and whatever
/// `NUMA_RT_TOPOLOGY` says (on this one-node machine, the same as the
/// discovered topology).
fn flat() -> NumaRt {
    NumaRt::with_topology(WORKERS, Topology::split(1).expect("Topology::split(1)"))
}

/// NUMA mode: the allowed CPUs cut into two nodes.
fn split2() -> NumaRt {
    NumaRt::with_topology(
        WORKERS,
        Topology::split(2).expect("Topology::split(2) needs at least 2 CPUs"),
    )
}

/// `numa_mode/<W::NAME>`: the workload on the flat and the split runtime.
fn flat_vs_split<W: Workload>(c: &mut Criterion) {
    let name = format!("numa_mode/{}", W::NAME);
    let mut group = c.benchmark_group(&name);
    // Built one at a time, so an idle runtime never competes for the cores.
    for (id, build) in [("flat", flat as fn() -> NumaRt), ("split2", split2)] {
        let rt = build();
        let iteration = W::prepare(&rt);
        bench_with_watchdog(&mut group, &name, id, &rt, iteration);
    }
    group.finish();
}

fn scheduler_workloads(c: &mut Criterion) {
    flat_vs_split::<SpawnManyLocal>(c);
    flat_vs_split::<SpawnManyRemoteIdle>(c);
    flat_vs_split::<SpawnManyRemoteBusy1>(c);
    flat_vs_split::<YieldMany>(c);
    flat_vs_split::<PingPong>(c);
    flat_vs_split::<ChainedSpawn>(c);
}

// ------------------------------------------------------- node_local_sum

/// Reader tasks (and buffers) per iteration: two per simulated node.
const SUM_TASKS: usize = 4;
/// Each buffer: 16 MiB of `u64`s.
const BUF_WORDS: usize = (16 << 20) / std::mem::size_of::<u64>();
/// Passes each reader makes over its buffer.
const READ_PASSES: usize = 4;
/// What every reader must return.
const EXPECTED_SUM: u64 = READ_PASSES as u64 * (BUF_WORDS as u64 * (BUF_WORDS as u64 - 1) / 2);

/// How the reader tasks of one iteration are spawned.
#[derive(Clone, Copy)]
enum Placement {
    /// `spawn_on(<the buffer's node>, ..)`.
    WithData,
    /// Plain `spawn`.
    Anywhere,
}

/// Allocates buffer `i` inside a task on node `i % nodes` and fills it there:
/// the fill is the first touch, which places the pages on that node.
fn place_buffers(rt: &NumaRt, nodes: usize) -> Vec<Arc<Vec<u64>>> {
    let handle = rt.runtime().handle();
    let fills: Vec<_> = (0..SUM_TASKS)
        .map(|i| {
            handle.spawn_on(i % nodes, async {
                // Zeroed memory comes untouched from the kernel; this loop
                // touches every page first.
                let mut buf = vec![0u64; BUF_WORDS];
                for (k, w) in buf.iter_mut().enumerate() {
                    *w = k as u64;
                }
                Arc::new(buf)
            })
        })
        .collect();
    rt.runtime().block_on(async {
        let mut buffers = Vec::with_capacity(SUM_TASKS);
        for f in fills {
            buffers.push(f.await.expect("allocating a buffer failed"));
        }
        buffers
    })
}

/// A reader: sums `buf` `READ_PASSES` times.
fn sum_passes(buf: &[u64]) -> u64 {
    let mut total = 0u64;
    for _ in 0..READ_PASSES {
        // black_box: every pass really reads the memory again.
        total = total.wrapping_add(black_box(buf).iter().sum::<u64>());
    }
    total
}

fn node_local_sum(c: &mut Criterion) {
    let name = "numa_mode/node_local_sum";
    let mut group = c.benchmark_group(name);
    // Tens of ms per iteration: fewer, longer samples.
    group.sample_size(20);
    for (id, build, placement) in [
        ("flat", flat as fn() -> NumaRt, Placement::Anywhere),
        ("split2_spawn", split2, Placement::Anywhere),
        ("split2_spawn_on", split2, Placement::WithData),
    ] {
        let rt = build();
        let handle = rt.runtime().handle();
        let nodes = handle.topology().num_nodes();
        let buffers = place_buffers(&rt, nodes);
        // Readers that ran on their buffer's node, of all readers: every
        // variant runs the same reader, which also does this bookkeeping.
        let (readers, with_data) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        bench_with_watchdog(&mut group, name, id, &rt, || {
            let handles: Vec<_> = buffers
                .iter()
                .enumerate()
                .map(|(i, buf)| {
                    let (buf, node) = (buf.clone(), i % nodes);
                    let (readers, with_data) = (readers.clone(), with_data.clone());
                    let reader = async move {
                        readers.fetch_add(1, Relaxed);
                        if numa_rt::numa::current_node().map(usize::from) == Some(node) {
                            with_data.fetch_add(1, Relaxed);
                        }
                        sum_passes(&buf)
                    };
                    match placement {
                        Placement::WithData => handle.spawn_on(node, reader),
                        Placement::Anywhere => handle.spawn(reader),
                    }
                })
                .collect();
            rt.runtime().block_on(async {
                for h in handles {
                    assert_eq!(h.await.expect("a reader failed"), EXPECTED_SUM);
                }
            });
        });
        // Nothing ran when a command-line filter left this function out.
        let ran = readers.load(Relaxed);
        if ran > 0 {
            eprintln!(
                "{name}/{id}: {} of {ran} readers ran on their buffer's node",
                with_data.load(Relaxed)
            );
        }
    }
    group.finish();
}

criterion_group!(benches, scheduler_workloads, node_local_sum);
criterion_main!(benches);
