//! RuntimeExt::wrap / TokioContext: a future polled by one executor uses
//! another runtime's timers and spawner.

use numa_rt::runtime::Builder;
use numa_rt::time::{sleep, Duration};
use numa_rt_util::context::{RuntimeExt, TokioContext};

#[test]
fn a_sleep_on_another_runtime() {
    let timers = Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let poller = Builder::new_current_thread().build().unwrap();
    let id = poller.block_on(timers.wrap(async {
        sleep(Duration::from_millis(1)).await;
        numa_rt::runtime::Handle::current().id()
    }));
    assert_eq!(id, timers.handle().id());
    assert_ne!(id, poller.handle().id());
}

#[test]
fn spawns_go_to_the_wrapped_runtime() {
    let rt = numa_rt::Runtime::new().unwrap();
    let wrapped = TokioContext::new(
        async {
            numa_rt::spawn(async { numa_rt::runtime::Handle::current().id() })
                .await
                .unwrap()
        },
        rt.handle().clone(),
    );
    assert_eq!(wrapped.handle().id(), rt.handle().id());
    // Polled by an executor that is no runtime at all.
    assert_eq!(futures::executor::block_on(wrapped), rt.handle().id());
}

#[test]
fn into_inner_gives_the_future_back() {
    let rt = numa_rt::Runtime::new().unwrap();
    let wrapped = rt.wrap(async { 2 });
    assert_eq!(futures::executor::block_on(wrapped.into_inner()), 2);
}
