//! An M's life: starting its thread (`start`), binding it to its node
//! (`bind_machine`), handing a P to an idle or new M (`handoff`, Go's
//! `handoffp`), and the node's pool where M's without a P wait
//! (`wait_for_core`). What an M does while it holds a P — the scheduling
//! loop — is `worker/`; the M's shared face is `machine.rs`.
//!
//! Invariant: every P has exactly one M at any time — running it, parked in
//! its driver, or being handed it. M's without a P wait in their node's pool.

use super::context;
use super::local::LocalQueue;
use super::machine::{Live, Machine};
use super::seat::Seat;
use super::worker::Worker;
use super::{BoxCore, Shared};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};

/// Starts an M on `node`, holding `core` if given. If the thread cannot be
/// created, the core comes back with the error.
pub(crate) fn start(
    shared: &Arc<Shared>,
    node: usize,
    core: Option<BoxCore>,
) -> Result<(), (std::io::Error, Option<BoxCore>)> {
    let id = shared.machines.next_id.fetch_add(1, Relaxed);
    let mut b = std::thread::Builder::new().name(shared.config.name_thread());
    if let Some(s) = shared.config.thread_stack_size {
        b = b.stack_size(s);
    }
    let first_p = core.as_ref().map(|c| c.index);
    // The core travels through a slot we keep a handle on: a failed spawn
    // drops the closure, and the core must not be dropped with it.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(core));
    let theirs = slot.clone();
    *shared.machines.live.count.lock().unwrap() += 1;
    let s = shared.clone();
    let spawned = b.spawn(move || {
        let core = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(theirs);
        // Built on its own thread: the pinned queue records its owner.
        let machine = Arc::new(Machine {
            id,
            node,
            tid: numa_rt_numa::sys::gettid(),
            local: LocalQueue::for_machine(&s),
            seat: Seat::new(),
            handoff: Mutex::new(None),
            cv: Condvar::new(),
            retaken: AtomicBool::new(false),
        });
        let owner: std::sync::Weak<dyn super::local::AsksForP> = Arc::downgrade(&machine) as _;
        machine.local.set_owner(owner);
        run(s, machine, core, first_p)
    });
    match spawned {
        Ok(h) => {
            let mut threads = shared.machines.threads.lock().unwrap();
            // Reap finished threads only when the list would grow: a scan
            // per start made starting N M's quadratic (build at 1,024 P's).
            if threads.len() == threads.capacity() {
                threads.retain(|t| !t.is_finished());
            }
            threads.push(h);
            Ok(())
        }
        Err(e) => {
            *shared.machines.live.count.lock().unwrap() -= 1;
            let core = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            Err((e, core))
        }
    }
}

/// Hands `core` to an idle M of its node, or a new one (Go's `handoffp`).
/// If no thread can be started the core comes back.
pub(crate) fn handoff(shared: &Arc<Shared>, core: BoxCore) -> Result<(), BoxCore> {
    let node = core.node;
    let m = {
        let mut pool = shared.nodes[node].idle_machines.lock().unwrap();
        // An M that lost this P and waits for it first (above all one with
        // pinned tasks, which no other M can run: a retake handing the P
        // to any idle M could leave them waiting for good), then any.
        let asker = shared.procs[core.index].take_asker(|m| pool.iter().any(|x| Arc::ptr_eq(x, m)));
        match asker {
            Some(m) => {
                let pos = pool.iter().position(|x| Arc::ptr_eq(x, &m));
                pool.swap_remove(pos.expect("take_asker picked an M of the pool"));
                Some(m)
            }
            None => pool.pop(),
        }
    };
    if let Some(m) = m {
        m.give(core);
        return Ok(());
    }
    start(shared, node, Some(core)).map_err(|(_, c)| c.expect("a failed start returns its core"))
}

/// Signals the M's exit to shutdown. It must drop after everything else the
/// thread held (the runtime's `Arc`s, its reactor context), so that when
/// `Runtime::drop` returns the M's references are gone and the reactor's
/// descriptors close with the runtime.
struct LiveGuard(Arc<Live>);
impl Drop for LiveGuard {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.0.exited.notify_all();
    }
}

fn run(shared: Arc<Shared>, machine: Arc<Machine>, core: Option<BoxCore>, first_p: Option<usize>) {
    let live = LiveGuard(shared.machines.live.clone());
    run_machine(shared, machine, core, first_p);
    drop(live);
}

