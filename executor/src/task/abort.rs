//! `AbortHandle`: abort a task without owning its output.

use super::{Id, TaskMeta};
use std::fmt;
use std::ptr::NonNull;
use std::task::Waker;

/// Aborts a task without owning its output; made by
/// [`JoinHandle::abort_handle`](super::JoinHandle::abort_handle).
///
/// `Send`, `Sync` and `Clone`. Holding one keeps the task's allocation (a
/// few words, not its future or output) alive until it is dropped.
#[derive(Clone)]
pub struct AbortHandle {
    id: Id,
    /// `None` when made from a handle whose output was already taken.
    task: Option<TaskWaker>,
}

/// A waker of the task (a counted reference: it keeps the allocation, and
/// so the header's `TaskMeta`, alive) and that `TaskMeta`.
#[derive(Clone)]
struct TaskWaker {
    waker: Waker,
    meta: NonNull<TaskMeta>,
}

// SAFETY: `meta` points at a `TaskMeta` (Sync: an id and an atomic word)
// inside the allocation that `waker` keeps alive; `Waker` is Send and Sync.
unsafe impl Send for TaskWaker {}
// SAFETY: as above.
unsafe impl Sync for TaskWaker {}

impl AbortHandle {
    pub(crate) fn new(id: Id, waker: Waker, meta: &TaskMeta) -> Self {
        AbortHandle {
            id,
            task: Some(TaskWaker {
                waker,
                meta: NonNull::from(meta),
            }),
        }
    }

    pub(crate) fn finished(id: Id) -> Self {
        AbortHandle { id, task: None }
    }

    /// Runs `f` on the task's metadata (`None` for a handle made after the
    /// output was taken).
    pub(crate) fn with_meta<R>(&self, f: impl FnOnce(&TaskMeta) -> R) -> Option<R> {
        self.meta().map(f)
    }

    fn meta(&self) -> Option<&TaskMeta> {
        // SAFETY: see `TaskWaker`: our waker keeps the header alive.
        self.task.as_ref().map(|t| unsafe { t.meta.as_ref() })
    }

    /// Cancels the task, like [`JoinHandle::abort`](super::JoinHandle::abort):
    /// its future is dropped at its next poll; a `JoinHandle` awaiting it then
    /// yields a cancelled error. No effect on a finished task.
    pub fn abort(&self) {
        if let (Some(t), Some(meta)) = (&self.task, self.meta()) {
            if meta.set_aborted() {
                t.waker.wake_by_ref();
            }
        }
    }

    /// Whether the task's future is gone: it completed, panicked, was
    /// aborted, or was dropped by runtime shutdown. Once true, whatever the
    /// future's destructor did is visible to the caller.
    pub fn is_finished(&self) -> bool {
        self.meta().is_none_or(TaskMeta::is_finished)
    }

    /// The task's id.
    pub fn id(&self) -> Id {
        self.id
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle").field("id", &self.id).finish()
    }
}
