//! `JoinError` is `Send + Sync + 'static` and an `Error`, so `?` carries it
//! into `Box<dyn Error + Send + Sync>` and into `std::io::Error`.

mod common;
use common::rt;
use numa_rt_executor::JoinError;
use std::error::Error;

fn assert_error<E: Error + Send + Sync + 'static>() {}

#[test]
fn join_error_is_a_send_sync_static_error() {
    assert_error::<JoinError>();
}

async fn boxed(h: numa_rt_executor::JoinHandle<u32>) -> Result<u32, Box<dyn Error + Send + Sync>> {
    Ok(h.await?)
}

async fn io(h: numa_rt_executor::JoinHandle<u32>) -> std::io::Result<u32> {
    Ok(h.await?)
}

#[test]
fn question_mark_into_a_boxed_error() {
    let rt = rt(2);
    assert_eq!(rt.block_on(boxed(rt.spawn(async { 1 }))).unwrap(), 1);
    let e = rt
        .block_on(boxed(rt.spawn(async { panic!("boxed boom") })))
        .unwrap_err();
    let je = e.downcast_ref::<JoinError>().expect("the JoinError itself");
    assert!(je.is_panic());
    assert!(e.to_string().contains("boxed boom"), "{e}");
    // And across threads: the box is Send + Sync.
    std::thread::spawn(move || assert!(e.to_string().contains("panicked")))
        .join()
        .unwrap();
}

#[test]
fn question_mark_into_io_error_keeps_the_join_error() {
    let rt = rt(2);
    assert_eq!(rt.block_on(io(rt.spawn(async { 2 }))).unwrap(), 2);
    let h = rt.spawn(std::future::pending::<u32>());
    h.abort();
    let e = rt.block_on(io(h)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Other);
    let je = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<JoinError>())
        .expect("the JoinError is the io::Error's source");
    assert!(je.is_cancelled());
}

#[test]
fn accessors_keep_their_meaning() {
    let rt = rt(2);
    let h = rt.spawn(async { panic!("payload {}", 7) });
    let id = h.id();
    let e = rt.block_on(h).unwrap_err();
    assert!(e.is_panic() && !e.is_cancelled());
    assert_eq!(e.id(), id);
    assert_eq!(
        format!("{e}"),
        format!("task {id} panicked with message \"payload 7\"")
    );
    // tokio's Debug shape.
    assert_eq!(
        format!("{e:?}"),
        format!("JoinError::Panic(Id({id}), \"payload 7\", ...)")
    );
    let p = e.try_into_panic().unwrap();
    assert_eq!(common::panic_message(&*p), "payload 7");

    let h = rt.spawn(std::future::pending::<()>());
    h.abort();
    let e = rt.block_on(h).unwrap_err();
    assert!(e.is_cancelled() && !e.is_panic());
    let e = e.try_into_panic().unwrap_err();
    assert_eq!(format!("{e}"), format!("task {} was cancelled", e.id()));
    assert_eq!(
        format!("{e:?}"),
        format!("JoinError::Cancelled(Id({}))", e.id())
    );
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.into_panic())).unwrap_err();
    assert!(common::panic_message(&*p).contains("cancelled"));
}
