//! Step 6, stealing: a spinning M takes work from other P's along the steal order.

use super::Worker;
use crate::scheduler::placement::Look;
use crate::scheduler::processor::Core;
use crate::scheduler::steal::{Seen, StealFrom};
use crate::task::Runnable;
use crate::tuning::{REMOTE_GRACE, RUNNEXT_GRACE, STEAL_PASSES};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// What one steal pass over a node's P's found.
enum Pass {
    /// A task to run now, and how many were taken.
    Found(Runnable, usize),
    /// A ring worth stealing from, but the steal lost a race (or found it
    /// shorter by then): another pass may do better.
    Missed,
    /// Only `runnext` tasks (taken on the last pass only).
    OnlyRunnext,
    /// Nothing a thief may take.
    Nothing,
}

/// What [`Worker::steal_passes`] found when it took nothing.
struct Empty {
    /// Some victim held owner-only work (a kept batch, or a ring within its
    /// reserve): the node is
    /// not out of work, only out of work worth moving (see [`Worker::steal`]).
    owner_only: bool,
}

impl Worker {
    /// Step 6: become a spinner if Go's rule allows one more and there is
    /// something to steal, then steal.
    pub(super) fn steal_work(&self, core: &mut Core, woke: bool) -> Option<Runnable> {
        let shared = &*self.shared;
        // Only where there is something to steal: another busy P of this
        // node, or a saturated node elsewhere (at light load the scan would
        // probe every idle P's empty ring before each park).
        if !core.spinning && shared.idle.may_spin(core.node) && self.worth_stealing(core.node) {
            core.spinning = true;
            shared.idle.start_spinning(core.node);
        }
        // A new M (tick 0, never parked) skips the steal: at build every M
        // starts spinning, and N of them each scanning N victims made
        // build() quadratic. Its park re-checks every queue (`any_work`)
        // and comes back spinning if one has work.
        let fresh = core.tick == 0 && !woke;
        if !core.spinning || fresh {
            return None;
        }
        self.steal(core).ok()
    }

    /// Whether a steal could find anything: another P of `node` is held by
    /// an M, or some other node is saturated (the only remote work `steal`
    /// takes).
    fn worth_stealing(&self, node: usize) -> bool {
        let shared = &*self.shared;
        shared.idle.others_busy(node)
            || shared.nodes[node]
                .remote_order
                .iter()
                .any(|&rn| shared.saturated(rn))
    }

    /// Steals along the steal order ([`Shared::steal_walk`]): P's of this
    /// node (four passes, `runnext` on the last), then remote node queues
    /// (nearest node first), then remote P's. Remote stealing starts only
    /// once this node has nothing, owner-only work included.
    ///
    /// [`Shared::steal_walk`]: crate::scheduler::Shared::steal_walk
    fn steal(&self, core: &mut Core) -> Result<Runnable, Empty> {
        let shared = &*self.shared;
        let m = &shared.procs[core.index].metrics;
        let seen = shared.steal_walk(core.node, |from| match from {
            StealFrom::OwnProcs(n) | StealFrom::NodeProcs(n) => {
                match self.steal_passes(core, shared.nodes[n].procs.clone()) {
                    Ok((t, k)) => Seen::Found((t, k, from)),
                    Err(Empty { owner_only: true }) => Seen::OwnerOnly,
                    Err(Empty { owner_only: false }) => Seen::Nothing,
                }
            }
            StealFrom::NodeQueue(n) => match shared.nodes[n].inject.pop_unserved(REMOTE_GRACE) {
                Some(t) => Seen::Found((t, 1, from)),
                None => Seen::Nothing,
            },
        });
        match seen {
            Seen::Found((t, k, from)) => {
                m.steals.add(k as u64);
                match from {
                    StealFrom::OwnProcs(_) => m.local_steals.incr(),
                    StealFrom::NodeQueue(_) | StealFrom::NodeProcs(_) => m.remote_steals.incr(),
                }
                Ok(t)
            }
            Seen::OwnerOnly => Err(Empty { owner_only: true }),
            Seen::Nothing => Err(Empty { owner_only: false }),
        }
    }

    /// Runs up to [`STEAL_PASSES`] passes over `victims`, `runnext` on the
    /// last only. A pass that saw nothing a thief may take (every ring empty,
    /// no `runnext`, or only owner-only work) ends the search: more
    /// passes a few hundred nanoseconds later would look at the same
    /// queues, and work that arrives afterwards is found by the park
    /// re-check (the barrier). A pass that saw only `runnext` tasks skips
    /// to the last pass: four full passes over many idle P's cost a large
    /// share of a light request.
    fn steal_passes(
        &self,
        core: &mut Core,
        victims: std::ops::Range<usize>,
    ) -> Result<(Runnable, usize), Empty> {
        let mut pass = 0;
        let mut owner_only = false;
        while pass < STEAL_PASSES {
            let last = pass + 1 == STEAL_PASSES;
            match self.steal_pass(core, victims.clone(), last, &mut owner_only) {
                Pass::Found(t, n) => return Ok((t, n)),
                Pass::Nothing => break,
                Pass::OnlyRunnext if !last => pass = STEAL_PASSES - 1,
                Pass::OnlyRunnext | Pass::Missed => pass += 1,
            }
        }
        Err(Empty { owner_only })
    }

    /// One pass; sets `owner_only` when a victim held only owner-only work
    /// (a kept batch's, or a ring within its reserve).
    fn steal_pass(
        &self,
        core: &mut Core,
        victims: std::ops::Range<usize>,
        last: bool,
        owner_only: &mut bool,
    ) -> Pass {
        let n = victims.len();
        if n == 0 {
            return Pass::Nothing;
        }
        let (mut rings, mut runnexts) = (false, false);
        let start = core.rand(n);
        for i in 0..n {
            let v = victims.start + (start + i) % n;
            if v == core.index {
                continue;
            }
            let victim = &self.shared.procs[v];
            // What the policy lets a thief take (a few loads: most victims
            // have nothing). A victim holding only a batch queue is asked
            // to split it; its split wakes an idle P, so parking loses
            // nothing.
            let reserve = match self.shared.steal_look(victim, true) {
                Look::Nothing => continue,
                Look::OwnerOnly => {
                    *owner_only = true;
                    continue;
                }
                Look::Runnext => {
                    // Taken on the last pass only.
                    runnexts = true;
                    if !last {
                        continue;
                    }
                    0
                }
                Look::Stealable { reserve } => {
                    rings = true;
                    reserve
                }
            };
            let wait = || {
                if victim.running.load(Relaxed) {
                    let t0 = Instant::now();
                    while t0.elapsed() < RUNNEXT_GRACE {
                        crate::loom::spin_loop();
                    }
                }
            };
            if let Some((t, n)) = core.queue.steal_sparing(&victim.steal, reserve, last, wait) {
                return Pass::Found(t, n);
            }
        }
        match (rings, runnexts) {
            (true, _) => Pass::Missed,
            (false, true) => Pass::OnlyRunnext,
            (false, false) => Pass::Nothing,
        }
    }
}

/// The random victim order's source, used only here.
impl Core {
    /// A random number in `0..n` (n > 0).
    pub(crate) fn rand(&mut self, n: usize) -> usize {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        ((x >> 32) as usize * n) >> 32
    }
}
