//! `Config`: the settings the scheduler reads while it runs, made by [`Builder`](crate::Builder),
//! and sysmon's settings (`DeadlockMode`, `SchedTrace`, their environment variables and
//! parsers). Below the scheduler: of the executor it names only `HistogramConfig`
//! (`histogram.rs`, also below; docs/architecture.md, the floors under "Glossary").

use std::sync::Arc;
use std::time::Duration;

/// The default of `global_queue_interval` and `event_interval`, and a
/// `LocalSet`'s tasks per turn: Go's 61 (`schedtick % 61`), the tasks run
/// from one source before another gets its turn (a prime, so the turns do
/// not fall in step with a program's own periods). A setting's default, not
/// a tuning constant (`tuning.rs`).
pub(crate) const DEFAULT_TURN: u32 = 61;

/// Gives the number of P's the process may use now (see `procs_source`).
pub(crate) type ProcsSource = Arc<dyn Fn() -> usize + Send + Sync>;

/// A function run on each runtime thread (`on_thread_start`, `on_thread_stop`,
/// `on_thread_park`, `on_thread_unpark`).
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
    /// Events per look at a P's poller (`Builder::max_io_events_per_tick`).
    pub(crate) io_events: numa_rt_reactor::EventsPerTick,
    pub(crate) on_thread_start: Option<Callback>,
    pub(crate) on_thread_stop: Option<Callback>,
    /// Run by an M as it goes to park, and as it comes back
    /// (`Config::before_park`, `Config::after_unpark`).
    pub(crate) on_thread_park: Option<Callback>,
    pub(crate) on_thread_unpark: Option<Callback>,
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
    pub(crate) schedtrace: Option<SchedTrace>,
    /// sysmon: what the deadlock diagnostic does.
    pub(crate) deadlock: DeadlockMode,
    /// The clock starts paused (`Builder::start_paused`, tests).
    pub(crate) start_paused: bool,
    /// What `Handle::runtime_flavor` says: one fixed P is tokio's current-thread kind.
    pub(crate) flavor: crate::RuntimeFlavor,
    /// The placement rules (`Builder::placement`, `NUMA_RT_PLACEMENT`).
    pub(crate) placement: crate::scheduler::placement::Placement,
    /// What `Handle::id` returns: unique among live runtimes.
    pub(crate) id: crate::runtime_id::Id,
    /// What `Handle::name` returns (`Builder::name`).
    pub(crate) name: Option<String>,
    /// Start the side tokio runtime (`crate::tokio_compat`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_compat: bool,
    /// Worker threads of the side tokio runtime (at least 1).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_compat_workers: usize,
}

/// The name a new thread gets when the user's `thread_name_fn` panics.
pub(crate) const DEFAULT_THREAD_NAME: &str = "numa_rt-worker";

impl Config {
    /// A name for a new runtime thread, from the user's `thread_name_fn`.
    pub(crate) fn name_thread(&self) -> String {
        name_thread(&self.thread_name)
    }

    /// Runs `on_thread_park`: called by an M in `Worker::park` while it still
    /// holds its P, before the release and the re-check, as tokio calls it
    /// before its own check, so that work the hook spawns is found there
    /// and the M does not sleep on it. A panic is reported on stderr and
    /// the M parks as usual: it holds a P, and must not die.
    pub(crate) fn before_park(&self) {
        if let Some(f) = &self.on_thread_park {
            numa_rt_reactor::fault::contain(
                "the on_thread_park hook",
                "the thread parks as usual",
                || f(),
            );
        }
    }

    /// Runs `on_thread_unpark`: called by an M at the end of
    /// `Worker::park`, with its P held again, once per `before_park` (also
    /// when the re-check found work and the M did not sleep, as in tokio).
    /// A panic is reported on stderr and the M runs tasks as usual.
    pub(crate) fn after_unpark(&self) {
        if let Some(f) = &self.on_thread_unpark {
            numa_rt_reactor::fault::contain(
                "the on_thread_unpark hook",
                "the thread runs tasks as usual",
                || f(),
            );
        }
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

// sysmon's settings: their types, environment variables and parsers (the
// builder reads the variables; sysmon, above the scheduler, acts on them).

/// The environment variable that sets the schedtrace period: `<ms>` or
/// `<ms>,detail`.
pub const SCHEDTRACE_ENV: &str = "NUMA_RT_SCHEDTRACE";
/// The environment variable that sets the deadlock diagnostic: `warn`,
/// `panic` or `off`.
pub const DEADLOCK_ENV: &str = "NUMA_RT_DEADLOCK";
/// The environment variable that sets the stall threshold in milliseconds
/// (`off` or `0`: no stall reports).
pub const STALL_ENV: &str = "NUMA_RT_STALL_MS";
/// The environment variable that sets the retake threshold in milliseconds
/// (`off` or `0`: no retake).
pub const RETAKE_ENV: &str = "NUMA_RT_RETAKE_MS";

/// What the deadlock diagnostic does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadlockMode {
    /// Nothing.
    Off,
    /// One line on stderr per deadlock.
    Warn,
    /// Every parked `block_on` panics with the diagnostic.
    Panic,
}

impl DeadlockMode {
    /// `warn` in debug builds, `off` in release builds.
    pub fn default_for_build() -> DeadlockMode {
        if cfg!(debug_assertions) {
            DeadlockMode::Warn
        } else {
            DeadlockMode::Off
        }
    }
}

/// The schedtrace settings: a period, and whether to add per-P lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SchedTrace {
    pub(crate) every: Duration,
    pub(crate) detail: bool,
}

