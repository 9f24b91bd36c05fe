//! `numa_rt::task::coop`: tokio's budget API on numa_rt's budget.

use numa_rt::task::coop;
use std::task::Poll;

/// Units spent with progress run out: the task is made to yield (and was
/// woken, so it comes back).
#[numa_rt::test]
async fn progress_spends_the_budget_and_the_task_yields() {
    let mut spent = 0u32;
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if spent > 0 && !yielded {
            // Back after the forced yield: a fresh budget.
            yielded = true;
        }
        loop {
            match coop::poll_proceed(cx) {
                Poll::Ready(g) => {
                    g.made_progress();
                    spent += 1;
                    if yielded {
                        return Poll::Ready(());
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await;
    assert_eq!(spent, 129, "128 units, then one more after the yield");
}

/// A guard dropped without progress gives its unit back.
#[numa_rt::test]
async fn no_progress_gives_the_unit_back() {
    std::future::poll_fn(|cx| {
        for _ in 0..10_000 {
            match coop::poll_proceed(cx) {
                Poll::Ready(g) => drop(g),
                Poll::Pending => panic!("the budget ran out without progress"),
            }
        }
        assert!(coop::has_budget_remaining());
        Poll::Ready(())
    })
    .await;
}

/// `cooperative` makes an always-ready loop take turns.
#[numa_rt::test]
async fn cooperative_makes_a_ready_loop_yield() {
    let mut polls = 0u32;
    let mut pendings = 0u32;
    std::future::poll_fn(|cx| {
        for _ in 0..1_000 {
            let mut f = std::pin::pin!(coop::cooperative(std::future::ready(())));
            match f.as_mut().poll(cx) {
                Poll::Ready(()) => polls += 1,
                Poll::Pending => {
                    pendings += 1;
                    return if pendings > 1 {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    };
                }
            }
        }
        Poll::Ready(())
    })
    .await;
    assert!(pendings >= 1, "never yielded in {polls} ready polls");
}

use std::future::Future;
