//! Thread-local context: which runtime, M and P the current thread belongs to.
//!
//! The runtime entered on a thread is kept as its `Arc<Shared>`;
//! `Handle::try_current` wraps it in a `Handle`.

use super::local::LocalQueue;
use super::processor::Core;
use super::worker::Worker;
use super::{BoxCore, Shared};
use crate::task::registry::Registry;
use crate::task::Runnable;
use std::cell::{Cell, RefCell};
use std::ptr;
use std::sync::Arc;

thread_local! {
    /// The M of this thread, if it is one. Set by `enter_worker` for the
    /// life of the M's run function.
    static WORKER: Cell<*const Worker> = const { Cell::new(ptr::null()) };
    /// The runtime entered on this thread (`Handle::enter`, `block_on`, workers).
    static RUNTIME: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
    /// Where `spawn_local` puts tasks on this thread.
    static LOCAL: RefCell<Option<Arc<LocalQueue>>> = const { RefCell::new(None) };
    /// Set while this thread runs a `block_in_place` closure.
    static BLOCKING: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread runs `Handle::block_on` (nesting one is refused).
    static IN_BLOCK_ON: Cell<bool> = const { Cell::new(false) };
    /// How many `EnterGuard`s live on this thread: each guard records the
    /// depth it made, so one dropped out of order is caught.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Resets the worker pointer when the M's run function ends.
pub(crate) struct WorkerGuard {
    _handle: EnterGuard,
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        WORKER.with(|w| w.set(ptr::null()));
        LOCAL.with(|l| l.borrow_mut().take());
    }
}

pub(crate) fn enter_worker(worker: &Worker) -> WorkerGuard {
    WORKER.with(|w| w.set(worker));
    LOCAL.with(|l| *l.borrow_mut() = Some(worker.machine.local.clone()));
    WorkerGuard {
        _handle: enter(worker.shared.clone()),
    }
}

/// This thread's M, as [`with_worker`] found it. Only this module makes
/// one, and it cannot leave the thread (`!Send`), so holding a `Here` says
/// that its `Worker` is the calling thread's: the owner of its seat.
#[derive(Clone, Copy)]
pub(crate) struct Here<'a>(&'a Worker, std::marker::PhantomData<*const ()>);

impl std::ops::Deref for Here<'_> {
    type Target = Worker;
    fn deref(&self) -> &Worker {
        self.0
    }
}

/// Runs `f` with this thread's worker, if any.
///
/// The pointer is read inside `WORKER.with` and `f` runs outside it: the
/// schedule function's closure inside `LocalKey::with` kept that call from
/// being inlined, so each wake paid an indirect call to the key's accessor
/// and built the closure's environment on the stack.
#[inline]
pub(crate) fn with_worker<R>(f: impl FnOnce(Option<Here<'_>>) -> R) -> R {
    let p = WORKER.with(Cell::get);
    // SAFETY: `WORKER` is only set by `enter_worker` on this thread to a
    // `Worker` that outlives the guard clearing it again (the guard lives in
    // the M's run function, below us on this thread's stack, so `f` cannot
    // outlive it); the pointer is never shared with another thread.
    let w = unsafe { p.as_ref() };
    f(w.map(|w| Here(w, std::marker::PhantomData)))
}

/// Pushes through the P of `w`, this thread's M (`None`: this thread is no
/// M of the runtime in question), if it holds one: `f(core, in_driver,
/// task)`. Otherwise the task comes back: also while sysmon is taking the
/// core away (see `seat`), and after it has.
#[inline]
pub(crate) fn with_core_of<R>(
    w: Option<Here<'_>>,
    task: Runnable,
    f: impl FnOnce(&mut Core, bool, Runnable) -> R,
) -> Result<R, Runnable> {
    let Some(w) = w else {
        return Err(task);
    };
    let mut task = Some(task);
    // SAFETY: `w` is this thread's M (a `Here`), the seat's owner; `f` is
    // crate code that pushes to a queue and does not re-enter the seat.
    let done = unsafe {
        w.machine.seat.access(|c| {
            let core = c.as_mut()?;
            let t = task.take().expect("the task is pushed once");
            Some(f(core, w.in_driver.get(), t))
        })
    };
    match done {
        Some(Some(r)) => Ok(r),
        _ => Err(task.take().expect("a task not pushed comes back")),
    }
}

/// This thread's M if it is one of `shared`'s.
#[inline]
pub(crate) fn worker_of<'a>(w: Option<Here<'a>>, shared: &Shared) -> Option<Here<'a>> {
    w.filter(|w| ptr::eq(&*w.shared, shared))
}

/// Whether `w` is an M of the runtime whose task registry is `registry`
/// (its `Shared` then outlives `w`: the M holds it). Compares addresses
/// only.
#[inline]
pub(crate) fn runs_registry(w: Here<'_>, registry: *const Registry) -> bool {
    ptr::eq(Arc::as_ptr(&w.shared.tasks), registry)
}

