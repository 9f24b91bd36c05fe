//! `JoinHandle` and `JoinError`.

use super::{Id, Panic, TaskMeta};
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

type Inner<T> = async_task::FallibleTask<Result<T, Panic>, TaskMeta>;

/// An owned permission to await a task's output.
///
/// Awaiting yields `Ok(output)`, or a [`JoinError`] if the task panicked or
/// was aborted (also by runtime shutdown). Dropping the handle detaches the
/// task: it keeps running. [`JoinHandle::abort`] cancels it; its future is
/// dropped promptly (at once if it is idle, after its current poll if it is
/// running).
pub struct JoinHandle<T> {
    /// `None` once aborted or after the output was taken. The mutex is only
    /// locked by `abort(&self)`; polling uses `get_mut` and never locks.
    task: Mutex<Option<Inner<T>>>,
    id: Id,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: async_task::Task<Result<T, Panic>, TaskMeta>) -> Self {
        let id = task.metadata().id;
        JoinHandle {
            task: Mutex::new(Some(task.fallible())),
            id,
        }
    }

    /// Cancels the task. Its future is dropped promptly; awaiting this handle
    /// then yields a cancelled [`JoinError`]. No effect on a finished task.
    pub fn abort(&self) {
        let mut slot = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|t| !t.is_finished()) {
            // Dropping an async-task handle cancels the task: an idle task is
            // scheduled once so its future gets dropped by a worker.
            drop(slot.take());
        }
    }

    /// Whether the task has finished (completed, panicked or been cancelled).
    pub fn is_finished(&self) -> bool {
        let slot = self.task.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The task's id.
    pub fn id(&self) -> Id {
        self.id
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let id = this.id;
        let slot = this.task.get_mut().unwrap_or_else(|e| e.into_inner());
        let Some(task) = slot.as_mut() else {
            return Poll::Ready(Err(JoinError::cancelled(id)));
        };
        // Awaiting a handle is an operation on the cooperative budget.
        if numa_rt_reactor::coop::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        match Pin::new(task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                *slot = None;
                Poll::Ready(match out {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(p)) => Err(JoinError::panic(id, p)),
                    None => Err(JoinError::cancelled(id)),
                })
            }
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

/// Why a task did not produce its output.
pub struct JoinError {
    repr: Repr,
    id: Id,
}

enum Repr {
    Cancelled,
    Panic(Panic),
}

impl JoinError {
    pub(crate) fn cancelled(id: Id) -> Self {
        JoinError {
            repr: Repr::Cancelled,
            id,
        }
    }

    pub(crate) fn panic(id: Id, p: Panic) -> Self {
        JoinError {
            repr: Repr::Panic(p),
            id,
        }
    }

    /// The task was aborted, or dropped by runtime shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload. Panics if the task was cancelled; see [`JoinError::try_into_panic`].
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` called on a cancelled task's error")
    }

    /// The panic payload, or the error back if the task was cancelled.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the task that failed.
    pub fn id(&self) -> Id {
        self.id
    }
}

fn panic_message(p: &Panic) -> Option<&str> {
    p.downcast_ref::<&'static str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "task {} was cancelled", self.id),
            Repr::Panic(p) => match panic_message(p) {
                Some(m) => write!(f, "task {} panicked with message {m:?}", self.id),
                None => write!(f, "task {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({})", self.id),
            Repr::Panic(p) => match panic_message(p) {
                Some(m) => write!(f, "JoinError::Panic({}, {m:?})", self.id),
                None => write!(f, "JoinError::Panic({}, ..)", self.id),
            },
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> Self {
        std::io::Error::other(e.to_string())
    }
}
