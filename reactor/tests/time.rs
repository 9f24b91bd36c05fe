//! Timers on the reactor, driven by the single-threaded harness.

mod common;

use numa_rt_reactor::time::{Duration, Instant};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use common::{block_on, count_waker, setup};
use numa_rt_reactor::time::{self, error::Elapsed, MissedTickBehavior};

/// Timers registered in a scrambled order are woken in deadline order,
/// also when several 1 ms slots expire in one turn of the wheel (it sorts
/// what one advance fires by deadline). Each sleep is registered with a
/// waker of its own that logs its deadline when woken, so the log is the
/// order in which the driver woke them. Every sleep is registered before
/// the first deadline: a sleep first polled after its deadline completes
/// at once by design (what failed on a slow TCG guest with a 5 ms lead). If
/// registering took longer than the lead, the round is dropped and run
/// again with a lead ten times longer. (Through `FuturesUnordered`, as
/// before, the completion order is not the wake order: it yields after 32
/// polls, and futures not yet polled with its wakers sit ahead of the ones
/// woken since in its ready queue.)
#[test]
fn timers_fire_in_deadline_order() {
    use std::sync::{Arc, Mutex};
    use std::task::{Wake, Waker};

    struct Logs {
        at: Instant,
        log: Arc<Mutex<Vec<Instant>>>,
    }
    impl Wake for Logs {
        fn wake(self: Arc<Self>) {
            self.log.lock().unwrap().push(self.at);
        }
    }

    let (reactor, mut d, _g) = setup(1);
    // A scrambled set of distinct deadlines, 1 ms apart.
    let offsets: Vec<u64> = (0..40u64).map(|i| (i * 17) % 40).collect();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut lead = Duration::from_millis(5);
    let (start, mut sleeps) = loop {
        let start = Instant::now() + lead;
        let mut sleeps: Vec<_> = offsets
            .iter()
            .map(|&k| Box::pin(time::sleep_until(start + Duration::from_millis(k))))
            .collect();
        let all_pending = sleeps.iter_mut().all(|s| {
            let waker = Waker::from(Arc::new(Logs {
                at: s.deadline(),
                log: log.clone(),
            }));
            s.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        });
        if all_pending && Instant::now() < start {
            break (start, sleeps);
        }
        assert!(
            lead < Duration::from_secs(50),
            "40 sleeps took {lead:?} to register"
        );
        drop(sleeps);
        log.lock().unwrap().clear();
        lead *= 10;
    };
    // Drive the driver until every sleep has been woken.
    block_on(
        &mut d[0],
        std::future::poll_fn(|_| {
            if log.lock().unwrap().len() == offsets.len() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }),
    );
    let order = log.lock().unwrap().clone();
    assert_eq!(order.len(), offsets.len());
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "timers woken out of order: {:?}",
        order.iter().map(|at| *at - start).collect::<Vec<_>>()
    );
    let (_, waker) = count_waker();
    for s in &mut sleeps {
        assert!(s.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    }
    assert!(Instant::now() >= start + Duration::from_millis(39));
    assert_eq!(reactor.pending_timers(), 0);
}

#[test]
fn sleep_waits_at_least_its_duration() {
    let (_r, mut d, _g) = setup(1);
    let t0 = Instant::now();
    block_on(&mut d[0], time::sleep(Duration::from_millis(15)));
    assert!(t0.elapsed() >= Duration::from_millis(15));
}

#[test]
fn zero_and_past_sleeps_complete_at_once() {
    let (reactor, _d, _g) = setup(1);
    let (_, waker) = count_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut time::sleep(Duration::ZERO))
        .poll(&mut cx)
        .is_ready());
    let past = Instant::now() - Duration::from_secs(1);
    assert!(Pin::new(&mut time::sleep_until(past))
        .poll(&mut cx)
        .is_ready());
    assert_eq!(reactor.pending_timers(), 0, "no entry for an elapsed sleep");
}

#[test]
fn sleep_reset_moves_the_deadline() {
    let (reactor, _d, _g) = setup(1);
    let (_, waker) = count_waker();
    let mut cx = Context::from_waker(&waker);
    let mut s = Box::pin(time::sleep(Duration::from_secs(3600)));
    assert!(s.as_mut().poll(&mut cx).is_pending());
    assert_eq!(reactor.pending_timers(), 1);
    s.as_mut().reset(Instant::now() - Duration::from_millis(1));
    assert_eq!(reactor.pending_timers(), 0, "reset cancels the old entry");
    assert!(s.as_mut().poll(&mut cx).is_ready());
    assert!(s.is_elapsed());
}

