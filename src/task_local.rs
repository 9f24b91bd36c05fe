//! Task-local values: tokio's `task_local!`, [`LocalKey`] and
//! [`TaskLocalFuture`].
//!
//! A value set by [`LocalKey::scope`] is visible to the future it wraps (and
//! to everything that future polls), wherever the task runs: each poll moves
//! the value into a thread-local slot, polls the future, and moves it back
//! out, so a task that changes worker between polls takes its value along.
//! Dropping the future also happens inside the scope, so destructors can read
//! the value. Spawned tasks do not inherit it (tokio's behaviour too).

use std::cell::RefCell;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Declares task-local keys (tokio's `task_local!`).
///
/// ```
/// numa_rt::task_local! {
///     static REQUEST_ID: u64;
/// }
///
/// #[numa_rt::main(max_procs = 1)]
/// async fn main() {
///     let seen = REQUEST_ID
///         .scope(7, async {
///             numa_rt::task::yield_now().await;
///             REQUEST_ID.get()
///         })
///         .await;
///     assert_eq!(seen, 7);
///     assert!(REQUEST_ID.try_with(|_| ()).is_err()); // outside the scope
/// }
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $crate::__task_local_inner!($(#[$attr])* $vis $name, $t);
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty) => {
        $crate::__task_local_inner!($(#[$attr])* $vis $name, $t);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __task_local_inner {
    ($(#[$attr:meta])* $vis:vis $name:ident, $t:ty) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = {
            ::std::thread_local! {
                static __NUMA_RT_TASK_LOCAL: ::std::cell::RefCell<::std::option::Option<$t>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }
            $crate::task::LocalKey::__new(__NUMA_RT_TASK_LOCAL)
        };
    };
}

/// A task-local key, declared with [`task_local!`](crate::task_local!).
pub struct LocalKey<T: 'static> {
    inner: std::thread::LocalKey<RefCell<Option<T>>>,
}

/// The key was read outside any [`LocalKey::scope`] that sets it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AccessError {
    _private: (),
}

impl fmt::Debug for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessError").finish()
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task-local value not set: read outside a LocalKey::scope or sync_scope")
    }
}

impl Error for AccessError {}

/// Why a value could not be swapped into the key's slot.
enum ScopeError {
    /// The slot is borrowed: a `with` closure is running on this thread and
    /// re-entered the scope.
    Borrowed,
    /// The thread is exiting and its thread-locals are gone.
    Destroyed,
}

impl ScopeError {
    #[track_caller]
    fn panic(self) -> ! {
        match self {
            ScopeError::Borrowed => panic!(
                "task_local: cannot enter a scope of this key while its value is borrowed \
                 (inside LocalKey::with on the same key)"
            ),
            ScopeError::Destroyed => panic!(
                "task_local: cannot enter a scope while the thread's locals are being destroyed"
            ),
        }
    }
}

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn __new(inner: std::thread::LocalKey<RefCell<Option<T>>>) -> Self {
        LocalKey { inner }
    }

    /// Runs `future` with the key set to `value`: every poll of the returned
    /// future (and its drop) sees the value.
    pub fn scope<F: Future>(&'static self, value: T, future: F) -> TaskLocalFuture<T, F> {
        TaskLocalFuture {
            key: self,
            slot: Some(value),
            future: ManuallyDrop::new(Some(future)),
            _pinned: PhantomPinned,
        }
    }

    /// Runs `f` with the key set to `value`, synchronously.
    ///
    /// # Panics
    /// Inside [`LocalKey::with`] on the same key (the value is borrowed).
    #[track_caller]
    pub fn sync_scope<F: FnOnce() -> R, R>(&'static self, value: T, f: F) -> R {
        let mut slot = Some(value);
        match self.enter(&mut slot, f) {
            Ok(r) => r,
            Err(e) => e.panic(),
        }
    }

    /// Swaps `slot` into the thread-local, runs `f`, swaps it back (also on a
    /// panic in `f`).
    fn enter<F: FnOnce() -> R, R>(
        &'static self,
        slot: &mut Option<T>,
        f: F,
    ) -> Result<R, ScopeError> {
        struct Guard<'a, T: 'static> {
            key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
            slot: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for Guard<'_, T> {
            fn drop(&mut self) {
                // The swap in `enter` succeeded, so the cell is alive and
                // not borrowed (a `with` borrow ends before its closure
                // returns, and `f` has returned or unwound).
                let _ = self.key.try_with(|cell| {
                    if let Ok(mut v) = cell.try_borrow_mut() {
                        std::mem::swap(self.slot, &mut *v);
                    }
                });
            }
        }
        self.inner
            .try_with(|cell| {
                cell.try_borrow_mut()
                    .map(|mut v| std::mem::swap(slot, &mut *v))
                    .map_err(|_| ScopeError::Borrowed)
            })
            .map_err(|_| ScopeError::Destroyed)??;
        let _guard = Guard {
            key: &self.inner,
            slot,
        };
        Ok(f())
    }

    /// Runs `f` with a reference to the value.
    ///
    /// # Panics
    /// Outside a scope that sets the key (see [`LocalKey::try_with`]).
    #[track_caller]
    pub fn with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs `f` with a reference to the value, or says it is not set.
    pub fn try_with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> Result<R, AccessError> {
        let r = self.inner.try_with(|cell| {
            // A borrow of the cell lasts only for `f`: reading the key from
            // inside `f` works (shared borrows), entering a new scope of it
            // does not (see `sync_scope`).
            let v = cell.try_borrow().ok()?;
            Some(f(v.as_ref()?))
        });
        match r {
            Ok(Some(r)) => Ok(r),
            _ => Err(AccessError { _private: () }),
        }
    }
}