/// Parses `NUMA_RT_SCHEDTRACE`: `<ms>` or `<ms>,detail`, ms ≥ 1.
pub(crate) fn parse_schedtrace(v: &str) -> Result<SchedTrace, String> {
    let bad = |why: &str| {
        format!("{SCHEDTRACE_ENV}={v:?}: {why} (expected <ms> or <ms>,detail, e.g. 1000,detail)")
    };
    let mut parts = v.trim().split(',');
    let ms = parts.next().unwrap_or("").trim();
    let ms: u64 = ms
        .parse()
        .map_err(|_| bad("the period is not a whole number of milliseconds"))?;
    if ms == 0 {
        return Err(bad("the period must be at least 1 ms"));
    }
    let detail = match parts.next().map(str::trim) {
        None => false,
        Some("detail") => true,
        Some(_) => return Err(bad("the only option is `detail`")),
    };
    if parts.next().is_some() {
        return Err(bad("too many fields"));
    }
    Ok(SchedTrace {
        every: Duration::from_millis(ms),
        detail,
    })
}

/// Parses `NUMA_RT_DEADLOCK`.
pub(crate) fn parse_deadlock(v: &str) -> Result<DeadlockMode, String> {
    match v.trim() {
        "warn" => Ok(DeadlockMode::Warn),
        "panic" => Ok(DeadlockMode::Panic),
        "off" => Ok(DeadlockMode::Off),
        _ => Err(format!("{DEADLOCK_ENV}={v:?}: expected warn, panic or off")),
    }
}

/// Parses `NUMA_RT_STALL_MS`: a whole number of milliseconds ≥ 1, or `off`
/// (or `0`) for no stall reports.
pub(crate) fn parse_stall(v: &str) -> Result<Option<Duration>, String> {
    parse_ms_or_off(STALL_ENV, v)
}

/// Parses `NUMA_RT_RETAKE_MS`: a whole number of milliseconds ≥ 1, or `off`
/// (or `0`) for no retake.
pub(crate) fn parse_retake(v: &str) -> Result<Option<Duration>, String> {
    parse_ms_or_off(RETAKE_ENV, v)
}

/// `off` or `0`: `None`; a whole number of milliseconds: `Some`; anything
/// else an error naming the variable `name` and the value.
fn parse_ms_or_off(name: &str, v: &str) -> Result<Option<Duration>, String> {
    match v.trim() {
        "off" | "0" => Ok(None),
        t => t
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| format!("{name}={v:?}: expected a whole number of milliseconds, or off")),
    }
}

/// Reads an env variable: unset or empty is `None`.
pub(crate) fn env<T>(
    name: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> std::io::Result<Option<T>> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name}={v:?}: not valid UTF-8"),
        )),
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => parse(&v)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
    }
}

/// "Every `n` ticks", tested once per task the scheduler runs without a
/// division: `tick % n == 0` through one multiplication and one comparison
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019:
/// for 32-bit `x` and `c = ceil(2^64 / n)`, `x % n == 0` iff
/// `x * c mod 2^64 < c`). The two `%` of `find_runnable` by the runtime's
/// intervals (61 by default, not a constant the compiler could fold) were
/// two `div` instructions per task, among the costliest of a `yield_now`
/// round.
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
    use super::*;

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

    #[test]
    fn env_values_parse_or_name_what_is_wrong() {
        assert_eq!(
            parse_schedtrace("1000").unwrap(),
            SchedTrace {
                every: Duration::from_secs(1),
                detail: false
            }
        );
        assert!(parse_schedtrace(" 50,detail ").unwrap().detail);
        for bad in ["", "x", "0", "10,verbose", "10,detail,x", "-5"] {
            let e = parse_schedtrace(bad).unwrap_err();
            assert!(e.starts_with(SCHEDTRACE_ENV), "{e}");
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!(parse_deadlock("panic").unwrap(), DeadlockMode::Panic);
        assert!(parse_deadlock("loud")
            .unwrap_err()
            .contains("NUMA_RT_DEADLOCK=\"loud\""));
        assert_eq!(parse_stall("off").unwrap(), None);
        assert_eq!(parse_stall("25").unwrap(), Some(Duration::from_millis(25)));
        assert!(parse_stall("10ms")
            .unwrap_err()
            .contains("NUMA_RT_STALL_MS"));
        assert_eq!(parse_retake("0").unwrap(), None);
        assert_eq!(parse_retake("off").unwrap(), None);
        assert_eq!(parse_retake("5").unwrap(), Some(Duration::from_millis(5)));
        let e = parse_retake("soon").unwrap_err();
        assert!(e.contains("NUMA_RT_RETAKE_MS=\"soon\""), "{e}");
    }
}