#[test]
fn timeout_elapses_or_passes_the_output_through() {
    let (reactor, mut d, _g) = setup(1);
    block_on(&mut d[0], async {
        let r = time::timeout(Duration::from_millis(10), futures::future::pending::<()>()).await;
        assert_eq!(r, Err(Elapsed::from_never()));
        let r = time::timeout(Duration::from_secs(3600), async { 5 }).await;
        assert_eq!(r, Ok(5));
        let r = time::timeout(
            Duration::from_secs(3600),
            time::sleep(Duration::from_millis(5)),
        )
        .await;
        assert!(r.is_ok());
        let e: std::io::Error = time::timeout(Duration::ZERO, futures::future::pending::<()>())
            .await
            .unwrap_err()
            .into();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    });
    assert_eq!(reactor.pending_timers(), 0);
}

trait FromNever {
    fn from_never() -> Self;
}
impl FromNever for Elapsed {
    /// Builds an `Elapsed` the only public way: from an expired timeout.
    fn from_never() -> Elapsed {
        let (_r, mut d, _g) = setup(1);
        block_on(
            &mut d[0],
            time::timeout(Duration::ZERO, futures::future::pending::<()>()),
        )
        .unwrap_err()
    }
}

fn poll_tick(i: &mut time::Interval) -> Poll<Instant> {
    let (_, waker) = count_waker();
    i.poll_tick(&mut Context::from_waker(&waker))
}

#[test]
fn interval_ticks_on_schedule() {
    let (_r, mut d, _g) = setup(1);
    let mut i = time::interval(Duration::from_millis(5));
    let ticks = block_on(&mut d[0], async {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(i.tick().await);
        }
        v
    });
    for w in ticks.windows(2) {
        assert_eq!(
            w[1] - w[0],
            Duration::from_millis(5),
            "ticks are scheduled a period apart"
        );
    }
}

/// Missed ticks, made deterministic by starting the schedule in the past
/// with a long period: no timing depends on how fast this test runs.
#[test]
fn interval_missed_tick_behaviours() {
    let (_r, _d, _g) = setup(1);
    let period = Duration::from_secs(10);
    let start = Instant::now() - period * 11 / 2; // 5.5 periods late

    let mut burst = time::interval_at(start, period);
    assert_eq!(burst.missed_tick_behavior(), MissedTickBehavior::Burst);
    for k in 0..6 {
        assert_eq!(
            poll_tick(&mut burst),
            Poll::Ready(start + period * k),
            "burst tick {k}"
        );
    }
    assert!(poll_tick(&mut burst).is_pending(), "caught up");

    let mut delay = time::interval_at(start, period);
    delay.set_missed_tick_behavior(MissedTickBehavior::Delay);
    assert_eq!(poll_tick(&mut delay), Poll::Ready(start));
    assert!(
        poll_tick(&mut delay).is_pending(),
        "next tick is a period from now"
    );

    let mut skip = time::interval_at(start, period);
    skip.set_missed_tick_behavior(MissedTickBehavior::Skip);
    assert_eq!(poll_tick(&mut skip), Poll::Ready(start));
    assert!(
        poll_tick(&mut skip).is_pending(),
        "missed ticks are skipped"
    );
    // Still on the original phase: the next tick is start + 6 periods.
    let mut reset = time::interval_at(start + period * 6, period);
    assert!(poll_tick(&mut reset).is_pending());
}

#[test]
fn a_hundred_thousand_sleeps_are_cheap_and_leave_nothing_behind() {
    const N: usize = 100_000;
    let (reactor, mut d, _g) = setup(2);
    let (_, waker) = count_waker();
    let mut cx = Context::from_waker(&waker);
    // Far enough ahead that registering them all (debug build, busy machine)
    // finishes before the first is due.
    let base = Instant::now() + Duration::from_secs(2);
    let mut sleeps: Vec<_> = (0..N)
        .map(|i| {
            Box::pin(time::sleep_until(
                base + Duration::from_micros((i % 500) as u64 * 100),
            ))
        })
        .collect();
    for s in &mut sleeps {
        assert!(s.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(reactor.pending_timers(), N);
    // Drop every other one: their entries go at once.
    let mut i = 0;
    sleeps.retain(|_| {
        i += 1;
        i % 2 == 0
    });
    assert_eq!(reactor.pending_timers(), N / 2);
    // The rest complete.
    block_on(&mut d[0], futures::future::join_all(sleeps));
    assert_eq!(reactor.pending_timers(), 0);
    // Churn: create, register and drop, many times over: the set never grows.
    for _ in 0..N {
        let mut s = Box::pin(time::sleep(Duration::from_secs(60)));
        assert!(s.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(reactor.pending_timers(), 0);
}
