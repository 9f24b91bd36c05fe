//! Time edge cases where numa_rt follows tokio: a fresh `sleep(ZERO)` is not
//! elapsed before its first poll, and an interval of `Duration::MAX`
//! saturates instead of overflowing. "Pending" is one poll that returns
//! `Pending`; nothing sleeps.

use std::pin::pin;
use std::time::Duration;

use numa_rt::time::{self, MissedTickBehavior};

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

#[test]
fn a_zero_sleep_is_elapsed_only_once_polled() {
    rt().block_on(async {
        let mut sleep = pin!(time::sleep(Duration::ZERO));
        assert!(!sleep.is_elapsed(), "not polled yet");
        sleep.as_mut().await;
        assert!(sleep.is_elapsed());
    });
}

#[test]
fn an_interval_of_duration_max_ticks_once_without_overflow() {
    rt().block_on(async {
        for missed in [
            MissedTickBehavior::Burst,
            MissedTickBehavior::Delay,
            MissedTickBehavior::Skip,
        ] {
            let mut interval = time::interval(Duration::MAX);
            interval.set_missed_tick_behavior(missed);
            interval.tick().await;
            assert!(
                futures::poll!(pin!(interval.tick())).is_pending(),
                "{missed:?}: the second tick is never"
            );
            interval.reset();
            assert!(futures::poll!(pin!(interval.tick())).is_pending());
        }
    });
}