fn run_machine(
    shared: Arc<Shared>,
    machine: Arc<Machine>,
    core: Option<BoxCore>,
    first_p: Option<usize>,
) {
    bind_machine(&shared, machine.node, first_p);
    // The hooks (a panicking one is contained) and the tokio context.
    let life = super::thread_life::started(&shared);
    let worker = Worker::new(shared.clone(), machine.clone());
    let _cx = context::enter_worker(&worker);
    let _reactor = numa_rt_reactor::context::enter(&shared.reactor);
    let mut core = core;
    let mut last_p = None;
    loop {
        let c = match core.take() {
            Some(c) => c,
            None => match wait_for_core(&shared, &machine, last_p) {
                Some(c) => c,
                None => break,
            },
        };
        let index = c.index;
        // Ask for the P back only if block_in_place lent it away; a P this
        // M gave back (or left at shutdown) stays where it went.
        last_p = worker.run_core(c).then_some(index);
        if shared.is_shutdown() {
            break;
        }
    }
    // Pinned tasks die on their own thread.
    machine.local.close_and_drain();
    life.stopping();
}

/// Binds the calling M's thread to its node's CPUs (the node, not a core,
/// so the OS balances within it — Vyukov), or to one core with
/// `Builder::pin_cores`, and prefers the node's memory. Failures (e.g. a
/// container without permission) are reported once per process and the
/// runtime carries on.
fn bind_machine(shared: &Arc<Shared>, node: usize, first_p: Option<usize>) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let report = |what: &str, e: std::io::Error| {
        if !REPORTED.swap(true, Relaxed) {
            eprintln!("numa_rt: {what} failed ({e}); continuing without it");
        }
    };
    let n = &shared.topology.nodes()[node];
    if shared.config.pin_cores {
        let cpus: Vec<usize> = n.cpus().iter().collect();
        let k = first_p.map_or(0, |p| p - shared.nodes[node].procs.start);
        if let Some(&cpu) = cpus.get(k % cpus.len().max(1)) {
            if !numa_rt_numa::sys::pin_to_core(cpu) {
                report(
                    "pinning a worker to a core",
                    std::io::Error::other(format!("core {cpu}")),
                );
            }
        }
    } else if let Err(e) = numa_rt_numa::sys::set_thread_affinity(n.cpus()) {
        report("binding a worker to its node's CPUs", e);
    }
    if shared.topology.nodes().len() > 1 {
        if let Err(e) = numa_rt_numa::sys::set_preferred_node(n.os_id()) {
            report("set_mempolicy(MPOL_PREFERRED)", e);
        }
    }
}

/// An M without a P waits in its node's pool for one (or exits after
/// `blocking_keep_alive`, as an idle blocking thread does, or at shutdown). If it lost P `last_p` (block_in_place),
/// it also asks for that P back: the P's holder returns it when it would
/// otherwise park (Go's exitsyscall reacquiring its old P). That keeps
/// P↔M affinity, and it is how an M with pinned tasks gets to run them again.
fn wait_for_core(
    shared: &Arc<Shared>,
    machine: &Arc<Machine>,
    last_p: Option<usize>,
) -> Option<BoxCore> {
    let pool = &shared.nodes[machine.node].idle_machines;
    pool.lock().unwrap().push(machine.clone());
    // A pinned task woken while this M was giving its P up may have found
    // it still holding one and asked nobody: ask for it now.
    let last_p = last_p.or_else(|| machine.local.note_no_p());
    if let Some(p) = last_p {
        shared.procs[p].ask_back(machine);
        // The P's holder may already be parked, having looked for an asker
        // before we asked: wake it so it looks again. (barrier) It releases
        // its P under the idle lock, which `take_specific` takes after our
        // `ask_back`; if it releases later, its re-check sees the asker.
        if shared.idle.take_specific(p) {
            shared.unpark(p);
        }
    }
    let mut slot = machine.handoff.lock().unwrap();
    loop {
        if let Some(c) = slot.take() {
            return Some(c);
        }
        if shared.is_shutdown() {
            drop(slot);
            let mut p = pool.lock().unwrap();
            let before = p.len();
            p.retain(|m| !Arc::ptr_eq(m, machine));
            if p.len() < before {
                return None;
            }
            // Someone popped us before we left the pool and is about to
            // hand us a core: take it, so that the scheduling loop leaves
            // it in its P's slot for shutdown's drain. Left in our hand-off
            // slot, its queued tasks would be dropped with this M, outside
            // the runtime and after the drain.
            drop(p);
            slot = machine.handoff.lock().unwrap();
            loop {
                if let Some(c) = slot.take() {
                    return Some(c);
                }
                slot = machine.cv.wait(slot).unwrap();
            }
        }
        let (s, t) = machine
            .cv
            .wait_timeout(slot, shared.config.blocking_keep_alive)
            .unwrap();
        slot = s;
        // An M with live pinned tasks never leaves: only it may run them.
        if t.timed_out() && slot.is_none() && !machine.local.has_live_tasks() {
            let mut p = pool.lock().unwrap();
            let before = p.len();
            p.retain(|m| !Arc::ptr_eq(m, machine));
            if p.len() < before {
                // Nobody picked us: leave, and stop asking for a P.
                drop(p);
                for asked in last_p.into_iter().chain(machine.local.last_p()) {
                    shared.procs[asked].forget_asker(machine);
                }
                return None;
            }
            // Someone popped us and is about to hand us a core: wait for it.
        }
    }
}
