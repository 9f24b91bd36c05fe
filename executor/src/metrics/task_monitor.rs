//! Per-task metrics, opt-in: [`TaskMonitor`] (the figures of tokio-metrics'
//! monitor of the same name).
//!
//! A monitor instruments futures; each instrumented future times its polls
//! and wraps the waker it is polled with, so it learns when it was woken.
//! From the three instants — woken, poll started, poll ended — follow the
//! four durations a slow service is diagnosed with:
//!
//! ```text
//!   instrument()    poll       Pending   wake()     poll
//!       |--first-poll-delay--|--poll--|--idle--|--scheduled--|--poll--| ...
//! ```
//!
//! - *first-poll delay*: from `instrument` to the first poll (queueing
//!   before the task ever ran);
//! - *idle*: from a poll returning `Pending` to the wake-up that ends the
//!   wait (time spent waiting on I/O, timers, channels);
//! - *scheduled*: from the wake-up to the next poll (time spent in a run
//!   queue: a high figure means the runtime is short of processors);
//! - *poll*: time inside the future's `poll`; polls longer than the
//!   monitor's threshold count as *slow* (tasks that block their thread).
//!
//! Nothing is measured for futures that are not instrumented: the cost
//! (three clock reads per poll-and-wake, a few relaxed atomic adds and the
//! waker wrapper's allocation once per task) is paid only by those that are.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Watches the futures it instruments and sums their timings.
///
/// ```
/// use numa_rt_executor::{spawn, Runtime, TaskMonitor};
///
/// let rt = Runtime::new().unwrap();
/// let monitor = TaskMonitor::new();
/// rt.block_on(async {
///     for _ in 0..10 {
///         spawn(monitor.instrument(async {
///             numa_rt_executor::task::yield_now().await;
///         }))
///         .await
///         .unwrap();
///     }
/// });
/// let m = monitor.cumulative();
/// assert_eq!(m.instrumented_count, 10);
/// assert_eq!(m.dropped_count, 10);
/// assert!(m.total_poll_count >= 20); // each task: a yield, then its end
/// ```
#[derive(Clone, Debug)]
pub struct TaskMonitor {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Instants are kept as nanoseconds since `base` (0 = unset).
    base: Instant,
    slow_poll_threshold: Duration,
    instrumented: AtomicU64,
    dropped: AtomicU64,
    first_polls: AtomicU64,
    first_poll_delay_ns: AtomicU64,
    idled: AtomicU64,
    idle_ns: AtomicU64,
    scheduled: AtomicU64,
    scheduled_ns: AtomicU64,
    polls: AtomicU64,
    poll_ns: AtomicU64,
    slow_polls: AtomicU64,
    slow_poll_ns: AtomicU64,
}

/// Sums over a monitor's tasks: since it was made ([`TaskMonitor::cumulative`])
/// or over one interval ([`TaskMonitor::intervals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskMetrics {
    /// Futures instrumented.
    pub instrumented_count: u64,
    /// Instrumented futures dropped (finished or cancelled).
    pub dropped_count: u64,
    /// Futures polled at least once.
    pub first_poll_count: u64,
    /// Summed time from `instrument` to the first poll.
    pub total_first_poll_delay: Duration,
    /// Waits that ended with a wake-up (a `Pending` followed by a wake).
    pub total_idled_count: u64,
    /// Summed time from `Pending` to the wake-up that ended the wait.
    pub total_idle_duration: Duration,
    /// Wake-ups followed by a poll.
    pub total_scheduled_count: u64,
    /// Summed time from a wake-up to the poll that followed it.
    pub total_scheduled_duration: Duration,
    /// Polls.
    pub total_poll_count: u64,
    /// Summed time inside `poll`.
    pub total_poll_duration: Duration,
    /// Polls longer than the monitor's slow-poll threshold.
    pub total_slow_poll_count: u64,
    /// Summed time of the slow polls.
    pub total_slow_poll_duration: Duration,
}

impl TaskMetrics {
    /// Mean time from `instrument` to the first poll.
    pub fn mean_first_poll_delay(&self) -> Duration {
        mean(self.total_first_poll_delay, self.first_poll_count)
    }
    /// Mean wait between `Pending` and the wake-up.
    pub fn mean_idle_duration(&self) -> Duration {
        mean(self.total_idle_duration, self.total_idled_count)
    }
    /// Mean time from a wake-up to the next poll: queueing delay.
    pub fn mean_scheduled_duration(&self) -> Duration {
        mean(self.total_scheduled_duration, self.total_scheduled_count)
    }
    /// Mean time of one poll.
    pub fn mean_poll_duration(&self) -> Duration {
        mean(self.total_poll_duration, self.total_poll_count)
    }
    /// The share of polls that were slow (0 when nothing was polled).
    pub fn slow_poll_ratio(&self) -> f64 {
        if self.total_poll_count == 0 {
            0.0
        } else {
            self.total_slow_poll_count as f64 / self.total_poll_count as f64
        }
    }

