//! [`JoinMap`]: a `JoinSet` whose tasks have keys.

use hashbrown::hash_table::{Entry, HashTable};
use numa_rt::runtime::Handle;
use numa_rt::task::{AbortHandle, Id, JoinError, JoinSet, LocalSet};
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

/// Tasks on numa_rt, each under a key: a [`JoinSet`] whose results come
/// back with their key, and whose tasks can be aborted or looked up by key.
///
/// Results come in completion order. Spawning under a key that already has
/// a task aborts that task and replaces it; the replaced task's result is
/// never returned. Dropping the map aborts every task in it.
///
/// ```
/// use numa_rt_util::task::JoinMap;
///
/// # #[numa_rt::main(max_procs = 2)]
/// # async fn main() {
/// let mut map = JoinMap::new();
/// map.spawn("answer", async { 42 });
/// map.spawn("never", std::future::pending());
/// assert!(map.abort("never"));
///
/// let mut seen = Vec::new();
/// while let Some((key, res)) = map.join_next().await {
///     match key {
///         "answer" => assert_eq!(res.unwrap(), 42),
///         _ => assert!(res.unwrap_err().is_cancelled()),
///     }
///     seen.push(key);
/// }
/// seen.sort();
/// assert_eq!(seen, ["answer", "never"]);
/// # }
/// ```
pub struct JoinMap<K, V, S = RandomState> {
    /// The live entries: key, abort handle, and the key's hash.
    by_key: HashTable<Slot<K>>,
    /// Each entry's key hash, by task id: `join_next` finds the entry of
    /// a finished task through it.
    hash_of: HashMap<Id, u64>,
    hasher: S,
    /// The tasks, replaced ones included until they end.
    tasks: JoinSet<V>,
}

struct Slot<K> {
    key: K,
    abort: AbortHandle,
    hash: u64,
}

impl<K, V> JoinMap<K, V> {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }

    /// An empty map with room for `capacity` tasks.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_hasher(capacity, RandomState::new())
    }
}

impl<K, V, S> JoinMap<K, V, S> {
    /// An empty map hashing keys with `hash_builder`.
    pub fn with_hasher(hash_builder: S) -> Self {
        Self::with_capacity_and_hasher(0, hash_builder)
    }

    /// An empty map with room for `capacity` tasks, hashing keys with
    /// `hash_builder`.
    pub fn with_capacity_and_hasher(capacity: usize, hash_builder: S) -> Self {
        JoinMap {
            by_key: HashTable::with_capacity(capacity),
            hash_of: HashMap::with_capacity(capacity),
            hasher: hash_builder,
            tasks: JoinSet::new(),
        }
    }

    /// The number of tasks (keys) in the map.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether the map holds no task.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// How many tasks the map holds without reallocating.
    pub fn capacity(&self) -> usize {
        self.by_key.capacity()
    }
}