impl<T: Clone + 'static> LocalKey<T> {
    /// A clone of the value.
    ///
    /// # Panics
    /// Outside a scope that sets the key.
    #[track_caller]
    pub fn get(&'static self) -> T {
        self.with(|v| v.clone())
    }

    /// A clone of the value, or [`AccessError`] outside a scope that sets
    /// the key (tokio's `try_get`).
    ///
    /// ```
    /// numa_rt::task_local! { static ID: u32; }
    ///
    /// # #[numa_rt::main(max_procs = 1)]
    /// # async fn main() {
    /// assert!(ID.try_get().is_err());
    /// ID.scope(7, async { assert_eq!(ID.try_get(), Ok(7)) }).await;
    /// # }
    /// ```
    pub fn try_get(&'static self) -> Result<T, AccessError> {
        self.try_with(|v| v.clone())
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("LocalKey { .. }")
    }
}

/// The future [`LocalKey::scope`] returns.
pub struct TaskLocalFuture<T: 'static, F> {
    key: &'static LocalKey<T>,
    /// The value while the future is not being polled.
    slot: Option<T>,
    /// `None` once completed (or taken by `Drop`). Structurally pinned.
    future: ManuallyDrop<Option<F>>,
    _pinned: PhantomPinned,
}

impl<T: 'static, F> TaskLocalFuture<T, F> {
    /// Takes the value out of the future (`None` once taken, or while the
    /// future is being polled, which this `&mut` rules out).
    pub fn take_value(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: `slot` is not structurally pinned (it moves in and out of
        // the thread-local on every poll); nothing here moves `future`.
        unsafe { self.get_unchecked_mut() }.slot.take()
    }
}

impl<T: 'static, F: Future> Future for TaskLocalFuture<T, F> {
    type Output = F::Output;

    #[track_caller]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is only ever reached
        // through `Pin::new_unchecked` below and dropped in place (in `Drop`
        // or by overwriting it with `None` through that pin, which drops it
        // where it lies); `slot` and `key` are not pinned. The struct is
        // `!Unpin` (PhantomPinned) so the pin is real.
        let this = unsafe { self.get_unchecked_mut() };
        let key = this.key;
        let future = &mut this.future;
        let r = key.enter(&mut this.slot, || {
            // SAFETY: see above: `future` never moves while pinned.
            let mut pinned = unsafe { Pin::new_unchecked(&mut **future) };
            let r = match pinned.as_mut().as_pin_mut() {
                None => panic!("TaskLocalFuture polled after completion"),
                Some(f) => f.poll(cx),
            };
            if r.is_ready() {
                // Drop the completed future inside the scope.
                pinned.set(None);
            }
            r
        });
        match r {
            Ok(r) => r,
            Err(e) => e.panic(),
        }
    }
}

impl<T: 'static, F> Drop for TaskLocalFuture<T, F> {
    fn drop(&mut self) {
        // SAFETY: `future` is dropped exactly once, here, in place (never
        // moved: `ManuallyDrop::drop` drops it where it lies), which the pin
        // contract allows.
        let drop_future =
            |future: &mut ManuallyDrop<Option<F>>| unsafe { ManuallyDrop::drop(future) };
        if self.future.is_none() {
            drop_future(&mut self.future);
            return;
        }
        // Drop the future inside the scope so its destructors see the value;
        // where the scope cannot be entered (the value borrowed by an outer
        // `with`, the thread exiting), drop it outside rather than panic in
        // a destructor.
        let key = self.key;
        let future = &mut self.future;
        let mut dropped = false;
        let _ = key.enter(&mut self.slot, || {
            dropped = true;
            drop_future(future);
        });
        if !dropped {
            drop_future(&mut self.future);
        }
    }
}

impl<T: 'static + fmt::Debug, F> fmt::Debug for TaskLocalFuture<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLocalFuture")
            .field("value", &self.slot)
            .finish_non_exhaustive()
    }
}