/// The P held by this thread, if it is a worker of `shared` holding one.
pub(crate) fn current_p_of(shared: &Arc<Shared>) -> Option<usize> {
    with_worker(|w| match w {
        // SAFETY: `w` is this thread's M, the seat's owner; the closure
        // only reads the index.
        Some(w) if ptr::eq(&*w.shared, &**shared) => unsafe {
            w.machine
                .seat
                .access(|c| c.as_ref().map(|c| c.index))
                .flatten()
        },
        _ => None,
    })
}

/// The node of this thread's M, if it is a worker of `shared`.
pub(crate) fn current_node_of(shared: &Arc<Shared>) -> Option<usize> {
    with_worker(|w| match w {
        Some(w) if ptr::eq(&*w.shared, &**shared) => Some(w.machine.node),
        _ => None,
    })
}

/// Whether this thread is an M of any numa_rt runtime, outside
/// `block_in_place` (see [`leave_worker`]).
pub(crate) fn in_worker() -> bool {
    with_worker(|w| w.is_some()) && !BLOCKING.with(Cell::get)
}

/// What `block_in_place` does around its closure, so that the closure may
/// block, including in `Handle::block_on` of this or another runtime (tokio
/// allows the same): until the guard drops, this thread counts as outside a
/// worker and outside any `block_on` for `block_on`'s checks, its pinned
/// queue is set aside (so
/// `block_on` installs its own), and `kept` — the P's core, when no M could
/// take it — is held by the guard rather than the worker, so wakes made on
/// this thread go to the node queue instead of a P whose M is blocked. The
/// M stays an M of its node (`current_node` answers), and the entered
/// runtime stays (`Handle::current()` works).
pub(crate) fn leave_worker(kept: Option<BoxCore>) -> LeftWorker {
    let blocking = BLOCKING.with(|b| b.replace(true));
    let local = LOCAL.with(|l| l.borrow_mut().take());
    let in_block_on = IN_BLOCK_ON.with(|b| b.replace(false));
    LeftWorker {
        blocking,
        local,
        in_block_on,
        kept,
    }
}

/// Restores what [`leave_worker`] set aside (also when the closure unwinds).
pub(crate) struct LeftWorker {
    blocking: bool,
    local: Option<Arc<LocalQueue>>,
    /// Whether the thread was in `block_on` (a nested one is allowed
    /// inside the closure, as on a worker).
    in_block_on: bool,
    kept: Option<BoxCore>,
}

impl Drop for LeftWorker {
    fn drop(&mut self) {
        if let Some(core) = self.kept.take() {
            with_worker(|w| {
                let w = w.expect("a core is kept only on a worker");
                // SAFETY: `w` is this thread's M, the seat's owner.
                unsafe { w.machine.seat.put_back(core) };
            });
        }
        let local = self.local.take();
        LOCAL.with(|l| *l.borrow_mut() = local);
        IN_BLOCK_ON.with(|b| b.set(self.in_block_on));
        BLOCKING.with(|b| b.set(self.blocking));
    }
}

/// The runtime entered on this thread.
pub(crate) fn current() -> Option<Arc<Shared>> {
    RUNTIME.with(|h| h.borrow().clone())
}

/// Calls `f` with the runtime entered on this thread (`None` if none is).
/// On an M of that runtime, with the M's own `Arc` of it, borrowed; in a
/// `block_on` of that runtime, with its handle's (see [`lend_block_on`]):
/// no reference count is taken, where [`current`]'s clone and drop are two
/// atomic updates (the free `spawn` on every worker, and in the spawning
/// loop of a `block_on`). Elsewhere with a clone. (The entered runtime is
/// not always the M's or the `block_on`'s: a task may enter another
/// runtime's handle.)
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> Option<R> {
    let entered = RUNTIME
        .try_with(|h| h.borrow().as_ref().map(Arc::as_ptr))
        .ok()
        .flatten()?;
    with_worker(move |w| match w {
        // The M holds this `Arc` for longer than the call (see `with_worker`).
        Some(w) if ptr::eq(Arc::as_ptr(&w.shared), entered) => Some(f(&w.shared)),
        Some(_) => current().map(|s| f(&s)),
        None => {
            let lent = BLOCK_ON_RUNTIME.try_with(Cell::get).unwrap_or(ptr::null());
            // SAFETY: a non-null `BLOCK_ON_RUNTIME` is the `Arc` of the
            // handle whose `block_on` runs below us on this thread's stack,
            // borrowed by that call until the `LentRuntime` restoring the
            // cell drops (see `lend_block_on`), so it outlives `f`.
            match unsafe { lent.as_ref() } {
                Some(shared) if ptr::eq(Arc::as_ptr(shared), entered) => Some(f(shared)),
                _ => current().map(|s| f(&s)),
            }
        }
    })
}

thread_local! {
    /// The `Arc` of the runtime whose `block_on` runs on this thread (its
    /// handle's, borrowed by the call), null outside one: see
    /// [`lend_block_on`].
    static BLOCK_ON_RUNTIME: Cell<*const Arc<Shared>> = const { Cell::new(ptr::null()) };
}

