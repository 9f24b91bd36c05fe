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
