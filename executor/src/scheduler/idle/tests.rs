//! Tests and loom models of the idle/spinning protocol and its barrier.

use super::*;

#[cfg(not(loom))]
#[test]
fn release_reclaim_and_wake() {
    let idle = Idle::new(vec![0, 0, 1], 2);
    idle.release(2);
    idle.release(0);
    assert_eq!(idle.npidle(), 2);
    // A waker prefers the node it is asked for.
    assert!(idle.try_claim_spinner());
    assert_eq!(idle.pop_for_spinning(1), Some(2));
    assert_eq!(idle.reclaim(2), Reclaim::Spinning);
    assert!(idle.stop_spinning());
    // A targeted wake, then the owner's reclaim is plain.
    assert!(idle.take_specific(0));
    assert!(!idle.take_specific(0));
    assert_eq!(idle.reclaim(0), Reclaim::Plain);
    assert_eq!(idle.npidle(), 0);
    // No idle P: nobody to wake.
    assert!(!idle.try_claim_spinner());
}

#[cfg(not(loom))]
#[test]
fn spinning_is_limited_to_half_the_busy_procs() {
    let idle = Idle::new(vec![0; 4], 1);
    assert!(idle.may_spin());
    idle.start_spinning();
    assert!(idle.may_spin()); // 2*1 < 4
    idle.start_spinning();
    assert!(!idle.may_spin()); // 2*2 == 4
    idle.release(0);
    idle.release(1);
    assert!(!idle.may_spin()); // busy = 2
}

#[cfg(loom)]
mod models {
    use super::*;
    use crate::loom::atomic::{fence, AtomicBool};
    use loom::thread;
    use std::sync::Arc;

    /// The lost wake-up the barrier prevents: a spinning M gives up and
    /// parks while a submitter publishes work. Either the parker sees the
    /// work in its re-check, or the submitter sees the idle P and wakes it.
    fn model(parker_was_spinning: bool) {
        loom::model(move || {
            let idle = Arc::new(Idle::new(vec![0, 0], 1));
            let work = Arc::new(AtomicBool::new(false));
            let woken = Arc::new(AtomicBool::new(false));
            if parker_was_spinning {
                idle.start_spinning();
            }
            let (i2, w2, k2) = (idle.clone(), work.clone(), woken.clone());
            let submitter = thread::spawn(move || {
                w2.store(true, Relaxed);
                fence(SeqCst);
                if i2.try_claim_spinner() {
                    if i2.pop_for_spinning(0).is_some() {
                        k2.store(true, Relaxed);
                    } else {
                        i2.stop_spinning();
                    }
                }
            });
            // The parker (P0's M).
            idle.release(0);
            if parker_was_spinning {
                idle.stop_spinning();
            }
            fence(SeqCst);
            let saw_work = work.load(Relaxed);
            submitter.join().unwrap();
            assert!(
                saw_work || woken.load(Relaxed),
                "lost wake-up: work published, P parked, nobody woke it"
            );
        });
    }

    #[test]
    fn barrier_spinning_parker() {
        model(true);
    }

    #[test]
    fn barrier_plain_parker() {
        model(false);
    }
}
