//! Making a task: the allocation (async-task's, with our `TaskMeta` and
//! `Harness`), its registry entry or count, and its `JoinHandle`. The
//! callers (`Shared::spawn_placed`, the pinned queues, the blocking pool)
//! queue the `Runnable`.

use super::harness::{self, Harness};
use super::meta::RegistryRef;
use super::registry::Registry;
use super::{JoinHandle, Kind, Runnable, TaskMeta, TaskRef};
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;

/// A new task and its handle, not yet scheduled.
pub(crate) struct Spawned<T> {
    pub(crate) runnable: Runnable,
    pub(crate) handle: JoinHandle<T>,
    /// False if the registry was closed (spawned after shutdown): the caller
    /// drops the runnable, which drops the future; the handle reports
    /// cancellation.
    pub(crate) live: bool,
}

/// Creates a `Send` task tracked in `registry`, with `schedule` as its
/// schedule function, spawned at `location`. The caller queues `runnable`
/// (if `live`).
pub(crate) fn spawn_tracked<F, S>(
    future: F,
    registry: &Arc<Registry>,
    schedule: S,
    location: &'static Location<'static>,
) -> Spawned<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: async_task::Schedule<TaskMeta> + Send + Sync + 'static,
{
    // Not `spawn_in`: a `Send` task gets its registry entry at its first
    // `Pending` (see `registry`), not here.
    let mut meta = TaskMeta::new(Kind::Task, location);
    meta.set_unregistered(location);
    meta.registry = RegistryRef::new(registry);
    let (runnable, task) = async_task::Builder::new()
        .metadata(meta)
        .spawn(move |meta| Harness::new(future, meta), schedule);
    // The handle's waker parts (a waker's count, taken and given back on
    // this thread, on the task's own fresh line).
    let raw = TaskRef::new(&runnable.waker(), runnable.metadata());
    // Counted either way: a task refused here is dropped by the caller,
    // and its harness takes the count back like any unpolled task's.
    registry.count_unpolled();
    Spawned {
        runnable,
        handle: JoinHandle::new(task, raw),
        live: !registry.is_closed(),
    }
}

/// Creates a `!Send` task tracked in `registry` (a pinned queue's). The
/// caller queues `runnable` (if `live`) on the owning thread.
#[track_caller]
pub(crate) fn spawn_local_tracked<F, S>(
    future: F,
    registry: &Arc<Registry>,
    schedule: S,
) -> Spawned<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
    S: async_task::Schedule<TaskMeta> + Send + Sync + 'static,
{
    spawn_in(Kind::Local, registry, |meta| {
        async_task::Builder::new()
            .metadata(meta)
            .spawn_local(move |meta| Harness::new(future, meta), schedule)
    })
}

/// A task with its registry entry from the start (pinned tasks: see
/// `registry`): a fresh `TaskMeta`, the entry (with the caller's location),
/// the handle. `build` makes the task from the meta.
#[track_caller]
fn spawn_in<T>(
    kind: Kind,
    registry: &Arc<Registry>,
    build: impl FnOnce(TaskMeta) -> (Runnable, async_task::Task<harness::Output<T>, TaskMeta>),
) -> Spawned<T> {
    let location = Location::caller();
    let mut meta = TaskMeta::new(kind, location);
    let id = meta.id.as_u64();
    meta.registry = RegistryRef::new(registry);
    let (runnable, task, raw, live) = registry.insert(id, location, |index| {
        meta.set_slot(index);
        build(meta)
    });
    Spawned {
        runnable,
        handle: JoinHandle::new(task, raw),
        live,
    }
}

/// Creates an untracked `Send` task (the blocking pool's: its queue drops
/// queued closures at shutdown, and a running one cannot be interrupted).
#[track_caller]
pub(crate) fn spawn_untracked<F, S>(future: F, schedule: S) -> (Runnable, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: async_task::Schedule<TaskMeta> + Send + Sync + 'static,
{
    let (runnable, task) = async_task::Builder::new()
        .metadata(TaskMeta::new(Kind::Blocking, Location::caller()))
        .spawn(move |meta| Harness::new(future, meta), schedule);
    // One waker clone and drop (two atomic updates) per blocking spawn,
    // which also takes the pool's lock: tracked tasks get this for free
    // from their registry entry.
    let raw = TaskRef::new(&runnable.waker(), runnable.metadata());
    (runnable, JoinHandle::new(task, raw))
}

#[cfg(test)]
mod tests {
    use crate::task::{Id, JoinSet};

    /// The `#[track_caller]` chain reaches the user's call for every way
    /// to spawn a tracked task (the location is in the registry entry, read
    /// by the task dump; `spawn_blocking` closures are not in the dump).
    /// (Builds a runtime: not under loom, whose primitives only work inside
    /// a model.)
    #[test]
    #[cfg(not(loom))]
    fn spawn_functions_record_their_callers_location() {
        use std::future::pending;
        let rt = crate::Builder::new().max_procs(1).build().unwrap();
        // A `Send` task is listed once its first poll (by the worker)
        // returned `Pending`: until then it is only counted.
        let check = |id: Id, line: u32| {
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
            let t = loop {
                let dump = rt.dump();
                if let Some(t) = dump.tasks().iter().find(|t| t.id == id) {
                    break t.clone();
                }
                assert!(
                    std::time::Instant::now() < give_up,
                    "task {id} never polled"
                );
                std::thread::yield_now();
            };
            assert_eq!((t.location.file(), t.location.line()), (file!(), line));
        };
        let h = rt.spawn(pending::<()>());
        check(h.id(), line!() - 1);
        let h3 = rt.handle().spawn_on(0, pending::<()>());
        check(h3.id(), line!() - 1);
        let mut lines = Vec::new();
        let mut set = JoinSet::new();
        rt.block_on(async {
            let a = crate::spawn(pending::<()>());
            lines.push((a.id(), line!() - 1));
            let b = crate::spawn_local(pending::<()>());
            lines.push((b.id(), line!() - 1));
            let d = crate::numa::spawn_on(0, pending::<()>());
            lines.push((d.id(), line!() - 1));
            let e = set.spawn(pending::<()>());
            lines.push((e.id(), line!() - 1));
            let f = set.spawn_local(pending::<()>());
            lines.push((f.id(), line!() - 1));
            let i = set.spawn_on_node(0, pending::<()>());
            lines.push((i.id(), line!() - 1));
            // Inside the `block_on`: its pinned tasks end with it.
            for (id, line) in lines {
                check(id, line);
            }
            for t in [&a, &b, &d] {
                t.abort();
            }
            for t in [a, b, d] {
                assert!(t.await.unwrap_err().is_cancelled());
            }
            set.shutdown().await;
        });
        for t in [&h, &h3] {
            t.abort();
        }
        for t in [h, h3] {
            assert!(rt.block_on(t).unwrap_err().is_cancelled());
        }
    }
}