    fn since(&self, earlier: &TaskMetrics) -> TaskMetrics {
        TaskMetrics {
            instrumented_count: self.instrumented_count - earlier.instrumented_count,
            dropped_count: self.dropped_count - earlier.dropped_count,
            first_poll_count: self.first_poll_count - earlier.first_poll_count,
            total_first_poll_delay: self.total_first_poll_delay - earlier.total_first_poll_delay,
            total_idled_count: self.total_idled_count - earlier.total_idled_count,
            total_idle_duration: self.total_idle_duration - earlier.total_idle_duration,
            total_scheduled_count: self.total_scheduled_count - earlier.total_scheduled_count,
            total_scheduled_duration: self.total_scheduled_duration
                - earlier.total_scheduled_duration,
            total_poll_count: self.total_poll_count - earlier.total_poll_count,
            total_poll_duration: self.total_poll_duration - earlier.total_poll_duration,
            total_slow_poll_count: self.total_slow_poll_count - earlier.total_slow_poll_count,
            total_slow_poll_duration: self.total_slow_poll_duration
                - earlier.total_slow_poll_duration,
        }
    }
}

fn mean(total: Duration, n: u64) -> Duration {
    if n == 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos((total.as_nanos() / n as u128).min(u64::MAX as u128) as u64)
    }
}

impl Default for TaskMonitor {
    fn default() -> Self {
        Self::new()
    }
}

impl TaskMonitor {
    /// tokio-metrics' default: a poll over 50 µs is slow.
    pub const DEFAULT_SLOW_POLL_THRESHOLD: Duration = Duration::from_micros(50);

    /// A monitor with the default slow-poll threshold (50 µs).
    pub fn new() -> TaskMonitor {
        Self::with_slow_poll_threshold(Self::DEFAULT_SLOW_POLL_THRESHOLD)
    }

    /// A monitor that counts polls longer than `threshold` as slow.
    pub fn with_slow_poll_threshold(threshold: Duration) -> TaskMonitor {
        TaskMonitor {
            shared: Arc::new(Shared {
                base: Instant::now(),
                slow_poll_threshold: threshold,
                instrumented: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                first_polls: AtomicU64::new(0),
                first_poll_delay_ns: AtomicU64::new(0),
                idled: AtomicU64::new(0),
                idle_ns: AtomicU64::new(0),
                scheduled: AtomicU64::new(0),
                scheduled_ns: AtomicU64::new(0),
                polls: AtomicU64::new(0),
                poll_ns: AtomicU64::new(0),
                slow_polls: AtomicU64::new(0),
                slow_poll_ns: AtomicU64::new(0),
            }),
        }
    }

    /// The slow-poll threshold.
    pub fn slow_poll_threshold(&self) -> Duration {
        self.shared.slow_poll_threshold
    }

    /// Wraps `future` so its timings are added to this monitor.
    pub fn instrument<F: Future>(&self, future: F) -> Instrumented<F> {
        self.shared.instrumented.fetch_add(1, Relaxed);
        Instrumented {
            future,
            monitor: self.shared.clone(),
            created_ns: self.shared.now_ns(),
            polled: false,
            idle_since_ns: 0,
            wake: None,
        }
    }

    /// The sums since the monitor was made.
    pub fn cumulative(&self) -> TaskMetrics {
        let s = &*self.shared;
        let d = |a: &AtomicU64| Duration::from_nanos(a.load(Relaxed));
        TaskMetrics {
            instrumented_count: s.instrumented.load(Relaxed),
            dropped_count: s.dropped.load(Relaxed),
            first_poll_count: s.first_polls.load(Relaxed),
            total_first_poll_delay: d(&s.first_poll_delay_ns),
            total_idled_count: s.idled.load(Relaxed),
            total_idle_duration: d(&s.idle_ns),
            total_scheduled_count: s.scheduled.load(Relaxed),
            total_scheduled_duration: d(&s.scheduled_ns),
            total_poll_count: s.polls.load(Relaxed),
            total_poll_duration: d(&s.poll_ns),
            total_slow_poll_count: s.slow_polls.load(Relaxed),
            total_slow_poll_duration: d(&s.slow_poll_ns),
        }
    }

