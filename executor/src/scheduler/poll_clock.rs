//! A time stamp per poll, cheap enough for every poll: the CPU's time-stamp
//! counter, where the kernel trusts it.
//!
//! A P keeps the few tasks queued behind its running task from thieves
//! when it will reach them soon (`Processor::keep_for_owner`), judged by its
//! mean poll time. That mean is folded at batch flushes, every
//! `event_interval` polls, so a P that starts running long polls (64
//! producers each computing for 500 µs) keeps looking fast for tens of
//! milliseconds: on 16 cores its queue of such tasks ran on it alone, one
//! after the other (3× tokio's time). Two uses of the stamp end that:
//!
//! - the P publishes when its poll in progress began
//!   (`Processor::poll_start`), and a thief counts the time that poll has
//!   already run against the keep window;
//! - at a poll's end its M sees that the poll was long (over the keep
//!   window), folds it into the mean at once and, if its ring now holds
//!   more than it keeps, wakes an idle P (`Worker::after_long_poll`).
//!
//! Reading the wall clock (`Instant::now`, ~26 ns through the vDSO on the
//! development VM) at every poll start and end would cost more than the
//! TSC (~10 ns, and it overlaps with the work around it). The TSC is used
//! only on x86_64 and only while the kernel's clocksource is `tsc`: Linux
//! switches away from it when the counters are not synchronized across
//! CPUs or not constant-rate, and then this rule is off (stamps read 0, a
//! thief counts no age, no poll is long) and keeping works as before it.
//! Other architectures: off (aarch64's `CNTVCT_EL0` would serve; not done).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// TSC ticks per microsecond; 0 while the rule is off.
static TICKS_PER_US: AtomicU64 = AtomicU64::new(0);
/// Polls at least this many ticks long are long (`u64::MAX`: off).
static LONG_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
static INIT: OnceLock<()> = OnceLock::new();

/// Calibrates the clock once per process (about 50 µs, at the first
/// runtime's build). `long_ns`: the length from which a poll is long.
pub(crate) fn init(long_ns: u64) {
    INIT.get_or_init(|| {
        if let Some(per_us) = calibrate() {
            TICKS_PER_US.store(per_us, Relaxed);
            LONG_TICKS.store(long_ns.saturating_mul(per_us) / 1000, Relaxed);
        }
    });
}

/// The stamp for a poll's start and end (0 when off).
#[inline]
pub(crate) fn stamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU and reads a counter; it
        // touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Whether a poll that took `ticks` was long (see [`init`]).
#[inline]
pub(crate) fn is_long(ticks: u64) -> bool {
    ticks >= LONG_TICKS.load(Relaxed)
}

/// Nanoseconds since `start` (a [`stamp`]); 0 when off or `start` is 0.
#[inline]
pub(crate) fn ns_since(start: u64) -> u64 {
    let per_us = TICKS_PER_US.load(Relaxed);
    if per_us == 0 || start == 0 {
        return 0;
    }
    // A stamp from another CPU may be a little ahead of ours: no age then.
    stamp().saturating_sub(start).saturating_mul(1000) / per_us
}

/// Nanoseconds in `ticks` (0 when off).
#[inline]
pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    match TICKS_PER_US.load(Relaxed) {
        0 => 0,
        per_us => ticks.saturating_mul(1000) / per_us,
    }
}

#[cfg(target_arch = "x86_64")]
fn calibrate() -> Option<u64> {
    use std::time::{Duration, Instant};
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()?;
    if source.trim() != "tsc" {
        return None;
    }
    // A pair of readings taken close together: the wall clock between two
    // TSC reads no more than ~10 µs apart at any plausible rate (a thread
    // preempted between them would skew the rate by its time off CPU).
    let pair = || {
        for _ in 0..100 {
            let a = stamp();
            let t = Instant::now();
            let b = stamp();
            if b.wrapping_sub(a) < 50_000 {
                return Some((a / 2 + b / 2, t));
            }
        }
        None
    };
    let (c0, t0) = pair()?;
    while t0.elapsed() < Duration::from_micros(50) {
        std::hint::spin_loop();
    }
    let (c1, t1) = pair()?;
    let ns = t1.duration_since(t0).as_nanos() as u64;
    let per_us = c1.checked_sub(c0)?.checked_mul(1000)? / ns.max(1);
    // 100 MHz to 100 GHz, or the readings are not a TSC worth trusting.
    (100..100_000).contains(&per_us).then_some(per_us)
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_measures_time_where_on() {
        init(20_000);
        let per_us = TICKS_PER_US.load(Relaxed);
        if per_us == 0 {
            // Off on this machine: nothing counts as long, nothing ages.
            assert!(!is_long(u64::MAX - 1));
            assert_eq!(ns_since(stamp()), 0);
            return;
        }
        let s = stamp();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let ns = ns_since(s);
        // Loose: the clock measured 2 ms of spinning as at least 1 ms and
        // at most what the wall clock saw since (a preempted thread still
        // counts wall time on both).
        assert!(ns >= 1_000_000, "{ns} ns");
        assert!(
            ns <= t.elapsed().as_nanos() as u64 * 2 + 1_000_000,
            "{ns} ns"
        );
        assert!(is_long(per_us * 20));
        assert!(!is_long(per_us * 19));
        assert_eq!(ns_since(0), 0);
    }
}
