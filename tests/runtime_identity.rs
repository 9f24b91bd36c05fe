//! tokio's paths for a runtime's identity: `numa_rt::runtime::Id`,
//! `Handle::id`, `Builder::name`, `Handle::name`.

use numa_rt::runtime::{Builder, Handle, Id};

#[test]
fn tokio_paths_for_the_runtime_id_and_name() {
    let rt = Builder::new_current_thread()
        .name("svc")
        .enable_all()
        .build()
        .unwrap();
    let (id, name): (Id, Option<String>) = rt.block_on(async {
        let h = Handle::current();
        (h.id(), h.name().map(str::to_owned))
    });
    assert_eq!(id, rt.handle().id());
    assert_eq!(name.as_deref(), Some("svc"));
}

#[test]
fn worker_index_names_the_p_of_a_task_and_nothing_elsewhere() {
    let rt = numa_rt::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    for _ in 0..10 {
        let i = rt
            .block_on(rt.spawn(async { numa_rt::runtime::worker_index() }))
            .unwrap();
        assert!(matches!(i, Some(0 | 1)), "{i:?}");
    }
    assert_eq!(
        rt.block_on(async { numa_rt::runtime::worker_index() }),
        None
    );
    let in_place = rt.block_on(
        rt.spawn(async { numa_rt::task::block_in_place(numa_rt::runtime::worker_index) }),
    );
    assert_eq!(
        in_place.unwrap(),
        None,
        "inside block_in_place the P moved on"
    );
    let blocking = rt.block_on(rt.spawn_blocking(numa_rt::runtime::worker_index));
    assert_eq!(blocking.unwrap(), None);
}

#[test]
fn is_rt_shutdown_err_is_false_for_other_errors() {
    use std::io::{Error, ErrorKind};
    assert!(!numa_rt::runtime::is_rt_shutdown_err(&Error::other("boom")));
    assert!(!numa_rt::runtime::is_rt_shutdown_err(&Error::from(
        ErrorKind::ConnectionReset
    )));
}
