//! Tests and loom models of the idle/spinning protocol and its barrier.

use super::*;

#[cfg(not(loom))]
#[test]
fn release_reclaim_and_wake() {
    let idle = Idle::new(vec![0, 0, 1], 2);
    idle.release(2);
    idle.release(0);
    assert_eq!(idle.npidle(), 2);
    assert_eq!((idle.node_npidle(0), idle.node_npidle(1)), (1, 1));
    // A waker claims and wakes on the node it is asked for.
    assert!(idle.try_claim_spinner(1));
    assert_eq!(idle.pop_for_spinning(1), Some(2));
    assert_eq!(idle.reclaim(2), Reclaim::Spinning);
    // Node 1 has a spinner now: nobody else claims there, node 0 still can.
    assert!(!idle.try_claim_spinner(1));
    assert!(idle.stop_spinning(1));
    // A targeted wake, then the owner's reclaim is plain.
    assert!(idle.take_specific(0));
    assert!(!idle.take_specific(0));
    assert_eq!(idle.reclaim(0), Reclaim::Plain);
    assert_eq!(idle.npidle(), 0);
    // No idle P: nobody to wake.
    assert!(!idle.try_claim_spinner(0));
    assert!(!idle.try_claim_spinner(1));
}

#[cfg(not(loom))]
#[test]
fn spinning_is_limited_to_half_the_busy_procs() {
    let idle = Idle::new(vec![0; 4], 1);
    assert!(idle.may_spin(0));
    idle.start_spinning(0);
    assert!(idle.may_spin(0)); // 2*1 < 4
    idle.start_spinning(0);
    assert!(!idle.may_spin(0)); // 2*2 == 4
    idle.release(0);
    idle.release(1);
    assert!(!idle.may_spin(0)); // busy = 2
}

#[cfg(not(loom))]
#[test]
fn spinning_is_counted_per_node() {
    // Two nodes of two P's: spinners of node 1 do not use node 0's allowance.
    let idle = Idle::new(vec![0, 0, 1, 1], 2);
    idle.start_spinning(1);
    assert!(idle.may_spin(0));
    assert!(!idle.may_spin(1)); // 2*1 == 2 busy P's of node 1
    assert_eq!(idle.nmspinning(), 1);
    assert_eq!((idle.node_nmspinning(0), idle.node_nmspinning(1)), (0, 1));
    // A claim on node 0 is not blocked by node 1's spinner.
    idle.release(0);
    assert!(idle.try_claim_spinner(0));
    assert_eq!(idle.pop_for_spinning(0), Some(0));
    // pop never crosses nodes.
    assert!(idle.pop_for_spinning(1).is_none());
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
            // Two nodes; node 1's M spins throughout, which must not stop
            // the submitter from waking node 0's P (per-node accounting).
            let idle = Arc::new(Idle::new(vec![0, 1], 2));
            idle.start_spinning(1);
            let work = Arc::new(AtomicBool::new(false));
            let woken = Arc::new(AtomicBool::new(false));
            if parker_was_spinning {
                idle.start_spinning(0);
            }
            let (i2, w2, k2) = (idle.clone(), work.clone(), woken.clone());
            let submitter = thread::spawn(move || {
                // Work for node 0 (its queue), then Shared::wake_idle_p(0).
                w2.store(true, Relaxed);
                fence(SeqCst);
                if i2.try_claim_spinner(0) {
                    if i2.pop_for_spinning(0).is_some() {
                        k2.store(true, Relaxed);
                    } else {
                        i2.stop_spinning(0);
                    }
                }
            });
            // The parker (P0's M, node 0).
            idle.release(0);
            if parker_was_spinning {
                idle.stop_spinning(0);
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

    /// Cross-node fallback: node 0's only P is inside a task (node 0 is
    /// saturated; that Relaxed flag is no part of the barrier, so the model
    /// holds it fixed) and work arrives on node 0's queue while node 1's
    /// spinner gives up and parks. The submitter falls back to node 1 (as
    /// `Shared::wake_idle_p` does); the parker's re-check looks at node 0's
    /// queue (as `Shared::any_work` does for saturated nodes). Either the
    /// parker sees the work, or the submitter wakes node 1's P.
    #[test]
    fn barrier_cross_node_fallback() {
        loom::model(|| {
            let idle = Arc::new(Idle::new(vec![0, 1], 2));
            idle.start_spinning(1);
            let work = Arc::new(AtomicBool::new(false));
            let woken = Arc::new(AtomicBool::new(false));
            let (i2, w2, k2) = (idle.clone(), work.clone(), woken.clone());
            let submitter = thread::spawn(move || {
                w2.store(true, Relaxed);
                fence(SeqCst);
                let claim = |node: usize| {
                    if !i2.try_claim_spinner(node) {
                        return false;
                    }
                    if i2.pop_for_spinning(node).is_some() {
                        true
                    } else {
                        i2.stop_spinning(node);
                        false
                    }
                };
                if claim(0) {
                    unreachable!("node 0 has no idle P");
                }
                // A spinner of node 1 seen here is the parker itself: then
                // nothing is woken and its re-check must find the work.
                if i2.node_nmspinning(1) == 0 && claim(1) {
                    k2.store(true, Relaxed);
                }
            });
            // Node 1's spinner parks.
            idle.release(1);
            idle.stop_spinning(1);
            fence(SeqCst);
            let saw_work = work.load(Relaxed);
            submitter.join().unwrap();
            assert!(
                saw_work || woken.load(Relaxed),
                "lost wake-up: work on a saturated node, the other node's spinner parked unaware"
            );
        });
    }
}

#[cfg(not(loom))]
/// The idle list is LIFO and a P leaves it from anywhere (a targeted wake,
/// a P reclaiming itself) without disturbing the others' order.
#[test]
fn idle_list_is_lifo_and_leaves_from_the_middle() {
    let idle = Idle::new(vec![0, 0, 0, 0, 1, 1], 2);
    for p in [0, 1, 2, 3, 4, 5] {
        idle.release(p);
    }
    assert_eq!(idle.node_npidle(0), 4);
    assert!(idle.take_specific(2), "an idle P is taken");
    assert!(!idle.take_specific(2), "not twice");
    assert_eq!(idle.reclaim(1), Reclaim::Plain);
    assert_eq!(idle.node_npidle(0), 2);
    // Left: 0 (oldest) and 3 (newest): the newest comes first.
    assert!(idle.try_claim_spinner(0));
    assert_eq!(idle.pop_for_spinning(0), Some(3));
    assert_eq!(idle.pop_for_spinning(0), Some(0));
    assert_eq!(idle.pop_for_spinning(0), None);
    // Node 1's P's are numbered from 4: its list hands out global indices.
    assert_eq!(idle.pop_for_spinning(1), Some(5));
    assert_eq!(idle.reclaim(4), Reclaim::Plain);
    assert_eq!(idle.pop_for_spinning(1), None);
    assert_eq!(idle.reclaim(2), Reclaim::Plain);
    assert_eq!(idle.reclaim(3), Reclaim::Spinning);
    assert_eq!(idle.npidle(), 0);
}
