//! A runtime's identity: `Handle::id` tells live runtimes apart, and
//! `Builder::name` is what `Handle::name` returns (tokio's names).

use numa_rt_executor::{Builder, Handle, RuntimeId};
use std::collections::HashSet;

#[test]
fn every_handle_of_a_runtime_has_its_id_and_no_other_runtime_does() {
    let rts: Vec<_> = (0..4)
        .map(|_| Builder::new_current_thread().build().unwrap())
        .collect();
    let ids: HashSet<RuntimeId> = rts.iter().map(|rt| rt.handle().id()).collect();
    assert_eq!(ids.len(), rts.len(), "{ids:?}");
    let rt = &rts[0];
    let inside = rt.block_on(async { Handle::current().id() });
    assert_eq!(inside, rt.handle().id());
    let spawned = rt.block_on(async {
        numa_rt_executor::spawn(async { Handle::current().id() })
            .await
            .unwrap()
    });
    assert_eq!(spawned, rt.handle().id());
    // Display prints the number Debug wraps.
    let id = rt.handle().id();
    assert!(format!("{id:?}").contains(&id.to_string()), "{id:?} {id}");
}

#[test]
fn a_named_runtime_reports_its_name_and_an_unnamed_one_none() {
    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .name("my-runtime")
        .build()
        .unwrap();
    assert_eq!(rt.handle().name(), Some("my-runtime"));
    let inside = rt.block_on(async { Handle::current().name().map(str::to_owned) });
    assert_eq!(inside.as_deref(), Some("my-runtime"));
    let unnamed = Builder::new_current_thread().build().unwrap();
    assert_eq!(unnamed.handle().name(), None);
}

#[test]
#[should_panic(expected = "runtime name shouldn't be empty")]
fn an_empty_name_panics_as_in_tokio() {
    Builder::new_current_thread().name("  ");
}
