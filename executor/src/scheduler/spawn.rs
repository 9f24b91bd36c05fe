//! Spawn placement: where a new task goes.

use super::placement::{NewTask, Route, Spawned};
use super::wake::schedule_task;
use super::{context, Shared};
use crate::task::{self, JoinHandle, Runnable};
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Where a new task goes (see [`Shared::spawn_placed`]).
enum Place {
    /// [`Shared::place_new`]'s rules.
    Default,
    /// A node's queue (`spawn_on`).
    Node(usize),
    /// Beside another task (`spawn_near`).
    Near(task::Anchor),
}

impl Shared {
    /// Spawns a `Send` task. Where it first runs follows the wake policy of
    /// [`Shared::schedule`], except for root tasks (see `place_new`).
    #[track_caller]
    pub(crate) fn spawn<F>(
        self: &Arc<Self>,
        future: F,
        node: Option<usize>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed(future, node.map_or(Place::Default, Place::Node))
    }

    /// Spawns a `Send` task beside the task `near` names (`spawn_near`): in
    /// its batch, queued on the P that last polled it (that P's inbox, or
    /// this P's `runnext` when it is this one). An anchor that never ran, ran
    /// on a P that is retired now, or has finished: an ordinary spawn.
    #[track_caller]
    pub(crate) fn spawn_near<F>(
        self: &Arc<Self>,
        future: F,
        near: Option<task::Anchor>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed(future, near.map_or(Place::Default, Place::Near))
    }

    #[track_caller]
    fn spawn_placed<F>(self: &Arc<Self>, future: F, place: Place) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed_at(future, place, std::panic::Location::caller())
    }

    /// [`Shared::spawn`] of a task spawned at `location`, for a caller
    /// that cannot pass its caller on (the free `spawn`, which reaches the
    /// runtime through a closure: see `context::with_current`).
    pub(crate) fn spawn_at<F>(
        self: &Arc<Self>,
        future: F,
        location: &'static std::panic::Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed_at(future, Place::Default, location)
    }

    fn spawn_placed_at<F>(
        self: &Arc<Self>,
        future: F,
        place: Place,
        location: &'static std::panic::Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let new = task::spawn_tracked(
            future,
            &self.tasks,
            async_task::WithInfo(schedule_task),
            location,
        );
        if !new.live {
            // Spawned after shutdown: dropping the runnable drops the future.
            drop(new.runnable);
            return new.handle;
        }
        self.place_new(new.runnable, place);
        new.handle
    }

    /// Where a new task goes: a requested node's queue (`spawn_on`); the next
    /// P round-robin for a root task (spawned right after an accept —
    /// Vyukov's root distribution); beside its anchor (`spawn_near`);
    /// otherwise like a wake-up (runnext). The policy decides for roots
    /// and near tasks (`Policy::route`, a `NewTask`); this carries it out.
    ///
    /// A root task stays one on a thread that holds no P: `block_on`
    /// accepting, or an M whose P sysmon is retaking or has retaken in the
    /// middle of the accepting poll (the seat refuses access then). It goes
    /// to the next P round-robin, the accepting P included, since this
    /// thread is not running it. The node queue, where such a task went
    /// before, lost the spread: an accept loop in `#[numa_rt::main]`'s body
    /// never dealt a connection, and a retaken poll's remaining connections
    /// went to whichever P looked first.
    fn place_new(self: &Arc<Self>, task: Runnable, place: Place) {
        let how = match place {
            Place::Node(node) => return self.push_node(node, task),
            Place::Near(a) => Spawned::Near(a),
            // (The accept mark is taken either way: it is for this spawn only.)
            Place::Default if numa_rt_reactor::context::take_accepted() && !self.is_shutdown() => {
                Spawned::Root
            }
            Place::Default => return self.enqueue(task, false, false),
        };
        let route = self.policy.route(NewTask {
            meta: task.metadata(),
            how,
            active: self.active_procs(),
            here: || context::current_p_of(self),
            next_root: &self.rr,
        });
        match route {
            Route::Wake => self.enqueue(task, false, false),
            Route::Root(p) => {
                self.procs[p].metrics.root_tasks_received.incr_shared();
                self.push_inbox(p, task)
            }
            Route::Near(p) => self.push_inbox(p, task),
        }
    }

    /// Picks a node for work that comes from outside the runtime, round-robin
    /// from the random start node.
    pub(super) fn next_node(&self) -> usize {
        let n = self.nodes.len();
        if n == 1 {
            0
        } else {
            // Nodes without P's are served by their nearest node with P's.
            self.nodes[(self.start_node + self.rr.fetch_add(1, Relaxed)) % n].served_by
        }
    }
}
