//! `Builder`: configures and builds a [`Runtime`](crate::Runtime).

mod build;

use crate::config::{self, Callback, DeadlockMode, SchedTrace};
use crate::scheduler::placement::Placement;
use crate::HistogramConfig;
use numa_rt_numa::Topology;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable that sets the number of processors (Go's GOMAXPROCS).
pub const MAXPROCS_ENV: &str = "NUMA_RT_MAXPROCS";

/// Builds a runtime with custom settings.
///
/// ```
/// let rt = numa_rt_executor::Builder::new()
///     .max_procs(2)
///     .thread_name("my-worker")
///     .build()
///     .unwrap();
/// assert_eq!(rt.block_on(async { 1 + 1 }), 2);
/// ```
pub struct Builder {
    max_procs: Option<usize>,
    procs_source: Option<config::ProcsSource>,
    thread_name: Arc<dyn Fn() -> String + Send + Sync>,
    thread_stack_size: Option<usize>,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
    global_queue_interval: u32,
    event_interval: u32,
    /// Events per look at a P's poller: waiting, and without waiting
    /// (`None`: as waiting). tokio's `max_io_events_per_(busy_)tick`.
    io_events_per_tick: usize,
    io_events_per_busy_tick: Option<usize>,
    on_thread_start: Option<Callback>,
    on_thread_stop: Option<Callback>,
    on_thread_park: Option<Callback>,
    on_thread_unpark: Option<Callback>,
    name: Option<String>,
    topology: Option<Topology>,
    pin_cores: bool,
    poll_histogram: Option<HistogramConfig>,
    stall_threshold: Option<Option<Duration>>,
    retake_threshold: Option<Option<Duration>>,
    schedtrace: Option<SchedTrace>,
    deadlock: Option<DeadlockMode>,
    deadlock_default: Option<DeadlockMode>,
    start_paused: bool,
    placement: Option<Placement>,
    #[cfg(feature = "tokio-compat")]
    tokio_compat: bool,
    #[cfg(feature = "tokio-compat")]
    tokio_compat_workers: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// Default settings: `max_procs` from `NUMA_RT_MAXPROCS` or the CPUs this
    /// process may use (capped by its cgroup CPU quota, which sysmon then
    /// re-reads about once a second: P's above a shrunk quota take no work
    /// until it grows back; see
    /// [`RuntimeMetrics::active_procs`](crate::RuntimeMetrics::active_procs)); the global queue
    /// checked every 61 ticks; up to 512 blocking threads kept 10 s.
    pub fn new() -> Builder {
        Builder {
            max_procs: None,
            procs_source: None,
            thread_name: Arc::new(|| "numa_rt-worker".to_string()),
            thread_stack_size: None,
            max_blocking_threads: 512,
            blocking_keep_alive: Duration::from_secs(10),
            global_queue_interval: crate::config::DEFAULT_TURN,
            event_interval: crate::config::DEFAULT_TURN,
            io_events_per_tick: numa_rt_reactor::EVENTS_PER_TICK,
            io_events_per_busy_tick: None,
            on_thread_start: None,
            on_thread_stop: None,
            on_thread_park: None,
            on_thread_unpark: None,
            name: None,
            topology: None,
            pin_cores: false,
            poll_histogram: None,
            stall_threshold: None,
            retake_threshold: None,
            schedtrace: None,
            deadlock: None,
            deadlock_default: None,
            start_paused: false,
            placement: None,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: false,
            #[cfg(feature = "tokio-compat")]
            tokio_compat_workers: 1,
        }
    }

    /// Which placement rules apply on top of Go's scheduling mechanism
    /// (see [`Placement`]): [`Placement::numa`] (the default, every rule)
    /// or [`Placement::go`] (plain Go placement: `runnext`, the ring, steal
    /// half). Overrides `NUMA_RT_PLACEMENT`.
    ///
    /// ```
    /// use numa_rt_executor::{Builder, Placement};
    /// let rt = Builder::new().max_procs(2).placement(Placement::go()).build().unwrap();
    /// assert_eq!(rt.block_on(async { 1 + 1 }), 2);
    /// ```
    pub fn placement(&mut self, placement: Placement) -> &mut Self {
        self.placement = Some(placement);
        self
    }

    /// The number of processors (P's): how many tasks run in parallel.
    /// Overrides `NUMA_RT_MAXPROCS`. Must be at least 1.
    pub fn max_procs(&mut self, n: usize) -> &mut Self {
        self.max_procs = Some(n);
        self
    }

    /// tokio's name for [`Builder::new`]: every numa_rt runtime is the
    /// multi-thread kind (`max_procs` P's, by default one per CPU).
    pub fn new_multi_thread() -> Builder {
        Builder::new()
    }

    /// tokio's current-thread runtime, as near as numa_rt comes: one P
    /// (`max_procs(1)`), so tasks never run in parallel with each other.
    /// Unlike tokio's, the tasks run on the P's own thread, not on the
    /// thread in [`Runtime::block_on`](crate::Runtime::block_on) (which
    /// polls only the future given to it); for the body to run as a task
    /// on the P, serialised with the tasks it spawns, use
    /// [`Runtime::run_on_worker`](crate::Runtime::run_on_worker) (what
    /// `#[numa_rt::test]` does). `max_procs` given later overrides the 1.
    pub fn new_current_thread() -> Builder {
        let mut b = Builder::new();
        b.max_procs(1);
        b
    }

    /// tokio's name for [`Builder::max_procs`]: each P is served by one
    /// worker thread at a time (more threads exist only while a task
    /// blocks in [`block_in_place`](crate::block_in_place)). Must be at
    /// least 1.
    pub fn worker_threads(&mut self, n: usize) -> &mut Self {
        self.max_procs(n)
    }

    /// Accepted for tokio's builder chains; does nothing: every P has its
    /// own I/O poller and timers, always on.
    pub fn enable_all(&mut self) -> &mut Self {
        self
    }

    /// See [`Builder::enable_all`].
    pub fn enable_io(&mut self) -> &mut Self {
        self
    }

    /// See [`Builder::enable_all`].
    pub fn enable_time(&mut self) -> &mut Self {
        self
    }

    /// tokio's name for [`Builder::blocking_keep_alive`].
    pub fn thread_keep_alive(&mut self, d: Duration) -> &mut Self {
        self.blocking_keep_alive(d)
    }

    /// Replaces the default `max_procs` rule (the CPUs of the affinity
    /// mask, capped by the cgroup CPU quota) with `f`, for tests of the
    /// quota re-read: `f()` at build is the P count, and sysmon calls it
    /// about once a second as it re-reads the quota. Ignored when
    /// `max_procs` or `NUMA_RT_MAXPROCS` is set.
    #[doc(hidden)]
    pub fn max_procs_source(&mut self, f: impl Fn() -> usize + Send + Sync + 'static) -> &mut Self {
        self.procs_source = Some(Arc::new(f));
        self
    }

    /// Sets the runtime's name, which [`Handle::name`](crate::Handle::name)
    /// returns (tokio's `Builder::name`). It does not name threads: see
    /// [`Builder::thread_name`].
    ///
    /// # Panics
    /// When `name` is empty or only white space, as tokio's does.
    ///
    /// ```
    /// let rt = numa_rt_executor::Builder::new_current_thread()
    ///     .name("my-runtime")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(rt.handle().name(), Some("my-runtime"));
    /// ```
    #[track_caller]
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        let name = name.into();
        assert!(!name.trim().is_empty(), "runtime name shouldn't be empty");
        self.name = Some(name);
        self
    }

    /// The name of the runtime's threads.
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        let name = name.into();
        self.thread_name = Arc::new(move || name.clone());
        self
    }

    /// A function that names each new thread. If it panics (or returns a
    /// name with a NUL byte), that is reported on stderr and the thread is
    /// named `numa_rt-worker`.
    pub fn thread_name_fn(&mut self, f: impl Fn() -> String + Send + Sync + 'static) -> &mut Self {
        self.thread_name = Arc::new(f);
        self
    }

    /// The stack size of the runtime's threads, in bytes.
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Self {
        self.thread_stack_size = Some(bytes);
        self
    }

    /// The most threads `spawn_blocking` may run at once (default 512).
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread, or an M left without a P (after
    /// `block_in_place`, or with more M's than P's), waits for work before it
    /// exits (default 10 s).
    pub fn blocking_keep_alive(&mut self, d: Duration) -> &mut Self {
        self.blocking_keep_alive = d;
        self
    }

    /// Every `n`-th scheduling tick a processor takes work from its node's
    /// global queue before its own (default 61, Go's value). Must be ≥ 1.
    pub fn global_queue_interval(&mut self, n: u32) -> &mut Self {
        self.global_queue_interval = n;
        self
    }

    /// Every `n`-th scheduling tick a busy processor polls its reactor
    /// without blocking (default 61). Must be ≥ 1.
    pub fn event_interval(&mut self, n: u32) -> &mut Self {
        self.event_interval = n;
        self
    }

    /// The most I/O events a P takes from its poller in one look (default
    /// 256, tokio's); the rest wait in the kernel for the next look. Must
    /// be at least 1 (tokio's `max_io_events_per_tick`).
    pub fn max_io_events_per_tick(&mut self, n: usize) -> &mut Self {
        self.io_events_per_tick = n;
        self
    }

    /// The most I/O events a P takes in a look that does not wait: a busy
    /// P's every `event_interval` ticks, a P running out of work, an idle
    /// P draining a busy one. Each event wakes a task into the P's queue:
    /// a small take keeps an overloaded P's queue from overflowing while
    /// the rest stay in the kernel. Default: as
    /// [`max_io_events_per_tick`](Builder::max_io_events_per_tick). Must be
    /// at least 1 (tokio's `max_io_events_per_busy_tick`).
    pub fn max_io_events_per_busy_tick(&mut self, n: usize) -> &mut Self {
        self.io_events_per_busy_tick = Some(n);
        self
    }

    /// Runs `f` on each runtime thread when it starts: each M and each
    /// blocking-pool thread (with `Builder::enable_tokio_compat`, feature `tokio-compat`,
    /// inside the side tokio runtime's context).
    ///
    /// If `f` panics, the panic is reported on stderr (a `numa_rt: the
    /// on_thread_start hook panicked …` line after the panic hook's) and the
    /// thread serves as usual, as in tokio: `build()` has already returned
    /// `Ok` when the hooks run, and the runtime never hangs on a hook.
    pub fn on_thread_start(&mut self, f: impl Fn() + Send + Sync + 'static) -> &mut Self {
        self.on_thread_start = Some(Arc::new(f));
        self
    }

    /// Runs `f` on each runtime thread (each M, each blocking-pool thread)
    /// before it stops. A panic is reported on stderr and the thread stops
    /// as usual. Not run on a thread that unwinds.
    pub fn on_thread_stop(&mut self, f: impl Fn() + Send + Sync + 'static) -> &mut Self {
        self.on_thread_stop = Some(Arc::new(f));
        self
    }

    /// Runs `f` on a worker thread just before it parks (goes idle): each
    /// time an M finds no task for its P (numa_rt's workers are its P's
    /// and the M's that run them). `f` runs inside the runtime, so it may
    /// [`spawn`](crate::spawn()); the M then finds that task and does not
    /// sleep. As in tokio, a later call replaces `f`, and each call of `f`
    /// is followed by one of [`Builder::on_thread_unpark`]'s hook.
    ///
    /// If `f` panics, the panic is reported on stderr (a `numa_rt: the
    /// on_thread_park hook panicked …` line) and the thread parks as usual.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    /// use std::sync::Arc;
    /// let parks = Arc::new(AtomicUsize::new(0));
    /// let seen = parks.clone();
    /// let rt = numa_rt_executor::Builder::new_multi_thread()
    ///     .worker_threads(2)
    ///     .on_thread_park(move || {
    ///         seen.fetch_add(1, Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(async { numa_rt_executor::spawn(async {}).await.unwrap() });
    /// println!("{} parks so far", parks.load(Relaxed));
    /// ```
    pub fn on_thread_park(&mut self, f: impl Fn() + Send + Sync + 'static) -> &mut Self {
        self.on_thread_park = Some(Arc::new(f));
        self
    }

    /// Runs `f` on a worker thread just after it unparks (starts running
    /// tasks again), once after each call of the
    /// [`on_thread_park`](Builder::on_thread_park) hook, inside the
    /// runtime. A later call replaces `f`. If `f` panics, the panic is
    /// reported on stderr and the thread runs tasks as usual.
    pub fn on_thread_unpark(&mut self, f: impl Fn() + Send + Sync + 'static) -> &mut Self {
        self.on_thread_unpark = Some(Arc::new(f));
        self
    }

    /// Uses `topology` instead of the machine's (or `NUMA_RT_TOPOLOGY`'s).
    /// `build()` rejects a topology naming a CPU outside the process's
    /// affinity mask, with the error `NUMA_RT_TOPOLOGY` gives.
    pub fn topology(&mut self, topology: Topology) -> &mut Self {
        self.topology = Some(topology);
        self
    }

    /// Pins each M to a single core of its node instead of the whole node.
    pub fn pin_cores(&mut self, pin: bool) -> &mut Self {
        self.pin_cores = pin;
        self
    }

    /// Times every task poll and counts it in a per-processor histogram of
    /// this shape ([`ProcMetrics::poll_time_histogram`](crate::ProcMetrics::poll_time_histogram)).
    /// Off by default: it costs two clock reads per poll (about 40 ns).
    ///
    /// ```
    /// use numa_rt_executor::{Builder, HistogramConfig};
    /// use std::time::Duration;
    ///
    /// let rt = Builder::new()
    ///     .max_procs(1)
    ///     .poll_time_histogram(HistogramConfig::log(Duration::from_micros(1), 20))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(async { numa_rt_executor::spawn(async {}).await.unwrap() });
    /// // A poll is counted just after it returns, so a moment after its
    /// // awaiter may have seen the result.
    /// let m = rt.metrics();
    /// let deadline = std::time::Instant::now() + Duration::from_secs(10);
    /// while m.proc(0).poll_time_histogram.iter().sum::<u64>() == 0 {
    ///     assert!(std::time::Instant::now() < deadline);
    ///     std::thread::yield_now();
    /// }
    /// for (i, n) in m.proc(0).poll_time_histogram.iter().enumerate() {
    ///     println!("{:?}: {n}", m.poll_time_histogram_bucket_range(i));
    /// }
    /// ```
    pub fn poll_time_histogram(&mut self, shape: HistogramConfig) -> &mut Self {
        self.poll_histogram = Some(shape);
        self
    }

    /// sysmon reports a task that stays inside one poll longer than this
    /// (one line on stderr per task and stall); `None` turns the reports
    /// off. Default 10 ms, or `NUMA_RT_STALL_MS`.
    pub fn stall_threshold(&mut self, threshold: Option<Duration>) -> &mut Self {
        self.stall_threshold = Some(threshold);
        self
    }

    /// sysmon hands the P of a thread stuck inside one task's poll longer
    /// than this — its queue, reactor and timers — to another thread, when
    /// the P has other work (Go's `retake`); the stuck thread gets a P
    /// again when its poll returns. `None` turns retake off. Default 10 ms,
    /// or `NUMA_RT_RETAKE_MS` (`0` or `off`: off). Needs Linux's
    /// `membarrier` (4.14+); without it retake is off and
    /// [`RuntimeMetrics::retake_unavailable`](crate::RuntimeMetrics::retake_unavailable)
    /// says why.
    pub fn retake_threshold(&mut self, threshold: Option<Duration>) -> &mut Self {
        self.retake_threshold = Some(threshold);
        self
    }

    /// Prints Go's `SCHED` line (plus one line per node, and with `detail`
    /// one per P and pooled M) on stderr every `every`; also set by
    /// `NUMA_RT_SCHEDTRACE=<ms>[,detail]`. Must be at least 1 ms.
    pub fn schedtrace(&mut self, every: Duration, detail: bool) -> &mut Self {
        self.schedtrace = Some(SchedTrace { every, detail });
        self
    }

    /// What to do when every task is asleep with nothing left that could
    /// wake one while `block_on` waits (see [`DeadlockMode`]); also set by
    /// `NUMA_RT_DEADLOCK`. Default: warn in debug builds, off in release.
    pub fn deadlock(&mut self, mode: DeadlockMode) -> &mut Self {
        self.deadlock = Some(mode);
        self
    }

    /// Makes tokio-bound code work inside this runtime's tasks
    /// (`tokio::time::sleep`, `tokio::net`, `tokio::spawn`, reqwest,
    /// database drivers), which otherwise panics with tokio's "there is no
    /// reactor running". Feature `tokio-compat`.
    ///
    /// `build()` then starts one small tokio runtime (multi-thread flavour,
    /// one worker thread `numa_rt-tokio` unless
    /// [`tokio_compat_workers`](Builder::tokio_compat_workers) says more,
    /// I/O and time drivers on), and every numa_rt thread enters its
    /// context: each M and blocking thread for its life, a `block_on`
    /// caller while `block_on` runs.
    /// tokio's resources are served by that runtime's driver, not by the
    /// P's pollers: when one is ready the driver wakes the numa_rt task
    /// that awaits it, which then runs on a P as usual. A `tokio::spawn`ed
    /// future runs on a `numa_rt-tokio` worker. numa_rt's own sockets and
    /// timers are unaffected, and remain the faster path (docs/performance.md
    /// gives the measured cost).
    ///
    /// Paused time is numa_rt's: use [`numa_rt::time::pause`] /
    /// `advance` (or `#[numa_rt::test(start_paused = true)]`).
    /// `tokio::time::pause()` panics at once in this runtime, with tokio's
    /// "`time::pause()` requires the `current_thread` Tokio runtime"; it
    /// cannot be served, because a paused tokio clock auto-advances
    /// whenever the side runtime is idle, blind to numa_rt's tasks (tokio
    /// timeouts then fire while numa_rt work is still running, or tests
    /// hang), and tokio has no hook to drive its clock from numa_rt's.
    ///
    /// [`numa_rt::time::pause`]: numa_rt_reactor::time::pause
    ///
    /// The tokio runtime is dropped when this runtime shuts down, after
    /// numa_rt's tasks are dropped. If it cannot be built, `build()`
    /// returns the error, naming `Builder::enable_tokio_compat`.
    /// [`Handle::enter`](crate::Handle::enter) does not enter it. The
    /// [deadlock diagnostic](Builder::deadlock) stays silent for such a
    /// runtime: tokio's timers and sockets hold wakers it cannot see.
    ///
    /// ```
    /// let rt = numa_rt_executor::Builder::new()
    ///     .max_procs(1)
    ///     .enable_tokio_compat()
    ///     .build()
    ///     .unwrap();
    /// let h = rt.spawn(async {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    ///     tokio::spawn(async { 6 * 7 }).await.unwrap()
    /// });
    /// assert_eq!(rt.block_on(h).unwrap(), 42);
    /// ```
    #[cfg(feature = "tokio-compat")]
    pub fn enable_tokio_compat(&mut self) -> &mut Self {
        self.tokio_compat = true;
        self
    }

    /// Worker threads of the side tokio runtime of
    /// [`enable_tokio_compat`](Builder::enable_tokio_compat) (which this
    /// does not switch on). Default 1. More workers serve more
    /// `tokio::spawn`ed futures at once (a library that spawns its
    /// connection tasks); tokio's I/O and timers are served by one driver
    /// whatever the number. Feature `tokio-compat`.
    ///
    /// `build()` fails with `InvalidInput` for 0.
    #[cfg(feature = "tokio-compat")]
    pub fn tokio_compat_workers(&mut self, n: usize) -> &mut Self {
        self.tokio_compat_workers = n;
        self
    }

    /// The deadlock diagnostic's mode when neither [`Builder::deadlock`] nor
    /// `NUMA_RT_DEADLOCK` sets it (`#[numa_rt::test]` uses `Panic`).
    #[doc(hidden)]
    pub fn deadlock_default(&mut self, mode: DeadlockMode) -> &mut Self {
        self.deadlock_default = Some(mode);
        self
    }

    /// Starts the runtime with its clock paused (tokio's `start_paused`,
    /// for tests): time moves only by `numa_rt::time::advance` or, while
    /// every task is idle, by auto-advance to the earliest pending timer
    /// (see `numa_rt::time::pause`). Default `false`.
    pub fn start_paused(&mut self, paused: bool) -> &mut Self {
        self.start_paused = paused;
        self
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Builder");
        d.field("max_procs", &self.max_procs)
            .field("thread_stack_size", &self.thread_stack_size)
            .field("max_blocking_threads", &self.max_blocking_threads)
            .field("global_queue_interval", &self.global_queue_interval)
            .field("event_interval", &self.event_interval)
            .field("max_io_events_per_tick", &self.io_events_per_tick)
            .field("max_io_events_per_busy_tick", &self.io_events_per_busy_tick)
            .field("topology", &self.topology)
            .field("pin_cores", &self.pin_cores)
            .field("placement", &self.placement)
            .field("name", &self.name);
        #[cfg(feature = "tokio-compat")]
        d.field("tokio_compat", &self.tokio_compat);
        #[cfg(feature = "tokio-compat")]
        d.field("tokio_compat_workers", &self.tokio_compat_workers);
        d.finish_non_exhaustive()
    }
}
