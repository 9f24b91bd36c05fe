//! `spawn_near`: a user's say in batching (docs/architecture.md, "Batches").

use super::{batch_id_for, AbortHandle, BatchId, JoinHandle, TaskMeta};

/// A task that [`spawn_near`](crate::spawn_near) can place a new task
/// beside: a [`JoinHandle`] or an [`AbortHandle`] of it. Sealed.
pub trait Near: sealed::Sealed {
    #[doc(hidden)]
    fn __anchor(&self) -> Option<Anchor>;
}

/// Where the anchor task is and which batch it is in (crate-private
/// contents).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    pub(crate) last_p: Option<usize>,
    pub(crate) batch: BatchId,
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for super::JoinHandle<T> {}
    impl Sealed for super::AbortHandle {}
}

/// The anchor's place; puts it in a batch of its own if it has none, so the
/// new task and it are one batch from now on.
pub(crate) fn anchor_of(meta: &TaskMeta) -> Option<Anchor> {
    if meta.is_finished() {
        return None;
    }
    let batch = match meta.batch() {
        Some(b) => b,
        None => {
            let b = batch_id_for(meta.id);
            meta.set_batch(b);
            b
        }
    };
    Some(Anchor {
        last_p: meta.last_p(),
        batch,
    })
}

impl<T> Near for JoinHandle<T> {
    fn __anchor(&self) -> Option<Anchor> {
        self.with_meta(anchor_of).flatten()
    }
}

impl Near for AbortHandle {
    fn __anchor(&self) -> Option<Anchor> {
        self.with_meta(anchor_of).flatten()
    }
}
