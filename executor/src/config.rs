//! `Config`: the settings the scheduler reads while it runs, made by [`Builder`](crate::Builder).

use std::sync::Arc;
use std::time::Duration;

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
    /// sysmon: print the schedtrace this often.
    pub(crate) schedtrace: Option<crate::sysmon::SchedTrace>,
    /// sysmon: what the deadlock diagnostic does.
    pub(crate) deadlock: crate::sysmon::DeadlockMode,
}
