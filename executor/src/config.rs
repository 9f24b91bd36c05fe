//! `Config`: the settings the scheduler reads while it runs, made by [`Builder`](crate::Builder).

use std::sync::Arc;
use std::time::Duration;

/// Gives the number of P's the process may use now (see `procs_source`).
pub(crate) type ProcsSource = Arc<dyn Fn() -> usize + Send + Sync>;

/// A function run on each runtime thread (`on_thread_start`, `on_thread_stop`).
pub(crate) type Callback = Arc<dyn Fn() + Send + Sync>;

/// The settings the scheduler reads while it runs.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) thread_name: Arc<dyn Fn() -> String + Send + Sync>,
    pub(crate) thread_stack_size: Option<usize>,
    pub(crate) max_blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) global_queue_interval: u32,
    pub(crate) event_interval: u32,
    pub(crate) on_thread_start: Option<Callback>,
    pub(crate) on_thread_stop: Option<Callback>,
    pub(crate) pin_cores: bool,
    /// The poll-time histogram's shape; `None`: off (no per-poll clock reads).
    pub(crate) poll_histogram: Option<crate::HistogramConfig>,
    /// sysmon: report a poll longer than this (`None`: no reports).
    pub(crate) stall_threshold: Option<Duration>,
    /// sysmon: hand the P of an M stuck in one poll longer than this to
    /// another M, when it has other work (`None`: never; see `seat`).
    pub(crate) retake_threshold: Option<Duration>,
    /// Where the default `max_procs` comes from (the affinity mask capped
    /// by the cgroup CPU quota) when the user did not set it: sysmon
    /// re-reads it about once a second. `None`: the user chose.
    pub(crate) procs_source: Option<ProcsSource>,
    /// sysmon: print the schedtrace this often.
    pub(crate) schedtrace: Option<crate::sysmon::SchedTrace>,
    /// sysmon: what the deadlock diagnostic does.
    pub(crate) deadlock: crate::sysmon::DeadlockMode,
    /// The clock starts paused (`Builder::start_paused`, tests).
    pub(crate) start_paused: bool,
    /// Start the side tokio runtime (`crate::tokio_compat`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_compat: bool,
}

/// The name a new thread gets when the user's `thread_name_fn` panics.
pub(crate) const DEFAULT_THREAD_NAME: &str = "numa_rt-worker";

impl Config {
    /// A name for a new runtime thread, from the user's `thread_name_fn`.
    pub(crate) fn name_thread(&self) -> String {
        name_thread(&self.thread_name)
    }
}

/// Calls a `thread_name_fn`, containing a panic: the runtime is often
/// starting a thread to take over a processor (or a blocking closure) when
/// it asks for a name, and a panic there would strand that work. The panic
/// is reported on stderr and the thread gets [`DEFAULT_THREAD_NAME`].
pub(crate) fn name_thread(f: &Arc<dyn Fn() -> String + Send + Sync>) -> String {
    let name = numa_rt_reactor::fault::contain(
        "the thread_name_fn hook",
        "the thread is named numa_rt-worker",
        || f(),
    );
    match name {
        // std panics on a name with a NUL byte (it becomes a C string).
        Some(n) if n.contains('\0') => {
            eprintln!(
                "numa_rt: thread_name_fn returned {n:?}, which contains a NUL byte; \
                 the thread is named {DEFAULT_THREAD_NAME}"
            );
            DEFAULT_THREAD_NAME.to_owned()
        }
        Some(n) => n,
        None => DEFAULT_THREAD_NAME.to_owned(),
    }
}
