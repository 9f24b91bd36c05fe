//! `Handle::enter` guards nest and must be dropped in reverse order.

mod common;
use common::{panic_message, rt};
use numa_rt_executor::Handle;

#[test]
fn nested_guards_restore_the_runtime_entered_before() {
    let (a, b) = (rt(1), rt(1));
    let ga = a.enter();
    assert_eq!(Handle::current().id(), a.handle().id());
    {
        let _gb = b.enter();
        assert_eq!(Handle::current().id(), b.handle().id());
    }
    assert_eq!(Handle::current().id(), a.handle().id());
    drop(ga);
    assert!(Handle::try_current().is_err());
}

#[test]
fn guards_of_two_runtimes_dropped_out_of_order_panic() {
    let (a, b) = (rt(1), rt(1));
    // The second guard drops while the first one's panic unwinds.
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ga = a.enter();
        let _gb = b.enter();
        drop(ga);
    }))
    .unwrap_err();
    assert!(
        panic_message(&*err).contains("out of order"),
        "{}",
        panic_message(&*err)
    );
}

#[test]
fn guards_of_one_runtime_dropped_out_of_order_panic() {
    let a = rt(1);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g1 = a.enter();
        let g2 = a.enter();
        let _g3 = a.enter();
        drop(g2);
    }))
    .unwrap_err();
    assert!(panic_message(&*err).contains("out of order"));
}