/// Lends `shared`, the `Arc` of the handle whose `block_on` is running, to
/// [`with_current`] on this thread until the guard drops, so that the free
/// `spawn` in a `block_on` (a spawning loop there, tokio's
/// `spawn_many_local`) takes no count of it per spawn. The caller keeps
/// the guard on its stack, inside the borrow of `shared`.
pub(crate) fn lend_block_on(shared: &Arc<Shared>) -> LentRuntime {
    LentRuntime(
        BLOCK_ON_RUNTIME
            .try_with(|c| c.replace(shared))
            .unwrap_or(ptr::null()),
    )
}

/// Restores the lent runtime of an outer `block_on` (see [`lend_block_on`];
/// `block_in_place` allows one nested on an M), also on unwinding.
pub(crate) struct LentRuntime(*const Arc<Shared>);

impl Drop for LentRuntime {
    fn drop(&mut self) {
        let _ = BLOCK_ON_RUNTIME.try_with(|c| c.set(self.0));
    }
}

/// Restores the previously entered runtime when dropped.
pub struct EnterGuard {
    prev: Option<Arc<Shared>>,
    /// This guard's place on the thread's stack of entered runtimes.
    depth: usize,
    _reactor: numa_rt_reactor::context::EnterGuard,
    /// A `LocalRuntime`'s set, entered with it (restored after the runtime).
    local: Option<LocalGuard>,
    /// Not Send: the guard restores this thread's state.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl EnterGuard {
    /// Also makes `queue` this thread's pinned queue until the guard drops.
    pub(crate) fn with_local(mut self, queue: Arc<LocalQueue>) -> EnterGuard {
        self.local = Some(set_local_queue(queue));
        self
    }
}

pub(crate) fn enter(shared: Arc<Shared>) -> EnterGuard {
    try_enter(shared).expect("this thread's locals are being destroyed")
}

/// [`enter`], or `None` when this thread's locals are being destroyed
/// (a runtime dropped by a `thread_local!`'s destructor at thread exit).
pub(crate) fn try_enter(shared: Arc<Shared>) -> Option<EnterGuard> {
    let reactor = numa_rt_reactor::context::try_enter(&shared.reactor)?;
    let depth = DEPTH
        .try_with(|d| {
            d.set(d.get() + 1);
            d.get()
        })
        .ok()?;
    let Ok(prev) = RUNTIME.try_with(|h| h.borrow_mut().replace(shared)) else {
        let _ = DEPTH.try_with(|d| d.set(depth - 1));
        return None;
    };
    Some(EnterGuard {
        prev,
        depth,
        _reactor: reactor,
        local: None,
        _not_send: std::marker::PhantomData,
    })
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // `try_with` throughout: a guard may drop while the thread's locals
        // are destroyed (see `try_enter`).
        let _ = RUNTIME.try_with(|h| *h.borrow_mut() = prev);
        let in_order = DEPTH
            .try_with(|d| {
                let top = d.get();
                d.set(self.depth - 1);
                top == self.depth
            })
            .unwrap_or(true);
        // Out of order, the runtime restored above is not the one the
        // caller entered before: code after this would spawn onto the
        // wrong runtime, or onto one already dropped. tokio panics too.
        if !in_order && !std::thread::panicking() {
            panic!(
                "`EnterGuard`s dropped out of order: guards returned by `Handle::enter` and \
                 `Runtime::enter` must be dropped in the reverse order they were made"
            );
        }
    }
}

impl std::fmt::Debug for EnterGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnterGuard")
    }
}

/// Marks this thread as inside `block_on` until the guard drops; `None`
/// if it already is.
pub(crate) fn enter_block_on() -> Option<BlockOnGuard> {
    if IN_BLOCK_ON.with(|b| b.replace(true)) {
        return None;
    }
    Some(BlockOnGuard(std::marker::PhantomData))
}

/// See [`enter_block_on`].
pub(crate) struct BlockOnGuard(std::marker::PhantomData<*const ()>);

impl Drop for BlockOnGuard {
    fn drop(&mut self) {
        let _ = IN_BLOCK_ON.try_with(|b| b.set(false));
    }
}

/// This thread's pinned-task queue (an M's, or the one of a running `block_on`).
pub(crate) fn local_queue() -> Option<Arc<LocalQueue>> {
    LOCAL.with(|l| l.borrow().clone())
}

/// Installs `q` as this thread's pinned queue until the guard drops.
pub(crate) fn set_local_queue(q: Arc<LocalQueue>) -> LocalGuard {
    let prev = LOCAL.with(|l| l.borrow_mut().replace(q));
    LocalGuard { prev }
}

/// [`set_local_queue`] when this thread's locals may already be gone (a
/// `LocalSet` kept in a `thread_local!` is dropped while the thread's
/// locals are destroyed): `None` then.
pub(crate) fn try_set_local_queue(q: Arc<LocalQueue>) -> Option<LocalGuard> {
    let prev = LOCAL.try_with(|l| l.borrow_mut().replace(q)).ok()?;
    Some(LocalGuard { prev })
}

pub(crate) struct LocalGuard {
    prev: Option<Arc<LocalQueue>>,
}

impl Drop for LocalGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // `try_with`: see `try_set_local_queue`.
        let _ = LOCAL.try_with(|l| *l.borrow_mut() = prev);
    }
}