impl<K, V, S> JoinMap<K, V, S>
where
    K: Hash + Eq,
    V: 'static,
    S: BuildHasher,
{
    /// Spawns `task` on the current runtime ([`numa_rt::spawn`]) under
    /// `key`, aborting and replacing the key's previous task if any.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, key: K, task: F)
    where
        F: Future<Output = V> + Send + 'static,
        V: Send,
    {
        let abort = self.tasks.spawn(task);
        self.insert(key, abort);
    }

    /// Spawns `task` on `handle`'s runtime under `key` (see
    /// [`spawn`](Self::spawn)).
    #[track_caller]
    pub fn spawn_on<F>(&mut self, key: K, task: F, handle: &Handle)
    where
        F: Future<Output = V> + Send + 'static,
        V: Send,
    {
        let abort = self.tasks.spawn_on(task, handle);
        self.insert(key, abort);
    }

    /// Runs `f` on the current runtime's blocking pool under `key` (see
    /// [`spawn`](Self::spawn)). Aborting does not stop a closure that has
    /// started.
    ///
    /// # Panics
    /// Outside a numa_rt runtime.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, key: K, f: F)
    where
        F: FnOnce() -> V + Send + 'static,
        V: Send,
    {
        let abort = self.tasks.spawn_blocking(f);
        self.insert(key, abort);
    }

    /// Runs `f` on `handle`'s blocking pool under `key`.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, key: K, f: F, handle: &Handle)
    where
        F: FnOnce() -> V + Send + 'static,
        V: Send,
    {
        let abort = self.tasks.spawn_blocking_on(f, handle);
        self.insert(key, abort);
    }

    /// Spawns a `!Send` `task` pinned to this thread
    /// ([`numa_rt::spawn_local`]) under `key`.
    ///
    /// # Panics
    /// On a thread that is neither a worker nor inside `block_on`.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, key: K, task: F)
    where
        F: Future<Output = V> + 'static,
    {
        let abort = self.tasks.spawn_local(task);
        self.insert(key, abort);
    }

    /// Spawns a `!Send` `task` onto `local_set` under `key`.
    #[track_caller]
    pub fn spawn_local_on<F>(&mut self, key: K, task: F, local_set: &LocalSet)
    where
        F: Future<Output = V> + 'static,
    {
        let abort = self.tasks.spawn_local_on(task, local_set);
        self.insert(key, abort);
    }

    fn insert(&mut self, key: K, abort: AbortHandle) {
        let hash = self.hasher.hash_one(&key);
        let id = abort.id();
        let slot = Slot { key, abort, hash };
        let entry = self.by_key.entry(hash, |s| s.key == slot.key, |s| s.hash);
        match entry {
            Entry::Occupied(mut occupied) => {
                let old = std::mem::replace(occupied.get_mut(), slot);
                self.hash_of.remove(&old.abort.id());
                self.hash_of.insert(id, hash);
                // Last, after the maps are consistent: the old key's drop
                // may panic.
                old.abort.abort();
                drop(old);
            }
            Entry::Vacant(vacant) => {
                vacant.insert(slot);
                self.hash_of.insert(id, hash);
            }
        }
    }

    /// Waits for a task to finish and returns its key and result; `None`
    /// if the map is empty.
    ///
    /// Cancel safe: dropped before it completes, it removes nothing.
    pub async fn join_next(&mut self) -> Option<(K, Result<V, JoinError>)> {
        loop {
            let res = self.tasks.join_next_with_id().await?;
            if let Some(joined) = self.claim(res) {
                return Some(joined);
            }
        }
    }

    /// A finished task's key and result if one is ready now; never waits.
    pub fn try_join_next(&mut self) -> Option<(K, Result<V, JoinError>)> {
        loop {
            let res = self.tasks.try_join_next_with_id()?;
            if let Some(joined) = self.claim(res) {
                return Some(joined);
            }
        }
    }

    /// The key of a finished task, removed from the map; `None` for a
    /// replaced task (its key now belongs to another).
    fn claim(&mut self, res: Result<(Id, V), JoinError>) -> Option<(K, Result<V, JoinError>)> {
        let (id, res) = match res {
            Ok((id, v)) => (id, Ok(v)),
            Err(e) => (e.id(), Err(e)),
        };
        let hash = self.hash_of.remove(&id)?;
        let slot = self
            .by_key
            .find_entry(hash, |s| s.abort.id() == id)
            .ok()?
            .remove()
            .0;
        Some((slot.key, res))
    }

    /// Aborts every task and waits for them to end; the map is then empty.
    /// Results (panics included) are dropped.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Aborts the task under `key`; `false` if there is none. The task
    /// stays in the map until joined (with a cancelled error, or its output
    /// if it had finished).
    pub fn abort<Q>(&mut self, key: &Q) -> bool
    where
        Q: ?Sized + Hash + Eq,
        K: Borrow<Q>,
    {
        match self.get(key) {
            Some(slot) => {
                slot.abort.abort();
                true
            }
            None => false,
        }
    }

    /// Aborts every task whose key matches `predicate` (they stay in the
    /// map until joined).
    pub fn abort_matching(&mut self, mut predicate: impl FnMut(&K) -> bool) {
        self.by_key
            .iter()
            .filter(|s| predicate(&s.key))
            .for_each(|s| s.abort.abort());
    }

    /// The keys, in no particular order.
    pub fn keys(&self) -> JoinMapKeys<'_, K, V> {
        JoinMapKeys {
            iter: self.by_key.iter(),
            _value: PhantomData,
        }
    }

    /// Whether a task is under `key`.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        Q: ?Sized + Hash + Eq,
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    /// Whether the task with id `task` is in the map (a replaced task is not).
    pub fn contains_task(&self, task: &Id) -> bool {
        self.hash_of.contains_key(task)
    }

    /// Makes room for `additional` more tasks.
    pub fn reserve(&mut self, additional: usize) {
        self.by_key.reserve(additional, |s| s.hash);
        self.hash_of.reserve(additional);
    }

    /// Frees what capacity it can.
    pub fn shrink_to_fit(&mut self) {
        self.by_key.shrink_to_fit(|s| s.hash);
        self.hash_of.shrink_to_fit();
    }

    /// Shrinks the capacity to `min_capacity` or the length, whichever is
    /// larger.
    pub fn shrink_to(&mut self, min_capacity: usize) {
        self.by_key.shrink_to(min_capacity, |s| s.hash);
        self.hash_of.shrink_to(min_capacity);
    }

    fn get<Q>(&self, key: &Q) -> Option<&Slot<K>>
    where
        Q: ?Sized + Hash + Eq,
        K: Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        self.by_key.find(hash, |s| s.key.borrow() == key)
    }
}

impl<K, V: 'static, S> JoinMap<K, V, S> {
    /// Aborts every task (they stay in the map until joined).
    pub fn abort_all(&mut self) {
        self.tasks.abort_all()
    }

    /// Empties the map without aborting anything: the tasks run on detached.
    pub fn detach_all(&mut self) {
        self.tasks.detach_all();
        self.by_key.clear();
        self.hash_of.clear();
    }
}

impl<K: fmt::Debug, V, S> fmt::Debug for JoinMap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Tasks<'a, K>(&'a HashTable<Slot<K>>);
        impl<K: fmt::Debug> fmt::Debug for Tasks<'_, K> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(self.0.iter().map(|s| (&s.key, s.abort.id())))
                    .finish()
            }
        }
        f.debug_struct("JoinMap")
            .field("tasks", &Tasks(&self.by_key))
            .finish()
    }
}

impl<K, V> Default for JoinMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

/// The keys of a [`JoinMap`] ([`JoinMap::keys`]).
pub struct JoinMapKeys<'a, K, V> {
    iter: hashbrown::hash_table::Iter<'a, Slot<K>>,
    _value: PhantomData<&'a V>,
}

impl<K, V> Clone for JoinMapKeys<'_, K, V> {
    fn clone(&self) -> Self {
        JoinMapKeys {
            iter: self.iter.clone(),
            _value: PhantomData,
        }
    }
}

impl<K: fmt::Debug, V> fmt::Debug for JoinMapKeys<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter.clone().map(|s| &s.key))
            .finish()
    }
}

impl<'a, K, V> Iterator for JoinMapKeys<'a, K, V> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        self.iter.next().map(|s| &s.key)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<K, V> ExactSizeIterator for JoinMapKeys<'_, K, V> {
    fn len(&self) -> usize {
        self.iter.len()
    }
}

impl<K, V> std::iter::FusedIterator for JoinMapKeys<'_, K, V> {}