    /// An endless iterator: each `next()` gives the sums since the previous
    /// one (the first: since the monitor was made). Call it on a timer to
    /// export rates.
    pub fn intervals(&self) -> Intervals {
        Intervals {
            monitor: self.clone(),
            previous: TaskMetrics::default(),
        }
    }
}

/// The iterator of [`TaskMonitor::intervals`].
#[derive(Debug)]
pub struct Intervals {
    monitor: TaskMonitor,
    previous: TaskMetrics,
}

impl Iterator for Intervals {
    type Item = TaskMetrics;
    fn next(&mut self) -> Option<TaskMetrics> {
        let now = self.monitor.cumulative();
        let delta = now.since(&self.previous);
        self.previous = now;
        Some(delta)
    }
}

impl Shared {
    /// Nanoseconds since `base`, never 0 (0 means "unset").
    fn now_ns(&self) -> u64 {
        (self.base.elapsed().as_nanos().min(u64::MAX as u128) as u64).max(1)
    }
}

/// What the waker wrapper shares with its future.
struct WakeState {
    monitor: Arc<Shared>,
    /// When the first wake-up since the last poll came (0: none yet).
    woke_ns: AtomicU64,
    /// The waker the future was last polled with.
    inner: Mutex<Waker>,
}

impl Wake for WakeState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let now = self.monitor.now_ns();
        // Only the first wake-up after a poll ends the wait.
        let _ = self.woke_ns.compare_exchange(0, now, Relaxed, Relaxed);
        let w = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        w.wake();
    }
}

/// A future instrumented by a [`TaskMonitor`].
#[derive(Debug)]
pub struct Instrumented<F> {
    future: F,
    monitor: Arc<Shared>,
    created_ns: u64,
    polled: bool,
    /// When the last poll returned `Pending` (0: never).
    idle_since_ns: u64,
    /// The waker wrapper, made at the first poll.
    wake: Option<(Arc<WakeState>, Waker)>,
}

impl std::fmt::Debug for WakeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeState").finish_non_exhaustive()
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // a pinned `Instrumented` (Drop below only counts, it does not move
        // it), and the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let m = &*this.monitor;
        let start = m.now_ns();
        if !this.polled {
            this.polled = true;
            m.first_polls.fetch_add(1, Relaxed);
            m.first_poll_delay_ns
                .fetch_add(start.saturating_sub(this.created_ns), Relaxed);
        }
        let state = match &mut this.wake {
            Some((state, waker)) => {
                let woke = state.woke_ns.swap(0, Relaxed);
                if woke != 0 {
                    m.scheduled.fetch_add(1, Relaxed);
                    m.scheduled_ns
                        .fetch_add(start.saturating_sub(woke), Relaxed);
                    if this.idle_since_ns != 0 && woke >= this.idle_since_ns {
                        m.idled.fetch_add(1, Relaxed);
                        m.idle_ns.fetch_add(woke - this.idle_since_ns, Relaxed);
                    }
                }
                let mut inner = state.inner.lock().unwrap_or_else(|e| e.into_inner());
                if !inner.will_wake(cx.waker()) {
                    *inner = cx.waker().clone();
                }
                drop(inner);
                waker.clone()
            }
            None => {
                let state = Arc::new(WakeState {
                    monitor: this.monitor.clone(),
                    woke_ns: AtomicU64::new(0),
                    inner: Mutex::new(cx.waker().clone()),
                });
                let waker = Waker::from(state.clone());
                this.wake = Some((state, waker.clone()));
                waker
            }
        };
        // SAFETY: see above: `future` is pinned with `self` and never moved.
        let fut = unsafe { Pin::new_unchecked(&mut this.future) };
        let out = fut.poll(&mut Context::from_waker(&state));
        let end = m.now_ns();
        let took = end.saturating_sub(start);
        if out.is_pending() {
            this.idle_since_ns = end;
        }
        m.polls.fetch_add(1, Relaxed);
        m.poll_ns.fetch_add(took, Relaxed);
        if Duration::from_nanos(took) > m.slow_poll_threshold {
            m.slow_polls.fetch_add(1, Relaxed);
            m.slow_poll_ns.fetch_add(took, Relaxed);
        }
        out
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        self.monitor.dropped.fetch_add(1, Relaxed);
    }
}
