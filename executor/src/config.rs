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
    pub(crate) global_queue_interval: Every,
    pub(crate) event_interval: Every,
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

/// "Every `n` ticks", tested once per task the scheduler runs without a
/// division: `tick % n == 0` through one multiplication and one comparison
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019:
/// for 32-bit `x` and `c = ceil(2^64 / n)`, `x % n == 0` iff
/// `x * c mod 2^64 < c`). The two `%` of `find_runnable` by the runtime's
/// intervals (61 by default, not a constant the compiler could fold) were
/// two `div` instructions per task, 17 of ~610 instructions per
/// `yield_now` round (callgrind).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Every {
    /// `ceil(2^64 / n)`; 0 stands for 2^64 when `n == 1` (every tick).
    c: u64,
}

impl Every {
    /// `n` must be at least 1 (the builder checks it).
    pub(crate) fn new(n: u32) -> Every {
        assert!(n >= 1, "an interval of 0 ticks");
        let c = if n == 1 { 0 } else { u64::MAX / n as u64 + 1 };
        Every { c }
    }

    /// Whether `tick % n == 0`.
    #[inline]
    pub(crate) fn hits(self, tick: u32) -> bool {
        self.c == 0 || (tick as u64).wrapping_mul(self.c) < self.c
    }
}

#[cfg(test)]
mod tests {
    use super::Every;

    #[test]
    fn every_agrees_with_the_remainder() {
        for n in [1u32, 2, 3, 7, 31, 61, 64, 100, 127, 1000, 65_537, u32::MAX] {
            let e = Every::new(n);
            let edges = [0u32, 1, n - 1, n, n.wrapping_add(1), u32::MAX - 1, u32::MAX];
            for x in (0..5_000u32)
                .chain(edges)
                .chain((0..50u32).map(|k| k.wrapping_mul(n)))
            {
                assert_eq!(e.hits(x), x % n == 0, "n = {n}, x = {x}");
            }
        }
    }
}
