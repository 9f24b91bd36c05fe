//! Building the runtime's shared state: P's, nodes, M threads.

use super::blocking_pool::BlockingPool;
use super::idle::Idle;
use super::inject::Inject;
use super::processor::Processor;
use super::{lifecycle, machine, placement, seat, BlockOns, Node, Shared};
use crate::config::Config;
use crate::task::registry::Registry;
use numa_rt_numa::Topology;
use numa_rt_reactor::Reactor;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

impl Shared {
    pub(crate) fn build(
        mut config: Config,
        topology: Topology,
        node_of_p: Vec<usize>,
        start_node: usize,
        sysmon: impl FnOnce(std::sync::Weak<Shared>) -> Arc<dyn numa_rt_reactor::SysmonHook>,
    ) -> std::io::Result<Arc<Shared>> {
        // Retake needs membarrier (see `seat`); without it, it is off and
        // the reason is told once per process, never a failure.
        let mut retake_unavailable = None;
        if config.retake_threshold.is_some() {
            if let Err(why) = seat::register() {
                static TOLD: AtomicBool = AtomicBool::new(false);
                if !TOLD.swap(true, Relaxed) {
                    eprintln!(
                        "numa_rt: sysmon's retake is off: {why}; a task that blocks its thread \
                         keeps its processor's other tasks waiting"
                    );
                }
                config.retake_threshold = None;
                retake_unavailable = Some(why);
            }
        }
        let nprocs = node_of_p.len();
        let nnodes = topology.nodes().len();
        // Other nodes nearest first, by the distance table (remote stealing,
        // and the reactor's lending of a busy node's pollers).
        let remote_orders: Vec<Vec<usize>> = (0..nnodes)
            .map(|n| {
                let dist = topology.nodes()[n].distances().to_vec();
                let mut remote_order: Vec<usize> = (0..nnodes).filter(|&k| k != n).collect();
                remote_order.sort_by_key(|&k| dist.get(k).copied().unwrap_or(u32::MAX));
                remote_order
            })
            .collect();
        // Idle P's help (drain the pollers of) busy P's of their own node;
        // a node whose M's are all busy lends its pollers to the nearest
        // node whose watcher is parked (docs/architecture.md, "Readiness
        // across nodes").
        let reactor =
            Reactor::with_nodes_events_and_order(&node_of_p, config.io_events, &remote_orders)?;
        let mut cores = Vec::with_capacity(nprocs);
        let mut procs = Vec::with_capacity(nprocs);
        for (i, &node) in node_of_p.iter().enumerate() {
            let (p, core) =
                Processor::new(i, node, reactor.driver(i), config.poll_histogram.as_ref());
            procs.push(p);
            cores.push(core);
        }
        let nodes = (0..nnodes)
            .map(|n| {
                let start = node_of_p.iter().position(|&k| k == n).unwrap_or(nprocs);
                let len = node_of_p.iter().filter(|&&k| k == n).count();
                let remote_order = remote_orders[n].clone();
                let served_by = if len > 0 {
                    n
                } else {
                    remote_order
                        .iter()
                        .copied()
                        .find(|&k| node_of_p.contains(&k))
                        .unwrap_or(0)
                };
                Node {
                    inject: Inject::new(),
                    procs: start..start + len,
                    remote_order,
                    idle_machines: Mutex::new(Vec::new()),
                    served_by,
                }
            })
            .collect();
        let blocking = BlockingPool::new(&config);
        // Before the M's, which enter its context when they start. A later
        // failure drops `shared`, and with it this (`SideRuntime::drop`).
        #[cfg(feature = "tokio-compat")]
        let tokio = match config.tokio_compat {
            true => Some(crate::tokio_compat::SideRuntime::start(
                config.tokio_compat_workers,
            )?),
            false => None,
        };
        let shared = Arc::new(Shared {
            procs: procs.into_boxed_slice(),
            nodes,
            idle: Idle::new(node_of_p, nnodes),
            policy: placement::Policy::new(config.placement),
            config,
            topology,
            reactor,
            blocking,
            machines: machine::Threads::default(),
            shutdown: AtomicBool::new(false),
            rr: AtomicUsize::new(0),
            active_procs: AtomicUsize::new(nprocs),
            start_node,
            tasks: Registry::for_runtime(4 * nprocs),
            started: std::time::Instant::now(),
            block_ons: BlockOns::default(),
            in_place: AtomicUsize::new(0),
            local_registries: Mutex::new(Vec::new()),
            retake_unavailable,
            sysmon: std::sync::OnceLock::new(),
            #[cfg(feature = "tokio-compat")]
            tokio,
        });
        // Before any task exists: the schedule function of a task woken off
        // this runtime's M's finds the runtime through its registry.
        let owner: std::sync::Weak<Shared> = Arc::downgrade(&shared);
        shared.tasks.set_owner(owner);
        // Always installed and started: besides its reports, sysmon retakes
        // stuck P's, polls the pollers nobody watches (the reactor's
        // monitor), which a runtime of one P needs too, and auto-advances a
        // paused clock. It sleeps while the runtime is idle.
        let sysmon = sysmon(Arc::downgrade(&shared));
        let hook = Arc::downgrade(&sysmon);
        let _ = shared.sysmon.set(sysmon);
        shared.reactor.set_sysmon(hook)?;
        if shared.config.start_paused {
            // Before any M runs: no timer sees the real clock.
            shared.reactor.pause_clock();
        }
        for mut core in cores {
            let index = core.index;
            let node = shared.procs[index].node;
            // A new M looks for work before it first parks: it counts as
            // spinning until then, so its node is never taken for one with
            // nobody to serve it (see `Idle::saturated`) while its threads
            // are still starting.
            core.spinning = true;
            shared.idle.start_spinning(node);
            if let Err((e, _)) = lifecycle::start(&shared, node, Some(core)) {
                let e = thread_start_error(&shared.config, index, nprocs, e);
                // Stop the M's already started, and wait for them: build()
                // fails without leaving threads behind.
                shared.begin_shutdown();
                shared.reactor.shutdown();
                shared.machines.wait_all(None, 0);
                shared.blocking.shutdown(None);
                shared.drain_all();
                shared.stop_tokio(None);
                return Err(e);
            }
        }
        Ok(shared)
    }
}

/// The error of a machine thread that could not be started while building,
/// naming the setting behind it.
fn thread_start_error(
    config: &Config,
    index: usize,
    nprocs: usize,
    e: std::io::Error,
) -> std::io::Error {
    let which = format!("thread {} of max_procs({nprocs})", index + 1);
    let msg = match (config.thread_stack_size, e.raw_os_error()) {
        (Some(s), Some(libc::EINVAL | libc::ENOMEM)) => format!(
            "cannot start {which}: the OS refused a stack of Builder::thread_stack_size({s}) \
             bytes ({e})"
        ),
        (_, Some(libc::EAGAIN)) => format!(
            "cannot start {which}: the OS refuses more threads ({e}); the limit is one of \
             RLIMIT_NPROC (ulimit -u), kernel.threads-max, vm.max_map_count or the cgroup's \
             pids.max: raise it or lower max_procs"
        ),
        _ => format!("cannot start {which} ({e})"),
    };
    std::io::Error::new(e.kind(), msg)
}
